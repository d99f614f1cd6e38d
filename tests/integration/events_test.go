package integration

// Issue 43: every event a source writes has a decided meaning. These tests write to the shards what
// applications, frameworks and DBAs write (XA transactions, savepoints, a session in statement
// format, DBA statements, MariaDB executable comments) through the real binaries, in the task mode
// the environment names (TRIBUTARY_TASK_MODE incremental or all; the shard tables are empty when the
// task starts, so every row here is written after it).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// session is one connection of its own to an upstream: XA START ... XA END, a temporary table and a
// session's binlog_format live on one connection. It has a pool of its own, so close ends the
// connection for real (a prepared XA transaction then stays, detached, until another session
// commits or rolls it back).
type session struct {
	c    *e2eCluster
	up   int
	db   *sql.DB
	conn *sql.Conn
	id   int64
}

func (c *e2eCluster) session(i int) *session {
	c.t.Helper()
	db, err := sql.Open("mysql", c.Ups[i].DSN(""))
	if err != nil {
		c.t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		c.t.Fatalf("upstream %d: a session: %v", i+1, err)
	}
	s := &session{c: c, up: i, db: db, conn: conn}
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&s.id); err != nil {
		s.close()
		c.t.Fatalf("upstream %d: CONNECTION_ID(): %v", i+1, err)
	}
	c.t.Cleanup(func() {
		if s.db != nil {
			s.conn.Close()
			s.db.Close()
		}
	})
	return s
}

func (s *session) exec(stmts ...string) {
	s.c.t.Helper()
	for _, q := range stmts {
		if _, err := s.conn.ExecContext(context.Background(), q); err != nil {
			s.c.t.Fatalf("upstream %d, session %d: %s: %v", s.up+1, s.id, q, err)
		}
	}
}

// close ends the session's connection and waits until the server no longer lists it (until then
// an XA transaction it prepared is still its own, and another session cannot end it).
func (s *session) close() {
	s.c.t.Helper()
	if s.db == nil {
		return
	}
	s.conn.Close()
	s.db.Close()
	s.db = nil
	wait.Eventually(s.c.t, 30*time.Second, func() bool {
		var n int
		err := s.c.UpDBs[s.up].QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", s.id).Scan(&n)
		return err == nil && n == 0
	}, func() string { return fmt.Sprintf("upstream %d still lists the closed session %d", s.up+1, s.id) })
}

// prepareXA runs stmts in XA transaction xid on a new session of upstream i, up to XA PREPARE, and
// returns the session (still open).
func (c *e2eCluster) prepareXA(i int, xid string, stmts ...string) *session {
	c.t.Helper()
	s := c.session(i)
	s.exec("XA START '" + xid + "'")
	s.exec(stmts...)
	s.exec("XA END '"+xid+"'", "XA PREPARE '"+xid+"'")
	return s
}

// binlogXID is an xid as MariaDB writes it in the binlog (and as query-status shows it): gtrid and
// bqual in hex, then the format ID.
func binlogXID(xid string) string { return fmt.Sprintf("X'%x',X'',1", xid) }

// absent fails the test if any of db.t's rows with id in [from, to) is downstream.
func (c *e2eCluster) absent(what string, from, to int) {
	c.t.Helper()
	if n := c.downCount(fmt.Sprintf("id >= %d AND id < %d", from, to)); n != 0 {
		c.t.Fatalf("%s: %d of the rows %d..%d are downstream, want none", what, n, from, to-1)
	}
}

// downV is the v of db.t's row id downstream ("<none>" when the row is not there).
func (c *e2eCluster) downV(id int) string {
	c.t.Helper()
	var v sql.NullString
	err := c.DownDB.QueryRow("SELECT v FROM db.t WHERE id = ?", id).Scan(&v)
	if err == sql.ErrNoRows {
		return "<none>"
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return v.String
}

// preparedXA returns the preparedXA entries query-status shows for source's subtask.
func preparedXA(r e2e.Result, source string) []e2e.Result {
	var out []e2e.Result
	for _, s := range r.List("sources") {
		if s.Get("sourceStatus").Str("source") != source {
			continue
		}
		for _, st := range s.List("subTaskStatus") {
			out = append(out, st.Get("sync").List("preparedXA")...)
		}
	}
	return out
}

// isNumber accepts a JSON number or a decimal string (protojson writes 64-bit integers as strings).
func isNumber(v any) bool {
	switch n := v.(type) {
	case float64:
		return n >= 0
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return err == nil && f >= 0
	}
	return false
}

// apiShowsPreparedXA reports whether the master's HTTP API (GET /api/v1/tasks/TASK/status) lists xid
// among some subtask's prepared_xa.
func (c *e2eCluster) apiShowsPreparedXA(xid string) bool {
	resp, err := http.Get("http://" + c.Master.Addr + "/api/v1/tasks/" + c.task + "/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Sync *struct {
				PreparedXA []struct {
					XID string `json:"xid"`
				} `json:"prepared_xa"`
			} `json:"sync_status"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return false
	}
	for _, st := range body.Data {
		if st.Sync != nil {
			for _, x := range st.Sync.PreparedXA {
				if x.XID == xid {
					return true
				}
			}
		}
	}
	return false
}

// waitPreparedXA waits until query-status shows (shown) or no longer shows xid among source's
// prepared XA transactions; a shown entry must carry its position and its age in seconds.
func (c *e2eCluster) waitPreparedXA(source, xid string, shown bool) {
	c.t.Helper()
	want := binlogXID(xid)
	c.until(fmt.Sprintf("query-status of %s shows prepared XA %s: %t", source, want, shown), func(r e2e.Result) bool {
		for _, x := range preparedXA(r, source) {
			if x.Str("xid") == want {
				if !shown {
					return false
				}
				if x.Str("position") == "" || !isNumber(x["seconds"]) {
					c.t.Fatalf("prepared XA %s is shown without its position or seconds: %v", want, x)
				}
				return c.apiShowsPreparedXA(want) // the dashboard's HTTP API shows it too
			}
		}
		return !shown
	}, "query-status", c.task)
}

// XA transactions on the shards of both sources, merged into one target: committed in two phases,
// rolled back after prepare (those rows never downstream), committed in one phase, prepared in a
// session that then closes and committed from another after other transactions (its rows held until
// then, and query-status shows it meanwhile), and prepared and ended while a shard DDL lock waits.
func TestE2EXATransactions(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, MasterArgs: []string{"--openapi"}}, true) // the HTTP API shows prepared XA too
	db := func(i int) string { return fmt.Sprintf("db_%d", i+1) }
	for i := range c.Ups {
		c.up(i, insertRows(db(i)+".t_1", 1+10*i, 11+10*i, ""))
	}
	c.converge("id, v")

	// Two phases, XA COMMIT from the session that prepared: inserts, an update and a delete.
	for i := range c.Ups {
		base := 100 * (i + 1)
		s := c.prepareXA(i, fmt.Sprintf("a%d", i+1), insertRows(db(i)+".t_2", base, base+5, ""),
			fmt.Sprintf("UPDATE %s.t_1 SET v = 'xa-a' WHERE id = %d", db(i), 1+10*i),
			fmt.Sprintf("DELETE FROM %s.t_1 WHERE id = %d", db(i), 2+10*i))
		s.exec(fmt.Sprintf("XA COMMIT 'a%d'", i+1))
	}
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 100 AND id < 300", 10)
	c.converge("id, v")

	// Prepared, then rolled back: nothing of it arrives, also after a later row of the same source.
	for i := range c.Ups {
		base := 1000 * (i + 1)
		s := c.prepareXA(i, fmt.Sprintf("r%d", i+1), insertRows(db(i)+".t_2", base, base+5, ""),
			fmt.Sprintf("UPDATE %s.t_1 SET v = 'rolled-back' WHERE id = %d", db(i), 3+10*i))
		s.exec(fmt.Sprintf("XA ROLLBACK 'r%d'", i+1))
		c.up(i, insertRows(db(i)+".t_2", base+50, base+51, "")) // the sentinel
	}
	c.waitRow(1050)
	c.waitRow(2050)
	c.absent("rows of XA transactions rolled back after XA PREPARE", 1000, 1005)
	c.absent("rows of XA transactions rolled back after XA PREPARE", 2000, 2005)
	for i := range c.Ups {
		if v := c.downV(3 + 10*i); v != fmt.Sprintf("v%d", 3+10*i) {
			t.Fatalf("row %d is %q downstream: the update of a rolled-back XA transaction arrived", 3+10*i, v)
		}
	}

	// One phase: XA COMMIT ... ONE PHASE without a prepare.
	for i := range c.Ups {
		base := 3000 + 100*i
		s := c.session(i)
		xid := fmt.Sprintf("o%d", i+1)
		s.exec("XA START '"+xid+"'", insertRows(db(i)+".t_1", base, base+5, ""), "XA END '"+xid+"'", "XA COMMIT '"+xid+"' ONE PHASE")
	}
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 3000 AND id < 3200", 10)

	// Prepared in a session that then closes; other transactions follow on both sources and arrive;
	// the prepared rows are held (not downstream) and query-status shows the transaction, until
	// another session commits it.
	for i := range c.Ups {
		base := 4000 + 100*i
		s := c.prepareXA(i, fmt.Sprintf("p%d", i+1), insertRows(db(i)+".t_1", base, base+5, ""),
			fmt.Sprintf("UPDATE %s.t_1 SET v = 'xa-p' WHERE id = %d", db(i), 4+10*i))
		s.close()
	}
	for i := range c.Ups {
		base := 4050 + 100*i
		c.up(i, insertRows(db(i)+".t_2", base, base+5, ""), fmt.Sprintf("UPDATE %s.t_2 SET v = 'after-p' WHERE id = %d", db(i), base))
	}
	c.waitRow(4054)
	c.waitRow(4154)
	c.absent("rows of a prepared XA transaction before its XA COMMIT", 4000, 4005)
	c.absent("rows of a prepared XA transaction before its XA COMMIT", 4100, 4105)
	for i := range c.Ups {
		if v := c.downV(4 + 10*i); v != fmt.Sprintf("v%d", 4+10*i) {
			t.Fatalf("row %d is %q downstream before XA COMMIT: the update of a prepared XA transaction was not held", 4+10*i, v)
		}
	}
	c.waitPreparedXA(s1, "p1", true)
	c.waitPreparedXA(s2, "p2", true)
	c.up(1, "XA COMMIT 'p2'")
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 4100 AND id < 4105", 5)
	c.waitPreparedXA(s2, "p2", false)
	c.waitPreparedXA(s1, "p1", true)
	c.absent("rows of source 1's prepared XA transaction while only source 2's was committed", 4000, 4005)
	c.up(0, "XA COMMIT 'p1'")
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 4000 AND id < 4005", 5)
	c.waitPreparedXA(s1, "p1", false)
	c.converge("id, v")
	c.allRunning()

	// While a lock waits: source 1 has run the ALTER, source 2 not yet. XA transactions on both are
	// prepared and ended (one committed, one rolled back on source 2; one committed from another
	// session on source 1) before source 2's ALTER.
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.waitLockOf("`db`.`t`", []string{s1}, []string{s2})
	l1 := c.prepareXA(0, "l1", insertRows("db_1.t_1", 5000, 5005, ", 1"), "UPDATE db_1.t_2 SET c = 11 WHERE id = 100")
	l2 := c.prepareXA(1, "l2", insertRows("db_2.t_1", 5100, 5105, ""), "UPDATE db_2.t_2 SET v = 'xa-l2' WHERE id = 200")
	lr := c.prepareXA(1, "lr", insertRows("db_2.t_2", 5200, 5205, ""))
	l1.close()
	c.up(0, insertRows("db_1.t_2", 5010, 5015, ", 2"))
	l2.exec("XA COMMIT 'l2'")
	lr.exec("XA ROLLBACK 'lr'")
	c.up(1, insertRows("db_2.t_2", 5250, 5251, "")) // the sentinel
	c.waitRow(5250)
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 5100 AND id < 5105", 5)
	c.absent("rows of an XA transaction rolled back while the lock waits", 5200, 5205)
	c.up(0, "XA COMMIT 'l1'")
	c.waitLockOf("`db`.`t`", []string{s1}, []string{s2})
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("db.t has %d columns downstream while source 2 has not run the ALTER, want 2", n)
	}
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insertRows("db_2.t_1", 5300, 5305, ", 3"))
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 5000 AND id < 5005 AND c = 1", 5)
	c.converge("id, v, c")
	c.waitSynced()
	c.ddlsRun(1)
	c.absent("rows of XA transactions rolled back after XA PREPARE", 1000, 1005)
	c.absent("rows of XA transactions rolled back after XA PREPARE", 2000, 2005)
	c.absent("rows of an XA transaction rolled back while the lock waits", 5200, 5205)
	for _, src := range []string{s1, s2} {
		if x := preparedXA(c.ok("query-status", c.task), src); len(x) != 0 {
			t.Fatalf("query-status of %s shows prepared XA transactions after all were ended: %v", src, x)
		}
	}
	c.allRunning()
}

// kill -9 of the worker serving a source between its XA PREPARE and its XA COMMIT: the commit is
// written while the worker is down, and after the restart the transaction's rows arrive exactly once
// (a table without a key would show them twice), with the rows written around it.
func TestE2EXAWorkerKilledBetweenPrepareAndCommit(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, MasterArgs: []string{"--openapi"}}, true)
	c.up(0, "CREATE TABLE db_1.nokey (id INT, v VARCHAR(32))")
	c.waitDown("SELECT COUNT(*) FROM db.nokey", 0)
	c.up(0, insertRows("db_1.t_1", 1, 11, ""))
	c.up(1, insertRows("db_2.t_1", 11, 21, ""))
	c.converge("id, v")

	s := c.prepareXA(0, "k1", insertRows("db_1.t_1", 100, 110, ""), insertRows("db_1.nokey", 100, 105, ""),
		"UPDATE db_1.t_1 SET v = 'xa-k1' WHERE id = 1", "DELETE FROM db_1.t_1 WHERE id = 2")
	// Rows after the prepare arrive: the worker has read past it.
	c.up(0, insertRows("db_1.t_2", 110, 120, ""))
	c.waitRow(119)
	c.absent("rows of the prepared XA transaction before its XA COMMIT", 100, 110)
	if n := c.downInt("SELECT COUNT(*) FROM db.nokey"); n != 0 {
		t.Fatalf("db.nokey holds %d rows of the prepared XA transaction before its XA COMMIT, want 0", n)
	}
	victim := c.Worker(c.workerOf(s1))
	victim.Kill9()
	s.exec("XA COMMIT 'k1'")
	c.up(0, insertRows("db_1.t_2", 120, 130, ""))
	c.up(1, insertRows("db_2.t_2", 130, 140, ""))
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitStage("Running")
	c.converge("id, v")
	c.nokeyConverges()

	// A restart before the outcome: the prepared transaction is read again (query-status shows it
	// again), its rows still held; the XA COMMIT after the restart applies them once.
	k2 := c.prepareXA(0, "k2", insertRows("db_1.t_1", 200, 205, ""), insertRows("db_1.nokey", 200, 205, ""))
	c.up(0, insertRows("db_1.t_2", 210, 215, ""))
	c.waitRow(214)
	c.waitPreparedXA(s1, "k2", true)
	victim = c.Worker(c.workerOf(s1))
	victim.Kill9()
	c.up(0, insertRows("db_1.t_2", 215, 220, ""))
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitStage("Running")
	c.waitRow(219)
	c.waitPreparedXA(s1, "k2", true)
	c.absent("rows of a prepared XA transaction after a restart, before its XA COMMIT", 200, 205)
	if n := c.downInt("SELECT COUNT(*) FROM db.nokey WHERE id >= 200"); n != 0 {
		t.Fatalf("db.nokey holds %d rows of the prepared XA transaction after a restart, before its XA COMMIT, want 0", n)
	}
	k2.exec("XA COMMIT 'k2'")
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE id >= 200 AND id < 205", 5)
	c.waitPreparedXA(s1, "k2", false)
	c.converge("id, v")
	c.nokeyConverges()
	c.allRunning()
}

// nokeyConverges waits until db.nokey downstream equals db_1.nokey upstream (a table without a key:
// rows applied twice would show twice), and checks it once more after every source is synced.
func (c *e2eCluster) nokeyConverges() {
	c.t.Helper()
	want, err := e2e.Rows(c.UpDBs[0], "SELECT id, v FROM db_1.nokey")
	if err != nil {
		c.t.Fatal(err)
	}
	c.until("db.nokey equal to db_1.nokey", func(e2e.Result) bool {
		got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.nokey")
		return err == nil && slices.Equal(got, want)
	}, "query-status", c.task)
	c.waitSynced()
	if got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.nokey"); err != nil || !slices.Equal(got, want) {
		c.t.Fatalf("db.nokey downstream %v (%v), upstream %v: the XA transaction's rows did not arrive exactly once", got, err, want)
	}
}

// SAVEPOINT / ROLLBACK TO SAVEPOINT / RELEASE SAVEPOINT in InnoDB transactions arrive as committed.
// A transaction that also changes a MyISAM table after its savepoint cannot be cut back in the
// binlog cache: MariaDB writes the rolled-back InnoDB rows and a ROLLBACK TO query; downstream those
// rows are absent, and the MyISAM change (which no rollback undoes) is there.
func TestE2ESavepointTransactions(t *testing.T) {
	c := startE2E(t, 2)
	c.up(0, "CREATE TABLE db_1.m (id INT PRIMARY KEY, v VARCHAR(32)) ENGINE=MyISAM")
	c.waitDown("SELECT COUNT(*) FROM db.m", 0)
	for i := range c.Ups {
		dbn := fmt.Sprintf("db_%d", i+1)
		b := 100 * (i + 1)
		c.up(i, insertRows(dbn+".t_1", b, b+5, ""))
		s := c.session(i)
		s.exec("BEGIN",
			fmt.Sprintf("INSERT INTO %s.t_1 VALUES (%d, 'kept')", dbn, b+10),
			"SAVEPOINT sp1",
			fmt.Sprintf("INSERT INTO %s.t_1 VALUES (%d, 'rolled-back')", dbn, b+11),
			fmt.Sprintf("UPDATE %s.t_1 SET v = 'rolled-back' WHERE id = %d", dbn, b),
			fmt.Sprintf("DELETE FROM %s.t_1 WHERE id = %d", dbn, b+1),
			"ROLLBACK TO SAVEPOINT sp1",
			fmt.Sprintf("INSERT INTO %s.t_1 VALUES (%d, 'kept')", dbn, b+12),
			"SAVEPOINT sp2",
			fmt.Sprintf("INSERT INTO %s.t_2 VALUES (%d, 'released')", dbn, b+13),
			fmt.Sprintf("UPDATE %s.t_1 SET v = 'updated' WHERE id = %d", dbn, b+2),
			"RELEASE SAVEPOINT sp2",
			"SAVEPOINT sp3",
			fmt.Sprintf("DELETE FROM %s.t_1 WHERE id = %d", dbn, b+3),
			"COMMIT")
		s.close()
	}
	// Mixed with MyISAM: the InnoDB rows after the savepoint are in the binlog, then ROLLBACK TO.
	mixed := c.session(0)
	mixed.exec("BEGIN",
		"INSERT INTO db_1.t_1 VALUES (500, 'kept')",
		"SAVEPOINT s",
		"INSERT INTO db_1.t_1 VALUES (501, 'rolled-back')",
		"UPDATE db_1.t_1 SET v = 'rolled-back' WHERE id = 100",
		"INSERT INTO db_1.m VALUES (1, 'myisam-after-savepoint')",
		"INSERT INTO db_1.t_2 VALUES (502, 'rolled-back')",
		"ROLLBACK TO SAVEPOINT s",
		"INSERT INTO db_1.t_1 VALUES (503, 'kept')",
		"COMMIT")
	// And a whole ROLLBACK of a transaction that changed both.
	mixed.exec("BEGIN",
		"INSERT INTO db_1.t_1 VALUES (510, 'rolled-back')",
		"INSERT INTO db_1.m VALUES (2, 'myisam-in-rollback')",
		"ROLLBACK")
	mixed.close()
	c.up(0, insertRows("db_1.t_2", 250, 251, ""))
	c.up(1, insertRows("db_2.t_2", 260, 261, ""))
	c.waitRow(250)
	c.waitRow(260)
	for _, r := range [][2]int{{111, 112}, {211, 212}, {501, 503}, {510, 511}} {
		c.absent("rows rolled back to a savepoint", r[0], r[1])
	}
	for _, id := range []int{100, 200} {
		if v := c.downV(id); v != fmt.Sprintf("v%d", id) {
			t.Fatalf("row %d is %q downstream: an update rolled back to a savepoint arrived", id, v)
		}
	}
	c.converge("id, v")
	want, err := e2e.Rows(c.UpDBs[0], "SELECT id, v FROM db_1.m")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 {
		t.Fatalf("upstream db_1.m holds %v, want the two MyISAM rows no rollback undoes", want)
	}
	c.until("db.m equal to db_1.m", func(e2e.Result) bool {
		got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.m")
		return err == nil && slices.Equal(got, want)
	}, "query-status", c.task)
	c.waitSynced()
	c.allRunning()
}

// A session with binlog_format STATEMENT: its DML on a table outside the task is skipped (replication
// goes on); its INSERT into a shard pauses that source's subtask with a message naming the statement
// and the reason (its rows cannot be known), and the row is not lost in silence. binlog skip passes
// the statement (the user then copies the row by hand) and replication goes on.
func TestE2EStatementFormatDMLPauses(t *testing.T) {
	c := startE2E(t, 2)
	c.up(1, "CREATE DATABASE other", "CREATE TABLE other.x (id INT PRIMARY KEY, v VARCHAR(32))")
	c.up(0, insertRows("db_1.t_1", 1, 11, ""))
	c.up(1, insertRows("db_2.t_1", 11, 21, ""))
	c.converge("id, v")

	stmt := c.session(1)
	stmt.exec("SET SESSION binlog_format = 'STATEMENT'",
		"INSERT INTO other.x VALUES (1, 'outside the task')", "UPDATE other.x SET v = 'changed' WHERE id = 1")
	c.up(1, insertRows("db_2.t_2", 30, 31, "")) // the sentinel, in row format
	c.waitRow(30)
	c.allRunning()

	const shardInsert = "INSERT INTO db_2.t_1 VALUES (700, 'statement format')"
	stmt.exec(shardInsert)
	stmt.close()
	c.up(1, insertRows("db_2.t_2", 31, 32, "")) // behind the statement: must wait for it
	c.up(0, insertRows("db_1.t_2", 40, 41, "")) // source 1 goes on
	c.waitRow(40)
	var msg string
	c.until("source 2 paused on the statement-format INSERT", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			if s.Get("sourceStatus").Str("source") != s2 {
				continue
			}
			for _, st := range s.List("subTaskStatus") {
				var b strings.Builder
				for _, e := range st.Get("result").List("errors") {
					fmt.Fprintf(&b, "%s\n%s\n%s\n", e.Str("Message"), e.Str("RawCause"), e.Str("Workaround"))
				}
				msg = b.String()
				if st.Str("stage") == "Paused" && strings.Contains(msg, shardInsert) {
					return true
				}
			}
		}
		return false
	}, "query-status", c.task)
	for _, want := range []string{shardInsert, "STATEMENT", "binlog_format", "binlog skip"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the pause does not say %q:\n%s", want, msg)
		}
	}
	r := c.ok("query-status", c.task)
	for _, s := range r.List("sources") {
		for _, st := range s.List("subTaskStatus") {
			if s.Get("sourceStatus").Str("source") == s1 && st.Str("stage") != "Running" {
				t.Fatalf("source 1's subtask is %s while only source 2 wrote statement-format DML: %v", st.Str("stage"), st)
			}
		}
	}
	c.absent("the statement-format row (its rows cannot be known)", 700, 701)
	c.absent("a row written after the statement-format INSERT while its source is paused", 31, 32)

	// The way out the message names: binlog skip, then the user copies the row by hand.
	c.ok("binlog", "skip", c.task, "-s", s2)
	c.waitStage("Running")
	c.waitRow(31)
	c.absent("the statement-format row skipped by binlog skip", 700, 701)
	c.down("INSERT INTO db.t VALUES (700, 'statement format')")
	c.up(1, insertRows("db_2.t_2", 32, 33, ""))
	c.converge("id, v")
	if n := c.downInt("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'other'"); n != 0 {
		t.Fatalf("%d tables of schema other (outside the task) downstream, want none", n)
	}
	c.allRunning()
}

// dbaStatements are a DBA's statements on source i (objects named dba_<tag>_...): table maintenance,
// FLUSH, users, grants and roles, triggers, views, procedures, functions and events, some dropped
// again and some left. Their data effects are rows of the shard tables: base+1 in t_1 (and, from
// then on, every row inserted into t_1 also as id+offset in t_2, by the trigger), base+2 and base+3
// in t_2 (by the procedure and with the function).
func dbaStatements(i int, tag string, base, offset int) []string {
	d := fmt.Sprintf("db_%d", i+1)
	o := "dba_" + tag + "_"
	u := "'" + o + "u'@'%'"
	u2 := "'" + o + "u2'@'%'"
	keep := "'" + o + "keep'@'localhost'"
	return []string{
		"OPTIMIZE TABLE " + d + ".t_1",
		"ANALYZE TABLE " + d + ".t_1",
		"REPAIR TABLE " + d + ".t_2",
		"CHECK TABLE " + d + ".t_2",
		"FLUSH TABLES",
		"FLUSH TABLES " + d + ".t_1",
		"FLUSH PRIVILEGES",
		"CREATE USER " + u + " IDENTIFIED BY 'dba-secret-1'",
		"GRANT SELECT, INSERT ON " + d + ".* TO " + u,
		"REVOKE INSERT ON " + d + ".* FROM " + u,
		"RENAME USER " + u + " TO " + u2,
		"ALTER USER " + u2 + " IDENTIFIED BY 'dba-secret-2'",
		"SET PASSWORD FOR " + u2 + " = PASSWORD('dba-secret-3')",
		"DROP USER " + u2,
		"CREATE USER " + keep,
		"GRANT SELECT ON " + d + ".t_1 TO " + keep,
		"CREATE ROLE " + o + "r1",
		"GRANT SELECT ON " + d + ".* TO " + o + "r1",
		"GRANT " + o + "r1 TO " + keep,
		"REVOKE " + o + "r1 FROM " + keep,
		"DROP ROLE " + o + "r1",
		"CREATE ROLE " + o + "role",
		"GRANT SELECT ON " + d + ".* TO " + o + "role",
		fmt.Sprintf("CREATE TRIGGER %s.%strg AFTER INSERT ON %s.t_1 FOR EACH ROW INSERT INTO %s.t_2 (id, v) VALUES (NEW.id + %d, CONCAT('trg-', NEW.v))", d, o, d, d, offset),
		fmt.Sprintf("CREATE TRIGGER %s.%strg2 BEFORE UPDATE ON %s.t_2 FOR EACH ROW SET NEW.v = NEW.v", d, o, d),
		fmt.Sprintf("DROP TRIGGER %s.%strg2", d, o),
		fmt.Sprintf("INSERT INTO %s.t_1 (id, v) VALUES (%d, 'fires the trigger')", d, base+1),
		fmt.Sprintf("CREATE VIEW %s.%sv AS SELECT id, v FROM %s.t_1", d, o, d),
		fmt.Sprintf("CREATE OR REPLACE VIEW %s.%sv AS SELECT id FROM %s.t_1", d, o, d),
		fmt.Sprintf("CREATE VIEW %s.%sv2 AS SELECT 1 AS one", d, o),
		fmt.Sprintf("DROP VIEW %s.%sv2", d, o),
		fmt.Sprintf("CREATE PROCEDURE %s.%sp(n INT) BEGIN INSERT INTO %s.t_2 (id, v) VALUES (n, 'procedure'); UPDATE %s.t_2 SET v = 'procedure-updated' WHERE id = n; END", d, o, d, d),
		fmt.Sprintf("CALL %s.%sp(%d)", d, o, base+2),
		fmt.Sprintf("CREATE PROCEDURE %s.%sp2() SELECT 1", d, o),
		fmt.Sprintf("DROP PROCEDURE %s.%sp2", d, o),
		fmt.Sprintf("CREATE FUNCTION %s.%sf(x INT) RETURNS INT DETERMINISTIC RETURN x + 1", d, o),
		fmt.Sprintf("INSERT INTO %s.t_2 (id, v) VALUES (%s.%sf(%d), 'function')", d, d, o, base+2),
		fmt.Sprintf("CREATE FUNCTION %s.%sf2() RETURNS INT DETERMINISTIC RETURN 2", d, o),
		fmt.Sprintf("DROP FUNCTION %s.%sf2", d, o),
		fmt.Sprintf("CREATE EVENT %s.%se ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM %s.t_1", d, o, d),
		fmt.Sprintf("ALTER EVENT %s.%se COMMENT 'never runs'", d, o),
		fmt.Sprintf("CREATE EVENT %s.%se2 ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM %s.t_1", d, o, d),
		fmt.Sprintf("DROP EVENT %s.%se2", d, o),
	}
}

// dbaTemporary uses a temporary table on its own session of upstream i: rows base+4..base+6 reach
// t_2 through INSERT ... SELECT from it.
func (c *e2eCluster) dbaTemporary(i int, tag string, base int) {
	c.t.Helper()
	d := fmt.Sprintf("db_%d", i+1)
	tmp := d + ".dba_" + tag + "_tmp"
	s := c.session(i)
	s.exec("CREATE TEMPORARY TABLE "+tmp+" (id INT PRIMARY KEY, v VARCHAR(32))",
		fmt.Sprintf("INSERT INTO %s VALUES (%d, 'tmp'), (%d, 'tmp'), (%d, 'tmp')", tmp, base+4, base+5, base+6),
		"UPDATE "+tmp+" SET v = 'from-tmp'",
		"INSERT INTO "+d+".t_2 (id, v) SELECT id, v FROM "+tmp,
		"DROP TEMPORARY TABLE "+tmp,
		"CREATE TEMPORARY TABLE "+tmp+"2 LIKE "+d+".t_1",
		"DROP TEMPORARY TABLE IF EXISTS "+tmp+"2")
	s.close()
}

// dbaObjects counts, on one server, what dbaStatements and dbaTemporary name dba_...: users and
// roles, grants, triggers, routines, events, views and tables.
var dbaObjects = []struct{ what, q string }{
	{"users and roles", `SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'dba\_%'`},
	{"schema grants", `SELECT COUNT(*) FROM mysql.db WHERE User LIKE 'dba\_%'`},
	{"table grants", `SELECT COUNT(*) FROM mysql.tables_priv WHERE User LIKE 'dba\_%'`},
	{"triggers", `SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN ('mysql', 'sys')`},
	{"routines", `SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA NOT IN ('mysql', 'sys')`},
	{"events", `SELECT COUNT(*) FROM information_schema.EVENTS`},
	{"views", `SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA NOT IN ('mysql', 'sys')`},
	{"tables named dba_", `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'dba\_%'`},
}

func countOn(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// A DBA's statements on both sources, between rows and again while a lock waits (on the source that
// ran its ALTER and on the one that has not): replication goes on, every subtask stays Running, the
// effects of the trigger, the procedure, the function and the temporary table arrive as rows once,
// the merged target equals the merge of its shards, and nothing was created downstream.
func TestE2EDBAStatementsPassThrough(t *testing.T) {
	c := startE2E(t, 2)
	before := make([]int, len(dbaObjects))
	for k, o := range dbaObjects {
		before[k] = countOn(t, c.DownDB, o.q)
	}
	for i := range c.Ups {
		c.up(i, insertRows(fmt.Sprintf("db_%d.t_1", i+1), 1+10*i, 11+10*i, ""))
	}
	c.converge("id, v")

	// Between rows.
	for i := range c.Ups {
		base, tag := 1000*(i+1), fmt.Sprintf("a%d", i+1)
		c.up(i, dbaStatements(i, tag, base, 100000*(i+1))...)
		c.dbaTemporary(i, tag, base)
		c.up(i, fmt.Sprintf("INSERT INTO db_%d.t_1 (id, v) VALUES (%d, 'after')", i+1, base+9))
	}
	c.waitRow(1009)
	c.waitRow(2009)
	c.allRunning()
	c.converge("id, v")
	for i := range c.Ups {
		base, off := 1000*(i+1), 100000*(i+1)
		for _, id := range []int{base + 1 + off, base + 9 + off} {
			if v := c.downV(id); !strings.HasPrefix(v, "trg-") {
				t.Fatalf("row %d (written by the trigger upstream) is %q downstream", id, v)
			}
		}
		if v := c.downV(base + 2); v != "procedure-updated" {
			t.Fatalf("row %d (written by the procedure) is %q downstream, want procedure-updated", base+2, v)
		}
		if v := c.downV(base + 3); v != "function" {
			t.Fatalf("row %d (written with the function) is %q downstream, want function", base+3, v)
		}
		if n := c.downCount(fmt.Sprintf("id BETWEEN %d AND %d AND v = 'from-tmp'", base+4, base+6)); n != 3 {
			t.Fatalf("%d of the 3 rows copied from the temporary table are downstream", n)
		}
	}

	// While a lock waits: source 1 has run the ALTER (its statements come after it), source 2 not.
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.waitLockOf("`db`.`t`", []string{s1}, []string{s2})
	for i := range c.Ups {
		base, tag := 3000+1000*i, fmt.Sprintf("b%d", i+1)
		c.up(i, dbaStatements(i, tag, base, 300000+100000*i)...)
		c.dbaTemporary(i, tag, base)
		c.up(i, fmt.Sprintf("INSERT INTO db_%d.t_2 (id, v) VALUES (%d, 'after')", i+1, base+9))
	}
	c.waitRow(4009) // source 2 is not held by the lock
	c.waitLockOf("`db`.`t`", []string{s1}, []string{s2})
	c.allRunning()
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("db.t has %d columns downstream while source 2 has not run the ALTER, want 2", n)
	}
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", "INSERT INTO db_2.t_1 VALUES (5000, 'after the lock', 2)")
	c.up(0, "INSERT INTO db_1.t_1 VALUES (5001, 'after the lock', 1)")
	c.waitRow(5000)
	c.waitRow(5001)
	c.converge("id, v, c")
	c.waitSynced()
	c.ddlsRun(1)
	c.allRunning()

	// Nothing of theirs downstream; they are upstream (the check can see them).
	for k, o := range dbaObjects {
		if n := countOn(t, c.DownDB, o.q); n != before[k] {
			t.Errorf("downstream %s: %d, %d before the DBA's statements: a statement with no meaning downstream ran there", o.what, n, before[k])
		}
		if up := countOn(t, c.UpDBs[0], o.q); o.what != "tables named dba_" && up == 0 {
			t.Errorf("upstream 1 has no %s: the DBA's statements did not do what the test means", o.what)
		}
	}
	// Skipped with a log line that names the statement; the account statements' passwords are not logged.
	if n := c.logCount(`"statement":"OPTIMIZE TABLE db_1.t_1"`); n < 2 {
		t.Errorf("the workers logged OPTIMIZE TABLE db_1.t_1 %d times, want a skip line for each of its 2 runs", n)
	}
	if n := c.logCount("dba-secret"); n != 0 {
		t.Errorf("the workers' logs hold the account statements' passwords %d times", n)
	}
	for _, prefix := range []string{"CREATE USER", "GRANT", "CREATE DEFINER", "CREATE TRIGGER", "CREATE VIEW", "CREATE ALGORITHM", "CREATE PROCEDURE",
		"CREATE FUNCTION", "CREATE EVENT", "CREATE ROLE", "OPTIMIZE", "REPAIR", "ANALYZE", "FLUSH", "CALL"} {
		if n, err := c.DownstreamStatements(prefix); err != nil || n != 0 {
			t.Errorf("%d statements starting %q reached the downstream (%v), want none", n, prefix, err)
		}
	}
}

// A shard DDL written as MariaDB's executable comment (/*M!100301 ... */, which a 10.11 source runs)
// is a DDL like any other: it goes through the lock (which waits for the source that has not run it)
// and runs once downstream; the rows with the new column then arrive. MySQL's form likewise, read as
// the source read it.
func TestE2EExecutableCommentDDL(t *testing.T) {
	c := startE2E(t, 2)
	for i := range c.Ups {
		c.up(i, insertRows(fmt.Sprintf("db_%d.t_1", i+1), 1+10*i, 11+10*i, ""))
	}
	c.converge("id, v")

	c.up(0, "/*M!100301 ALTER TABLE db_1.t_1 ADD COLUMN c INT */", "/*M!100301 ALTER TABLE db_1.t_2 ADD COLUMN c INT */",
		insertRows("db_1.t_1", 100, 105, ", 1"))
	c.waitLockOf("`db`.`t`", []string{s1}, []string{s2})
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("db.t has %d columns downstream while source 2 has not run the ALTER, want 2", n)
	}
	c.up(1, "/*M!100301 ALTER TABLE db_2.t_1 ADD COLUMN c INT */", insertRows("db_2.t_1", 200, 205, ", 2"),
		"/*M!100301 ALTER TABLE db_2.t_2 ADD COLUMN c INT */", insertRows("db_2.t_2", 205, 210, ", 3"))
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE c IS NOT NULL", 15)
	c.converge("id, v, c")
	c.waitSynced()
	if n := downColumns(t, c); n != 3 {
		t.Fatalf("db.t has %d columns downstream, want 3", n)
	}
	c.ddlsRun(1)

	// MySQL's form, on both sources: /*!50100 ...*/ runs on MariaDB; /*!80016 ...*/ does not (MariaDB
	// leaves MySQL 5.7 to 9.x's versions alone), so its ADD COLUMN z runs neither upstream nor
	// downstream.
	for i := range c.Ups {
		d := fmt.Sprintf("db_%d", i+1)
		c.up(i, "/*!50100 ALTER TABLE "+d+".t_1 ADD COLUMN d INT */", "ALTER TABLE "+d+".t_2 ADD COLUMN d INT /*!80016 , ADD COLUMN z INT */",
			fmt.Sprintf("INSERT INTO %s.t_2 VALUES (%d, 'with d', %d, %d)", d, 300+i, i, 10+i))
		if n := countOn(t, c.UpDBs[i], "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '"+d+"' AND COLUMN_NAME = 'z'"); n != 0 {
			t.Fatalf("upstream %d ran the /*!80016 ... */ comment (%d columns z): the test's premise is wrong", i+1, n)
		}
	}
	c.waitDown("SELECT COUNT(*) FROM db.t WHERE d IS NOT NULL", 2)
	c.converge("id, v, c, d")
	c.waitSynced()
	if n := downColumns(t, c); n != 4 {
		t.Fatalf("db.t has %d columns downstream, want 4 (id, v, c, d; not z, which the sources did not run)", n)
	}
	c.ddlsRun(2)
	c.allRunning()
}
