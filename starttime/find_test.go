package starttime

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// unixNow is the server's clock.
func unixNow(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var now int64
	if err := db.QueryRow("SELECT UNIX_TIMESTAMP()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// TestFindMariaDB: against a real server, the time between two batches (a second apart by the
// server's clock) gives the position and GTID set right after the first batch, whatever the session
// time zone the time is read in; a time in the future gives the current position; a time before the
// oldest binlog is refused, naming it, also after a purge.
func TestFindMariaDB(t *testing.T) {
	s := mariadbtest.Start(t)
	root := s.DB(t)
	s.Exec(t, root, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(10))")
	for i := 1; i <= 3; i++ {
		s.Exec(t, root, fmt.Sprintf("INSERT INTO d.t VALUES (%d, 'one')", i))
	}
	s.Exec(t, root, "FLUSH BINARY LOGS", "INSERT INTO d.t VALUES (4, 'one')", "ALTER TABLE d.t ADD COLUMN c INT")
	after1, gtid1, err := dbutil.SourcePosition(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	last := unixNow(t, root)
	var at int64
	wait.Eventually(t, 5*time.Second, func() bool { at = unixNow(t, root); return at > last },
		func() string { return "the server's clock did not tick" })
	s.Exec(t, root, "INSERT INTO d.t (id, v) VALUES (5, 'two')", "INSERT INTO d.t (id, v) VALUES (6, 'two')", "FLUSH BINARY LOGS", "INSERT INTO d.t (id, v) VALUES (7, 'two')")

	// The time as text in a session zone of +05:00, read back in that zone.
	zoned, err := dbutil.OpenDB(config.Database{Host: "127.0.0.1", Port: s.Port, User: "root", Session: map[string]any{"time_zone": "+05:00"}})
	if err != nil {
		t.Fatal(err)
	}
	defer zoned.Close()
	var civil string
	if err := zoned.QueryRow("SELECT DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%d %H:%i:%s')", at).Scan(&civil); err != nil {
		t.Fatal(err)
	}
	if utc := time.Unix(at, 0).UTC().Format(time.DateTime); civil == utc {
		t.Fatalf("the +05:00 session shows %s as UTC does", civil)
	}
	st, err := Parse(civil)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := st.Unix(t.Context(), zoned)
	if err != nil || ts != at {
		t.Fatalf("%s in +05:00 = %d, %v; want %d", civil, ts, err, at)
	}

	src := Source{Host: "127.0.0.1", Port: uint16(s.Port), User: "root", Flavor: mysql.MariaDBFlavor, ServerID: 0x30000001, GTID: true}
	p, err := Find(t.Context(), zoned, src, ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.AtEnd || p.Pos != after1 || p.GTID != gtid1 || int64(p.Event) < at {
		t.Fatalf("Find(%d) = %+v; want %s, GTID %s (after the first batch)", at, p, after1, gtid1)
	}
	var logName, evType string
	var pos, serverID, endPos any
	var info string
	if err := root.QueryRow(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", p.Pos.File, p.Pos.Pos)).Scan(&logName, &pos, &evType, &serverID, &endPos, &info); err != nil {
		t.Fatal(err)
	}
	if evType != "Gtid" {
		t.Fatalf("the event at %s is a %s (%s), not a group's GTID event", p.Pos, evType, info)
	}

	// Without GTID: the position only.
	src.GTID = false
	if p2, err := Find(t.Context(), zoned, src, ts, nil); err != nil || p2.Pos != after1 || p2.GTID != "" {
		t.Fatalf("Find without GTID = %+v, %v", p2, err)
	}

	// A time after the last event: the current position.
	src.GTID = true
	now, nowGTID, err := dbutil.SourcePosition(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Find(t.Context(), root, src, unixNow(t, root)+3600, nil); err != nil || !p.AtEnd || p.Pos != now || p.GTID != nowGTID {
		t.Fatalf("Find(in an hour) = %+v, %v; want the end %s %s", p, err, now, nowGTID)
	}

	// Before the oldest binlog, then before the oldest left after a purge.
	_, err = Find(t.Context(), root, src, 1000, nil)
	var early *TooEarlyError
	if !errors.As(err, &early) || early.Oldest != "mysql-bin.000001" || early.First == 0 || early.Zone == "" {
		t.Fatalf("Find(1970) = %v; want a TooEarlyError naming mysql-bin.000001", err)
	}
	s.Exec(t, root, "PURGE BINARY LOGS TO 'mysql-bin.000002'")
	_, err = Find(t.Context(), root, src, 1000, nil)
	if !errors.As(err, &early) || early.Oldest != "mysql-bin.000002" {
		t.Fatalf("Find(1970) after the purge = %v; want a TooEarlyError naming mysql-bin.000002", err)
	}
	// The time is still found in what is left.
	if p, err := Find(t.Context(), root, src, ts, nil); err != nil || p.Pos != after1 || p.GTID != gtid1 {
		t.Fatalf("Find after the purge = %+v, %v", p, err)
	}
}
