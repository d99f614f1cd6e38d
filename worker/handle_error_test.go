package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/syncer"
	"github.com/tributary-db/tributary/vocab"
)

func TestSplitStatements(t *testing.T) {
	got, err := splitStatements([]string{"ALTER TABLE db.t ADD COLUMN c INT; INSERT INTO db.t VALUES (1, 'a;b');", "DELETE FROM db.t"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ALTER TABLE db.t ADD COLUMN c INT", "INSERT INTO db.t VALUES (1, 'a;b')", "DELETE FROM db.t"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("split %q, want %q", got, want)
	}
	if _, err := splitStatements([]string{"ALTER TABLE"}); err == nil {
		t.Fatal("a statement that does not parse is refused")
	}
	if _, err := splitStatements([]string{" ; "}); err == nil {
		t.Fatal("no statement is refused")
	}
}

// TestProcessError: query-status shows a permanent error that stopped the subtask at one event in
// the event's scope, a source that cannot be read in scope upstream, and anything else as internal
// and resumed automatically.
func TestProcessError(t *testing.T) {
	start := vocab.Position{File: "mysql-bin.000007", Pos: 4711}
	cause := &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}
	for _, c := range []struct {
		err   error
		code  int32
		scope string
	}{
		{&syncer.StatementError{Task: "t", Source: "s", Pos: start, DML: true, Cause: cause}, 36067, "downstream"},
		{&syncer.RefusedDDLError{Task: "t", Source: "s", Start: start, DDL: "DROP TABLE x"}, 36067, "internal"},
		{&syncer.ReadError{Cause: errors.New("purged")}, 36067, "upstream"},
		{errors.New("connection refused"), 36069, "internal"},
	} {
		if pe := processError(fmt.Errorf("sync: %w", c.err)); pe.ErrCode != c.code || pe.ErrScope != c.scope {
			t.Errorf("%v: processError = %d %q, want %d %q", c.err, pe.ErrCode, pe.ErrScope, c.code, c.scope)
		}
		if at, lock, ok := pausedAt(c.err); ok != (c.code == 36067 && c.scope != "upstream") || ok && (at != start || lock) {
			t.Errorf("%v: pausedAt = %v %v %v", c.err, at, lock, ok)
		}
	}
}
