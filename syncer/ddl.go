// The unit's side of the DDL path: it carries out what ddlPath.decide decided for a query event's
// statement (ddlpath.go): the statements downstream through the DDLExecutor, then the infos.

package syncer

import (
	"context"
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/vocab"
)

// handleDDL handles the statement q of a query event; in are the event's session settings, which the
// DDLs it sends downstream run in.
func (s *Syncer) handleDDL(ctx context.Context, q, schema string, start, end vocab.Position, in session.Settings) error {
	ready, err := s.ddl.decide(q, schema, ddlEventAt{start: s.cur.evStart, groupStart: start, end: end, in: in})
	if err != nil {
		return err
	}
	for _, t := range ready.forgetShapes {
		delete(s.rows.shapes, t)
	}
	for _, r := range ready.runs {
		if err := s.runDDL(ctx, r, end); err != nil {
			return err
		}
		s.setTables(r.tables)
	}
	if ready.forgetKeys {
		s.forgetKeys()
	}
	for _, target := range ready.post {
		if err := s.postInfo(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

// runDDL runs one statement the DDL path decided, with the table checkpoints it moves.
func (s *Syncer) runDDL(ctx context.Context, r ddlRun, end vocab.Position) error {
	if r.part.SQL == "" {
		st, err := ddl.ParseStatement(r.stmt) // one Tributary writes (dropReplicatedTables)
		if err != nil {
			return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
		}
		return s.exec.ExecDDLOnce(ctx, r.marker, []ddl.Statement{st}, r.in, meta.CheckpointUpdate{Tables: r.tables})
	}
	stmt := s.sessions.defaultCharset(ctx, r.part)
	if r.ifNotExists {
		var err error
		if stmt, err = stmt.IfNotExists(); err != nil {
			if r.join {
				return err
			}
			return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
		}
	}
	if !r.join {
		return s.exec.ExecDDLOnce(ctx, r.marker, []ddl.Statement{stmt}, r.in, meta.CheckpointUpdate{Tables: r.tables})
	}
	ddls := []ddl.Statement{stmt}
	if named, err := stmt.Tables(""); err == nil && len(named) == 1 && r.part.Kind == ddl.KindCreateTableLike {
		ddls = nil // CREATE TABLE t_3 LIKE t_1 of two shards: the target is LIKE itself, and exists
	}
	return s.exec.ExecDDL(ctx, ddls, r.in, meta.CheckpointUpdate{Tables: r.tables})
}

// RefusedDDLError is a DDL the safety table refuses: nothing ran downstream and the subtask stops
// before the statement.
type RefusedDDLError struct {
	Task   string
	Start  vocab.Position // start of the event (binlog skip -b)
	Source string
	Pos    vocab.Position
	DDL    string
	Kind   ddl.Kind
	Table  vocab.TableName
	Scope  ddl.Scope
	Why    string
}

// Permanent: the statement is refused again on every retry; the subtask waits for the user.
func (e *RefusedDDLError) Permanent() bool { return true }

func (e *RefusedDDLError) stoppedAt() (vocab.Position, string, bool) {
	return e.Start, "internal", false
}

func (e *RefusedDDLError) Error() string {
	stmt := e.DDL
	if len(stmt) > 256 {
		stmt = stmt[:256] + "..."
	}
	event := strings.ToLower(string(e.Kind))
	if evs := ddl.FilterEvents(e.Kind); len(evs) > 0 {
		event = evs[len(evs)-1]
	}
	return fmt.Sprintf("source %s at %s: %s of %s (%s) is refused: %s. Nothing ran downstream; the subtask stops before %q. "+
		"To go on without it, ignore it with a binlog event filter (filters: {skip-it: {schema-pattern: %q, table-pattern: %q, events: [%q], action: Ignore}} "+
		"and filter-rules: [skip-it] in this source's mysql-instances entry), then stop-task and start-task with the changed file: the checkpoint is kept; "+
		"or skip this one statement with `binlog skip %s -b %s -s %s`, or put statements the table allows in its place with `binlog replace %s -b %s -s %s \"SQL;...\"`",
		e.Source, e.Pos, e.Kind, e.Table, e.Scope, e.Why, stmt, e.Table.Schema, e.Table.Name, event,
		e.Task, e.Start.BinlogPos(), e.Source, e.Task, e.Start.BinlogPos(), e.Source)
}

func (s *Syncer) forgetKeys() {
	for _, p := range s.apply.parts {
		p.sink.ForgetKeys()
	}
	s.apply.keyGen++
	clear(s.apply.targetKeys)
}

func (s *Syncer) setTables(tables map[vocab.TableName]vocab.Position) {
	for t, p := range tables {
		s.ckpt.Tables[t] = p
	}
}
