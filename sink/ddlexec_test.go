package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

func TestExecDDLTwiceIsIdempotent(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	sink := NewSink(db, "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ctx := context.Background()
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	ddls := []string{
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id INT PRIMARY KEY)",
		"ALTER TABLE d.t ADD COLUMN c INT",
		"ALTER TABLE d.t ADD INDEX ic (c)",
		"ALTER TABLE d.t DROP INDEX ic",
		"ALTER TABLE d.t DROP COLUMN c",
		"DROP TABLE d.t",
		"DROP DATABASE d",
	}
	pos := vocab.Position{File: "bin.000001", Pos: 4}
	for _, q := range ddls {
		for run := 0; run < 2; run++ {
			if err := ex.ExecDDL(ctx, stmts(q), nil, meta.CheckpointUpdate{Global: pos}); err != nil {
				t.Fatalf("%s (run %d): %v", q, run+1, err)
			}
		}
	}
	// A real error is still an error.
	if err := ex.ExecDDL(ctx, stmts("ALTER TABLE nowhere.t ADD COLUMN c INT"), nil, meta.CheckpointUpdate{}); err == nil {
		t.Fatal("ALTER of a missing table succeeded")
	}
	cp, err := sink.Load(ctx)
	if err != nil || cp.Global != pos {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
}

func TestExecDDLOnceAcrossCrashes(t *testing.T) {
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) { execDDLOnceAcrossCrashes(t, together) })
	}
}

func execDDLOnceAcrossCrashes(t *testing.T, together bool) {
	s := mariadbtest.Start(t)
	db := s.DB(t) // takes multi-statement queries
	ctx := context.Background()
	sink := NewSink(db, "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	if together {
		ex.ddlDB = db
	}
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY AUTO_INCREMENT)")
	alters := func() int {
		var name string
		var n int
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	add := "ALTER TABLE `d`.`t` ADD COLUMN `c` INT"
	tables := []vocab.TableName{{Schema: "d", Name: "t"}}
	once := func(want int, why string) {
		t.Helper()
		before := alters()
		if err := ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		if got := alters() - before; got != want {
			t.Fatalf("%s: %d ALTERs ran, want %d", why, got, want)
		}
	}
	once(1, "first run")
	s.Exec(t, db, "INSERT INTO d.t (c) VALUES (1), (2)") // moves AUTO_INCREMENT, which must not matter
	once(0, "re-run after done (crash before the checkpoint or etcd done)")

	// A crash between the DDL and its done marker: the marker says started, the table changed.
	s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
	def, err := ex.definition(ctx, tables)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.mark(ctx, "L", add, "started", def.hash, ""); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, add)
	once(0, "re-run after a crash right after the DDL")

	// A marker written before definitions were hashed holds the text: a started marker whose table
	// is unchanged means the DDL did not run.
	s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
	if def, err = ex.definition(ctx, tables); err != nil {
		t.Fatal(err)
	}
	if err := ex.mark(ctx, "L", add, "started", def.text, ""); err != nil {
		t.Fatal(err)
	}
	once(1, "re-run after a crash before the DDL, marker of the old format (it holds the text)")

	// A crash between the started marker and the DDL: the table did not change, the DDL runs.
	s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
	if def, err = ex.definition(ctx, tables); err != nil {
		t.Fatal(err)
	}
	if err := ex.mark(ctx, "L", add, "started", def.hash, ""); err != nil {
		t.Fatal(err)
	}
	once(1, "re-run after a crash before the DDL")

	// A later round of the same lock with the same DDL text (the column was dropped since): it runs.
	s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
	once(1, "the same DDL in a later round")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("column c: %d %v", n, err)
	}
}

func TestDDLRunsOnlyAfterItsMarker(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	sink := NewSink(db, "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ex.ddlDB = workerDB(t, s.Port, nil, dbutil.MultiStatements)
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)",
		"CREATE TRIGGER meta.no_marker BEFORE INSERT ON meta.task_ddl_marker FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no marker today'")
	add := "ALTER TABLE `d`.`t` ADD COLUMN `c` INT COMMENT 'a ? and a '' quote'"
	err := ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{})
	// (The message is the one-query path's.)
	if err == nil || !strings.Contains(err.Error(), "no marker today") || !strings.Contains(err.Error(), "write the started marker of lock L and execute DDL") {
		t.Fatalf("ExecDDLOnce with the marker refused: %v", err)
	}
	columns := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := columns(); n != 0 {
		t.Fatal("the DDL ran although its marker was refused")
	}
	// Once the marker can be written, the DDL runs, and the marker holds the statement as it was.
	s.Exec(t, db, "DROP TRIGGER meta.no_marker")
	if err := ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if n := columns(); n != 1 {
		t.Fatal("the DDL did not run")
	}
	var state, ddl string
	if err := db.QueryRow("SELECT state, ddl FROM meta.task_ddl_marker WHERE lock_id = 'L'").Scan(&state, &ddl); err != nil || state != "done" || ddl != add {
		t.Fatalf("marker %q %q %v", state, ddl, err)
	}
}

func TestBeforeInOneQuery(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	sink := NewSink(workerDB(t, s.Port, nil), "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ex.ddlDB = workerDB(t, s.Port, nil, dbutil.MultiStatements)
	sink.SetEpoch(5)
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.x (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(8) DEFAULT 'x;y')",
		"INSERT INTO d.x (v) VALUES ('a'), ('b')", "CREATE TABLE d.a (id BIGINT, KEY (id)) DEFAULT CHARSET latin1")
	// RENAME names four tables; the second and the fourth do not exist: the server stops at the
	// second, and the rest are read one by one.
	q := "RENAME TABLE `d`.`x` TO `d`.`y`, `d`.`a` TO `d`.`b`"
	tables, err := ddl.TablesOf(q, "")
	if err != nil || len(tables) != 4 {
		t.Fatalf("tables of %s: %v %v", q, tables, err)
	}
	apart, err := ex.definition(ctx, tables)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(apart.text, ": absent\n"); n != 2 {
		t.Fatalf("definition read apart has %d absent tables, want 2:\n%s", n, apart.text)
	}
	cur, m, ok, err := ex.before(ctx, "L", q, tables)
	if err != nil {
		t.Fatal(err)
	}
	if cur != apart || ok || m != (meta.Marker{}) {
		t.Fatalf("in one query: definition\n%s(%s), marker %+v %v; apart:\n%s(%s)", cur.text, cur.hash, m, ok, apart.text, apart.hash)
	}
	// Every table there (the first one absent this time), then none.
	for _, ts := range [][]vocab.TableName{{{Schema: "d", Name: "x"}, {Schema: "d", Name: "a"}}, {{Schema: "d", Name: "gone"}, {Schema: "d", Name: "x"}}, {{Schema: "d", Name: "gone"}}} {
		apart, err := ex.definition(ctx, ts)
		if err != nil {
			t.Fatal(err)
		}
		if cur, _, _, err := ex.before(ctx, "L", q, ts); err != nil || cur != apart {
			t.Fatalf("tables %v: in one query\n%s%v; apart:\n%s", ts, cur.text, err, apart.text)
		}
	}
	if err := ex.mark(ctx, "L", q, "started", cur.hash, "h;2"); err != nil {
		t.Fatal(err)
	}
	if _, m, ok, err := ex.before(ctx, "L", q, tables); err != nil || !ok || m != (meta.Marker{State: "started", Before: cur.hash, After: "h;2"}) {
		t.Fatalf("marker after mark: %+v %v %v", m, ok, err)
	}
	// A newer binding of the source claims the checkpoint: the owner's reads before its DDL say so.
	newer := NewSink(workerDB(t, s.Port, nil), "meta", "task", "s1")
	newerEx := NewDDLExecutor(newer, nil, nil)
	newer.SetEpoch(6)
	if err := newer.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ex.before(ctx, "L", q, tables); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("before with a newer binding: %v, want ErrFenced", err)
	}
	newerEx.ddlDB = workerDB(t, s.Port, nil, dbutil.MultiStatements)
	if _, _, _, err := newerEx.before(ctx, "L", q, tables); err != nil {
		t.Fatalf("before of the binding that owns the checkpoint: %v", err)
	}
}

// TestHandMadeColumnIsComparedNotAssumed: a column of the DDL's name was added downstream by hand. When
// it differs from what the DDL makes, the DDL fails with a NotAppliedError naming both definitions
// (a downstream error the subtask pauses on) and the column is left as it is; once the user drops it,
// the DDL runs, whatever marker the refusal left, and a re-run after that does not run it again. When
// the column is the DDL's, the DDL is taken as applied without taking effect. Each way the owner runs a
// lock's DDL: reading first (ExecDDLOnce), or behind a running marker (ExecDDLFirst), with or without
// the one-query DDL connection.
func TestHandMadeColumnIsComparedNotAssumed(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	s.Exec(t, db, "CREATE DATABASE d")
	add := "ALTER TABLE `d`.`t` ADD COLUMN `c` INT"
	columnType := func(t *testing.T) string {
		var typ string
		if err := db.QueryRow("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'").Scan(&typ); err != nil {
			t.Fatal(err)
		}
		return typ
	}
	alters := func(t *testing.T) int { // ALTERs that took effect (a refused one is not binlogged)
		rows, err := db.Query("SHOW BINLOG EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var log, typ, info string
			var pos, server, end int
			if err := rows.Scan(&log, &pos, &typ, &server, &end, &info); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(info, add) {
				n++
			}
		}
		return n
	}
	for i, c := range []struct {
		first, together bool
	}{{false, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("first=%v,together=%v", c.first, c.together), func(t *testing.T) {
			sink := NewSink(db, "meta", fmt.Sprintf("task%d", i), "s1")
			ex := NewDDLExecutor(sink, nil, nil)
			if c.together {
				ex.ddlDB = workerDB(t, s.Port, nil, dbutil.MultiStatements)
			}
			if err := sink.Init(ctx); err != nil {
				t.Fatal(err)
			}
			exec := func() error {
				if c.first {
					return ex.ExecDDLFirst(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{})
				}
				return ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{})
			}
			s.Exec(t, db, "DROP TABLE IF EXISTS d.t", "CREATE TABLE d.t (id INT PRIMARY KEY, c VARCHAR(5))")
			before := alters(t)
			err := exec()
			var na *NotAppliedError
			if !errors.As(err, &na) || !DownstreamPermanent(err) || IsPermanent(err) {
				t.Fatalf("DDL over a different hand-made column: %v; want a NotAppliedError the caller pauses on", err)
			}
			for _, want := range []string{add, "Error 1060", "column `c` differs (type varchar(5) downstream, int in the statement)",
				"downstream: `c` varchar(5) DEFAULT NULL", "the DDL would make: `c` INT", "resume-task runs the DDL"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if columnType(t) != "varchar(5)" {
				t.Fatalf("the hand-made column is now %s", columnType(t))
			}
			// A retry meets the same refusal.
			if err := exec(); !errors.As(err, &na) {
				t.Fatalf("retry: %v", err)
			}
			// The user drops the column: the DDL runs, once.
			s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
			if err := exec(); err != nil {
				t.Fatal(err)
			}
			if err := ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}); err != nil {
				t.Fatal(err)
			}
			if columnType(t) != "int(11)" || alters(t)-before != 1 {
				t.Fatalf("column c is %s, the DDL took effect %d times; want int(11), once", columnType(t), alters(t)-before)
			}

			// The hand-made column is the DDL's: taken as applied.
			s.Exec(t, db, "DROP TABLE d.t", "CREATE TABLE d.t (id INT PRIMARY KEY, c INT)")
			before = alters(t)
			if err := ex.ExecDDLOnce(ctx, "L2", stmts(add), nil, meta.CheckpointUpdate{}); err != nil {
				t.Fatalf("DDL over the same hand-made column: %v", err)
			}
			if alters(t) != before {
				t.Fatal("the DDL took effect over a column that was there")
			}
		})
	}
}
