package sink

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

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
	if err := ex.ExecDDL(ctx, stmts("CREATE TABLE d.a (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02')"), shanghai, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if got := own(); got != base {
		t.Fatalf("after a DDL alone the session is %q, was %q", got, base)
	}
	if d := def("d.a"); !strings.Contains(d, "'2020-02-01 18:02:02'") {
		t.Fatalf("the default was not read in +08:00 (shown in UTC):\n%s", d)
	}
	if err := ex.ExecDDLOnce(ctx, "L", stmts("ALTER TABLE d.a ADD COLUMN u TIMESTAMP NOT NULL DEFAULT '2021-01-01 08:00:00'"), shanghai, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if got := own(); got != base || !strings.Contains(def("d.a"), "'2021-01-01 00:00:00'") {
		t.Fatalf("behind a marker: session %q (was %q), table\n%s", got, base, def("d.a"))
	}
	if err := ex.ExecDDLOnce(ctx, "L", stmts("ALTER TABLE d.missing ADD COLUMN c INT"), shanghai, meta.CheckpointUpdate{}); err == nil {
		t.Fatal("a DDL of a missing table succeeded")
	}
	if got := own(); got != base {
		t.Fatalf("after a failed DDL the session is %q, was %q", got, base)
	}

	// Refused by the downstream: the zone (no time zone tables) and MySQL's TIME_TRUNCATE_FRACTIONAL
	// are left out; NO_ZERO_DATE (bit 24) is carried, so a zero default is refused as upstream would.
	mars := settingsOf(t, "Mars/Olympus", 1<<32|1<<24|1<<21, "mysql")
	if err := ex.ExecDDL(ctx, stmts("CREATE TABLE d.b (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT '2020-02-02 02:02:02')"), mars, meta.CheckpointUpdate{}); err != nil {
		t.Fatal(err)
	}
	if d := def("d.b"); !strings.Contains(d, "'2020-02-02 02:02:02'") {
		t.Fatalf("the refused zone was not left at the sink's (UTC):\n%s", d)
	}
	if err := ex.ExecDDL(ctx, stmts("CREATE TABLE d.z (id INT PRIMARY KEY, d DATE NOT NULL DEFAULT '0000-00-00')"), mars, meta.CheckpointUpdate{}); err == nil {
		t.Fatal("a zero date default passed under the carried NO_ZERO_DATE")
	}
	if got := own(); got != base {
		t.Fatalf("after refused settings the session is %q, was %q", got, base)
	}
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
