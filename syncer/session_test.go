package syncer

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// body is e2e.DefinitionBody, failing the test on error.
func body(t testing.TB, db *sql.DB, table string) string {
	t.Helper()
	body, err := e2e.DefinitionBody(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// sessionConn is one connection to source i's server: what is SET on it holds for what follows.
func (c *cluster) sessionConn(i int) *sql.Conn {
	c.t.Helper()
	conn, err := c.upDBs[i].Conn(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

func run(t testing.TB, conn *sql.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestDDLRunsInItsEventSession: each DDL runs downstream in the session settings its binlog event
// carries, not in the worker's (UTC, strict, utf8mb4), and the downstream ends as the upstream is, rows
// and definitions: a shard lock's ALTER under time_zone +08:00 (a TIMESTAMP default literal), under a
// non-strict sql_mode (a narrowing MODIFY that truncates, which the worker's strict mode refuses), and
// under SET NAMES latin1 (a string default's bytes); an unsharded table's CREATE in a latin1 database
// without a charset of its own, its AUTO_INCREMENT column added under auto_increment_increment 5, and
// a CREATE TABLE with a foreign key to a table that is not there, under foreign_key_checks 0. The
// worker's own connections are back in its settings after each (the rows after them are written as
// before).
func TestDDLRunsInItsEventSession(t *testing.T) {
	c := newCluster(t)
	c.up(0, "ALTER DATABASE db_1 CHARACTER SET latin1 COLLATE latin1_swedish_ci")
	c.startSyncer(0)
	c.startSyncer(1)
	for i := range c.ups {
		for j, table := range c.shards[i] {
			c.up(i, insert(table, (i*2+j)*100, (i*2+j)*100+3))
		}
	}
	c.converge("id, v")
	conns := []*sql.Conn{c.sessionConn(0), c.sessionConn(1)}
	each := func(stmt func(table string) string) {
		for i, conn := range conns {
			for _, table := range c.shards[i] {
				run(t, conn, stmt(table))
			}
		}
	}
	shapes := func() {
		t.Helper()
		want := body(t, c.upDBs[0], c.shards[0][0])
		wait.Eventually(t, 30*time.Second, func() bool { return body(t, c.downDB, "db.t") == want },
			func() string { return "downstream db.t:\n" + body(t, c.downDB, "db.t") + "\nupstream:\n" + want })
	}

	for _, conn := range conns {
		run(t, conn, "SET SESSION time_zone = '+08:00'")
	}
	each(func(table string) string {
		return "ALTER TABLE " + table + " ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02'"
	})
	c.converge("id, v, ts")
	shapes()

	for _, conn := range conns {
		run(t, conn, "SET SESSION sql_mode = ''")
	}
	each(func(table string) string { return "ALTER TABLE " + table + " MODIFY v VARCHAR(2)" })
	c.converge("id, v, ts")
	shapes()

	for _, conn := range conns {
		run(t, conn, "SET SESSION sql_mode = DEFAULT", "SET NAMES latin1")
	}
	each(func(table string) string {
		return "ALTER TABLE " + table + " ADD COLUMN s VARCHAR(8) NOT NULL DEFAULT 'é'" // UTF-8 bytes read as latin1: 'Ã©'
	})
	for i := range c.ups {
		c.up(i, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'x'), (%d, 'y')", c.shards[i][0], 1000+i*10, 1001+i*10)) // in the worker's session again
	}
	c.converge("id, v, ts, HEX(s)")
	shapes()
	if got := c.downScalar("SELECT HEX(s) FROM db.t WHERE id = 100"); got != "C383C2A9" {
		t.Fatalf("the default's bytes downstream are %s, want C383C2A9 (é's UTF-8 bytes read as latin1, as upstream)", got)
	}

	// Unsharded: db_1.p goes to db.p.
	run(t, conns[0], "SET NAMES utf8mb4", "USE db_1", "CREATE TABLE p (id INT PRIMARY KEY, c VARCHAR(8))",
		"INSERT INTO p VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"SET SESSION auto_increment_increment = 5, auto_increment_offset = 2",
		"ALTER TABLE p ADD COLUMN n INT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (n)",
		"SET SESSION auto_increment_increment = 1, auto_increment_offset = 1, foreign_key_checks = 0",
		"CREATE TABLE db_1.child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES db_1.parent (id)) CHARSET utf8mb4",
		"SET SESSION foreign_key_checks = 1", "USE mysql")
	want, err := e2e.Rows(c.upDBs[0], "SELECT id, c, n FROM db_1.p")
	if err != nil || strings.Join(want, ",") == "1|a|1,2|b|2,3|c|3" {
		t.Fatalf("upstream db_1.p: %v %v (numbered with an increment of 1?)", want, err)
	}
	var got []string
	wait.Eventually(t, 30*time.Second, func() bool {
		got, err = e2e.Rows(c.downDB, "SELECT id, c, n FROM db.p")
		return err == nil && slices.Equal(got, want)
	}, func() string {
		return "db.p downstream: " + strings.Join(got, ",") + " " + errString(err) + "; upstream " + strings.Join(want, ",")
	})
	for _, table := range []string{"p", "child"} {
		wait.Eventually(t, 30*time.Second, func() bool {
			var n int
			return c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = ?", table).Scan(&n) == nil && n == 1
		}, func() string { return "db." + table + " not created downstream" })
		if up, down := body(t, c.upDBs[0], "db_1."+table), body(t, c.downDB, "db."+table); up != down {
			t.Fatalf("db.%s downstream:\n%s\nupstream:\n%s", table, down, up)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
