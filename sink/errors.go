package sink

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
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

// DownstreamPermanent reports whether a downstream statement's error is a server's verdict on the
// statement itself (a duplicate key, a value too long, a missing table, a DDL it refuses): every
// server error but the transient ones. Errors without a server code (network, driver) are transient.
func DownstreamPermanent(err error) bool {
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
