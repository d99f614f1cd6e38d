package syncer

import (
	"testing"
	"time"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestLockWaitIsRetried: a downstream row locked by someone else for longer than the session's
// innodb_lock_wait_timeout makes the syncer's transaction fail with 1205; it is rolled back and run
// again, and the change arrives once the lock is gone, without the syncer stopping.
func TestLockWaitIsRetried(t *testing.T) {
	c := newCluster(t)
	c.syncDB = workerDB(t, c.down.Port, map[string]any{"innodb_lock_wait_timeout": 1}, dbutil.MultiStatements)
	stop := c.startSyncer(0)
	c.up(0, insert("db_1.t_1", 1, 2))
	c.waitRow(1)
	waits := func() int {
		var name string
		var n int
		if err := c.downDB.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := waits()
	tx, err := c.downDB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT * FROM db.t WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	c.up(0, "UPDATE db_1.t_1 SET v = 'after the lock' WHERE id = 1")
	// Two lock waits: the first timed out and the transaction is waiting again.
	wait.Eventually(t, 30*time.Second, func() bool { return waits() >= before+2 }, func() string { return "the syncer did not wait on the lock twice" })
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c.converge("id, v")
	if err := stop(); err != nil {
		t.Fatalf("the syncer stopped on the lock wait: %v", err)
	}
}
