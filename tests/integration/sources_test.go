package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// The tests of DM's per-source task commands (pause|resume|stop-task -s) and of transfer-source.

// subtaskOn returns the stage of the task's subtask on source in a query-status answer, and the
// source's worker ("" and "" when the answer does not list the source).
func subtaskOn(r e2e.Result, source string) (stage, worker string) {
	for _, s := range r.List("sources") {
		ss := s.Get("sourceStatus")
		if ss.Str("source") != source {
			continue
		}
		for _, sub := range s.List("subTaskStatus") {
			return sub.Str("stage"), ss.Str("worker")
		}
		return "", ss.Str("worker")
	}
	return "", ""
}

// waitStages waits until query-status lists exactly the sources of want, each in its stage.
func (c *e2eCluster) waitStages(want map[string]string) e2e.Result {
	c.t.Helper()
	return c.until(fmt.Sprint("stages ", want),
		func(r e2e.Result) bool {
			if len(r.List("sources")) != len(want) {
				return false
			}
			for src, stage := range want {
				if got, _ := subtaskOn(r, src); got != stage {
					return false
				}
			}
			return true
		}, "query-status", c.task)
}

// onlySources checks that a task command answered for exactly these sources, each with true.
func onlySources(t *testing.T, r e2e.Result, want ...string) {
	t.Helper()
	var got []string
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			t.Fatalf("source %s: %s", s.Str("source"), s.Str("msg"))
		}
		got = append(got, s.Str("source"))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("answered for sources %v, want %v", got, want)
	}
}

// refused runs dmctl and wants "result": false (exit status 1) with a msg that holds every sub.
func (c *e2eCluster) refused(subs []string, args ...string) {
	c.t.Helper()
	r, out, err := c.Dmctl(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	if r.Bool("result") {
		c.t.Fatalf("dmctl %s was not refused: %s", strings.Join(args, " "), out)
	}
	contains(c.t, r.Str("msg"), subs...)
}

// pause-task -s s1 while a lock waits: s2 goes on replicating, the lock says it waits for the paused
// s1, resume-task -s s1 brings it back and the lock resolves with the DDL once downstream.
func TestE2EPauseOneSource(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 50, ""), insertRows("db_1.t_2", 50, 100, ""))
	c.up(1, insertRows("db_2.t_1", 100, 150, ""), insertRows("db_2.t_2", 150, 200, ""))
	c.converge("id, v")

	c.refused([]string{"nope: not a source of task shard (its sources: " + s1 + ", " + s2 + ")"}, "pause-task", "-s", "nope", c.task)
	onlySources(t, c.ok("pause-task", "-s", s1, c.task), s1)
	c.waitStages(map[string]string{s1: "Paused", s2: "Running"})

	// s2 replicates while s1 is paused; s1's writes wait.
	c.up(0, insertRows("db_1.t_1", 300, 310, ""))
	c.up(1, insertRows("db_2.t_1", 200, 210, ""))
	c.waitRow(209)
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id BETWEEN 300 AND 309").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the paused source arrived (%v)", n, err)
	}

	// A lock that waits for the paused source says so.
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", insertRows("db_1.t_1", 1000, 1010, ", 1"), "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insertRows("db_2.t_1", 2000, 2010, ", 2"), "ALTER TABLE db_2.t_2 ADD COLUMN c INT")
	c.waitLock([]string{s2}, []string{s1})
	note := "waits for source " + s1 + ", whose subtask of task shard is paused: resume-task shard -s " + s1
	contains(t, c.ok("shard-ddl-lock", c.task).Str("msg"), note)
	contains(t, c.ok("query-status", c.task).Str("msg"), note)
	c.waitStages(map[string]string{s1: "Paused", s2: "Running"})

	onlySources(t, c.ok("resume-task", "-s", s1, c.task), s1)
	if n := c.converge("id, v, c"); n != 240 {
		t.Fatalf("%d rows, want 240", n)
	}
	c.waitSynced()
	c.ddlsRun(1)
	if msg := c.ok("query-status", c.task).Str("msg"); msg != "" {
		t.Fatalf("query-status still says %q", msg)
	}
}

// stop-task -s removes one source's subtask; the other goes on; a bad -s is refused and changes
// nothing; a lock waits for the stopped source and says so; start-task -s brings it back.
func TestE2EStopOneSource(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, insertRows("db_1.t_1", 0, 50, ""))
	c.up(1, insertRows("db_2.t_1", 100, 150, ""))
	c.converge("id, v")

	c.refused([]string{"nope: not a source of task shard (its sources: " + s1 + ", " + s2 + ")"}, "stop-task", "-s", s1+",nope", c.task)
	c.waitStages(map[string]string{s1: "Running", s2: "Running"})

	onlySources(t, c.ok("stop-task", "-s", s1, c.task), s1)
	c.waitStages(map[string]string{s2: "Running"})
	c.refused([]string{"stopped by stop-task -s: " + s1}, "resume-task", "-s", s1, c.task)

	c.up(0, insertRows("db_1.t_1", 300, 310, ""))
	c.up(1, insertRows("db_2.t_1", 200, 210, ""))
	c.waitRow(209)
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_2", 2000, 2010, ", 2"))
	c.waitLock([]string{s2}, []string{s1})
	contains(t, c.ok("shard-ddl-lock", c.task).Str("msg"), "waits for source "+s1+", which stop-task -s removed from task shard: start-task shard -s "+s1)
	// the source stays the task's while its locks wait for it: it cannot be removed under them
	c.refused([]string{"source " + s1 + " is still a source of task shard (stop-task -s stopped it there"}, "operate-source", "stop", s1)
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id BETWEEN 300 AND 309").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the stopped source arrived (%v)", n, err)
	}

	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.refused([]string{"--remove-meta and --start-time do not apply"}, "start-task", "-s", s1, "--remove-meta", f)
	onlySources(t, c.ok("start-task", "-s", s1, f), s1)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT", insertRows("db_1.t_2", 1000, 1010, ", 1"))
	if n := c.converge("id, v, c"); n != 140 {
		t.Fatalf("%d rows, want 140", n)
	}
	c.waitSynced()
	c.ddlsRun(1)

	// start-task -s of a new task starts it on those sources only; start-task -s adds the others.
	c.ok("stop-task", c.task)
	c.until("task gone", func(r e2e.Result) bool { return !r.Bool("result") }, "query-status", c.task)
	onlySources(t, c.ok("start-task", "-s", s2, f), s2)
	c.waitStages(map[string]string{s2: "Running"})
	c.refused([]string{"start-task -s " + s2 + ": task shard is started and runs on " + s2}, "start-task", "-s", s2, f)
	c.up(0, insertRows("db_1.t_1", 4000, 4010, ", 4"))
	c.up(1, insertRows("db_2.t_1", 5000, 5010, ", 5"))
	c.waitRow(5009)
	onlySources(t, c.ok("start-task", "-s", s1, f), s1)
	c.waitStages(map[string]string{s1: "Running", s2: "Running"})
	if n := c.converge("id, v, c"); n != 160 {
		t.Fatalf("%d rows, want 160", n)
	}
}

// transfer-source while a lock waits: refused while the source's subtask runs, to a busy or unknown
// worker; once paused it moves to the spare, resumes there from the checkpoint, and the lock resolves
// with every row once and the DDL once.
func TestE2ETransferSourceWhileLockWaits(t *testing.T) {
	c := startE2E(t, 3)
	c.halfForm()
	r := c.ok("query-status", c.task)
	_, from := subtaskOn(r, s1)
	_, busy := subtaskOn(r, s2)
	var spare string
	for _, m := range c.ok("list-member", "--worker").List("members") {
		for _, w := range m.Get("worker").List("workers") {
			if w.Str("stage") == "free" {
				spare = w.Str("name")
			}
		}
	}
	if from == "" || busy == "" || spare == "" {
		t.Fatalf("workers: %q of %s, %q of %s, spare %q", from, s1, busy, s2, spare)
	}

	c.refused([]string{"source " + s1 + " has running subtasks of task shard", "pause-task shard -s " + s1}, "transfer-source", s1, spare)
	c.refused([]string{"worker " + busy + " is bound to source " + s2}, "transfer-source", s1, busy)
	c.refused([]string{"worker nope is not registered"}, "transfer-source", s1, "nope")
	c.refused([]string{"source nope does not exist"}, "transfer-source", "nope", spare)
	if r := c.ok("transfer-source", s1, from); !strings.Contains(r.Str("msg"), "already bound") {
		t.Fatalf("transfer to its own worker: %v", r)
	}

	onlySources(t, c.ok("pause-task", "-s", s1, c.task), s1)
	c.waitStages(map[string]string{s1: "Paused", s2: "Running"})
	if r := c.ok("transfer-source", s1, spare); r.Str("msg") != "" {
		t.Fatalf("transfer-source: %v", r)
	}
	r = c.waitStages(map[string]string{s1: "Paused", s2: "Running"})
	if _, w := subtaskOn(r, s1); w != spare {
		t.Fatalf("%s is on %q after the transfer, want %s", s1, w, spare)
	}
	c.up(0, insertRows("db_1.t_1", 1500, 1510, ", 6"))
	onlySources(t, c.ok("resume-task", "-s", s1, c.task), s1)
	c.waitLock([]string{s1}, []string{s2})
	c.finishLockPlus(10)
	_, w := subtaskOn(c.ok("query-status", c.task), s1)
	if w != spare {
		t.Fatalf("%s ended on %q, want %s", s1, w, spare)
	}
}
