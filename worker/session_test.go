package worker

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/internal/e2e"
	"github.com/tributary-db/tributary/internal/mariadbtest"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/session"
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
		eventually(t, 30*time.Second, func() bool { return body(t, c.downDB, "db.t") == want },
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
	eventually(t, 30*time.Second, func() bool {
		got, err = e2e.Rows(c.downDB, "SELECT id, c, n FROM db.p")
		return err == nil && slices.Equal(got, want)
	}, func() string {
		return "db.p downstream: " + strings.Join(got, ",") + " " + errString(err) + "; upstream " + strings.Join(want, ",")
	})
	for _, table := range []string{"p", "child"} {
		eventually(t, 30*time.Second, func() bool {
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

// settingsOf decodes status variables built from a time zone and a sql_mode bitmask of flavor.
func settingsOf(t *testing.T, zone string, mode uint64, flavor string) session.Settings {
	t.Helper()
	raw := binary.LittleEndian.AppendUint64([]byte{0x01}, mode)
	raw = append(append(raw, 0x05, byte(len(zone))), zone...)
	v, err := session.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	in, notes := v.Settings(flavor, nil)
	if len(notes) != 0 {
		t.Fatal(notes)
	}
	return in
}

// TestDDLSessionIsPutBack: the connection a DDL ran on is in the sink's own settings afterwards,
// whether the DDL (alone, or behind a marker in one query) succeeded or failed; what the downstream
// refuses (a time zone it has no tables for, a sql_mode name only MySQL has) is left at the sink's
// value while the rest is carried.
func TestDDLSessionIsPutBack(t *testing.T) {
	s := mariadbtest.Start(t)
	db := workerDB(t, s.Port, nil, dbutil.MultiStatements)
	db.SetMaxOpenConns(1) // one connection: the one each DDL ran on
	sink := NewSink(db, "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ex.ddlDB = db
	ctx := context.Background()
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	own := func() string {
		t.Helper()
		var zone, mode, fk string
		if err := db.QueryRow("SELECT @@session.time_zone, @@session.sql_mode, @@session.foreign_key_checks").Scan(&zone, &mode, &fk); err != nil {
			t.Fatal(err)
		}
		return zone + " " + mode + " " + fk
	}
	base := own()
	if _, err := db.Exec("CREATE DATABASE d"); err != nil {
		t.Fatal(err)
	}
	shanghai := settingsOf(t, "+08:00", 0, "mariadb") // sql_mode '': not strict
	def := func(table string) string { return body(t, db, table) }

	// Alone (no marker), then behind a marker, then failing behind a marker.
	if err := ex.ExecDDL(ctx, []string{"CREATE TABLE d.a (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02')"}, shanghai, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if got := own(); got != base {
		t.Fatalf("after a DDL alone the session is %q, was %q", got, base)
	}
	if d := def("d.a"); !strings.Contains(d, "'2020-02-01 18:02:02'") {
		t.Fatalf("the default was not read in +08:00 (shown in UTC):\n%s", d)
	}
	if err := ex.ExecDDLOnce(ctx, "L", []string{"ALTER TABLE d.a ADD COLUMN u TIMESTAMP NOT NULL DEFAULT '2021-01-01 08:00:00'"}, shanghai, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if got := own(); got != base || !strings.Contains(def("d.a"), "'2021-01-01 00:00:00'") {
		t.Fatalf("behind a marker: session %q (was %q), table\n%s", got, base, def("d.a"))
	}
	if err := ex.ExecDDLOnce(ctx, "L", []string{"ALTER TABLE d.missing ADD COLUMN c INT"}, shanghai, meta.CheckpointUpdate{}); err == nil {
		t.Fatal("a DDL of a missing table succeeded")
	}
	if got := own(); got != base {
		t.Fatalf("after a failed DDL the session is %q, was %q", got, base)
	}

	// Refused by the downstream: the zone (no time zone tables) and MySQL's TIME_TRUNCATE_FRACTIONAL
	// are left out; NO_ZERO_DATE (bit 24) is carried, so a zero default is refused as upstream would.
	mars := settingsOf(t, "Mars/Olympus", 1<<32|1<<24|1<<21, "mysql")
	if err := ex.ExecDDL(ctx, []string{"CREATE TABLE d.b (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02')"}, mars, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if d := def("d.b"); !strings.Contains(d, "'2020-02-02 02:02:02'") {
		t.Fatalf("the refused zone was not left at the sink's (UTC):\n%s", d)
	}
	if err := ex.ExecDDL(ctx, []string{"CREATE TABLE d.z (id INT PRIMARY KEY, d DATE NOT NULL DEFAULT '0000-00-00')"}, mars, meta.CheckpointUpdate{}); err == nil {
		t.Fatal("a zero date default passed under the carried NO_ZERO_DATE")
	}
	if got := own(); got != base {
		t.Fatalf("after refused settings the session is %q, was %q", got, base)
	}
}
