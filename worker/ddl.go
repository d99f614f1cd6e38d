// The DDL path: a query event's statement through the online-DDL rewrite, the split, the safety table
// (shardgroup.Policy) and the shard groups; what runs downstream goes through the DDLExecutor.

package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/shardgroup"
)

func (st *shardState) group(target TableName) *shardgroup.ShardingGroup {
	g, ok := st.groups[target]
	if !ok {
		g = shardgroup.NewShardingGroup(target)
		st.groups[target] = g
		st.ddlStart[target] = map[Position]ddlEvent{}
	}
	return g
}

// handleDDL handles the statement q of a query event; in are the event's session settings, which the
// DDLs it sends downstream run in.
func (s *Syncer) handleDDL(ctx context.Context, q, schema string, start, end Position, in session.Settings) error {
	if s.cfg.Online != nil {
		d, err := s.cfg.Online.Decide(s.runs, q, schema, end)
		if err != nil {
			return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
		}
		for _, t := range d.Changed {
			s.onlineDirty[t] = true
		}
		if !d.Pass {
			s.log.Info("online DDL tool statement", zap.String("ddl", q), zap.String("what", d.Note), zap.Strings("replaced-by", d.DDLs), zap.Stringer("pos", end))
			if len(d.DDLs) == 0 {
				return nil
			}
			return s.handleDDL(ctx, strings.Join(d.DDLs, ";\n"), schema, start, end, in)
		}
	}
	if err := s.rows.schemas.apply(q, schema, end); err != nil {
		// Only binlogs without column names need it; those report a missing schema when they do.
		s.log.Debug("schema not tracked for statement", zap.Error(err))
	}
	parts, err := shardgroup.Split(q, schema, s.cfg.Router.Route)
	if errors.Is(err, shardgroup.ErrNotDDL) {
		return nil
	}
	if err != nil && schema != "" && s.cfg.Router.Skip(TableName{Schema: schema}) {
		// A statement the parser cannot read, run in a database this task does not replicate.
		s.log.Warn("skip unparsable statement of a filtered database", zap.String("schema", schema), zap.Error(err))
		return nil
	}
	if err != nil {
		// A statement the parser cannot read: only a filter's sql-pattern can say what it is.
		switch act, rule := s.cfg.Filter.Statement(schema, q); act {
		case router.IgnoreEvent:
			s.log.Info("statement ignored by a binlog event filter", zap.String("rule", rule), zap.String("ddl", q), zap.Stringer("pos", end))
			return nil
		case router.FailEvent:
			return s.filterStop(rule, end, fmt.Sprintf("%q", q))
		}
		pattern := schema
		if pattern == "" {
			pattern = "*"
		}
		return &filterError{s.cur.evStart, fmt.Errorf("source %s at %s: %w; nothing ran downstream. To go on without this statement, binlog skip it, or ignore it with a binlog event filter "+
			"(filters: {skip-it: {schema-pattern: %q, sql-pattern: [...], action: Ignore}} and filter-rules: [skip-it] in this source's mysql-instances entry), "+
			"then stop-task and start-task with the changed file: the checkpoint is kept", s.cfg.Source, end, err, pattern)}
	}
	// Every part is decided before any runs: a statement with one refused part runs no part at all.
	type decided struct {
		shardgroup.Part
		scope shardgroup.Scope
		shardgroup.Decision
	}
	var plan []decided
	renamed := false
	for _, p := range parts {
		if s.cfg.Router.Skip(p.Source) {
			continue
		}
		switch act, rule := s.cfg.Filter.Decide(p.Source, shardgroup.FilterEvents(p.Kind), q); act {
		case router.IgnoreEvent:
			s.log.Info("DDL ignored by a binlog event filter", zap.String("rule", rule), zap.Stringer("table", p.Source), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
			continue
		case router.FailEvent:
			return s.filterStop(rule, end, fmt.Sprintf("%q", q))
		}
		scope := s.scopeOf(p)
		d := shardgroup.Decide(p.Kind, scope)
		if d.Action == shardgroup.FollowRename {
			// Each part of a multi-table RENAME in order, on the groups as the parts before it left them.
			if end.Compare(s.shard.renames.at) <= 0 {
				continue // read again by a re-sync: the groups follow it already
			}
			why, err := s.rename(p, end)
			if err != nil {
				return err
			}
			if why != "" {
				d = shardgroup.Decision{Action: shardgroup.Refuse, Why: why}
			}
			renamed = true
		}
		if d.Action == shardgroup.Refuse {
			return &RefusedDDLError{Task: s.cfg.Task, Start: s.cur.evStart, Source: s.cfg.Source, Pos: end, DDL: q, Kind: p.Kind, Table: p.Source, Scope: scope, Why: d.Why}
		}
		plan = append(plan, decided{p, scope, d})
	}
	if renamed {
		s.shard.renames.at = end
	}
	var sharded []shardgroup.Part
	for _, x := range plan {
		p, scope, d := x.Part, x.scope, x.Decision
		tables := map[TableName]Position{}
		if p.Source.Name != "" {
			tables[p.Source] = end
		}
		switch d.Action {
		case shardgroup.Ignore:
			s.log.Warn("DDL not replicated downstream", zap.String("kind", string(p.Kind)), zap.Stringer("table", p.Source),
				zap.String("scope", scope.String()), zap.String("why", d.Why), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
		case shardgroup.Run, shardgroup.RunIfNotExists:
			if p.Source.Name != "" && end.Compare(s.ckpt.Tables[p.Source]) <= 0 {
				continue // applied before a restart
			}
			stmt := s.sessions.defaultCharset(ctx, p)
			if d.Action == shardgroup.RunIfNotExists {
				if stmt, err = shardgroup.CreateIfNotExists(stmt); err != nil {
					return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
				}
			}
			if err := s.exec.ExecDDLOnce(ctx, s.sourceMarker(end), []string{stmt}, in, CheckpointUpdate{Tables: tables}); err != nil {
				return err
			}
			s.setTables(tables)
			s.forgetKeys()
		case shardgroup.JoinGroup:
			g := s.shard.group(p.Target)
			if err := g.AddTable(p.Source, Position{}); err != nil {
				return fmt.Errorf("source %s: %w", s.cfg.Source, err)
			}
			if end.Compare(s.ckpt.Tables[p.Source]) <= 0 {
				continue // re-read after a restart: the table's rows after it are applied; keep its checkpoint
			}
			stmt, err := shardgroup.CreateIfNotExists(s.sessions.defaultCharset(ctx, p))
			if err != nil {
				return err
			}
			ddls := []string{stmt}
			if named, err := shardgroup.TablesOf(stmt, ""); err == nil && len(named) == 1 && p.Kind == shardgroup.KindCreateTableLike {
				ddls = nil // CREATE TABLE t_3 LIKE t_1 of two shards: the target is LIKE itself, and exists
			}
			if err := s.exec.ExecDDL(ctx, ddls, in, CheckpointUpdate{Tables: tables}); err != nil {
				return err
			}
			s.setTables(tables)
		case shardgroup.LeaveGroup:
			leaving := []TableName{p.Source}
			if p.Kind == shardgroup.KindDropDatabase {
				leaving = s.shard.shardsIn(p.Source.Schema)
			}
			for _, t := range leaving {
				target := s.cfg.Router.Route(t)
				g := s.shard.group(target)
				res := g.RemoveTable(t, end)
				s.log.Info("shard table left its group", zap.Stringer("table", t), zap.Stringer("target", target), zap.String("ddl", p.SQL))
				if res.Synced && !s.shard.pending[target] && g.InSharding() {
					if err := s.postInfo(ctx, target); err != nil {
						return err
					}
				}
			}
		case shardgroup.FollowRename:
			continue // done while deciding (rename.go)
		case shardgroup.DropTablesOnly:
			if err := s.dropReplicatedTables(ctx, p.Source.Schema, start, end); err != nil {
				return err
			}
		case shardgroup.Lock:
			sharded = append(sharded, p)
		default:
			return fmt.Errorf("source %s at %s: no action %s for %s", s.cfg.Source, end, d.Action, p.Kind)
		}
		if p.Kind == shardgroup.KindDropDatabase {
			s.rows.schemas.dropSchema(p.Source.Schema, end)
		}
	}
	for _, item := range shardgroup.Items(sharded, end) {
		g := s.shard.group(item.Target)
		res, err := g.TrySync(item)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.cfg.Source, err)
		}
		if res.Duplicate {
			continue
		}
		s.shard.ddlStart[item.Target][end] = ddlEvent{start: start, in: in}
		s.log.Info("sharding DDL reached", zap.String("lock", pessimist.LockID(s.cfg.Task, item.Target.String())), zap.Stringer("table", item.Source), zap.Strings("ddls", item.DDLs),
			zap.Bool("synced", res.Synced), zap.Int("remaining", len(res.Remaining)))
		if res.Synced && !s.shard.pending[item.Target] {
			if err := s.postInfo(ctx, item.Target); err != nil {
				return err
			}
		}
	}
	return nil
}

// sourceMarker is the DDL marker key of a statement of this source that runs downstream by itself:
// its binlog position is in it, so the statement read again after a crash finds its marker, and the
// same text later in the binlog (a second TRUNCATE of a table) is a statement of its own.
func (s *Syncer) sourceMarker(end Position) string {
	return "source:" + s.cfg.Source + "@" + end.String()
}

// scopeOf places a DDL part in the safety table's columns (shardgroup.Policy). A rename counts as the
// more merged of its two names: renaming a table into a shard group or onto a shared target is as
// dangerous as renaming a shard out of one. Each part of a multi-table RENAME is placed by its own
// pair of names.
func (s *Syncer) scopeOf(p shardgroup.Part) shardgroup.Scope {
	r := s.cfg.Router
	if p.Source.Name == "" {
		if r.MergedSchema(p.Source.Schema) {
			return shardgroup.MergedSchema
		}
		return shardgroup.Unsharded
	}
	tables := []TableName{p.Source}
	if (p.Kind == shardgroup.KindRenameTable || p.Kind == shardgroup.KindAlterTableRename) && p.RenamedTo.Name != "" {
		tables = append(tables, p.RenamedTo)
	}
	scope := shardgroup.Unsharded
	for _, t := range tables {
		switch {
		case r.Skip(t):
		case r.Sharded(t):
			return shardgroup.Shard
		case r.SharedTarget(t):
			scope = shardgroup.MergedSchema
		}
	}
	return scope
}

// shardsIn lists the shard tables of schema in this source's groups.
func (st *shardState) shardsIn(schema string) []TableName {
	var out []TableName
	for _, g := range st.groups {
		for _, t := range g.Tables() {
			if strings.EqualFold(t.Schema, schema) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// dropReplicatedTables carries out DROP DATABASE of an unsharded schema: the downstream tables
// replicated from it are dropped, one by one, and the downstream database is left, since it may hold
// tables the task did not create.
func (s *Syncer) dropReplicatedTables(ctx context.Context, schema string, start, end Position) error {
	for _, t := range s.rows.schemas.tablesIn(schema, end) {
		if s.cfg.Router.Skip(t) || s.cfg.Router.Sharded(t) || s.cfg.Router.SharedTarget(t) || end.Compare(s.ckpt.Tables[t]) <= 0 {
			continue
		}
		target := s.cfg.Router.Route(t)
		tables := map[TableName]Position{t: end}
		s.log.Info("DROP DATABASE: dropping a table replicated from it", zap.String("schema", schema), zap.Stringer("table", target))
		if err := s.exec.ExecDDLOnce(ctx, s.sourceMarker(end), []string{"DROP TABLE IF EXISTS " + target.String()}, nil, CheckpointUpdate{Tables: tables}); err != nil {
			return err
		}
		s.setTables(tables)
	}
	s.forgetKeys()
	return nil
}

// RefusedDDLError is a DDL the safety table refuses: nothing ran downstream and the subtask stops
// before the statement.
type RefusedDDLError struct {
	Task   string
	Start  Position // start of the event (binlog skip -b)
	Source string
	Pos    Position
	DDL    string
	Kind   shardgroup.Kind
	Table  TableName
	Scope  shardgroup.Scope
	Why    string
}

// Permanent: the statement is refused again on every retry; the subtask waits for the user.
func (e *RefusedDDLError) Permanent() bool { return true }

func (e *RefusedDDLError) Error() string {
	ddl := e.DDL
	if len(ddl) > 256 {
		ddl = ddl[:256] + "..."
	}
	event := strings.ToLower(string(e.Kind))
	if evs := shardgroup.FilterEvents(e.Kind); len(evs) > 0 {
		event = evs[len(evs)-1]
	}
	return fmt.Sprintf("source %s at %s: %s of %s (%s) is refused: %s. Nothing ran downstream; the subtask stops before %q. "+
		"To go on without it, ignore it with a binlog event filter (filters: {skip-it: {schema-pattern: %q, table-pattern: %q, events: [%q], action: Ignore}} "+
		"and filter-rules: [skip-it] in this source's mysql-instances entry), then stop-task and start-task with the changed file: the checkpoint is kept; "+
		"or skip this one statement with `binlog skip %s -b %s -s %s`, or put statements the table allows in its place with `binlog replace %s -b %s -s %s \"SQL;...\"`",
		e.Source, e.Pos, e.Kind, e.Table, e.Scope, e.Why, ddl, e.Table.Schema, e.Table.Name, event,
		e.Task, e.Start.BinlogPos(), e.Source, e.Task, e.Start.BinlogPos(), e.Source)
}

func (s *Syncer) forgetKeys() {
	for _, p := range s.apply.parts {
		p.sink.ForgetKeys()
	}
	s.apply.keyGen++
	clear(s.apply.targetKeys)
}

func (s *Syncer) setTables(tables map[TableName]Position) {
	for t, p := range tables {
		s.ckpt.Tables[t] = p
	}
}
