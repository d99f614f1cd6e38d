package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// TestExecDDLTwiceIsIdempotent: a DDL re-run after a crash between the DDL and its checkpoint is
// recognised as applied, for every kind the worker runs downstream.
// TestExecDDLOnceAcrossCrashes: the DDL markers make a lock's DDL run exactly once whatever step a
// crash interrupted; counted with the server's Com_alter_table. With the marker and the DDL in two
// statements, and in one multi-statement query (a dm-worker's way).
// TestDDLRunsOnlyAfterItsMarker: with the marker and the DDL in one query, a marker that cannot be
// written (a trigger refuses it) stops the DDL: it never runs, and the error says why.
// TestBeforeInOneQuery: what the owner reads before a lock's DDL (epoch fence, marker, definitions)
// in one multi-statement query on the DDL connection is what the reads one by one give: the same
// definition (a crash's re-run compares it with one read the other way), tables that do not exist in
// the middle of the list included, the marker, and the fence.
// TestGroupedStatements: with SetGroupStatements, a flush's multi-row INSERTs go several to a query,
// led by the epoch fence's SELECT and followed by the checkpoint's upsert, in order with the statements
// that cannot (values the driver must write, an UPDATE), each of which sends what waits first; counted
// in the server's general log. A statement of a group that fails rolls the whole transaction back, and
// the error names its rows and table; a newer binding's claim fails the flush with ErrFenced.
func TestGroupedStatements(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t) // takes multi-statement queries
	ctx := context.Background()
	sink := NewSink(db, "meta", "task", "s1")
	sink.maxRows = 2
	sink.SetGroupStatements(true)
	sink.SetEpoch(3)
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.g (id INT PRIMARY KEY, v VARCHAR(32))")
	origin := &ChangeOrigin{Target: vocab.TableName{Schema: "d", Name: "g"}, Columns: []string{"id", "v"}}
	ins := func(from, to int, v string) (cs []Change) {
		for id := from; id <= to; id++ {
			cs = append(cs, Change{Kind: Insert, ChangeOrigin: origin, Row: []any{int64(id), v}})
		}
		return cs
	}
	var changes []Change
	changes = append(changes, ins(1, 10, "a")...)                        // 5 statements after the fence, one query
	changes = append(changes, ins(11, 11, `x\y`)...)                     // with 12 in one statement the driver writes
	changes = append(changes, ins(12, 15, "a;\nb")...)                   // (11, 12) alone; (13, 14), (15) wait
	changes = append(changes, Change{Kind: Update, ChangeOrigin: origin, // waits with them
		Row: []any{int64(1), "b"}, Old: []any{int64(1), "a"}})
	changes = append(changes, Change{Kind: Update, ChangeOrigin: origin, // the driver writes it: sends
		Row: []any{int64(2), `p\q`}, Old: []any{int64(2), "a"}}) // what waits, then runs alone
	changes = append(changes, ins(16, 17, "c")...) // the last query, with the checkpoint
	pos := vocab.Position{File: "bin.000001", Pos: 100}
	queries := queriesDuring(t, s, db, func() error { return sink.Flush(ctx, changes, meta.CheckpointUpdate{Global: pos}) })
	// Each query of the flush's transaction as the statements it holds: fence, inserts into d.g,
	// checkpoint, or its own text.
	var got []string
	in := false
	for _, q := range queries {
		in = in || q == "START TRANSACTION"
		if !in {
			continue
		}
		var parts []string
		if strings.HasPrefix(q, "SELECT binlog_pos FROM `meta`.`task_checkpoint`") {
			parts = append(parts, "fence")
		}
		if n := strings.Count(q, "INSERT INTO `d`.`g`"); n > 0 {
			parts = append(parts, fmt.Sprintf("%d inserts", n))
		}
		if n := strings.Count(q, "UPDATE `d`.`g`"); n > 0 {
			parts = append(parts, fmt.Sprintf("%d updates", n))
		}
		if strings.Contains(q, "INSERT INTO `meta`.`task_checkpoint`") {
			parts = append(parts, "checkpoint")
		}
		if len(parts) == 0 {
			parts = append(parts, strings.Fields(q)[0])
		}
		got = append(got, strings.Join(parts, " + "))
		if q == "COMMIT" {
			break
		}
	}
	// (SELECT: the key columns of the UPDATEs, read once on a connection of the pool.)
	want := []string{"START", "fence + 5 inserts", "1 inserts", "SELECT", "2 inserts + 1 updates", "1 updates", "1 inserts + checkpoint", "COMMIT"}
	if !slices.Equal(got, want) {
		t.Fatalf("the flush's queries: %q, want %q", got, want)
	}
	var n int
	var v1, v2, v11, v12 string
	if err := db.QueryRow("SELECT COUNT(*), MAX(IF(id = 1, v, '')), MAX(IF(id = 2, v, '')), MAX(IF(id = 11, v, '')), MAX(IF(id = 12, v, '')) FROM d.g").Scan(&n, &v1, &v2, &v11, &v12); err != nil {
		t.Fatal(err)
	}
	if n != 17 || v1 != "b" || v2 != `p\q` || v11 != `x\y` || v12 != "a;\nb" {
		t.Fatalf("%d rows, id 1 %q, id 2 %q, id 11 %q, id 12 %q", n, v1, v2, v11, v12)
	}
	if cp, err := sink.Load(ctx); err != nil || cp.Global != pos {
		t.Fatalf("checkpoint after the flush: %+v %v", cp.Global, err)
	}
	// The third statement of a group meets a row that is there: nothing of the flush stays.
	bad := append(ins(18, 21, "d"), ins(5, 6, "dup")...)
	err := sink.Flush(ctx, append(bad, ins(22, 23, "d")...), meta.CheckpointUpdate{Global: vocab.Position{File: "bin.000001", Pos: 200}})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 || !strings.Contains(err.Error(), "insert 2 rows") || !strings.Contains(err.Error(), "`d`.`g`") {
		t.Fatalf("flush with a duplicate key: %v", err)
	}
	checkUnchanged := func(why string) {
		t.Helper()
		if err := db.QueryRow("SELECT COUNT(*) FROM d.g").Scan(&n); err != nil || n != 17 {
			t.Fatalf("%s: %d rows, want 17 (%v)", why, n, err)
		}
		if cp, err := sink.Load(ctx); err != nil || cp.Global != pos {
			t.Fatalf("%s: checkpoint %+v %v", why, cp.Global, err)
		}
	}
	checkUnchanged("after the failed flush")
	// A newer binding claims the source's checkpoint: the fence at the head of the group stops the flush.
	newer := NewSink(db, "meta", "task", "s1")
	newer.SetEpoch(4)
	if err := newer.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctx, ins(30, 33, "e"), meta.CheckpointUpdate{Global: vocab.Position{File: "bin.000001", Pos: 300}}); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("flush of a fenced binding: %v, want ErrFenced", err)
	}
	checkUnchanged("after the fenced flush")
}

// TestAppendInterpolated: a ? in a backquoted name stays, each other one takes its argument as a
// literal; a value the driver must write, or a count that differs, says so.
func TestAppendInterpolated(t *testing.T) {
	q := "UPDATE `d`.`a?b` SET `x``?` = ?, `y` = ? WHERE `k` <=> ? AND CAST(`b` AS BINARY) <=> ? LIMIT 1"
	got, ok := appendInterpolated(nil, q, []any{int64(-1), "v'?", nil, []byte("b?")})
	want := "UPDATE `d`.`a?b` SET `x``?` = -1, `y` = 'v''?' WHERE `k` <=> NULL AND CAST(`b` AS BINARY) <=> _binary'b?' LIMIT 1"
	if !ok || string(got) != want {
		t.Fatalf("got %q %v\nwant %q", got, ok, want)
	}
	for _, args := range [][]any{{int64(1), "a", nil}, {int64(1), "a", nil, nil, nil}, {int64(1), `back\slash`, nil, nil}, {int64(1), time.Now(), nil, nil}} {
		if _, ok := appendInterpolated(nil, q, args); ok {
			t.Fatalf("args %v: written in", args)
		}
	}
}

// TestInsertValuesWrittenIn: a multi-row INSERT with its values written in (appendInsertValues) stores
// the same values as the driver's interpolation of the same statement, with and without
// NO_BACKSLASH_ESCAPES: quotes, NUL, newlines, ^Z, double quotes, question marks, bytes that are not
// UTF-8, and (through the driver) backslashes.
func TestInsertValuesWrittenIn(t *testing.T) {
	s := mariadbtest.Start(t)
	ctx := context.Background()
	texts := []string{"", "plain", "it's", "''", "a\x00b", "line\nbreak\r\n", "ctrl\x1aZ", `say "hi"`, "what?", "?,?", "héllo 🙂",
		"back\\slash", `\'`, "\xff\xfe'\x00"}
	for _, mode := range []string{"", "NO_BACKSLASH_ESCAPES"} {
		t.Run("mode="+mode, func(t *testing.T) {
			db, err := sql.Open("mysql", s.DSN("")+"&sql_mode="+url.QueryEscape("'"+mode+"'"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			schema := "d" + strings.ToLower(strings.ReplaceAll(mode, "_", ""))
			s.Exec(t, db, "CREATE DATABASE "+schema, "CREATE TABLE "+schema+".t (id INT PRIMARY KEY, b VARBINARY(64), l VARCHAR(64) CHARACTER SET latin1, "+
				"u BIGINT UNSIGNED, i TINYINT, f FLOAT, g DOUBLE, n INT)")
			sink := NewSink(db, "meta", "task", "s1")
			if err := sink.Init(ctx); err != nil {
				t.Fatal(err)
			}
			target := vocab.TableName{Schema: schema, Name: "t"}
			cols := []string{"id", "b", "l", "u", "i", "f", "g", "n"}
			var changes []Change
			for i, txt := range texts {
				// Each row alone (a backslash sends only its own statement through the driver), then all in one.
				changes = append(changes, Change{Kind: Insert, ChangeOrigin: &ChangeOrigin{Target: target, Columns: cols},
					Row: []any{int32(i), []byte(txt), []byte(txt), uint64(1<<64-1) - uint64(i), int8(-i), float32(0.1) * float32(i), 1.0 / float64(i+3), nil}})
			}
			for _, batch := range [][]Change{changes[:len(changes)/2], changes[len(changes)/2:]} {
				if err := sink.Flush(ctx, batch, meta.CheckpointUpdate{}); err != nil {
					t.Fatal(err)
				}
			}
			s.Exec(t, db, "CREATE TABLE "+schema+".want LIKE "+schema+".t")
			for _, c := range changes {
				if _, err := db.Exec("INSERT INTO "+schema+".want VALUES (?,?,?,?,?,?,?,?)", c.Row...); err != nil {
					t.Fatal(err)
				}
			}
			var diff int
			if err := db.QueryRow("SELECT COUNT(*) FROM " + schema + ".t a RIGHT JOIN " + schema + ".want b USING (id) WHERE NOT (a.b <=> b.b AND BINARY a.l <=> BINARY b.l AND a.u <=> b.u AND a.i <=> b.i AND a.f <=> b.f AND a.g <=> b.g AND a.n <=> b.n)").Scan(&diff); err != nil {
				t.Fatal(err)
			}
			var n int
			db.QueryRow("SELECT COUNT(*) FROM " + schema + ".t").Scan(&n)
			if diff != 0 || n != len(texts) {
				t.Fatalf("%d rows, %d differ from the driver's", n, diff)
			}
			for i, txt := range texts {
				var b []byte
				if err := db.QueryRow("SELECT b FROM "+schema+".t WHERE id = ?", i).Scan(&b); err != nil || string(b) != txt {
					t.Fatalf("row %d: %q, want %q (%v)", i, b, txt, err)
				}
			}
		})
	}
}

func TestAppendLiteral(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "NULL"}, {[]byte(nil), "NULL"}, {[]byte{}, "_binary''"}, {[]byte("it's"), "_binary'it''s'"}, {"a''b", "'a''''b'"},
		{int8(-128), "-128"}, {int16(-3), "-3"}, {int32(70000), "70000"}, {int64(-1 << 63), "-9223372036854775808"}, {7, "7"},
		{uint8(255), "255"}, {uint16(65535), "65535"}, {uint32(1 << 31), "2147483648"}, {uint64(1<<64 - 1), "18446744073709551615"},
		{float32(0.1), "0.10000000149011612"}, {0.1, "0.1"}, {1e300, "1e+300"},
	} {
		got, ok := appendLiteral(nil, c.v)
		if !ok || string(got) != c.want {
			t.Errorf("%T %v: %q %v, want %q", c.v, c.v, got, ok, c.want)
		}
	}
	for _, v := range []any{"a\\b", []byte("\\"), true, time.Now(), struct{}{}} {
		if _, ok := appendLiteral(nil, v); ok {
			t.Errorf("%T %v written in", v, v)
		}
	}
}

// TestFlushCountsKinds: a flush with a statement of binlog replace (Raw) among row changes commits;
// counting the flush's changes by kind for the metrics indexed an array of the three row kinds by Raw,
// the fourth, and panicked.
func TestFlushCountsKinds(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v INT)")
	sink := NewSink(db, "meta", "task", "s1")
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	target := vocab.TableName{Schema: "d", Name: "t"}
	cols := []string{"id", "v"}
	row := &ChangeOrigin{Target: target, Columns: cols}
	changes := []Change{
		{Kind: Insert, Row: []any{int32(1), int32(1)}, ChangeOrigin: row},
		{Kind: Insert, Row: []any{int32(2), int32(2)}, ChangeOrigin: row},
		{Kind: Raw, ChangeOrigin: &ChangeOrigin{Target: target, SQL: "INSERT INTO d.t VALUES (3, 3)"}},
		{Kind: Update, Row: []any{int32(2), int32(20)}, Old: []any{int32(2), int32(2)}, ChangeOrigin: row},
		{Kind: Delete, Old: []any{int32(1), int32(1)}, ChangeOrigin: row},
	}
	if err := sink.Flush(ctx, changes, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := db.QueryRow("SELECT SUM(id * 100 + v) FROM d.t").Scan(&sum); err != nil || sum != 220+303 {
		t.Fatalf("rows sum to %d (%v)", sum, err)
	}
}

// queriesDuring runs f and returns the queries the server received meanwhile, in order (its general
// log), failing the test if f fails.
func queriesDuring(t *testing.T, s *mariadbtest.Server, db *sql.DB, f func() error) []string {
	t.Helper()
	s.Exec(t, db, "SET GLOBAL log_output = 'TABLE'", "TRUNCATE mysql.general_log", "SET GLOBAL general_log = 1")
	err := f()
	s.Exec(t, db, "SET GLOBAL general_log = 0")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log WHERE command_type = 'Query' ORDER BY event_time")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var queries []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		queries = append(queries, q)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return queries
}
