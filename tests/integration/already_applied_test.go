package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// The shard DDL's ADD COLUMN meets a column of the same name someone added downstream by hand. The
// downstream answers 1060 (duplicate column); the DDL is taken as applied only when the column there
// is what it would have made.

// TestE2EHandAddedColumnDiffersPauses: the hand-made column is VARCHAR(5), the shards add INT. The
// owner's subtask pauses with an error that names both definitions and the ways out, the lock stays
// and every row written after the DDL waits; the column is left as it is. Once the user drops it,
// resume-task runs the DDL, once, and the rows follow.
func TestE2EHandAddedColumnDiffersPauses(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""))
	c.up(1, insertRows("db_2.t_1", 10, 20, ""))
	c.converge("id, v")
	c.down("ALTER TABLE db.t ADD COLUMN c VARCHAR(5)")
	c.bothAddColumnC()

	r := c.until("a subtask paused on the hand-made column", func(r e2e.Result) bool { return pausedOn(r, "Duplicate column") != "" }, "query-status", c.task)
	cause := pausedOn(r, "Duplicate column")
	t.Logf("query-status: %s", cause)
	contains(t, cause, "ADD COLUMN `c` INT", "Error 1060", "column `c` differs",
		"downstream: `c` varchar(5) DEFAULT NULL", "the DDL would make: `c` INT", "resume-task", "binlog skip shard -b mysql-bin.", "binlog replace shard")
	// The lock waits for its owner, and with it every row written after the DDL.
	if locks := c.ok("shard-ddl-lock", c.task).List("locks"); len(locks) != 1 {
		t.Fatalf("locks while the owner is paused: %v, want the DDL's", locks)
	}
	if n := c.downCount("id >= 100"); n != 0 {
		t.Fatalf("%d rows written after the DDL arrived while its lock waits", n)
	}
	if typ := c.downColumnType("c"); typ != "varchar(5)" {
		t.Fatalf("the hand-made column is now %q; it must be left as it is", typ)
	}

	c.down("ALTER TABLE db.t DROP COLUMN c")
	c.ok("resume-task", c.task)
	if n := c.converge("id, v, c"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
	c.waitSynced()
	if typ := c.downColumnType("c"); typ != "int(11)" {
		t.Fatalf("column c downstream is %q, want the shards' int(11)", typ)
	}
	if n := c.binlogged("ALTER TABLE `db`.`t` ADD COLUMN `c` INT"); n != 1 {
		t.Fatalf("the DDL took effect downstream %d times (downstream binlog), want once", n)
	}
}

// TestE2EHandAddedColumnSameIsApplied: the hand-made column is what the DDL makes (INT): the DDL is
// taken as applied, which the worker logs, the lock resolves and the rows follow; the DDL never took
// effect downstream.
func TestE2EHandAddedColumnSameIsApplied(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""))
	c.up(1, insertRows("db_2.t_1", 10, 20, ""))
	c.converge("id, v")
	c.down("ALTER TABLE db.t ADD COLUMN c INT")
	c.bothAddColumnC()
	if n := c.converge("id, v, c"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
	c.waitSynced()
	if n := c.logCount("DDL already in effect downstream"); n != 1 {
		t.Fatalf("the workers logged %d DDLs taken as applied, want 1", n)
	}
	if n := c.binlogged("ALTER TABLE `db`.`t`"); n != 0 {
		t.Fatalf("%d of Tributary's ALTERs took effect downstream, want none", n)
	}
}

// bothAddColumnC adds c INT to every shard, with rows after it (ids 100-109 and 200-209).
func (c *e2eCluster) bothAddColumnC() {
	c.t.Helper()
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_1", 100, 110, ", 1"))
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 200, 210, ", 2"))
}

// down runs statements on the downstream, as a user would by hand.
func (c *e2eCluster) down(stmts ...string) {
	c.t.Helper()
	for _, q := range stmts {
		if _, err := c.DownDB.Exec(q); err != nil {
			c.t.Fatalf("downstream: %s: %v", q, err)
		}
	}
}

func (c *e2eCluster) downCount(where string) int {
	c.t.Helper()
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE " + where).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *e2eCluster) downColumnType(col string) string {
	c.t.Helper()
	var typ string
	if err := c.DownDB.QueryRow("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = ?", col).Scan(&typ); err != nil {
		c.t.Fatalf("column db.t.%s: %v", col, err)
	}
	return typ
}

// binlogged counts the statements in the downstream's binlog that contain s: the DDLs that took effect
// (a refused one is in the general log, not in the binlog).
func (c *e2eCluster) binlogged(s string) int {
	c.t.Helper()
	files, err := e2e.Rows(c.DownDB, "SHOW BINARY LOGS")
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		name, _, _ := strings.Cut(f, "|")
		events, err := e2e.Rows(c.DownDB, fmt.Sprintf("SHOW BINLOG EVENTS IN '%s'", name))
		if err != nil {
			c.t.Fatal(err)
		}
		for _, ev := range events {
			// The load cut-over's ALTER giving the target its comment back (task-mode all) is not a DDL.
			if strings.Contains(ev, s) && !strings.Contains(ev, loader.CommentBack) {
				n++
			}
		}
	}
	return n
}

// pausedOn returns the error of a paused subtask whose cause contains s, or "".
func pausedOn(r e2e.Result, s string) string {
	for _, st := range subtasks(r) {
		for _, e := range st.Get("result").List("errors") {
			if st.Str("stage") == "Paused" && strings.Contains(e.Str("RawCause"), s) {
				return e.Str("RawCause")
			}
		}
	}
	return ""
}
