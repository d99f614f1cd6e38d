package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/checker"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/vocab"
)

// What Tributary owns it can prove, and two tasks never write one target.

// noDrop fails the test when a refusal asks the user to drop a table Tributary cannot prove it made.
func noDrop(t *testing.T, out string) {
	t.Helper()
	if l := strings.ToLower(out); strings.Contains(l, "drop it") || strings.Contains(l, "tributary created it") || strings.Contains(l, "it is tributary's") {
		t.Fatalf("the refusal asks to drop a table the task did not create:\n%s", out)
	}
}

// A second task whose route rules send the same upstream tables into db.t is refused by check-task
// and start-task, naming both tasks and the table; one routed elsewhere starts beside the first; and
// the first task restarted under its own name is no conflict.
func TestE2ETwoTasksOneTargetRefused(t *testing.T) {
	c := startCluster(t, 2, true)
	other, err := c.TaskFile("other")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check-task", "start-task"} {
		out := c.fails(cmd, other)
		t.Logf("%s of a second task on db.t:\n%s", cmd, out)
		contains(t, out, "task other", "task "+c.task, "`db`.`t`", "["+checker.ItemOneTaskPerTarget+"]")
	}
	contains(t, c.fails("query-status", "other"), "has no source or not exist")

	// The same tables routed into db_other: a different target, so it starts.
	body, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := c.writeFile("elsewhere.yaml", strings.ReplaceAll(string(body), "target-schema: db\n", "target-schema: db_other\n"))
	if r := c.ok("check-task", elsewhere); !strings.Contains(r.Str("msg"), "pre-check is passed") {
		t.Fatalf("check-task of a task with other targets: %v", r)
	}
	for _, s := range c.ok("start-task", elsewhere).List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task of a task with other targets: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	c.up(0, insertRows("db_1.t_1", 1, 4, ""))
	c.until("the rows in db.t and db_other.t", func(e2e.Result) bool {
		var a, b int
		c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&a)
		c.DownDB.QueryRow("SELECT COUNT(*) FROM db_other.t").Scan(&b)
		return a == 3 && b == 3
	}, "query-status")

	// The first task stopped and started again: its own targets are no conflict.
	c.ok("stop-task", c.task)
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.ok("start-task", f).List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task %s again: source %s: %s", c.task, s.Str("source"), s.Str("msg"))
		}
	}
}

// Downstream tables that carry the names Tributary gives its own (a meta table's, the load's hidden
// table's) but that this task did not create are refused by the precheck, the load and start-task
// --remove-meta, never written, renamed or dropped, and the refusals do not ask to drop them.
func TestE2ETablesTheTaskDidNotCreateAreKept(t *testing.T) {
	const n = 300
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all"}, n)
	f := c.loadTask()
	down := func(stmts ...string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := c.DownDB.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	kept := func(table string) {
		t.Helper()
		if got, err := e2e.Rows(c.DownDB, "SELECT v FROM "+table); err != nil || len(got) != 1 || got[0] != "mine" {
			t.Fatalf("the user's %s holds %v (%v), want its one row", table, got, err)
		}
	}

	// A table of the checkpoint table's name and layout, with a comment of its own.
	ckpt := meta.CheckpointTable("dm_meta", c.task)
	down("CREATE DATABASE dm_meta", meta.CreateCheckpoint(ckpt, c.task)+" COMMENT='the user''s own'",
		"ALTER TABLE "+ckpt.String()+" ADD COLUMN v TEXT",
		"INSERT INTO "+ckpt.String()+" (source, id_hash, id, v) VALUES ('mine', '"+meta.Hash("x")+"', 'x', 'mine')")
	for _, args := range [][]string{{"start-task", f}, {"start-task", "--remove-meta", f}} {
		out := c.fails(args...)
		t.Logf("%v over the user's %s:\n%s", args[:len(args)-1], ckpt, out)
		contains(t, out, ckpt.String(), "did not create")
		noDrop(t, out)
		kept(ckpt.String())
	}
	c.noTask()
	down("RENAME TABLE " + ckpt.String() + " TO dm_meta.users_own")

	// A table of the hidden table's name: the precheck refuses it, and so does the load when the
	// precheck is ignored.
	hidden := vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})}.String()
	down("CREATE DATABASE db", "CREATE TABLE "+hidden+" (id INT PRIMARY KEY, v VARCHAR(32))", "INSERT INTO "+hidden+" VALUES (1, 'mine')")
	out := c.fails("start-task", f)
	t.Logf("start-task over the user's %s:\n%s", hidden, out)
	contains(t, out, "[table_empty]", hidden, "did not create")
	noDrop(t, out)
	c.noTask()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	ignoring := c.writeFile("ignore-table-empty.yaml", string(data)+"ignore-checking-items: [\"table_empty\"]\n")
	c.Dmctl("start-task", ignoring)
	r := c.until("the loads refusing the table", func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			errs := s.Get("result").List("errors")
			if len(errs) == 0 || !strings.Contains(errs[0].Str("RawCause"), hidden) {
				return false
			}
		}
		return len(subs) == 2
	}, "query-status", c.task)
	for _, s := range subtasks(r) {
		cause := s.Get("result").List("errors")[0].Str("RawCause")
		t.Logf("the load of %s: %s", s.Str("name"), cause)
		contains(t, cause, "did not create")
		noDrop(t, cause)
	}
	kept(hidden)

	// Renamed away, the load goes on and finishes.
	down("RENAME TABLE " + hidden + " TO db.users_hidden")
	c.ok("resume-task", c.task)
	if rows := c.converge("id, v"); rows != 4*n {
		t.Fatalf("%d rows, want %d", rows, 4*n)
	}
	c.waitSynced()
	if got, err := e2e.Rows(c.DownDB, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't'"); err != nil || len(got) != 1 || got[0] != "" {
		t.Fatalf("db.t's comment after the cut-over: %q (%v), want the upstream's (none)", got, err)
	}
	c.ok("stop-task", c.task)

	// The task's load header still names its hidden table; a table of that name made since is not the
	// load's: start-task --remove-meta refuses to drop it, and drops nothing.
	down("DROP TABLE db.t", "CREATE TABLE "+hidden+" (id INT PRIMARY KEY, v VARCHAR(32))", "INSERT INTO "+hidden+" VALUES (1, 'mine')")
	out = c.fails("start-task", "--remove-meta", f)
	t.Logf("start-task --remove-meta with the user's %s:\n%s", hidden, out)
	contains(t, out, hidden, "did not create")
	noDrop(t, out)
	kept(hidden)
	kept("db.users_hidden")
	kept("dm_meta.users_own")
}
