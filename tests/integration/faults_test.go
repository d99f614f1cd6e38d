package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// The fault matrix: kill -9 of the leader master, the owner worker or the non-owner worker at each
// step of a lock, then restart it. Each cell checks that the downstream converges to the merged
// upstream, that the DDL reached the downstream exactly once (its general log), that no lock is left
// and that the task is Running and synced. `make test-faults` (TRIBUTARY_FAULTS=all) runs every cell
// TRIBUTARY_FAULT_RUNS times (default 1; even runs use GTID sources); `make test` runs one cell per
// step, the victim rotating.

type faultStep struct {
	name      string
	failpoint string // where a process is held while the victim is killed ("" : no failpoint needed)
}

// The owner's done is the other sources' skip (pessimist: implicit skips): no master step lies between
// them any more (the master puts skips of their own only for sources that join a lock late).
var faultSteps = []faultStep{
	{"info put by some sources", ""},
	{"all infos put", "master-before-exec"},
	{"exec op written", "worker-before-exec"},
	{"DDL executed downstream before done", "worker-after-ddl"},
	{"DDL and checkpoint committed before done", "worker-before-done"},
	{"skips written before re-sync", "worker-before-skip"},
}

var faultVictims = []string{"leader master", "owner worker", "non-owner worker"}

func TestFaultMatrix(t *testing.T) {
	all := os.Getenv("TRIBUTARY_FAULTS") == "all"
	runs := 1
	if n, err := fmt.Sscan(os.Getenv("TRIBUTARY_FAULT_RUNS"), &runs); n != 1 || err != nil || runs < 1 {
		runs = 1
	}
	for i, step := range faultSteps {
		for j, victim := range faultVictims {
			if !all && j != i%len(faultVictims) {
				continue
			}
			for run := 0; run < runs; run++ {
				gtid := run%2 == 1 // repeated runs alternate file/position and GTID sources
				t.Run(fmt.Sprintf("%s/kill %s/run %d gtid=%t", step.name, victim, run+1, gtid), func(t *testing.T) {
					faultCell(t, step, victim, gtid)
				})
			}
		}
	}
}

func faultCell(t *testing.T, step faultStep, victim string, gtid bool) {
	o := e2e.Options{Workers: 2, GTID: gtid}
	// The step between the last info and the exec is the coordinator's alone: that cell's workers leave
	// every exec to it. Elsewhere the last info writes the exec itself (pessimist.Agent.PutInfo).
	coordinated := step.failpoint == "master-before-exec"
	if step.failpoint != "" {
		o.Failpoints = []string{step.failpoint}
	}
	if coordinated {
		o.Failpoints = append(o.Failpoints, "agent-coordinated")
	}
	c := startWith(t, o, true)
	c.up(0, insertRows("db_1.t_1", 0, 50, ""), insertRows("db_1.t_2", 50, 100, ""))
	c.up(1, insertRows("db_2.t_1", 100, 150, ""), insertRows("db_2.t_2", 150, 200, ""))
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", insertRows("db_1.t_1", 1000, 1020, ", 1"),
		"ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_2", 1020, 1040, ", 2"))
	// Source 1 reached the DDL first: the coordinator would make it the owner. Source 2's info
	// completes the lock: it writes the exec for itself, unless the agents leave it to the coordinator.
	c.waitLock([]string{s1}, []string{s2})
	owner, nonOwner := c.workerOf(s2), c.workerOf(s1)
	if coordinated {
		owner, nonOwner = nonOwner, owner
	}
	var proc *e2e.Proc
	switch victim {
	case "leader master":
		proc = c.Master
	case "owner worker":
		proc = c.Worker(owner)
	default:
		proc = c.Worker(nonOwner)
	}
	finishSource2 := func() {
		c.up(1, insertRows("db_2.t_1", 2000, 2020, ""), "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2020, 2040, ", 3"),
			"ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2040, 2060, ", 4"))
	}
	if step.failpoint == "" {
		proc.Kill9()
		c.up(0, insertRows("db_1.t_1", 3000, 3010, ", 5"))
		if err := proc.Restart(); err != nil {
			t.Fatal(err)
		}
		finishSource2()
	} else {
		finishSource2()
		if err := c.Reached(step.failpoint, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		proc.Kill9()
		c.up(0, insertRows("db_1.t_1", 3000, 3010, ", 5"))
		if err := c.Release(step.failpoint); err != nil {
			t.Fatal(err)
		}
		if err := proc.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	c.up(1, insertRows("db_2.t_2", 4000, 4010, ", 6"))
	if n := c.converge("id, v, c"); n != 320 {
		t.Fatalf("%d rows, want 320", n)
	}
	c.waitSynced()
	c.ddlsRun(1)
}

// workerOf returns the worker a source is bound to.
func (c *e2eCluster) workerOf(source string) string {
	c.t.Helper()
	r := c.ok("operate-source", "show", source)
	for _, s := range r.List("sources") {
		if s.Str("source") == source && s.Str("worker") != "" {
			return s.Str("worker")
		}
	}
	c.t.Fatalf("source %s is not bound: %v", source, r)
	return ""
}

// waitLog waits until a process's log contains s.
func waitLog(t *testing.T, p *e2e.Proc, s string, timeout time.Duration) {
	t.Helper()
	wait.Eventually(t, timeout, func() bool { data, _ := os.ReadFile(p.LogFile); return strings.Contains(string(data), s) },
		func() string { return fmt.Sprintf("%s did not log %q", p.Name, s) })
}

// Partition: the workers lose etcd (every master is down) while a lock is half formed. They stop
// their subtasks once their lease is over (nothing runs that they are not sure of), the upstreams keep
// changing meanwhile, and after the masters return everything resolves once.
func TestE2EPartitionFromEtcd(t *testing.T) {
	c := startE2E(t, 2)
	c.halfForm()
	c.Master.Kill9()
	for _, w := range c.Workers {
		waitLog(t, w, "subtasks stopped until it is back", 60*time.Second)
	}
	c.up(1, insertRows("db_2.t_1", 2000, 2020, ""), "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2020, 2040, ", 3"),
		"ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2040, 2060, ", 4"))
	c.up(0, insertRows("db_1.t_1", 3000, 3020, ", 5"))
	if cols := downColumns(t, c); cols != 2 {
		t.Fatalf("the DDL ran downstream while the workers were cut off: %d columns", cols)
	}
	if err := c.Master.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := c.converge("id, v, c"); n != 320 {
		t.Fatalf("%d rows, want 320", n)
	}
	c.waitSynced()
	c.ddlsRun(1)
}

// Three masters while DML and DDL flow: the leader is killed with a lock half formed; the lock
// resolves under the new leader, and dmctl works against each remaining master.
func TestE2EThreeMastersFailover(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, Masters: 3}, true)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		id := 100000
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			for i, tbl := range []string{"db_1.t_1", "db_1.t_2", "db_2.t_1", "db_2.t_2"} {
				if err := c.Exec(i/2, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'w')", tbl, id)); err != nil {
					done <- err
					return
				}
				id++
			}
			time.Sleep(5 * time.Millisecond) // pace the writer: a steady trickle, not a flood
		}
	}()
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.waitLock([]string{s1}, []string{s2})
	r := c.ok("list-member", "--leader")
	leader := r.List("members")[0].Get("leader").Str("name")
	var live []*e2e.Proc
	for _, m := range c.Masters {
		if m.Name == leader {
			m.Kill9()
		} else {
			live = append(live, m)
		}
	}
	if len(live) != 2 {
		t.Fatalf("leader %q is not one of the masters", leader)
	}
	c.Master = live[0]
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT")
	c.until("lock resolved under the new leader", func(r e2e.Result) bool { return r.Bool("result") && len(r.List("locks")) == 0 }, "shard-ddl-lock", c.task)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.converge("id, v, c")
	c.waitSynced()
	c.ddlsRun(1)
	for _, m := range live {
		c.Master = m
		if r := c.ok("list-member", "--leader"); r.List("members")[0].Get("leader").Str("name") == leader {
			t.Fatalf("master %s still names the dead %s as leader", m.Name, leader)
		}
		c.ok("query-status", c.task)
	}
}

// The owner's worker dies for good while the lock is half formed and a spare takes its source over:
// the spare resumes from the checkpoint, posts the DDL again under a newer binding, and the lock
// resolves once.
func TestE2EFailoverWhileLockHalfFormed(t *testing.T) {
	c := startE2E(t, 3)
	c.halfForm()
	victim := c.workerOf(s1)
	c.Worker(victim).Kill9()
	c.up(0, insertRows("db_1.t_2", 1500, 1510, ", 9"))
	c.until("source 1 moved to the spare", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			if s.Str("source") == s1 && s.Str("worker") != "" && s.Str("worker") != victim {
				return true
			}
		}
		return false
	}, "operate-source", "show", s1)
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
}

// A shard is renamed within its group (db_1.t_1 to db_1.t_9, under db_*.t_*) and its source's worker
// dies for good before the next shard DDL, twice: at once after the rename (the spare reads it again
// from a checkpoint before it, or resumes past it) and after a second rename has converged (the spare
// rebuilds the group from the names at its resume position). The next lock then forms over the new
// names on the last spare, runs its ALTER once, and every row of the old and new names arrives.
func TestE2EFailoverBetweenRenameAndShardDDL(t *testing.T) {
	c := startE2E(t, 4)
	c.up(0, insertRows("db_1.t_1", 100, 110, ""), insertRows("db_1.t_2", 200, 210, ""))
	c.up(1, insertRows("db_2.t_1", 300, 310, ""), insertRows("db_2.t_2", 400, 410, ""))
	c.converge("id, v")
	failover := func() {
		t.Helper()
		victim := c.workerOf(s1)
		c.Worker(victim).Kill9()
		c.until("source 1 moved to a spare", func(r e2e.Result) bool {
			for _, s := range r.List("sources") {
				if s.Str("source") == s1 && s.Str("worker") != "" && s.Str("worker") != victim {
					return true
				}
			}
			return false
		}, "operate-source", "show", s1)
	}
	c.up(0, "RENAME TABLE db_1.t_1 TO db_1.t_9", insertRows("db_1.t_9", 110, 115, ""))
	failover()
	c.converge("id, v")
	c.up(0, "RENAME TABLE db_1.t_2 TO db_1.t_8", insertRows("db_1.t_8", 210, 215, ""))
	c.converge("id, v")
	failover()
	c.up(0, "ALTER TABLE db_1.t_9 ADD COLUMN c INT", insertRows("db_1.t_9", 120, 125, ", 1"),
		"ALTER TABLE db_1.t_8 ADD COLUMN c INT", insertRows("db_1.t_8", 220, 225, ", 2"))
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 420, 425, ", 3"))
	if n := c.converge("id, v, IFNULL(c, -1)"); n != 65 {
		t.Fatalf("%d rows, want 65", n)
	}
	c.waitSynced()
	c.ddlsRun(1)
	if tables := c.downTables(); slices.Contains(tables, "t_9") || slices.Contains(tables, "t_8") {
		t.Fatalf("a shard's new name reached the downstream: %v", tables)
	}
}
