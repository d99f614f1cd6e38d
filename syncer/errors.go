package syncer

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// atStatement is a permanent error that stops a subtask at one binlog event: binlog skip and binlog
// replace without -b resolve to that event (pausedAt), and query-status shows the scope
// (processError). A new error of that kind implements it and both follow.
type atStatement interface {
	error
	// stoppedAt returns the start of the event, the error's scope as query-status shows it
	// ("downstream": the downstream refused it; "internal": Tributary stops before it), and whether
	// the statement is a lock's DDLs this source ran as owner.
	stoppedAt() (start vocab.Position, scope string, lock bool)
}

// StatementError is a statement the downstream refused for good: the subtask pauses on it.
type StatementError struct {
	Task, Source string
	Table        vocab.TableName // upstream table of the event
	Stmt         string          // the statement (a DML with its first values)
	Pos          vocab.Position  // start of the binlog event (as SHOW BINLOG EVENTS' Pos)
	Lock         string          // the shard DDL lock whose DDLs this source ran as owner ("" for an event)
	DML          bool            // a row change
	Cause        error
}

func (e *StatementError) Permanent() bool { return true }
func (e *StatementError) stoppedAt() (vocab.Position, string, bool) {
	return e.Pos, "downstream", e.Lock != ""
}
func (e *StatementError) Unwrap() error { return e.Cause }

func (e *StatementError) Error() string {
	what := "the binlog event"
	if e.Lock != "" {
		what = "the DDLs of lock " + e.Lock + " (this source is its owner)"
	}
	hint := ""
	var me *mysql.MySQLError
	if errors.As(e.Cause, &me) && (me.Number == 1062 || me.Number == 1586) && e.DML {
		hint = "; for keys that collide between shards, syncers' safe-mode: true makes later rows replace earlier ones"
	}
	return fmt.Sprintf("source %s: the downstream refused %s from %s at binlog position %s: %v. "+
		"A retry cannot fix this, so the subtask is paused. Ways out: fix the downstream and resume-task %s; "+
		"or skip %s with `binlog skip %s -b %s -s %s`, or run other statements in its place with "+
		"`binlog replace %s -b %s -s %s \"SQL;...\"`%s",
		e.Source, clip(e.Stmt, 300), e.Table, e.Pos, e.Cause, e.Task, what, e.Task, e.Pos.BinlogPos(), e.Source,
		e.Task, e.Pos.BinlogPos(), e.Source, hint)
}

// SchemaMismatchError is a rows event that the tracked schema of its table does not fit, in a binlog
// without column names: a DDL of the table was skipped (binlog skip) or made outside the binlog. Every
// retry reads the same event with the same schema, so the subtask waits for the user, who repairs the
// tracked schema with binlog-schema update (or skips the rows).
type SchemaMismatchError struct {
	Task, Source   string
	Table          vocab.TableName
	Known          bool // a schema is tracked for the table
	Tracked, Event int  // columns tracked, columns in the event
	At             vocab.Position
}

func (e *SchemaMismatchError) Permanent() bool { return true }

func (e *SchemaMismatchError) Error() string {
	tracked := fmt.Sprintf("the tracked schema (%d columns)", e.Tracked)
	if !e.Known {
		tracked = "no schema is tracked for it"
	}
	return fmt.Sprintf("source %s: the binlog has no column names for %s and %s does not fit its rows event ending at %s (%d columns): "+
		"a DDL of the table was skipped or made outside the binlog. A retry cannot fix this, so the subtask is paused. "+
		"Ways out: binlog-schema update %s %s %s --from-source -s %s (the upstream's definition now; or a CREATE TABLE file with the "+
		"columns the rows have, or --from-target), then resume-task %s. binlog_row_metadata=FULL upstream puts the column names in later events",
		e.Source, e.Table, tracked, e.At, e.Event, e.Task, e.Table.Schema, e.Table.Name, e.Source, e.Task)
}

// filterError is a statement the syncer stops on by rule (a binlog event filter with action Error, a
// statement the parser cannot read): a retry meets it again, so the subtask waits for the user.
type filterError struct {
	Start vocab.Position // start of the event (binlog skip -b)
	error
}

func (e *filterError) Permanent() bool                           { return true }
func (e *filterError) stoppedAt() (vocab.Position, string, bool) { return e.Start, "internal", false }
func (e *filterError) Unwrap() error                             { return e.error }

// sequenceError is a shard DDL that does not match the DDL another shard of its group has at the same
// step (shardgroup's "detect inconsistent DDL sequence"). The group is rebuilt the same way from the
// same binlog on every retry, so the subtask pauses (DM: "task can't auto resume") until the user
// skips or replaces the statement.
type sequenceError struct {
	Task, Source string
	Start, End   vocab.Position
	Cause        *shardgroup.InconsistentError
}

func (e *sequenceError) Permanent() bool                           { return true }
func (e *sequenceError) stoppedAt() (vocab.Position, string, bool) { return e.Start, "internal", false }
func (e *sequenceError) Unwrap() error                             { return e.Cause }

func (e *sequenceError) Error() string {
	return fmt.Sprintf("source %s at %s: %v; nothing ran downstream, and every retry reads the same sequence, so the subtask is paused. "+
		"Ways out: run in this statement's place the DDLs the group expects at this step, with "+
		"`binlog replace %s -b %s -s %s \"SQL;...\"`, and make the shards' schemas agree upstream; or go on without the statement with "+
		"`binlog skip %s -b %s -s %s` (the downstream table then lacks its change)",
		e.Source, e.End, e.Cause, e.Task, e.Start.BinlogPos(), e.Source, e.Task, e.Start.BinlogPos(), e.Source)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// StoppedAt tells where a permanent error stopped the subtask, when it stopped at one binlog event:
// the start of the event, the error's scope as query-status shows it ("downstream" or "internal"),
// and whether the statement is a lock's DDLs this source ran as owner.
func StoppedAt(err error) (start vocab.Position, scope string, lock, ok bool) {
	var st atStatement
	if errors.As(err, &st) {
		start, scope, lock = st.stoppedAt()
		return start, scope, lock, true
	}
	return vocab.Position{}, "", false, false
}
