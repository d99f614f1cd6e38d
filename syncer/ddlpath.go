// The DDL stage: what a query event's statement does, decided without I/O. The online-DDL rewrite,
// the split, the binlog event filters, the safety table (ddl.Policy) and the shard groups
// decide; the unit carries out what comes back (ddlReady: statements for the DDLExecutor, infos for
// the agent), as etcd raft's Ready is carried out by its node's loop.

package syncer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// ddlPath is the DDL stage of one source: the shard groups and their locks (shardState), the online
// schema change tools' runs, and read access to what the other stages keep that a decision depends
// on (the tracked schemas it also updates, the table checkpoints). Its methods do no I/O.
type ddlPath struct {
	task, source string
	router       *router.Router
	filter       *router.Filter   // nil: none
	online       *onlineddl.Rules // nil: online DDL off
	log          *zap.Logger
	shard        shardState
	// runs are the online schema change tools' runs by real table (online), persisted with the
	// checkpoint; onlineDirty those changed since the last flush.
	runs        onlineddl.Runs
	onlineDirty map[vocab.TableName]bool
	schemas     *schemaTracker // the rows stage's; a DDL changes what it tracks
	applied     appliedView    // the applier's checkpoint, read only
}

// ddlEventAt is where a query event is: its own start (binlog skip -b names it), its event group's
// start (a restart before its DDL resolves reads it again from there), its end, and the session
// settings it carries (the DDLs it sends downstream run in them).
type ddlEventAt struct {
	start, groupStart, end vocab.Position
	in                     session.Settings
}

// ddlReady is what the DDL path decided for one statement, for the unit to carry out in order:
// first the statements downstream, then the infos. Nothing in it has run; the shard groups, the
// tracked schemas and the online runs already say what it does.
type ddlReady struct {
	runs []ddlRun
	// post are the targets whose group became synced and has no info out: post it.
	post []vocab.TableName
	// forgetShapes are tables whose cached row shapes a rename left stale (the rows stage's).
	forgetShapes []vocab.TableName
	// forgetKeys: the downstream's rows changed under the applier's key tracking (a DDL ran).
	forgetKeys bool
}

// ddlRun is one statement downstream, exactly once, moving the table checkpoints with it.
type ddlRun struct {
	// part is a statement of the binlog (a CREATE TABLE gets the collation its table took upstream,
	// eventSessions.defaultCharset); stmt is used when part has no SQL.
	part ddl.Part
	stmt string
	// ifNotExists rewrites a CREATE to CREATE ... IF NOT EXISTS.
	ifNotExists bool
	// join is the CREATE TABLE of a table that joins its shard group: no marker (the IF NOT EXISTS
	// makes it idempotent), and nothing when it is LIKE another shard (the target exists).
	join   bool
	marker string           // the DDL marker key (not used by a join)
	in     session.Settings // nil: the sink's session
	tables map[vocab.TableName]vocab.Position
}

// shardState is the DDL path's state of the source's shard groups: the groups by target, where their
// DDLs start, the infos posted and awaited, the DML held back and the re-read it asks for, and the
// renames followed.
type shardState struct {
	groups   map[vocab.TableName]*shardgroup.ShardingGroup   // by target
	ddlStart map[vocab.TableName]map[vocab.Position]ddlEvent // per target: DDL item (end) position -> its event
	infoAt   map[vocab.TableName]vocab.Position              // per target: an info deferred until the reader passes this (postDeferred)
	pending  map[vocab.TableName]bool                        // targets whose info is posted and operation awaited
	opCh     chan opResult
	// heldBack: targets whose group held back DML (skipped it, to be re-read) since its active step
	// began. A step resolved with nothing held back needs no re-read.
	heldBack   map[vocab.TableName]bool
	resync     *resumePoint
	resyncLock string       // the lock whose resolution asked for the re-sync (for the trace)
	ddlReadAt  time.Time    // when the DDL event being handled was read (for the trace)
	renames    shardRenames // shard renames followed within their groups (rename.go)
}

// newShardState is the state of a source's groups before any table is discovered.
func newShardState() shardState {
	return shardState{
		groups:   map[vocab.TableName]*shardgroup.ShardingGroup{},
		ddlStart: map[vocab.TableName]map[vocab.Position]ddlEvent{},
		infoAt:   map[vocab.TableName]vocab.Position{},
		pending:  map[vocab.TableName]bool{},
		heldBack: map[vocab.TableName]bool{},
		opCh:     make(chan opResult, 16),
	}
}

// pruneRuns drops the online-DDL runs' past runs that no restart reads again: swapped in before resume,
// the persisted checkpoint's position.
func (d *ddlPath) pruneRuns(resume vocab.Position) {
	for t, run := range d.runs {
		if run.Prune(resume) {
			d.onlineDirty[t] = true
		}
	}
}

// decide decides statement q of a query event in database schema. An error stops the subtask before
// the statement: nothing of it has run downstream (a refused statement, a filter's Error, a statement
// the parser cannot read outside a filtered database).
func (d *ddlPath) decide(q, schema string, at ddlEventAt) (ddlReady, error) {
	var ready ddlReady
	err := d.decideInto(&ready, q, schema, at)
	return ready, err
}

func (d *ddlPath) decideInto(ready *ddlReady, q, schema string, at ddlEventAt) error {
	end := at.end
	// The statement is parsed here, once: the online rules, the schema tracker and the splitter read
	// the same tree, and the parts carry theirs to the downstream.
	parsed, err := ddl.Parse(q)
	if errors.Is(err, ddl.ErrNotDDL) {
		return nil
	}
	if d.online != nil && err == nil {
		od, err := d.online.Decide(d.runs, parsed, schema, end)
		if err != nil {
			return fmt.Errorf("source %s at %s: %w", d.source, end, err)
		}
		for _, t := range od.Changed {
			d.onlineDirty[t] = true
		}
		if !od.Pass {
			d.log.Info("online DDL tool statement", zap.String("ddl", q), zap.String("what", od.Note), zap.Strings("replaced-by", od.DDLs), zap.Stringer("pos", end))
			if len(od.DDLs) == 0 {
				return nil
			}
			return d.decideInto(ready, strings.Join(od.DDLs, ";\n"), schema, at)
		}
	}
	var parts []ddl.Part
	if err == nil {
		if err := d.schemas.apply(parsed, schema, end); err != nil {
			// Only binlogs without column names need it; those report a missing schema when they do.
			d.log.Debug("schema not tracked for statement", zap.Error(err))
		}
		parts, err = parsed.Split(schema, d.router.Route)
	}
	if errors.Is(err, ddl.ErrNotDDL) {
		return nil
	}
	if err != nil && schema != "" && d.router.Skip(vocab.TableName{Schema: schema}) {
		// A statement the parser cannot read, run in a database this task does not replicate.
		d.log.Warn("skip unparsable statement of a filtered database", zap.String("schema", schema), zap.Error(err))
		return nil
	}
	if err != nil {
		// A statement the parser cannot read: only a filter's sql-pattern can say what it is.
		switch act, rule := d.filter.Statement(schema, q); act {
		case router.IgnoreEvent:
			d.log.Info("statement ignored by a binlog event filter", zap.String("rule", rule), zap.String("ddl", q), zap.Stringer("pos", end))
			return nil
		case router.FailEvent:
			return filterStop(d.task, d.source, at.start, rule, end, fmt.Sprintf("%q", q))
		}
		pattern := schema
		if pattern == "" {
			pattern = "*"
		}
		return &filterError{at.start, fmt.Errorf("source %s at %s: %w; nothing ran downstream. To go on without this statement, binlog skip it, or ignore it with a binlog event filter "+
			"(filters: {skip-it: {schema-pattern: %q, sql-pattern: [...], action: Ignore}} and filter-rules: [skip-it] in this source's mysql-instances entry), "+
			"then stop-task and start-task with the changed file: the checkpoint is kept", d.source, end, err, pattern)}
	}
	// Every part is decided before any runs: a statement with one refused part runs no part at all.
	type decided struct {
		ddl.Part
		scope ddl.Scope
		ddl.Decision
	}
	var plan []decided
	renamed := false
	for _, p := range parts {
		if d.router.Skip(p.Source) {
			continue
		}
		switch act, rule := d.filter.Decide(p.Source, ddl.FilterEvents(p.Kind), q); act {
		case router.IgnoreEvent:
			d.log.Info("DDL ignored by a binlog event filter", zap.String("rule", rule), zap.Stringer("table", p.Source), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
			continue
		case router.FailEvent:
			return filterStop(d.task, d.source, at.start, rule, end, fmt.Sprintf("%q", q))
		}
		scope := d.scopeOf(p)
		dec := ddl.Decide(p.Kind, scope)
		if dec.Action == ddl.FollowRename {
			// Each part of a multi-table RENAME in order, on the groups as the parts before it left them.
			if end.Compare(d.shard.renames.at) <= 0 {
				continue // read again by a re-sync: the groups follow it already
			}
			why, err := d.rename(p, end)
			if err != nil {
				return err
			}
			if why != "" {
				dec = ddl.Decision{Action: ddl.Refuse, Why: why}
			} else {
				ready.forgetShapes = append(ready.forgetShapes, p.Source, p.RenamedTo)
			}
			renamed = true
		}
		if dec.Action == ddl.Refuse {
			return &RefusedDDLError{Task: d.task, Start: at.start, Source: d.source, Pos: end, DDL: q, Kind: p.Kind, Table: p.Source, Scope: scope, Why: dec.Why}
		}
		plan = append(plan, decided{p, scope, dec})
	}
	if renamed {
		d.shard.renames.at = end
	}
	// applied says whether a table's changes at end are downstream already: read again after a
	// restart, or run by an earlier part of this statement.
	moved := map[vocab.TableName]bool{}
	applied := func(t vocab.TableName) bool { return moved[t] || end.Compare(d.applied.tableAt(t)) <= 0 }
	run := func(r ddlRun) {
		ready.runs = append(ready.runs, r)
		for t := range r.tables {
			moved[t] = true
		}
	}
	posting := map[vocab.TableName]bool{}
	post := func(target vocab.TableName) {
		if !posting[target] {
			posting[target] = true
			ready.post = append(ready.post, target)
		}
	}
	var sharded []ddl.Part
	for _, x := range plan {
		p, scope, dec := x.Part, x.scope, x.Decision
		tables := map[vocab.TableName]vocab.Position{}
		if p.Source.Name != "" {
			tables[p.Source] = end
		}
		switch dec.Action {
		case ddl.Ignore:
			d.log.Warn("DDL not replicated downstream", zap.String("kind", string(p.Kind)), zap.Stringer("table", p.Source),
				zap.String("scope", scope.String()), zap.String("why", dec.Why), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
		case ddl.Run, ddl.RunIfNotExists:
			if p.Source.Name != "" && applied(p.Source) {
				continue // applied before a restart
			}
			run(ddlRun{part: p, ifNotExists: dec.Action == ddl.RunIfNotExists, marker: d.sourceMarker(end), in: at.in, tables: tables})
			ready.forgetKeys = true
		case ddl.JoinGroup:
			g := d.shard.group(p.Target)
			if err := g.AddTable(p.Source, vocab.Position{}); err != nil {
				return fmt.Errorf("source %s: %w", d.source, err)
			}
			if applied(p.Source) {
				continue // re-read after a restart: the table's rows after it are applied; keep its checkpoint
			}
			run(ddlRun{part: p, ifNotExists: true, join: true, in: at.in, tables: tables})
		case ddl.LeaveGroup:
			leaving := []vocab.TableName{p.Source}
			if p.Kind == ddl.KindDropDatabase {
				leaving = d.shard.shardsIn(p.Source.Schema)
			}
			for _, t := range leaving {
				target := d.router.Route(t)
				g := d.shard.group(target)
				res := g.RemoveTable(t, end)
				d.log.Info("shard table left its group", zap.Stringer("table", t), zap.Stringer("target", target), zap.String("ddl", p.SQL))
				if res.Synced && !d.shard.pending[target] && g.InSharding() {
					post(target)
				}
			}
		case ddl.FollowRename:
			continue // done while deciding (rename.go)
		case ddl.DropTablesOnly:
			d.dropReplicatedTables(p.Source.Schema, end, applied, run)
			ready.forgetKeys = true
		case ddl.Lock:
			sharded = append(sharded, p)
		default:
			return fmt.Errorf("source %s at %s: no action %s for %s", d.source, end, dec.Action, p.Kind)
		}
		if p.Kind == ddl.KindDropDatabase {
			d.schemas.dropSchema(p.Source.Schema, end)
		}
	}
	stmtsOf := map[vocab.TableName][]ddl.Statement{}
	for _, p := range sharded {
		stmtsOf[p.Source] = append(stmtsOf[p.Source], p.Statement)
	}
	for _, item := range ddl.Items(sharded, end) {
		g := d.shard.group(item.Target)
		res, err := g.TrySync(item)
		var ie *shardgroup.InconsistentError
		if errors.As(err, &ie) {
			return &sequenceError{Task: d.task, Source: d.source, Start: at.start, End: end, Cause: ie}
		}
		if err != nil {
			return fmt.Errorf("source %s: %w", d.source, err)
		}
		if res.Duplicate {
			continue
		}
		d.shard.ddlStart[item.Target][end] = ddlEvent{start: at.groupStart, in: at.in, stmts: stmtsOf[item.Source]}
		d.log.Info("sharding DDL reached", zap.String("lock", pessimist.LockID(d.task, item.Target.String())), zap.Stringer("table", item.Source), zap.Strings("ddls", item.DDLs),
			zap.Bool("synced", res.Synced), zap.Int("remaining", len(res.Remaining)))
		if res.Synced && !d.shard.pending[item.Target] {
			post(item.Target)
		}
	}
	return nil
}

// dropReplicatedTables decides DROP DATABASE of an unsharded schema: the downstream tables
// replicated from it are dropped, one by one, and the downstream database is left, since it may hold
// tables the task did not create.
func (d *ddlPath) dropReplicatedTables(schema string, end vocab.Position, applied func(vocab.TableName) bool, run func(ddlRun)) {
	for _, t := range d.schemas.tablesIn(schema, end) {
		if d.router.Skip(t) || d.router.Sharded(t) || d.router.SharedTarget(t) || applied(t) {
			continue
		}
		target := d.router.Route(t)
		d.log.Info("DROP DATABASE: dropping a table replicated from it", zap.String("schema", schema), zap.Stringer("table", target))
		run(ddlRun{stmt: "DROP TABLE IF EXISTS " + target.String(), marker: d.sourceMarker(end), tables: map[vocab.TableName]vocab.Position{t: end}})
	}
}

// sourceMarker is the DDL marker key of a statement of this source that runs downstream by itself:
// its binlog position is in it, so the statement read again after a crash finds its marker, and the
// same text later in the binlog (a second TRUNCATE of a table) is a statement of its own.
func (d *ddlPath) sourceMarker(end vocab.Position) string {
	return "source:" + d.source + "@" + end.String()
}

// scopeOf places a DDL part in the safety table's columns (ddl.Policy). A rename counts as the
// more merged of its two names: renaming a table into a shard group or onto a shared target is as
// dangerous as renaming a shard out of one. Each part of a multi-table RENAME is placed by its own
// pair of names.
func (d *ddlPath) scopeOf(p ddl.Part) ddl.Scope {
	r := d.router
	if p.Source.Name == "" {
		if r.MergedSchema(p.Source.Schema) {
			return ddl.MergedSchema
		}
		return ddl.Unsharded
	}
	tables := []vocab.TableName{p.Source}
	if (p.Kind == ddl.KindRenameTable || p.Kind == ddl.KindAlterTableRename) && p.RenamedTo.Name != "" {
		tables = append(tables, p.RenamedTo)
	}
	scope := ddl.Unsharded
	for _, t := range tables {
		switch {
		case r.Skip(t):
		case r.Sharded(t):
			return ddl.Shard
		case r.SharedTarget(t):
			scope = ddl.MergedSchema
		}
	}
	return scope
}

func (st *shardState) group(target vocab.TableName) *shardgroup.ShardingGroup {
	g, ok := st.groups[target]
	if !ok {
		g = shardgroup.NewShardingGroup(target)
		st.groups[target] = g
		st.ddlStart[target] = map[vocab.Position]ddlEvent{}
	}
	return g
}

// shardsIn lists the shard tables of schema in this source's groups.
func (st *shardState) shardsIn(schema string) []vocab.TableName {
	var out []vocab.TableName
	for _, g := range st.groups {
		for _, t := range g.Tables() {
			if strings.EqualFold(t.Schema, schema) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
