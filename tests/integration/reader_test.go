package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// sourceSub is source's subtask status in a query-status result.
func sourceSub(r e2e.Result, source string) (e2e.Result, bool) {
	for _, s := range r.List("sources") {
		if s.Get("sourceStatus").Str("source") != source {
			continue
		}
		if subs := s.List("subTaskStatus"); len(subs) > 0 {
			return subs[0], true
		}
	}
	return nil, false
}

// binaryLogs are the first and last of upstream i's binlog files (SHOW BINARY LOGS): the names the
// server chose, which the tests compare messages with instead of assuming mysql-bin.000001.
func (c *e2eCluster) binaryLogs(i int) (first, last string) {
	c.t.Helper()
	files, err := dbutil.BinaryLogs(context.Background(), c.UpDBs[i])
	if err != nil || len(files) == 0 {
		c.t.Fatalf("SHOW BINARY LOGS on upstream %d: %v %v", i+1, files, err)
	}
	return files[0].Name, files[len(files)-1].Name
}

// binlogFile is upstream i's current binlog file (SHOW MASTER STATUS).
func (c *e2eCluster) binlogFile(i int) string {
	c.t.Helper()
	var file string
	var pos, doDB, ignoreDB any
	if err := c.UpDBs[i].QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
		c.t.Fatalf("SHOW MASTER STATUS on upstream %d: %v", i+1, err)
	}
	return file
}

// firstError is the RawCause and Message of a subtask's first error ("" when none).
func firstError(sub e2e.Result) (raw, msg string) {
	errs := sub.Get("result").List("errors")
	if len(errs) == 0 {
		return "", ""
	}
	return errs[0].Str("RawCause"), errs[0].Str("Message")
}

// TestE2EReaderErrors: what the operator sees when a source's binlog cannot be read, through the
// binaries: start-task refuses a meta naming a binlog file the source does not have (it names the files
// the source has) and says of a source without meta that it starts at its current position; a source
// that is down shows Running with the failure and the attempt count while the worker retries, and
// replicates again once it is back; a checkpoint whose binlog was purged while the task was paused
// pauses the subtask on resume with the position asked for and the files the source has.
func TestE2EReaderErrors(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, TaskMode: "incremental"}, false)
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	first := "  - source-id: " + s1 + "\n"
	withMeta := c.writeFile("meta.yaml", strings.Replace(string(body), first, first+"    meta:\n      binlog-name: pid-bin.000001\n      binlog-pos: 4\n", 1))
	out := c.fails("start-task", withMeta)
	firstFile, lastFile := c.binaryLogs(0)
	contains(t, out, "meta_position", "pid-bin.000001 is not a binlog file of the source, which has "+firstFile+" to "+lastFile)
	c.noTask()

	// Where each source starts: its current binlog file (nothing writes to the upstreams meanwhile).
	startFile := map[string]string{s1: c.binlogFile(0), s2: c.binlogFile(1)}
	r := c.ok("start-task", f)
	for _, s := range r.List("sources") {
		if msg := s.Str("msg"); !strings.Contains(msg, "no meta: the task starts this source at its current binlog position ("+startFile[s.Str("source")]+", ") ||
			!strings.Contains(msg, "rows written before it are not copied") {
			t.Fatalf("start-task says of %s: %q", s.Str("source"), msg)
		}
	}
	c.waitStage("Running")
	c.up(0, insertRows("db_1.t_1", 1, 11, ""))
	c.up(1, insertRows("db_2.t_1", 100, 111, ""))
	c.converge("id, v")

	// Source 2 down: Running, retrying, and saying so.
	c.Ups[1].Stop()
	c.until("source 2 shows the read failure and its attempts", func(r e2e.Result) bool {
		sub, ok := sourceSub(r, s2)
		if !ok || sub.Str("stage") != "Running" {
			return false
		}
		_, msg := firstError(sub)
		return strings.Contains(msg, "the binlog cannot be read; retrying (attempt 2")
	}, "query-status", c.task)
	if err := c.Ups[1].Boot(); err != nil {
		t.Fatal(err)
	}
	c.up(1, insertRows("db_2.t_2", 200, 211, ""))
	c.converge("id, v")
	c.until("source 2's failure cleared", func(r e2e.Result) bool {
		sub, ok := sourceSub(r, s2)
		raw, _ := firstError(sub)
		return ok && raw == ""
	}, "query-status", c.task)

	// Source 1's checkpoint purged while the task is paused.
	c.ok("pause-task", c.task)
	c.up(0, "FLUSH BINARY LOGS", insertRows("db_1.t_2", 20, 31, ""), "FLUSH BINARY LOGS", "PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
	// The checkpoint is still in the file source 1 started in (no rotation until the FLUSH above).
	firstFile, lastFile = c.binaryLogs(0)
	if startFile[s1] >= firstFile { // one base name: the numbered names sort as the files do
		t.Fatalf("%s was not purged: the source has %s to %s", startFile[s1], firstFile, lastFile)
	}
	c.ok("resume-task", c.task)
	sub := c.until("source 1 paused on its purged checkpoint", func(r e2e.Result) bool {
		sub, ok := sourceSub(r, s1)
		return ok && sub.Str("stage") == "Paused" && strings.Contains(func() string { raw, _ := firstError(sub); return raw }(), "its binlog cannot be read from ("+startFile[s1]+", ")
	}, "query-status", c.task)
	s, _ := sourceSub(sub, s1)
	raw, msg := firstError(s)
	for _, want := range []string{"ERROR 1236", "The source has binlog files " + firstFile + " to " + lastFile, "start-task --remove-meta", "A retry cannot fix this"} {
		if !strings.Contains(raw, want) {
			t.Fatalf("the error does not say %q: %s", want, raw)
		}
	}
	if !strings.Contains(msg, "cannot be read from where it resumes") {
		t.Fatalf("message %q", msg)
	}
}

// TestE2EReaderAccessDenied: the source user loses REPLICATION SLAVE while the task runs; when its
// binlog connection is cut, the reconnect is refused, and the subtask pauses saying which grant it
// needs, instead of retrying for ever; resume-task after the grant goes on.
func TestE2EReaderAccessDenied(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, TaskMode: "incremental"}, false)
	c.up(1, "CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'pw'", "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.* TO repl@'127.0.0.1'")
	c.ok("operate-source", "stop", s2)
	f, err := c.SourceFile(1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("operate-source", "create", c.writeFile("repl.yaml", strings.Replace(strings.Replace(string(body), "user: root", "user: repl", 1), `password: ""`, "password: pw", 1)))
	tf, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.startTask(tf)
	c.waitStage("Running")
	c.up(1, insertRows("db_2.t_1", 1, 11, ""))
	c.converge("id, v")
	c.up(1, "REVOKE REPLICATION SLAVE ON *.* FROM repl@'127.0.0.1'")
	ids, err := e2e.Rows(c.UpDBs[1], "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'repl' AND COMMAND LIKE 'Binlog Dump%'")
	if err != nil || len(ids) == 0 {
		t.Fatalf("the binlog connection of repl: %v %v", ids, err)
	}
	for _, id := range ids {
		c.up(1, "KILL "+id)
	}
	c.until("source 2 paused on the missing grant", func(r e2e.Result) bool {
		sub, ok := sourceSub(r, s2)
		raw, _ := firstError(sub)
		return ok && sub.Str("stage") == "Paused" && strings.Contains(raw, "GRANT REPLICATION SLAVE") && strings.Contains(raw, "A retry cannot fix this")
	}, "query-status", c.task)
	c.up(1, "GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'", insertRows("db_2.t_2", 20, 31, ""))
	c.ok("resume-task", c.task)
	c.converge("id, v")
}
