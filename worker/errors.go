package worker

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// Errors a subtask meets fall in two classes. Transient ones (the connection lost, a deadlock, a lock
// wait timeout, a server that went read-only in a failover, a full disk) go away by themselves: the
// subtask retries with backoff. Permanent ones (the downstream refuses a row or a statement for what it
// is, a DDL the safety table refuses) come back on every retry: the subtask pauses with the error and
// the ways out, and waits for the user (resume-task after a fix, binlog skip or replace, safe-mode).

// PermanentError marks an error a retry cannot fix.
type PermanentError interface {
	error
	Permanent() bool
}

// IsPermanent reports whether err, or an error it wraps, is permanent.
func IsPermanent(err error) bool {
	var p PermanentError
	return errors.As(err, &p) && p.Permanent()
}

// transientCodes are server errors that another try can get past: deadlock (1213), lock wait timeout
// (1205), too many connections (1040, 1203), server shutdown or connection killed (1053, 1927, 1317),
// network errors (1152, 1158-1161), read-only during a failover (1290, 1836), disk full (1021, 1114),
// statement timeouts (1969, 3024).
var transientCodes = map[uint16]bool{1213: true, 1205: true, 1040: true, 1203: true, 1053: true, 1927: true, 1317: true,
	1152: true, 1158: true, 1159: true, 1160: true, 1161: true, 1290: true, 1836: true, 1021: true, 1114: true, 1969: true, 3024: true}

// downstreamPermanent reports whether a downstream statement's error is a server's verdict on the
// statement itself (a duplicate key, a value too long, a missing table, a DDL it refuses): every
// server error but the transient ones. Errors without a server code (network, driver) are transient.
func downstreamPermanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, mysql.ErrInvalidConn) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return false
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return !transientCodes[me.Number]
}

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

// describe renders a change as the statement it becomes downstream, with its values, for an error.
func describe(c Change) string {
	vals := func(v []any) string {
		parts := make([]string, len(v))
		for i, x := range v {
			switch y := x.(type) {
			case nil:
				parts[i] = "NULL"
			case []byte:
				parts[i] = fmt.Sprintf("%q", clip(string(y), 40))
			case string:
				parts[i] = fmt.Sprintf("%q", clip(y, 40))
			default:
				parts[i] = fmt.Sprint(y)
			}
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	switch c.Kind {
	case Insert:
		return "INSERT INTO " + c.Target.String() + " (" + quoteCols(c.Columns) + ") VALUES " + vals(c.Row)
	case Update:
		return "UPDATE " + c.Target.String() + " row " + vals(c.Old) + " to " + vals(c.Row)
	case Delete:
		return "DELETE FROM " + c.Target.String() + " row " + vals(c.Old)
	case Raw:
		return c.SQL
	}
	return fmt.Sprintf("change %d", c.Kind)
}
