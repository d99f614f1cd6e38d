package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// TestEffectsOnTheServer checks ddl.Effects' claims on MariaDB (utf8mb4, strict): for each DDL
// it takes, the table says whether it ran (ddl.CompareWithDownstream, on the server's own SHOW
// CREATE TABLE before and after), and a second
// run fails with an error execOnce takes for "already applied", leaving the table and its rows as they
// were; each DDL shown here that it leaves out would not be safe to run again.
func TestEffectsOnTheServer(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	sink := NewSink(db, "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ctx := context.Background()
	s.Exec(t, db, "CREATE DATABASE d")
	table := "CREATE TABLE d.t (id BIGINT NOT NULL, a INT, b INT, c INT, v VARCHAR(16) DEFAULT 'v', s TEXT, " +
		"j JSON, d DECIMAL(20,6), PRIMARY KEY (id), KEY i (c), KEY k (a)) DEFAULT CHARSET utf8mb4"
	applied := func(q string) (same, known bool) {
		t.Helper()
		c, err := ex.compare(ctx, stmts(q)[0])
		if err != nil {
			t.Fatal(err)
		}
		if !c.Known {
			t.Logf("%s: %s", q, c.Reason)
		}
		return c.Same, c.Known
	}
	for _, c := range []struct {
		ddl string
		ok  bool
	}{
		{"ALTER TABLE `d`.`t` ADD COLUMN `n` INT", true},
		{"ALTER TABLE d.t ADD COLUMN n INT NOT NULL DEFAULT 0 AFTER id, ADD COLUMN M JSON", true},
		{"ALTER TABLE d.t ADD COLUMN (n INT, m VARCHAR(8))", true},
		{"ALTER TABLE d.t ADD COLUMN g BIGINT AS (id * 2) VIRTUAL", true},
		{"ALTER TABLE d.t ADD COLUMN u INT UNIQUE", true},
		{"ALTER TABLE d.t DROP COLUMN b", true},
		{"ALTER TABLE d.t DROP COLUMN B, MODIFY COLUMN a BIGINT", true},
		{"ALTER TABLE d.t ADD INDEX ib (b), ADD UNIQUE KEY u (b, id), ADD FULLTEXT INDEX f (s)", true},
		{"ALTER TABLE d.t DROP INDEX i, DROP PRIMARY KEY", true},
		{"ALTER TABLE d.t DROP KEY `PRIMARY`", true},
		{"ALTER TABLE d.t ADD COLUMN n INT, MODIFY COLUMN c BIGINT UNSIGNED NULL, ALTER COLUMN v SET DEFAULT 'x'", true},
		{"ALTER TABLE d.t DROP COLUMN d, MODIFY COLUMN v VARCHAR(4) NOT NULL DEFAULT '' FIRST", true},
		{"ALTER TABLE d.t ADD COLUMN n INT, ALGORITHM=INPLACE, LOCK=NONE", true},

		// Some of the DDLs Effects leaves out, and what a second run does to them.
		{"ALTER TABLE d.t ADD INDEX (b)", false},                             // adds b_2
		{"ALTER TABLE d.t RENAME COLUMN a TO a2", false},                     // 1054, not "already applied": the owner would stop
		{"ALTER TABLE d.t DROP COLUMN IF EXISTS b, ADD COLUMN b INT", false}, // drops b's values again
	} {
		_, ok := ddl.Effects(c.ddl)
		if ok != c.ok {
			t.Errorf("Effects(%q) ok = %v, want %v", c.ddl, ok, c.ok)
			continue
		}
		s.Exec(t, db, "DROP TABLE IF EXISTS d.t", table, "INSERT INTO d.t (id, a, b, c, s) VALUES (1, 1, 1, 1, 'x'), (2, 2, 2, 2, 'y')")
		if ok {
			if ran, known := applied(c.ddl); ran || !known {
				t.Errorf("%s: before it ran, the comparison says the same %v, known %v", c.ddl, ran, known)
			}
		}
		s.Exec(t, db, c.ddl)
		if ok {
			if ran, known := applied(c.ddl); !ran || !known {
				t.Errorf("%s: after it ran, the comparison says the same %v, known %v", c.ddl, ran, known)
			}
		}
		db.Exec("UPDATE d.t SET b = id * 10") // rows written since (when b is still there) must stay as they are
		first := tableState(t, db)
		_, err := db.Exec(c.ddl)
		var me *mysql.MySQLError
		alreadyRan := errors.As(err, &me) && alreadyApplied[me.Number] && tableState(t, db) == first
		same := err == nil && tableState(t, db) == first
		if c.ok && !alreadyRan {
			t.Errorf("%s run twice: %v; after the first run:\n%s\nafter the second:\n%s", c.ddl, err, first, tableState(t, db))
		}
		if !c.ok && (alreadyRan || same) {
			t.Errorf("%s, left out, ran twice as once (%v)", c.ddl, err)
		}
	}
}

// tableState is d.t's definition and rows.
func tableState(t *testing.T, db *sql.DB) string {
	t.Helper()
	var name, def string
	if err := db.QueryRow("SHOW CREATE TABLE d.t").Scan(&name, &def); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT * FROM d.t ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString(def + "\n")
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&sb, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestRunningMarker: a DDL nobody can have run yet (ExecDDLFirst) whose effect shows on its table goes
// downstream in one query with its "running" marker, nothing read before it; a re-run (ExecDDLOnce)
// finds it wherever a crash left it and tells from the table whether it ran, without sending it again
// when it did; a marker of an earlier round with the same DDL is overwritten; a DDL whose effect does
// not show and a newer binding's claim each take the way that reads first (the last one stops before
// the DDL).
func TestRunningMarker(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	ddlDB := workerDB(t, s.Port, nil, dbutil.MultiStatements)
	sink := NewSink(workerDB(t, s.Port, nil), "meta", "task", "s1")
	ex := NewDDLExecutor(sink, nil, nil)
	ex.ddlDB = ddlDB
	sink.SetEpoch(4)
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id BIGINT PRIMARY KEY, v VARCHAR(8), j JSON)", "INSERT INTO d.t VALUES (1, 'a', '{}')")
	tables := []vocab.TableName{{Schema: "d", Name: "t"}}
	marker := func(q string) (m meta.Marker, ok bool) {
		t.Helper()
		var state, before, after sql.NullString
		err := db.QueryRow("SELECT state, before_def, after_def FROM meta.task_ddl_marker WHERE lock_id = 'L' AND ddl = ?", q).Scan(&state, &before, &after)
		if errors.Is(err, sql.ErrNoRows) {
			return m, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return meta.Marker{State: state.String, Before: before.String, After: after.String}, true
	}
	columns := func(name string) int {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't' AND COLUMN_NAME = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	definition := func() definition {
		t.Helper()
		def, err := ex.definition(ctx, tables)
		if err != nil {
			t.Fatal(err)
		}
		return def
	}
	doneNow := func(q, before string) {
		t.Helper()
		if m, ok := marker(q); !ok || m != (meta.Marker{State: "done", Before: before, After: definition().hash}) {
			t.Fatalf("marker of %s: %+v %v, want done with the definition of now", q, m, ok)
		}
	}
	// sent runs f and returns the queries the downstream received meanwhile (a new connection's
	// session settings left out).
	sent := func(f func() error) []string {
		t.Helper()
		return slices.DeleteFunc(queriesDuring(t, s, db, f), func(q string) bool { return strings.HasPrefix(q, "SET ") })
	}
	sending := func(queries []string, ddl string) (n int) {
		for _, q := range queries {
			if strings.HasSuffix(q, ddl) {
				n++
			}
		}
		return n
	}

	// One query: the marker and the DDL, nothing before it.
	add := "ALTER TABLE `d`.`t` ADD COLUMN `c` INT"
	queries := sent(func() error { return ex.ExecDDLFirst(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}) })
	if len(queries) < 2 || !strings.HasPrefix(queries[0], "INSERT INTO `meta`.`task_ddl_marker`") || !strings.HasSuffix(queries[0], ";\n"+add) || sending(queries, add) != 1 {
		t.Fatalf("queries of ExecDDLFirst: %q; want the running marker and the DDL first, in one query, and the DDL once", queries)
	}
	if columns("c") != 1 {
		t.Fatal("column c missing")
	}
	doneNow(add, "")

	// Run again after it is done (a crash before the checkpoint): nothing is sent.
	if queries := sent(func() error { return ex.ExecDDLOnce(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}) }); sending(queries, add) != 0 {
		t.Fatalf("a DDL marked done was sent again: %q", queries)
	}
	doneNow(add, "")

	// A crash after the query (the DDL ran, the marker says running): the table shows it ran; it is
	// marked done and not sent again.
	drop := "ALTER TABLE `d`.`t` DROP COLUMN `v`, MODIFY COLUMN `j` LONGTEXT"
	s.Exec(t, ddlDB, sink.meta.MarkRunningSQL("L", drop)+";\n"+drop)
	if m, ok := marker(drop); !ok || m.State != meta.MarkerRunning || columns("v") != 0 {
		t.Fatalf("marker %+v %v, column v %d", m, ok, columns("v"))
	}
	if queries := sent(func() error { return ex.ExecDDLOnce(ctx, "L", stmts(drop), nil, meta.CheckpointUpdate{}) }); sending(queries, drop) != 0 {
		t.Fatalf("a DDL whose table shows it ran was sent again: %q", queries)
	}
	doneNow(drop, "")

	// A crash between the marker and the DDL: the table shows it did not run; it runs.
	idx := "ALTER TABLE `d`.`t` ADD INDEX `ic` (`c`)"
	s.Exec(t, db, sink.meta.MarkRunningSQL("L", idx))
	before := definition()
	if err := ex.ExecDDLOnce(ctx, "L", stmts(idx), nil, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't' AND INDEX_NAME = 'ic'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("index ic: %d %v", n, err)
	}
	doneNow(idx, before.hash)

	// The same DDL in a later round of the lock (the column was dropped since): the running marker
	// takes the place of the earlier round's, and the DDL is sent once.
	s.Exec(t, db, "ALTER TABLE d.t DROP COLUMN c")
	queries = sent(func() error { return ex.ExecDDLFirst(ctx, "L", stmts(add), nil, meta.CheckpointUpdate{}) })
	if sending(queries, add) != 1 || !strings.HasPrefix(queries[0], "INSERT INTO `meta`.`task_ddl_marker`") || columns("c") != 1 {
		t.Fatalf("the later round's DDL: queries %q, column c %d", queries, columns("c"))
	}
	doneNow(add, "")

	// An effect that does not show on the table: the definition is read first, and recorded.
	modify := "ALTER TABLE `d`.`t` MODIFY COLUMN `c` BIGINT"
	before = definition()
	if err := ex.ExecDDLFirst(ctx, "L", stmts(modify), nil, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	doneNow(modify, before.hash)

	// A newer binding claims the checkpoint: the server refuses the marker (1048), the DDL does not
	// run, and the reads say why.
	newer := NewSink(workerDB(t, s.Port, nil), "meta", "task", "s1")
	newerEx := NewDDLExecutor(newer, nil, nil)
	newer.SetEpoch(5)
	if err := newer.Init(ctx); err != nil {
		t.Fatal(err)
	}
	fenced := "ALTER TABLE `d`.`t` ADD COLUMN `f` INT"
	_, err := ddlDB.Exec(sink.meta.MarkRunningSQL("L", fenced) + ";\n" + fenced)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1048 {
		t.Fatalf("running marker of a fenced binding: %v, want error 1048", err)
	}
	if err := ex.ExecDDLFirst(ctx, "L", stmts(fenced), nil, meta.CheckpointUpdate{}); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("ExecDDLFirst of a fenced binding: %v, want ErrFenced", err)
	}
	if _, ok := marker(fenced); ok || columns("f") != 0 {
		t.Fatalf("a fenced binding left a marker (%v) or ran its DDL (%d)", ok, columns("f"))
	}
	// Nor does it overwrite a marker that is there.
	was, _ := marker(add)
	if _, err := ddlDB.Exec(sink.meta.MarkRunningSQL("L", add)); !errors.As(err, &me) || me.Number != 1048 {
		t.Fatalf("running marker of a fenced binding over a done one: %v, want error 1048", err)
	}
	if m, _ := marker(add); m != was || m.State != "done" {
		t.Fatalf("a fenced binding changed a marker: %+v, was %+v", m, was)
	}
	// The newer binding runs it, once.
	newerEx.ddlDB = ddlDB
	if err := newerEx.ExecDDLFirst(ctx, "L", stmts(fenced), nil, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if err := newerEx.ExecDDLOnce(ctx, "L", stmts(fenced), nil, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if columns("f") != 1 {
		t.Fatal("column f missing")
	}
	doneNow(fenced, "")
}
