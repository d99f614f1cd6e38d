package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/internal/e2e"
	"github.com/tributary-db/tributary/internal/mariadbtest"
)

// e2eCluster starts a cluster (2 upstreams, 1 downstream, 1 master, workers) built from this
// module, with the shard tables db_1.t_1, db_1.t_2 on upstream 1 and db_2.t_1, db_2.t_2 on upstream
// 2, both sources created and the task "shard" started.
type e2eCluster struct {
	*e2e.Cluster
	t    *testing.T
	task string
}

func startE2E(t *testing.T, workers int) *e2eCluster {
	t.Helper()
	if !mariadbtest.Available() {
		t.Skip("mariadbd not found: install mariadb-server (apt-get install -y mariadb-server) to run this test")
	}
	root, _ := filepath.Abs("..")
	bin := binaries(t)
	c, err := e2e.Start(e2e.Options{Root: root, Bin: bin, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	ec := &e2eCluster{Cluster: c, t: t}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append([]*e2e.Proc{c.Master}, c.Workers...) {
				t.Logf("--- %s log (last lines):\n%s\n%s", p.Name, e2e.Tail(p.LogFile, 40), e2e.Tail(p.LogFile+".out", 10))
			}
		}
		c.Close()
	})
	for i := range c.Ups {
		db := fmt.Sprintf("db_%d", i+1)
		ec.up(i, "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".t_1 (id INT PRIMARY KEY, v VARCHAR(32))",
			"CREATE TABLE "+db+".t_2 (id INT PRIMARY KEY, v VARCHAR(32))")
		f, err := c.SourceFile(i)
		if err != nil {
			t.Fatal(err)
		}
		ec.ok("operate-source", "create", f)
	}
	ec.task = "shard"
	f, err := c.TaskFile(ec.task)
	if err != nil {
		t.Fatal(err)
	}
	r := ec.ok("start-task", f)
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	ec.waitStage("Running")
	return ec
}

func (c *e2eCluster) up(i int, stmts ...string) {
	c.t.Helper()
	if err := c.Exec(i, stmts...); err != nil {
		c.t.Fatal(err)
	}
}

// ok runs dmctl and fails the test unless it printed "result": true.
func (c *e2eCluster) ok(args ...string) e2e.Result {
	c.t.Helper()
	r, out, err := c.Dmctl(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	if !r.Bool("result") {
		c.t.Fatalf("dmctl %s: %s", strings.Join(args, " "), out)
	}
	return r
}

func (c *e2eCluster) until(what string, ok func(e2e.Result) bool, args ...string) e2e.Result {
	c.t.Helper()
	r, err := c.Until(90*time.Second, ok, args...)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	return r
}

// subtasks returns every source's subtask status of the task.
func subtasks(r e2e.Result) []e2e.Result {
	var out []e2e.Result
	for _, s := range r.List("sources") {
		out = append(out, s.List("subTaskStatus")...)
	}
	return out
}

func (c *e2eCluster) waitStage(stage string) e2e.Result {
	c.t.Helper()
	return c.until("task stage "+stage, func(r e2e.Result) bool {
		subs := subtasks(r)
		if len(subs) != len(c.Ups) {
			return false
		}
		for _, s := range subs {
			if s.Str("stage") != stage {
				return false
			}
		}
		return true
	}, "query-status", c.task)
}

// waitSynced waits until every subtask is Running and synced with no lock left.
func (c *e2eCluster) waitSynced() {
	c.t.Helper()
	c.until("all sources synced", func(r e2e.Result) bool {
		subs := subtasks(r)
		if len(subs) != len(c.Ups) {
			return false
		}
		for _, s := range subs {
			if s.Str("stage") != "Running" || !s.Get("sync").Bool("synced") {
				return false
			}
		}
		return true
	}, "query-status", c.task)
	r := c.ok("shard-ddl-lock", c.task)
	if len(r.List("locks")) != 0 {
		c.t.Fatalf("a lock is left: %v", r)
	}
}

func (c *e2eCluster) converge(cols string) int {
	c.t.Helper()
	n, err := c.Converge(cols, 90*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// lockState waits for the task's lock to show exactly these synced and unsynced sources.
func (c *e2eCluster) waitLock(synced, unsynced []string) e2e.Result {
	c.t.Helper()
	r := c.until(fmt.Sprintf("lock synced=%v unsynced=%v", synced, unsynced), func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && slices.Equal(locks[0].Strings("synced"), synced) && slices.Equal(locks[0].Strings("unsynced"), unsynced)
	}, "shard-ddl-lock", c.task)
	return r.List("locks")[0]
}

func insertRows(table string, from, to int, extra string) string {
	var vals []string
	for i := from; i < to; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 'v%d'%s)", i, i, extra))
	}
	return "INSERT INTO " + table + " VALUES " + strings.Join(vals, ", ")
}

var (
	s1 = e2e.SourceID(0)
	s2 = e2e.SourceID(1)
)

// ADD COLUMN on 4 shards over 2 sources with inserts between; the lock forms shard by shard, only
// one source executes it, and the rows written after the DDL on early shards arrive after it.
func TestE2EAddColumn(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 100, ""), insertRows("db_1.t_2", 100, 200, ""))
	c.up(1, insertRows("db_2.t_1", 200, 300, ""), insertRows("db_2.t_2", 300, 400, ""))
	c.converge("id, v")
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", insertRows("db_1.t_1", 1000, 1050, ", 7"), insertRows("db_1.t_2", 1050, 1100, ""))
	c.up(0, "ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_2", 1100, 1150, ", 8"))
	lock := c.waitLock([]string{s1}, []string{s2})
	if id := lock.Str("ID"); id != "shard-`db`.`t`" {
		t.Fatalf("lock ID %q", id)
	}
	if ddls := lock.Strings("DDLs"); len(ddls) != 1 || !strings.Contains(ddls[0], "ADD COLUMN `c` INT") {
		t.Fatalf("lock DDLs %q", ddls)
	}
	c.until(s1+" blocked on the lock in query-status", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			for _, sub := range s.List("subTaskStatus") {
				if s.Get("sourceStatus").Str("source") == s1 && sub.Str("unresolvedDDLLockID") == "shard-`db`.`t`" &&
					len(sub.Get("sync").Strings("blockingDDLs")) == 1 && len(sub.Get("sync").List("unresolvedGroups")) == 1 {
					return true
				}
			}
		}
		return false
	}, "query-status", c.task)
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2000, 2050, ", 9"), insertRows("db_2.t_2", 2050, 2100, ""))
	c.up(1, "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2100, 2150, ", 10"))
	n := c.converge("id, v, c")
	c.waitSynced()
	if n != 700 {
		t.Fatalf("%d rows downstream, want 700", n)
	}
	if cols := downColumns(t, c); cols != 3 {
		t.Fatalf("downstream db.t has %d columns, want 3", cols)
	}
}

func downColumns(t *testing.T, c *e2eCluster) int {
	t.Helper()
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

