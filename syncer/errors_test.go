package syncer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

func TestStatementErrorIsPermanent(t *testing.T) {
	se := &StatementError{Task: "task", Source: "s1", DML: true, Pos: vocab.Position{File: "mysql-bin.000001", Pos: 1234}, Cause: &mysql.MySQLError{Number: 1062}}
	if !sink.IsPermanent(fmt.Errorf("wrapped: %w", se)) || !strings.Contains(se.Error(), "binlog skip task -b mysql-bin.000001:1234 -s s1") ||
		!strings.Contains(se.Error(), "safe-mode") {
		t.Fatalf("statement error: %v", se)
	}
	if sink.IsPermanent(errors.New("connection lost")) {
		t.Fatal("a plain error is not permanent")
	}
}

// TestStoppedAtEveryStatementError: every permanent error that stops a subtask at one event resolves
// binlog skip/replace without -b to that event, and shows its scope; anything else resolves nothing.
func TestStoppedAtEveryStatementError(t *testing.T) {
	start := vocab.Position{File: "mysql-bin.000007", Pos: 4711}
	cause := &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}
	for _, c := range []struct {
		name  string
		err   error
		lock  bool
		scope string
	}{
		{"statement", &StatementError{Task: "t", Source: "s", Pos: start, DML: true, Cause: cause}, false, "downstream"},
		{"lock statement", &StatementError{Task: "t", Source: "s", Pos: start, Lock: "t-`a`.`b`", Cause: cause}, true, "downstream"},
		{"refused DDL", &RefusedDDLError{Task: "t", Source: "s", Start: start, DDL: "DROP TABLE x"}, false, "internal"},
		{"filter", &filterError{start, errors.New("filtered")}, false, "internal"},
		{"sequence", &sequenceError{Task: "t", Source: "s", Start: start, Cause: &shardgroup.InconsistentError{}}, false, "internal"},
	} {
		for _, err := range []error{c.err, fmt.Errorf("sync: %w", c.err)} {
			at, scope, lock, ok := StoppedAt(err)
			if !ok || at != start || lock != c.lock || scope != c.scope || !sink.IsPermanent(err) {
				t.Errorf("%s: StoppedAt(%v) = %v %q %v %v, want %v %q %v true, permanent", c.name, err, at, scope, lock, ok, start, c.scope, c.lock)
			}
		}
	}
	for _, err := range []error{cause, errors.New("connection refused"), &ReadError{Cause: errors.New("purged")}} {
		if _, _, _, ok := StoppedAt(err); ok {
			t.Errorf("StoppedAt(%v) resolved an event", err)
		}
	}
}
