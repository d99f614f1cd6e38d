package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/vocab"
)

// The binlog reader's errors fall in the classes of errors.go too. Permanent: the source does not have
// the position asked for (never had it, or purged it; ERROR 1236), the source user may not read the
// binlog (1045, 1044, 1227), another replica took this syncer's server-id (1236 naming it, 4052), the
// source is not of the flavor the source file says (1047). The subtask then pauses with a ReadError. Any
// other failure (refused, reset, timed out, the source restarting) is retried by readRetry.

// readClass is what a permanent reader error is about; "" for a transient one.
type readClass string

const (
	readPosition readClass = "position"
	readAccess   readClass = "access"
	readServerID readClass = "server-id"
	readFlavor   readClass = "flavor"
)

// classifyRead places a reader error: the server's code, and its class ("" for transient).
func classifyRead(err error) (uint16, readClass) {
	me := serverError(err)
	if me == nil {
		return 0, ""
	}
	switch me.Code {
	case 1236:
		if strings.Contains(strings.ToLower(me.Message), "same server") {
			return me.Code, readServerID
		}
		return me.Code, readPosition
	case 4052:
		return me.Code, readServerID
	case 1045, 1044, 1227:
		return me.Code, readAccess
	case 1047:
		return me.Code, readFlavor
	}
	return me.Code, ""
}

// serverError is go-mysql's server error in err's chain (errors.As, or pingcap/errors' Cause).
func serverError(err error) *gmysql.MyError {
	for err != nil {
		var me *gmysql.MyError
		if errors.As(err, &me) {
			return me
		}
		c, ok := err.(interface{ Cause() error })
		if !ok || c.Cause() == err {
			return nil
		}
		err = c.Cause()
	}
	return nil
}

// connect starts a reader at from, after the reader before it failed with failed (nil: none did). An
// error a retry cannot fix (classifyRead) stops the syncer with a ReadError; any other is retried with
// readRetry's backoff until a reader starts or ctx ends.
func (s *Syncer) connect(ctx context.Context, from resumePoint, failed error) (*reader, error) {
	for {
		if failed != nil {
			code, class := classifyRead(failed)
			if class != "" {
				return nil, &ReadError{Task: s.cfg.Task, Source: s.cfg.Source, Addr: net.JoinHostPort(s.cfg.Host, strconv.Itoa(int(s.cfg.Port))),
					ServerID: s.cfg.ServerID, From: from.pos, GTID: from.gtid, Class: class, Code: code,
					Has: sourceHas(ctx, s.upstream, s.cfg.Flavor), Cause: failed}
			}
			attempt, wait := s.cur.retry.failed(failed)
			s.log.Warn("binlog read failed, reconnecting", zap.Error(failed), zap.Int("attempt", attempt), zap.Duration("backoff", wait))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		r, err := s.startReader(ctx, from)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		failed = err
	}
}

// ReadError is a binlog read a retry cannot fix: the subtask pauses on it until resume-task.
type ReadError struct {
	Task, Source string
	Addr         string // host:port of the source
	ServerID     uint32
	From         vocab.Position
	GTID         string
	Class        readClass
	Code         uint16
	Has          string // what the source has (binlog files, GTIDs), or why that could not be read
	Cause        error
}

func (e *ReadError) Permanent() bool { return true }
func (e *ReadError) Unwrap() error   { return e.Cause }

func (e *ReadError) Error() string {
	from := e.From.String()
	if e.GTID != "" {
		from = "GTID set " + e.GTID
	}
	var ways string
	switch e.Class {
	case readPosition:
		ways = "The position is not in the source's binlog: it never was (a meta naming another file, or a source whose log-bin base name " +
			"changed since) or it was purged. Set this source's meta in the task file to a position the source has (binlog-name and " +
			"binlog-pos from SHOW BINARY LOGS, or binlog-gtid) and start the task again with start-task --remove-meta, or run it with " +
			"task-mode: all to load the tables again; rows written between the two positions are not replicated otherwise"
	case readAccess:
		ways = "The source user may not read the binlog: grant it REPLICATION SLAVE and REPLICATION CLIENT (GRANT REPLICATION SLAVE, " +
			"REPLICATION CLIENT ON *.* TO the user), or correct its password in the source file (operate-source update), then resume-task " + e.Task
	case readServerID:
		ways = fmt.Sprintf("Another replica of this source uses server-id %d: give the source file a server-id no other replica of the "+
			"source has (operate-source update), then resume-task %s", e.ServerID, e.Task)
	case readFlavor:
		ways = "The source is not of the flavor the source file says: set flavor to mariadb or mysql as the server is (operate-source update), then resume-task " + e.Task
	}
	return fmt.Sprintf("source %s (%s): its binlog cannot be read from %s: %v. The source has %s. A retry cannot fix this, so the subtask is paused. %s.",
		e.Source, e.Addr, from, e.Cause, e.Has, ways)
}

// sourceHas says what binlog a source has: its first and last binlog files and its GTID position.
func sourceHas(ctx context.Context, db *sql.DB, flavor string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	files, err := dbutil.BinaryLogs(ctx, db)
	if err != nil {
		return "binlog files that could not be listed (SHOW BINARY LOGS: " + err.Error() + ")"
	}
	has := "no binlog files (SHOW BINARY LOGS is empty: is log-bin on?)"
	if len(files) > 0 {
		has = fmt.Sprintf("binlog files %s to %s (SHOW BINARY LOGS)", files[0].Name, files[len(files)-1].Name)
	}
	q, what := "SELECT @@gtid_binlog_pos", "gtid_binlog_pos"
	if flavor == gmysql.MySQLFlavor {
		q, what = "SELECT @@gtid_executed", "gtid_executed"
	}
	var gtid string
	if err := db.QueryRowContext(ctx, q).Scan(&gtid); err == nil {
		if gtid == "" {
			gtid = "empty"
		}
		has += fmt.Sprintf(" and %s %s", what, gtid)
	}
	return has
}

// readRetry is the reader's reconnect policy for transient failures: the backoff doubles from 2 s to
// 30 s across failures and starts again only after the binlog moved, so a source that accepts the
// connection and then fails at once is not retried every second. query-status shows the last failure
// and the attempt count until the source answers again (any event, a heartbeat included).
type readRetry struct {
	dirty    atomic.Bool // a failure is recorded that an event has not cleared yet: read's fast path
	mu       sync.Mutex
	attempt  int
	last     error
	at       time.Time
	answered bool // an event arrived since the last failure
}

// failed records a failure and returns how long to wait before the next attempt.
func (r *readRetry) failed(err error) (attempt int, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempt++
	r.last, r.at, r.answered = err, time.Now(), false
	r.dirty.Store(true)
	return r.attempt, min(2*time.Second<<min(r.attempt-1, 4), 30*time.Second)
}

// read records an event: the source answers; one that moves the binlog (moves) also starts the
// backoff again.
func (r *readRetry) read(ev *replication.BinlogEvent) {
	if !r.dirty.Load() {
		return // nothing failed since the binlog last moved: one atomic load per event
	}
	r.mu.Lock()
	r.answered = true
	if r.attempt != 0 && moves(ev) {
		r.attempt, r.last = 0, nil
		r.dirty.Store(false)
	}
	r.mu.Unlock()
}

// failing is the failure being retried, if the source has not answered since.
func (r *readRetry) failing() (attempt int, last error, at time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempt, r.last, r.at, r.last != nil && !r.answered
}

// moves reports whether ev shows the binlog moving: an event of the binlog itself, not the fake
// rotate, format description or heartbeat a server sends when a dump starts or idles.
func moves(ev *replication.BinlogEvent) bool {
	switch ev.Header.EventType {
	case replication.ROTATE_EVENT, replication.FORMAT_DESCRIPTION_EVENT, replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
		return false
	}
	return ev.Header.LogPos != 0
}
