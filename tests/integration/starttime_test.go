package integration

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestE2EStartTime: start-task --start-time through the binaries, on GTID sources. A first batch is
// written on every source, then a time the servers' clocks have passed after it, then a second batch:
// an incremental task started at that time replicates the second batch and what follows, and not the
// first, on every source. A time older than every source's oldest binlog, and --start-time with
// task-mode all, are refused (exit status non-zero), and nothing is started. A task started again
// without --remove-meta keeps its checkpoints, and says so; with --remove-meta the time applies again.
func TestE2EStartTime(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, GTID: true, TaskMode: "incremental"}, false)
	taskFile, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(taskFile)
	if err != nil {
		t.Fatal(err)
	}
	// A meta in the task file that would start the sources at their first event: the time comes first.
	meta := strings.ReplaceAll(string(body), "    syncer-config-name: global\n", "    syncer-config-name: global\n    meta:\n      binlog-name: mysql-bin.000001\n      binlog-pos: 4\n")
	if meta == string(body) {
		t.Fatalf("task file without the line the meta goes after:\n%s", body)
	}
	taskFile = c.writeFile("shard-meta.yaml", meta)

	// Refused before anything starts: a time before every binlog, and task-mode all.
	out := c.fails("start-task", "--start-time", "2001-01-01 00:00:00", taskFile)
	contains(t, out, "before the oldest binlog", s1, s2, "mysql-bin.000001", "nothing started")
	all := c.writeFile("shard-all.yaml", strings.Replace(meta, "task-mode: incremental", "task-mode: all", 1))
	contains(t, c.fails("start-task", "--start-time", "2001-01-01 00:00:00", all), "--start-time applies to task-mode incremental only", "nothing started")
	c.noTask()

	for i := range c.Ups {
		db := []string{"db_1", "db_2"}[i]
		c.up(i, insertRows(db+".t_1", 1000*i+1, 1000*i+4, ""), insertRows(db+".t_2", 1000*i+101, 1000*i+104, ""))
	}
	// The time: a second after the last second any source wrote the first batch in, by the servers'
	// own clocks (binlog timestamps are whole seconds).
	var last int64
	for i := range c.Ups {
		var now int64
		if err := c.UpDBs[i].QueryRow("SELECT UNIX_TIMESTAMP()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		last = max(last, now)
	}
	at := last + 1
	wait.Eventually(t, 10*time.Second, func() bool {
		for i := range c.Ups {
			var now int64
			if c.UpDBs[i].QueryRow("SELECT UNIX_TIMESTAMP()").Scan(&now) != nil || now < at {
				return false
			}
		}
		return true
	}, func() string { return "the upstreams' clocks did not pass the time" })
	var when string // in the sources' time zone, DM's second format
	if err := c.UpDBs[0].QueryRow("SELECT DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%dT%H:%i:%s')", at).Scan(&when); err != nil {
		t.Fatal(err)
	}
	for i := range c.Ups {
		db := []string{"db_1", "db_2"}[i]
		c.up(i, insertRows(db+".t_1", 1000*i+11, 1000*i+14, ""), "FLUSH BINARY LOGS", insertRows(db+".t_2", 1000*i+111, 1000*i+114, ""))
	}

	r := c.ok("start-task", "--start-time", when, taskFile)
	for _, s := range r.List("sources") {
		if msg := s.Str("msg"); !strings.Contains(msg, "--start-time "+when+": starts at (mysql-bin.") || !strings.Contains(msg, "GTID set") {
			t.Fatalf("source %s's answer does not say where it starts: %q", s.Str("source"), msg)
		}
	}
	for i := range c.Ups {
		db := []string{"db_1", "db_2"}[i]
		c.up(i, insertRows(db+".t_1", 1000*i+21, 1000*i+24, ""))
	}
	want := []int{11, 12, 13, 21, 22, 23, 111, 112, 113, 1011, 1012, 1013, 1021, 1022, 1023, 1111, 1112, 1113}
	c.waitRow(1023)
	c.waitRow(23)
	ids := c.downIDs()
	if !equalInts(ids, want) {
		t.Fatalf("downstream ids %v; want the second batch and later only: %v", ids, want)
	}
	// query-status shows where each source stands (its checkpoint, past the time's position).
	qs := c.ok("query-status", c.task)
	for _, st := range subtasks(qs) {
		if st.Get("sync").Str("syncerBinlog") == "" || st.Get("sync").Str("syncerBinlogGtid") == "" {
			t.Fatalf("query-status shows no position: %v", st)
		}
	}

	// Started again without --remove-meta: the checkpoints win, and the answer says so.
	c.ok("stop-task", c.task)
	r = c.ok("start-task", "--start-time", when, taskFile)
	for _, s := range r.List("sources") {
		contains(t, s.Str("msg"), "does not apply to this source: it resumes from its checkpoint")
	}
	for i := range c.Ups {
		db := []string{"db_1", "db_2"}[i]
		c.up(i, insertRows(db+".t_1", 1000*i+31, 1000*i+32, ""))
	}
	c.waitRow(31)
	c.waitRow(1031)
	want = append(want, 31, 1031)
	if ids := c.downIDs(); !equalInts(ids, want) {
		t.Fatalf("downstream ids after the restart %v", ids)
	}

	// With --remove-meta the time applies to every source again: the checkpoints are dropped, and the
	// rows from the time on come again (into an emptied target).
	c.ok("stop-task", c.task)
	c.down("TRUNCATE TABLE db.t")
	r = c.ok("start-task", "--remove-meta", "--start-time", when, taskFile)
	for _, s := range r.List("sources") {
		contains(t, s.Str("msg"), "--start-time "+when+": starts at (mysql-bin.")
	}
	c.waitRow(31)
	c.waitRow(1031)
	if ids := c.downIDs(); !equalInts(ids, want) {
		t.Fatalf("downstream ids after start-task --remove-meta --start-time: %v; want %v", ids, want)
	}
	log, err := os.ReadFile(c.Master.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, string(log), "binlog position found for a time", "source starts at a time's position")
	c.logsHaveNoDuplicateKeys()
}

func (c *e2eCluster) downIDs() []int {
	c.t.Helper()
	rows, err := c.DownDB.Query("SELECT id FROM db.t ORDER BY id")
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			c.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func equalInts(got, want []int) bool {
	w := slices.Clone(want)
	slices.Sort(w)
	return slices.Equal(got, w)
}
