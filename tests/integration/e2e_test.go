package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
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
	return startCluster(t, workers, true)
}

// startCluster is startE2E without starting the task when startTask is false.
func startCluster(t *testing.T, workers int, startTask bool) *e2eCluster {
	t.Helper()
	return startWith(t, e2e.Options{Workers: workers}, startTask)
}

// startWith starts a cluster with options o.
func startWith(t *testing.T, o e2e.Options, startTask bool) *e2eCluster {
	t.Helper()
	e2e.SkipShort(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	bin := binaries(t)
	o.Root, o.Bin = root, bin
	c, err := e2e.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	ec := &e2eCluster{Cluster: c, t: t}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(append([]*e2e.Proc{}, c.Masters...), c.Workers...) {
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
	if !startTask {
		return ec
	}
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
	if c.TaskMode() == "all" {
		// As DM asks: no shard DDL while the full load dumps. The scenarios write DDL at once, so they
		// start once every source's load has handed over to the sync unit.
		ec.until("every source in the sync unit", func(r e2e.Result) bool {
			subs := subtasks(r)
			for _, s := range subs {
				if s.Str("unit") != "Sync" || s.Str("stage") != "Running" {
					return false
				}
			}
			return len(subs) == len(c.Ups)
		}, "query-status", ec.task)
	}
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

// waitRow waits until the row of id has arrived in db.t.
func (c *e2eCluster) waitRow(id int) {
	c.t.Helper()
	c.until(fmt.Sprintf("row %d downstream", id), func(e2e.Result) bool {
		var n int
		c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id = ?", id).Scan(&n)
		return n == 1
	}, "query-status", c.task)
}

func (c *e2eCluster) converge(cols string) int {
	c.t.Helper()
	n, err := c.Converge(cols, 90*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// waitConflict waits for the task's one lock to show a conflict between the two sources, and returns it.
func (c *e2eCluster) waitConflict() e2e.Result {
	c.t.Helper()
	r := c.until("conflict shown", func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && len(locks[0].List("conflict")) == 2
	}, "shard-ddl-lock", c.task)
	return r.List("locks")[0]
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
	c.ddlsRun(1)
	c.logsHaveNoDuplicateKeys()
}

// ddlsRun checks that exactly n ALTER TABLE statements reached the downstream table db.t.
func (c *e2eCluster) ddlsRun(n int) {
	c.t.Helper()
	got, err := c.DownstreamStatements("ALTER TABLE `db`.`t`")
	if err != nil {
		c.t.Fatal(err)
	}
	if got != n {
		c.t.Fatalf("%d ALTER TABLE statements ran downstream, want %d", got, n)
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

// Two successive DDLs reached in a different order across tables: t_1 runs both before t_2 runs any
// on one source, the other source interleaves them. Each runs downstream once, in order.
func TestE2ESuccessiveDDLs(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""), insertRows("db_1.t_2", 10, 20, ""))
	c.up(1, insertRows("db_2.t_1", 20, 30, ""), insertRows("db_2.t_2", 30, 40, ""))
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c1 INT", insertRows("db_1.t_1", 100, 110, ", 1"),
		"ALTER TABLE db_1.t_1 ADD COLUMN c2 INT", insertRows("db_1.t_1", 110, 120, ", 1, 2"),
		insertRows("db_1.t_2", 120, 130, ""),
		"ALTER TABLE db_1.t_2 ADD COLUMN c1 INT", insertRows("db_1.t_2", 130, 140, ", 3"),
		"ALTER TABLE db_1.t_2 ADD COLUMN c2 INT", insertRows("db_1.t_2", 140, 150, ", 3, 4"))
	c.up(1, "ALTER TABLE db_2.t_2 ADD COLUMN c1 INT", insertRows("db_2.t_2", 200, 210, ", 5"),
		"ALTER TABLE db_2.t_1 ADD COLUMN c1 INT", insertRows("db_2.t_1", 210, 220, ", 6"),
		"ALTER TABLE db_2.t_1 ADD COLUMN c2 INT", insertRows("db_2.t_1", 220, 230, ", 6, 7"),
		insertRows("db_2.t_2", 230, 240, ", 8"),
		"ALTER TABLE db_2.t_2 ADD COLUMN c2 INT", insertRows("db_2.t_2", 240, 250, ", 8, 9"))
	if n := c.converge("id, v, c1, c2"); n != 140 {
		t.Fatalf("%d rows, want 140", n)
	}
	c.waitSynced()
	if cols := downColumns(t, c); cols != 4 {
		t.Fatalf("downstream db.t has %d columns, want 4", cols)
	}
	c.ddlsRun(2)
}

// A shard table created mid-task joins its group: its rows arrive and the next DDL waits for it too.
func TestE2ENewShardTable(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""))
	c.up(1, "CREATE TABLE db_2.t_3 (id INT PRIMARY KEY, v VARCHAR(32))", insertRows("db_2.t_3", 10, 20, ""))
	c.converge("id, v")
	for i, db := range []string{"db_1", "db_2"} {
		c.up(i, "ALTER TABLE "+db+".t_1 ADD COLUMN c INT", "ALTER TABLE "+db+".t_2 ADD COLUMN c INT")
	}
	// db_2.t_3 has not reached the DDL: the lock waits for source 2.
	c.waitLock([]string{s1}, []string{s2})
	c.up(1, insertRows("db_2.t_3", 30, 40, ""), "ALTER TABLE db_2.t_3 ADD COLUMN c INT", insertRows("db_2.t_3", 40, 50, ", 5"))
	if n := c.converge("id, v, c"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
	c.waitSynced()
}

// halfForm runs the DDL on source 1's shards only, with rows around it, and waits for the lock to
// show source 1 synced and source 2 not.
func (c *e2eCluster) halfForm() {
	c.t.Helper()
	c.up(0, insertRows("db_1.t_1", 0, 50, ""), insertRows("db_1.t_2", 50, 100, ""))
	c.up(1, insertRows("db_2.t_1", 100, 150, ""), insertRows("db_2.t_2", 150, 200, ""))
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", insertRows("db_1.t_1", 1000, 1020, ", 1"),
		"ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_2", 1020, 1040, ", 2"))
	c.waitLock([]string{s1}, []string{s2})
}

// finishLock runs the DDL on source 2 with rows around it and checks everything converges.
func (c *e2eCluster) finishLock() {
	c.t.Helper()
	c.up(1, insertRows("db_2.t_1", 2000, 2020, ""), "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2020, 2040, ", 3"),
		"ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2040, 2060, ", 4"))
	c.up(0, insertRows("db_1.t_1", 3000, 3020, ", 5"))
	if n := c.converge("id, v, c"); n != 340 {
		c.t.Fatalf("%d rows, want 340", n)
	}
	c.waitSynced()
	if cols := downColumns(c.t, c); cols != 3 {
		c.t.Fatalf("downstream db.t has %d columns, want 3", cols)
	}
}

func TestE2EPauseResumeWhileLockHalfFormed(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	c.ok("pause-task", c.task)
	c.waitStage("Paused")
	// Writes while paused, on both sources, are picked up after resume.
	c.up(1, insertRows("db_2.t_1", 1500, 1510, ""))
	c.ok("resume-task", c.task)
	c.waitStage("Running")
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
}

func TestE2EStopStartWhileLockHalfFormed(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	c.ok("stop-task", c.task)
	c.until("task gone", func(r e2e.Result) bool { return !r.Bool("result") }, "query-status", c.task)
	// stop-task keeps the lock (DM's way): it still shows, and start-task continues it.
	c.waitLock([]string{s1}, []string{s2})
	c.up(1, insertRows("db_2.t_1", 1500, 1510, ""))
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoints were kept: the task resumes, source 1 meets its DDL again and the lock re-forms.
	c.ok("start-task", f)
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
}

// TestE2EUnlockAfterStopTask (dm#1543): a lock kept by stop-task is removed by a plain unlock, which
// answers true and says nothing ran downstream; start-task then reads the DDL again from the
// checkpoint, the lock forms again and finishes.
func TestE2EUnlockAfterStopTask(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	c.ok("stop-task", c.task)
	c.until("task gone", func(r e2e.Result) bool { return !r.Bool("result") }, "query-status", c.task)
	lk := c.waitLock([]string{s1}, []string{s2})
	u := c.ok("shard-ddl-lock", "unlock", lk.Str("ID"))
	contains(t, u.Str("msg"), "is stopped", "nothing ran downstream")
	if r := c.ok("shard-ddl-lock", c.task); len(r.List("locks")) != 0 {
		t.Fatalf("unlock left the lock: %v", r)
	}
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", f)
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(0)
}

// finishLockPlus is finishLock when extra more rows were written meanwhile.
func (c *e2eCluster) finishLockPlus(extra int) {
	c.t.Helper()
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2020, 2040, ", 3"),
		"ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2040, 2060, ", 4"))
	if n := c.converge("id, v, c"); n != 280+extra {
		c.t.Fatalf("%d rows, want %d", n, 280+extra)
	}
	c.waitSynced()
	c.ddlsRun(1)
}

// Different DDLs from the two sources: shard-ddl-lock shows the conflict with both DDLs; the user
// force-removes the lock, fixes the downstream by hand, and the held-back rows arrive.
func TestE2EConflictForceRemoveAndManualFix(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""), "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT",
		insertRows("db_1.t_1", 100, 110, ", 1"))
	c.up(1, insertRows("db_2.t_1", 10, 20, ""), "ALTER TABLE db_2.t_1 ADD COLUMN c BIGINT", "ALTER TABLE db_2.t_2 ADD COLUMN c BIGINT",
		insertRows("db_2.t_1", 200, 210, ", 2"))
	lock := c.waitConflict()
	var all []string
	for _, cf := range lock.List("conflict") {
		all = append(all, cf.Str("source")+": "+strings.Join(cf.Strings("DDLs"), ";"))
	}
	joined := strings.Join(all, "\n")
	if !strings.Contains(joined, s1+": ALTER TABLE `db`.`t` ADD COLUMN `c` INT") || !strings.Contains(joined, s2+": ALTER TABLE `db`.`t` ADD COLUMN `c` BIGINT") {
		t.Fatalf("conflict does not name both DDLs and sources:\n%s", joined)
	}
	if cols := downColumns(t, c); cols != 2 {
		t.Fatalf("a conflicting DDL ran downstream: %d columns", cols)
	}
	c.ok("shard-ddl-lock", "unlock", lock.Str("ID"), "--force-remove")
	if r := c.ok("shard-ddl-lock"); len(r.List("locks")) != 0 {
		t.Fatalf("lock left after force-remove: %v", r)
	}
	// The manual fix: the user chooses BIGINT downstream. Held-back rows then arrive (the subtasks
	// retry by themselves; resume-task makes it immediate).
	if _, err := c.DownDB.Exec("ALTER TABLE db.t ADD COLUMN c BIGINT"); err != nil {
		t.Fatal(err)
	}
	c.ok("resume-task", c.task)
	if n := c.converge("id, v, c"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
	c.waitSynced()
}

// kill -9 of a worker while its source is part of a half-formed lock, then restart it: its source
// stays bound to it (or moves back), the lock completes, nothing is lost or applied twice.
func TestE2EKillWorkerWhileLockHalfFormed(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	w := c.Worker("worker1") // bound to source 1, which has put its info
	w.Kill9()
	c.up(0, insertRows("db_1.t_2", 1500, 1510, ", 9"))
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitStage("Running")
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
}

// Worker failover: with a spare worker registered, stopping a bound worker moves its source to the
// spare, which resumes from the downstream checkpoint.
func TestE2EWorkerFailover(t *testing.T) {
	c := startE2E(t, 3)
	c.up(0, insertRows("db_1.t_1", 0, 100, ""))
	c.up(1, insertRows("db_2.t_1", 100, 200, ""))
	c.converge("id, v")
	r := c.ok("query-status", c.task)
	var victim string
	for _, s := range r.List("sources") {
		if s.Get("sourceStatus").Str("source") == s1 {
			victim = s.Get("sourceStatus").Str("worker")
		}
	}
	c.Worker(victim).Kill9()
	c.up(0, insertRows("db_1.t_2", 300, 400, ""))
	c.until("source 1 moved to the spare", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			ss := s.Get("sourceStatus")
			if ss.Str("source") == s1 && ss.Str("worker") != victim && ss.Str("worker") != "" && len(s.List("subTaskStatus")) == 1 {
				return true
			}
		}
		return false
	}, "query-status", c.task)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_1", 500, 510, ", 1"))
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_1", 600, 610, ", 2"))
	if n := c.converge("id, v, c"); n != 320 {
		t.Fatalf("%d rows, want 320", n)
	}
	c.waitSynced()
	c.ddlsRun(1)
	c.until("dead worker offline", func(r e2e.Result) bool {
		for _, m := range r.List("members") {
			for _, w := range m.Get("worker").List("workers") {
				if w.Str("name") == victim {
					return w.Str("stage") == "offline"
				}
			}
		}
		return false
	}, "list-member", "--worker")
	c.ok("offline-member", "--type", "worker", "--name", victim)
}

// stop-task keeps the checkpoints (start-task resumes); start-task --remove-meta drops the task's
// checkpoint table and etcd keys, only those. In task-mode incremental the task starts from the
// sources' positions of that moment. In a loading mode it loads again, and a target that holds rows
// is the user's: start-task refuses it by name and changes nothing (the checkpoints stay) until the
// user drops it; then the reload copies everything the shards hold.
func TestE2ERemoveMeta(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 10, ""))
	c.converge("id, v")
	if _, err := c.DownDB.Exec("CREATE TABLE dm_meta.keep (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	c.ok("stop-task", c.task)
	c.up(0, insertRows("db_1.t_1", 10, 20, "")) // while stopped
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", f)
	c.converge("id, v") // resumed from the checkpoint: the rows written while stopped arrived
	c.ok("stop-task", c.task)
	c.up(0, insertRows("db_1.t_1", 20, 30, "")) // while stopped: lost to a fresh incremental start
	checkpointRows := func() int {
		t.Helper()
		var n int
		if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM dm_meta.shard_checkpoint").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := checkpointRows()
	if before == 0 {
		t.Fatal("no checkpoint rows before --remove-meta")
	}
	from, want := 30, 10 // rows 30..39 arrive; 20..29 were written before the fresh start
	if c.TaskMode() != "incremental" {
		down, err := e2e.Rows(c.DownDB, "SELECT * FROM db.t")
		if err != nil {
			t.Fatal(err)
		}
		contains(t, c.fails("start-task", "--remove-meta", f), "nothing started", "`db`.`t`", "holds rows")
		c.noTask()
		if now, err := e2e.Rows(c.DownDB, "SELECT * FROM db.t"); err != nil || !slices.Equal(now, down) {
			t.Fatalf("the refused start-task --remove-meta changed db.t: %d rows (%v), had %d: %s", len(now), err, len(down), e2e.FirstDiff(now, down))
		}
		if n := checkpointRows(); n != before {
			t.Fatalf("the refused start-task --remove-meta changed the checkpoint: %d rows, had %d", n, before)
		}
		// The user drops the target: the reload copies every row the shards hold (20..29 too).
		if _, err := c.DownDB.Exec("DROP TABLE db.t"); err != nil {
			t.Fatal(err)
		}
		from, want = 20, 20
	}
	c.ok("start-task", "--remove-meta", f)
	c.up(0, insertRows("db_1.t_1", 30, 40, ""))
	c.until("rows after the fresh start", func(e2e.Result) bool {
		var n int
		c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id >= ?", from).Scan(&n)
		return n == want
	}, "query-status", c.task)
	if c.TaskMode() == "incremental" {
		var n20 int
		if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id >= 20 AND id < 30").Scan(&n20); err != nil || n20 != 0 {
			t.Fatalf("rows written before the fresh start were replicated: %d %v", n20, err)
		}
	} else {
		c.converge("id, v")
		if cut, other := c.renames(); cut != 2 || other != 0 {
			t.Fatalf("%d cut-over RENAMEs downstream (want 2: the first load and the reload), %d others", cut, other)
		}
	}
	var keep int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dm_meta' AND TABLE_NAME = 'keep'").Scan(&keep); err != nil || keep != 1 {
		t.Fatalf("--remove-meta touched another table in dm_meta: %d %v", keep, err)
	}
	c.waitSynced()
}

// A plain unlock of a half-formed lock: the owner executes the DDL without waiting for source 2, whose
// DDL is skipped when it arrives; rows on both sides arrive, and the DDL runs once.
func TestE2EUnlockHalfFormedLock(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	c.ok("shard-ddl-lock", "unlock", "shard-`db`.`t`", "--owner", s1)
	c.until("the owner ran the DDL", func(r e2e.Result) bool { return downColumns(t, c) == 3 }, "shard-ddl-lock")
	c.finishLockPlus(0)
}

// Sources in GTID mode: the lock forms and resolves, and a worker killed while it is half formed
// resumes by GTID set.
func TestE2EGTIDSources(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, GTID: true}, true)
	c.halfForm()
	w := c.Worker(c.workerOf(s1))
	w.Kill9()
	c.up(0, insertRows("db_1.t_2", 1500, 1510, ", 9"))
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
	r := c.ok("query-status", c.task)
	for _, sub := range subtasks(r) {
		if sub.Get("sync").Str("syncerBinlogGtid") == "" {
			t.Fatalf("no GTID set in query-status: %v", r)
		}
	}
}

// TestE2EShardSchemaDropAndRefusedDDL, through the binaries on utf8mb4 servers: a generated column and
// unsigned values at their limits added by a sharding DDL; DROP DATABASE of one source's shard schema,
// which must leave the merged target and every shard's rows; then a RENAME of a shard, which is
// refused (query-status names the statement and the way on) and passed with the binlog event filter
// the error suggests, after stop-task and start-task with the changed file.
func TestE2EShardSchemaDropAndRefusedDDL(t *testing.T) {
	c := startCluster(t, 2, false)
	// A table without a key, there before the task: MariaDB's JSON (LONGTEXT with a json_valid CHECK in
	// SHOW CREATE TABLE, which the parser's restore wrote with MySQL-8-only ENFORCED), a generated
	// column, unsigned values and duplicate rows.
	c.up(0, "CREATE TABLE db_1.events (js JSON, n INT UNSIGNED, note VARCHAR(20), kind VARCHAR(20) AS (JSON_VALUE(js, '$.k')) VIRTUAL)")
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", f)
	c.waitStage("Running")
	c.up(0, `INSERT INTO db_1.events (js, n, note) VALUES ('{"k": "a"}', 4294967295, 'dup'), ('{"k": "a"}', 4294967295, 'dup'), ('{"k": "b"}', 0, 'x')`,
		"UPDATE db_1.events SET note = 'changed' WHERE note = 'dup' LIMIT 1", "DELETE FROM db_1.events WHERE note = 'x'")
	const events = "SELECT js, n, note, kind FROM %s ORDER BY note"
	want, err := e2e.Rows(c.UpDBs[0], fmt.Sprintf(events, "db_1.events"))
	if err != nil {
		t.Fatal(err)
	}
	c.until("db.events equal to db_1.events", func(e2e.Result) bool {
		got, err := e2e.Rows(c.DownDB, fmt.Sprintf(events, "db.events"))
		return err == nil && slices.Equal(got, want)
	}, "query-status", c.task)
	for i := range c.Ups {
		for j := 1; j <= 2; j++ {
			c.up(i, insertRows(fmt.Sprintf("db_%d.t_%d", i+1, j), (i*2+j)*100, (i*2+j)*100+5, ""))
		}
	}
	c.converge("id, v")
	for i := range c.Ups {
		for j := 1; j <= 2; j++ {
			table := fmt.Sprintf("db_%d.t_%d", i+1, j)
			c.up(i, "ALTER TABLE "+table+" ADD COLUMN g INT AS (id + 1) VIRTUAL, ADD COLUMN u BIGINT UNSIGNED",
				fmt.Sprintf("INSERT INTO %s (id, v, u) VALUES (%d, 'max', 18446744073709551615)", table, (i*2+j)*100+50))
		}
	}
	c.converge("id, v, g, u")

	// DROP DATABASE of a shard schema: nothing of the merged target goes.
	var before int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&before); err != nil {
		t.Fatal(err)
	}
	c.up(0, "DROP DATABASE db_1")
	c.up(1, "INSERT INTO db_2.t_1 (id, v) VALUES (900, 'after drop database')")
	c.waitRow(900)
	var after int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&after); err != nil || after != before+1 {
		t.Fatalf("db.t holds %d rows after DROP DATABASE db_1 upstream, want %d (%v)", after, before+1, err)
	}
	if got, err := e2e.Rows(c.DownDB, fmt.Sprintf(events, "db.events")); err != nil || !slices.Equal(got, want) {
		t.Fatalf("db.events after DROP DATABASE db_1 upstream: %v (%v), want %v", got, err, want)
	}

	// A RENAME that takes a shard out of its merged table is refused: the subtask stops before it, and
	// says why and how to go on (a rename within the group is followed: TestShardRenameFollowsGroup).
	c.up(1, "RENAME TABLE db_2.t_2 TO db_2.old_t2")
	r := c.until("the refused RENAME in query-status", func(r e2e.Result) bool {
		for _, s := range subtasks(r) {
			for _, e := range s.Get("result").List("errors") {
				if strings.Contains(e.Str("RawCause"), "RENAME TABLE db_2.t_2 TO db_2.old_t2") {
					return true
				}
			}
		}
		return false
	}, "query-status", c.task)
	if !strings.Contains(fmt.Sprint(r), "filter") {
		t.Fatalf("the refusal does not name the way on: %v", r)
	}
	wantCut := 0 // the load's cut-over renames db.t into place, once
	if c.TaskMode() != "incremental" {
		wantCut = 1
	}
	if cut, other := c.renames(); other != 0 || cut != wantCut {
		t.Fatalf("%d RENAME statements downstream besides the load's cut-over (%d, want %d)", other, cut, wantCut)
	}
	c.ok("stop-task", c.task)
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	task := strings.Replace(string(data), "  - source-id: "+s2+"\n", "  - source-id: "+s2+"\n    filter-rules: [skip-rename]\n", 1) +
		"filters:\n  skip-rename:\n    schema-pattern: \"db_2\"\n    table-pattern: \"t_2\"\n    events: [\"rename table\"]\n    action: Ignore\n"
	if err := os.WriteFile(f, []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", f)
	c.up(1, "INSERT INTO db_2.t_1 (id, v) VALUES (901, 'after the filter')")
	c.waitRow(901)
	c.waitStage("Running")
}

// The owner shard-ddl-lock shows is the source whose worker runs the lock's DDL: while the lock waits on
// source 2, it is source 2 (its info will complete the lock and write the exec for itself), and source
// 2's worker is the one that executes.
func TestE2EOwnerShownRunsTheDDL(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	if lock := c.waitLock([]string{s1}, []string{s2}); lock.Str("owner") != s2 {
		t.Fatalf("the waiting lock shows owner %q, want %s (the source that completes it runs it): %v", lock.Str("owner"), s2, lock)
	}
	c.finishLockPlus(0)
	for source, exec := range map[string]string{s1: `"exec":false`, s2: `"exec":true`} {
		log, err := os.ReadFile(c.Worker(c.workerOf(source)).LogFile)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "sharding DDL resolved") && strings.Contains(line, `"source":"`+source+`"`) {
				found = true
				if !strings.Contains(line, exec) {
					t.Fatalf("source %s's worker: %s, want %s", source, line, exec)
				}
			}
		}
		if !found {
			t.Fatalf("source %s's worker logged no resolved lock", source)
		}
	}
}
