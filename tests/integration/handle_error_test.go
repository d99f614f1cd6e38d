package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// TestE2ERefusedRowPausesThenBinlogSkip: two shards write the same key. The second source's subtask
// pauses (not retried) and query-status names the row, its table, the binlog position and the way
// out; dmctl binlog skip (without -b: the event it paused on) resumes it and everything after the
// event arrives. binlog list and revert answer for an operation waiting at another position.
func TestE2ERefusedRowPausesThenBinlogSkip(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 1, 6, ""))
	c.waitRow(5)
	c.up(1, "INSERT INTO db_2.t_1 VALUES (3, 'collides')", insertRows("db_2.t_2", 2001, 2006, ""))
	r := c.until("source 2 paused on the duplicate key", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			for _, st := range s.List("subTaskStatus") {
				for _, e := range st.Get("result").List("errors") {
					if st.Str("stage") == "Paused" && strings.Contains(e.Str("RawCause"), "Duplicate entry") {
						return true
					}
				}
			}
		}
		return false
	}, "query-status", c.task)
	var cause, workaround string
	for _, s := range r.List("sources") {
		for _, st := range s.List("subTaskStatus") {
			for _, e := range st.Get("result").List("errors") {
				if strings.Contains(e.Str("RawCause"), "Duplicate entry") {
					cause, workaround = e.Str("RawCause"), e.Str("Workaround")
					if s.Get("sourceStatus").Str("source") != s2 || e.Str("ErrScope") != "downstream" {
						t.Fatalf("error shown as %v", e)
					}
				}
			}
		}
	}
	for _, want := range []string{"`db_2`.`t_1`", `"collides"`, "binlog position (mysql-bin.", "binlog skip shard -b mysql-bin.", "-s " + s2, "safe-mode"} {
		if !strings.Contains(cause, want) {
			t.Fatalf("error does not say %q:\n%s", want, cause)
		}
	}
	if !strings.Contains(workaround, "binlog skip") {
		t.Fatalf("workaround %q", workaround)
	}
	// An operation at another position waits; list shows it, revert withdraws it.
	c.ok("binlog", "skip", c.task, "-b", "mysql-bin.000001:4", "-s", s2)
	if l := c.ok("binlog", "list", c.task, "-s", s2); !strings.Contains(l.List("sources")[0].Str("msg"), `"pos":{"file":"mysql-bin.000001","pos":4}`) {
		t.Fatalf("binlog list: %v", l)
	}
	c.ok("binlog", "revert", c.task, "-b", "mysql-bin.000001:4", "-s", s2)
	if r, _, _ := c.Dmctl("binlog", "revert", c.task, "-b", "mysql-bin.000001:4", "-s", s2); r.Bool("result") {
		t.Fatal("a second revert of the same position succeeded")
	}
	if r, _, _ := c.Dmctl("binlog", "skip", c.task, "-b", "mysql-bin.000001:4"); r.Bool("result") || !strings.Contains(r.Str("msg"), "-s") {
		t.Fatalf("-b without -s on a two-source task: %v", r)
	}
	// Paused, not retried: one pause logged by the worker of source 2 so far.
	// Naming a source that is not paused is an error; the whole task's skip (DM's handle-error without
	// -s) skips on the paused source and answers the running one that it had nothing to do.
	if r, _, _ := c.Dmctl("binlog", "skip", c.task, "-s", s1); r.Bool("result") || !strings.Contains(r.Str("msg")+r.List("sources")[0].Str("msg"), "not paused") {
		t.Fatalf("binlog skip -s %s (not paused): %v", s1, r)
	}
	sk := c.ok("binlog", "skip", c.task)
	for _, src := range sk.List("sources") {
		if !src.Bool("result") || (src.Str("source") == s1) != strings.Contains(src.Str("msg"), "not paused") {
			t.Fatalf("binlog skip %s: %v", c.task, sk)
		}
	}
	c.waitRow(2005)
	c.waitSynced()
	var v string
	if err := c.DownDB.QueryRow("SELECT v FROM db.t WHERE id = 3").Scan(&v); err != nil || v != "v3" {
		t.Fatalf("row 3: %q %v, want source 1's", v, err)
	}
	pauses := 0
	for _, w := range c.Workers {
		b, _ := os.ReadFile(w.LogFile)
		pauses += strings.Count(string(b), "subtask paused on an error a retry cannot fix")
	}
	if pauses != 1 {
		t.Fatalf("the workers logged %d pauses, want 1 (a refused row must not be retried)", pauses)
	}
}

// TestE2EConflictUnlockAndPseudoGroup: while only source 1 has reached the DDL, query-status shows
// DM's pseudo group on source 2. Source 2 then sends another DDL (a conflict); a plain unlock does
// what DM does: source 1's (the owner's) DDL runs downstream once, source 2 skips its own, and the
// answer says so.
func TestE2EConflictUnlockAndPseudoGroup(t *testing.T) {
	c := startE2E(t, 2)
	alters0, err := c.DownstreamStatements("ALTER TABLE")
	if err != nil {
		t.Fatal(err)
	}
	c.up(0, insertRows("db_1.t_1", 0, 10, ""), "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT",
		insertRows("db_1.t_1", 100, 110, ", 1"))
	c.waitLock([]string{s1}, []string{s2})
	c.until("pseudo group on source 2", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			if s.Get("sourceStatus").Str("source") != s2 {
				continue
			}
			for _, st := range s.List("subTaskStatus") {
				for _, g := range st.Get("sync").List("unresolvedGroups") {
					// DM's pseudo group lists no DDLs: the source received none.
					if g.Str("target") == "`db`.`t`" && strings.Join(g.Strings("unsynced"), "") == "this DM-worker doesn't receive any shard DDL of this group" &&
						len(g.Strings("DDLs")) == 0 && st.Str("unresolvedDDLLockID") == "shard-`db`.`t`" {
						return true
					}
				}
			}
		}
		return false
	}, "query-status", c.task)
	c.up(1, insertRows("db_2.t_1", 10, 20, ""), "ALTER TABLE db_2.t_1 ADD COLUMN c BIGINT", "ALTER TABLE db_2.t_2 ADD COLUMN c BIGINT",
		insertRows("db_2.t_1", 200, 210, ", 2"))
	u := c.ok("shard-ddl-lock", "unlock", c.waitConflict().Str("ID"))
	ex, sk := u.List("executed"), u.List("skipped")
	if len(ex) != 1 || ex[0].Str("source") != s1 || !strings.Contains(strings.Join(ex[0].Strings("DDLs"), ""), "ADD COLUMN `c` INT") ||
		len(sk) != 1 || sk[0].Str("source") != s2 || !strings.Contains(strings.Join(sk[0].Strings("DDLs"), ""), "BIGINT") ||
		!strings.Contains(u.Str("msg"), s2+" skip") {
		t.Fatalf("unlock answered %v", u)
	}
	if n := c.converge("id, v, c"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
	c.waitSynced()
	alters, err := c.DownstreamStatements("ALTER TABLE")
	if err != nil {
		t.Fatal(err)
	}
	var typ string
	c.DownDB.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'").Scan(&typ)
	if alters-alters0 != 1 || typ != "int" {
		t.Fatalf("downstream ran %d ALTERs, column c is %q; want one ALTER, int (the owner's)", alters-alters0, typ)
	}
}

// TestE2EBinlogSkipSurvivesFailover: a binlog skip given ahead of its statement (-b: where source 1's
// next event group starts, before it is written) is kept in etcd, not in the worker: binlog list shows
// it, the worker dies by kill -9 before the statement is written, and the spare that takes the source
// over skips it (its table never reaches the downstream) and replicates what follows. The decision is
// removed once the checkpoint is past its statement, and one still waiting is removed by stop-task.
func TestE2EBinlogSkipSurvivesFailover(t *testing.T) {
	c := startE2E(t, 3)
	c.up(0, insertRows("db_1.t_1", 1, 6, ""))
	c.waitRow(5)
	pos, _, err := dbutil.SourcePosition(context.Background(), c.UpDBs[0])
	if err != nil {
		t.Fatal(err)
	}
	c.ok("binlog", "skip", c.task, "-b", pos.BinlogPos(), "-s", s1)
	stored := fmt.Sprintf(`"pos":{"file":%q,"pos":%d}`, pos.File, pos.Pos)
	if l := c.ok("binlog", "list", c.task, "-s", s1); !strings.Contains(l.List("sources")[0].Str("msg"), stored) {
		t.Fatalf("binlog list: %v", l)
	}
	victim := c.workerOf(s1)
	c.Worker(victim).Kill9()
	c.up(0, "CREATE TABLE db_1.skipped (id INT PRIMARY KEY)", insertRows("db_1.t_1", 6, 11, ""))
	c.until("source 1 moved to a spare", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			if s.Str("source") == s1 && s.Str("worker") != "" && s.Str("worker") != victim {
				return true
			}
		}
		return false
	}, "operate-source", "show", s1)
	c.waitRow(10)
	c.waitSynced()
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 'skipped'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the skipped CREATE TABLE reached the downstream (%d tables db.skipped, %v)", n, err)
	}
	c.until("the used skip removed", func(r e2e.Result) bool {
		s := r.List("sources")
		return len(s) == 1 && s[0].Bool("result") && !strings.Contains(s[0].Str("msg"), stored)
	}, "binlog", "list", c.task, "-s", s1)
	// A decision waiting goes with its task at stop-task: the task started again has none.
	c.ok("binlog", "skip", c.task, "-b", "mysql-bin.999999:4", "-s", s1)
	if l := c.ok("binlog", "list", c.task, "-s", s1); !strings.Contains(l.List("sources")[0].Str("msg"), `"mysql-bin.999999"`) {
		t.Fatalf("binlog list: %v", l)
	}
	c.ok("stop-task", c.task)
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", f)
	if l := c.ok("binlog", "list", c.task, "-s", s1); strings.Contains(l.List("sources")[0].Str("msg"), `"pos"`) {
		t.Fatalf("binlog list after stop-task and start-task: %v", l)
	}
}
