package integration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// definitionBody is e2e.DefinitionBody, failing the test on error.
func definitionBody(t testing.TB, db *sql.DB, table string) string {
	t.Helper()
	body, err := e2e.DefinitionBody(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestE2EDDLRunsInItsSession: through the binaries, with every server at time_zone +08:00 (the
// upstreams' and the downstream's), each DDL runs downstream in the session its binlog event carries
// and the downstream ends as the upstream is, rows and SHOW CREATE TABLE: a shard lock's TIMESTAMP
// default in the servers' zone (read as UTC it would be 8 hours off); a narrowing MODIFY under a
// non-strict sql_mode (the worker's strict session refuses it); a string default written by a SET
// NAMES latin1 session; a CREATE TABLE without a charset in a latin1 database, given an AUTO_INCREMENT
// column under auto_increment_increment 5; a CREATE TABLE with a foreign key to a missing table
// under foreign_key_checks 0. Each ALTER of the merged table runs once.
func TestE2EDDLRunsInItsSession(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, MariaDBArgs: []string{"--default-time-zone=+08:00"}}, false)
	c.up(0, "ALTER DATABASE db_1 CHARACTER SET latin1 COLLATE latin1_swedish_ci")
	f, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.startTask(f)
	c.until("every source in the sync unit", func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			if s.Str("unit") != "Sync" || s.Str("stage") != "Running" {
				return false
			}
		}
		return len(subs) == len(c.Ups)
	}, "query-status", c.task)
	for i := range c.Ups {
		for j := 1; j <= 2; j++ {
			c.up(i, fmt.Sprintf("INSERT INTO db_%d.t_%d VALUES (%d, 'first'), (%d, 'second')", i+1, j, (i*2+j)*10, (i*2+j)*10+1))
		}
	}
	c.converge("id, v")
	conns := make([]*sql.Conn, len(c.Ups))
	for i := range c.Ups {
		if conns[i], err = c.UpDBs[i].Conn(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	each := func(stmts ...string) {
		t.Helper()
		for i, conn := range conns {
			for _, q := range stmts {
				q = strings.ReplaceAll(q, "db_N", fmt.Sprintf("db_%d", i+1))
				if _, err := conn.ExecContext(context.Background(), q); err != nil {
					t.Fatalf("upstream %d: %s: %v", i+1, q, err)
				}
			}
		}
	}
	same := func() {
		t.Helper()
		want := definitionBody(t, c.UpDBs[0], "db_1.t_1")
		if got := definitionBody(t, c.DownDB, "db.t"); got != want {
			t.Fatalf("db.t downstream:\n%s\nupstream db_1.t_1:\n%s", got, want)
		}
	}

	each("ALTER TABLE db_N.t_1 ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02'",
		"ALTER TABLE db_N.t_2 ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02'")
	c.converge("id, v, ts")
	same()
	if got, _ := e2e.Rows(c.DownDB, "SELECT DISTINCT ts FROM db.t"); strings.Join(got, ",") != "2020-02-02 02:02:02" {
		t.Fatalf("the existing rows' ts downstream (in +08:00): %v, want 2020-02-02 02:02:02", got)
	}

	each("SET SESSION sql_mode = ''", "ALTER TABLE db_N.t_1 MODIFY v VARCHAR(3)", "ALTER TABLE db_N.t_2 MODIFY v VARCHAR(3)")
	c.converge("id, v, ts")
	same()

	each("SET SESSION sql_mode = DEFAULT", "SET NAMES latin1",
		"ALTER TABLE db_N.t_1 ADD COLUMN s VARCHAR(8) NOT NULL DEFAULT 'é'", "ALTER TABLE db_N.t_2 ADD COLUMN s VARCHAR(8) NOT NULL DEFAULT 'é'",
		"SET NAMES utf8mb4")
	c.up(0, "INSERT INTO db_1.t_1 (id, v) VALUES (900, 'new')") // in the worker's own session again
	c.converge("id, v, ts, HEX(s)")
	same()
	c.ddlsRun(3)

	if _, err := conns[0].ExecContext(context.Background(), `USE db_1`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE p (id INT PRIMARY KEY, c VARCHAR(8))", "INSERT INTO p VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"SET SESSION auto_increment_increment = 5, auto_increment_offset = 2",
		"ALTER TABLE p ADD COLUMN n INT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (n)",
		"SET SESSION auto_increment_increment = 1, auto_increment_offset = 1, foreign_key_checks = 0",
		"CREATE TABLE child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent (id)) CHARSET utf8mb4",
		"SET SESSION foreign_key_checks = 1", "INSERT INTO p (id, c) VALUES (4, 'd')",
	} {
		if _, err := conns[0].ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	want, err := e2e.Rows(c.UpDBs[0], "SELECT id, c, n FROM db_1.p")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(want, ",") == "1|a|1,2|b|2,3|c|3,4|d|4" {
		t.Fatalf("upstream db_1.p numbered with an increment of 1: %v", want)
	}
	c.until("db.p downstream as upstream (the row written after db_1.child's CREATE included)", func(e2e.Result) bool {
		got, _ := e2e.Rows(c.DownDB, "SELECT id, c, n FROM db.p")
		return slices.Equal(got, want)
	}, "query-status", c.task)
	for _, table := range []string{"p", "child"} {
		if up, down := definitionBody(t, c.UpDBs[0], "db_1."+table), definitionBody(t, c.DownDB, "db."+table); up != down {
			t.Fatalf("db.%s downstream:\n%s\nupstream:\n%s", table, down, up)
		}
	}
}
