package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// A hot shard table's backlog with syncers.spread-hot-tables: true, through the real binaries: its
// changes are spread over the connections by primary key (the worker logs it), the worker is killed
// with SIGKILL in the middle of the catch-up, and after its restart the downstream holds exactly the
// merged upstream rows (inserts, updates, primary key changes, deletes and keys inserted again, in big
// transactions): nothing lost, nothing applied twice, every key's changes in binlog order. Once
// caught up, the table's own checkpoint position is past its lanes'.
func TestE2ESpreadHotTableWorkerKilled(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, SyncerExtra: "    spread-hot-tables: true\n"}, true)
	c.ok("pause-task", c.task)
	c.waitStage("Paused")
	const n = 150000
	stmts := []string{}
	for from := 1; from <= n; from += 5000 {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO db_1.t_1 SELECT seq, CONCAT('v', seq) FROM db_1.seq_%d_to_%d", from, from+4999))
	}
	stmts = append(stmts,
		"UPDATE db_1.t_1 SET v = CONCAT('u', id) WHERE id % 3 = 0",
		"UPDATE db_1.t_1 SET id = id + 1000000 WHERE id % 7 = 0", // a key change of 21428 rows
		fmt.Sprintf("DELETE FROM db_1.t_1 WHERE id %% 5 = 0 AND id < %d", n/2),
		fmt.Sprintf("INSERT INTO db_1.t_1 SELECT seq, CONCAT('again', seq) FROM db_1.seq_5_to_%d_step_5 WHERE seq %% 7 <> 0", n/2-1),
		"UPDATE db_1.t_1 SET v = CONCAT(v, '+') WHERE id BETWEEN 1000 AND 1100")
	c.up(0, stmts...)
	c.up(1, insertRows("db_2.t_1", 5000000, 5001000, ""))
	var victim string
	for _, s := range c.ok("query-status", c.task).List("sources") {
		if s.Get("sourceStatus").Str("source") == s1 {
			victim = s.Get("sourceStatus").Str("worker")
		}
	}
	if victim == "" {
		t.Fatal("no worker bound to source 1")
	}
	c.ok("resume-task", c.task)
	// Kill the worker once a third of the inserts are downstream.
	var at int
	wait.Eventually(t, 90*time.Second, func() bool { c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&at); return at >= n/3 },
		func() string { return fmt.Sprintf("%d rows downstream after 90 s", at) })
	w := c.Worker(victim)
	w.Kill9()
	var rows int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	want, err := c.Merged("id, v")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == len(want) && e2e.FirstDiff(got, want) == "none" {
		t.Fatalf("the catch-up was over before the kill (%d rows): the test needs a bigger backlog", rows)
	}
	t.Logf("killed %s with %d of %d rows downstream", victim, rows, len(want))
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitStage("Running")
	if got := c.converge("id, v"); got != len(want) {
		t.Fatalf("%d rows, want %d", got, len(want))
	}
	logged, err := os.ReadFile(w.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "hot table: its changes are spread over the connections by key") {
		t.Fatalf("%s never spread the hot table's changes (spread-hot-tables lost on the way?)", victim)
	}
	// The lanes' positions were committed (one checkpoint row per connection), and the table's own
	// position has moved past all of them.
	table := `{"schema":"db_1","name":"t_1"}`
	c.until("the table position past its lanes'", func(e2e.Result) bool {
		var lanes, ahead int
		err := c.DownDB.QueryRow(`SELECT COUNT(*), COALESCE(SUM(l.binlog_name > t.binlog_name OR l.binlog_name = t.binlog_name AND l.binlog_pos > t.binlog_pos), 0)
			FROM dm_meta.shard_checkpoint l JOIN dm_meta.shard_checkpoint t ON t.source = l.source AND t.id = ?
			WHERE l.source = ? AND l.id LIKE 'lane:%' AND l.id LIKE CONCAT('%:', ?)`, table, s1, table).Scan(&lanes, &ahead)
		if err != nil {
			t.Log(err)
		}
		return err == nil && lanes > 0 && ahead == 0
	}, "query-status", c.task)
	c.waitSynced()
}
