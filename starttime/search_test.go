package starttime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"2026-12-06 17:04:05", "2026-12-06T17:04:05", " 2026-12-06 17:04:05 "} {
		p, err := Parse(s)
		if err != nil || p.Zoned() || p.civil != "2026-12-06 17:04:05" {
			t.Errorf("Parse(%q) = %+v, %v", s, p, err)
		}
	}
	for s, want := range map[string]time.Time{
		"2026-12-06T17:04:05Z":      time.Date(2026, 12, 6, 17, 4, 5, 0, time.UTC),
		"2026-12-06 17:04:05+08:00": time.Date(2026, 12, 6, 9, 4, 5, 0, time.UTC),
		"2026-12-06T17:04:05-0130":  time.Date(2026, 12, 6, 18, 34, 5, 0, time.UTC),
	} {
		p, err := Parse(s)
		if err != nil || !p.Zoned() || !p.at.Equal(want) {
			t.Errorf("Parse(%q) = %+v, %v; want %v", s, p, err, want)
		}
		if u, err := p.Unix(t.Context(), nil); err != nil || u != want.Unix() {
			t.Errorf("Parse(%q).Unix = %d, %v", s, u, err)
		}
	}
	for _, s := range []string{"", "2026-12-06", "17:04:05", "2026/12/06 17:04:05", "2026-12-06 17:04:05.123", "2026-13-06 17:04:05", "yesterday"} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), "--start-time") || !strings.Contains(err.Error(), "YYYY-MM-DD HH:MM:SS") {
			t.Errorf("Parse(%q) = %v, want an error naming the flag and the format", s, err)
		}
	}
}

func TestSearchFiles(t *testing.T) {
	firsts := []uint32{100, 200, 200, 300, 400}
	probes := 0
	first := func(i int) (uint32, error) { probes++; return firsts[i], nil }
	for _, c := range []struct {
		ts     uint32
		idx    int
		before bool
	}{
		{50, 0, true},      // before the oldest file
		{99, 0, true},      //
		{100, 0, false},    // the oldest file began in that second
		{101, 0, false},    // inside the oldest file
		{200, 0, false},    // file 1 begins at 200: a group of 200 may end file 0
		{250, 2, false},    // the last file that begins before it
		{300, 2, false},    //
		{399, 3, false},    //
		{400, 3, false},    //
		{9999, 4, false},   // after the last file's start: scan it (AtEnd if nothing there)
		{401, 4, false},    //
		{201, 2, false},    // two files began in one second: the later one
		{150, 0, false},    //
		{1, 0, true},       //
		{100000, 4, false}, //
	} {
		probes = 0
		idx, before, err := searchFiles(len(firsts), first, c.ts)
		if err != nil || idx != c.idx || before != c.before {
			t.Errorf("searchFiles(ts %d) = %d, %v, %v; want %d, %v", c.ts, idx, before, err, c.idx, c.before)
		}
		if probes > 4 {
			t.Errorf("searchFiles(ts %d) read %d first timestamps of 5 files: not a binary search", c.ts, probes)
		}
	}
	if _, _, err := searchFiles(0, first, 10); err == nil {
		t.Error("no file: no error")
	}
	boom := errors.New("boom")
	if _, _, err := searchFiles(3, func(int) (uint32, error) { return 0, boom }, 10); !errors.Is(err, boom) {
		t.Errorf("error of a probe: %v", err)
	}
}

func gtid(d, s uint32, n uint64) *mysql.MariadbGTID {
	return &mysql.MariadbGTID{DomainID: d, ServerID: s, SequenceNumber: n}
}

// A MariaDB binlog: every group begins at a GTID event; the set before the group found is the list's
// plus the GTIDs before it.
func TestScannerMariaDB(t *testing.T) {
	file := []event{
		{Type: replication.FORMAT_DESCRIPTION_EVENT, Time: 90, Start: 4},
		{Type: replication.MARIADB_GTID_LIST_EVENT, Time: 90, Start: 256, GTIDList: []mysql.MariadbGTID{*gtid(0, 1, 7), *gtid(0, 2, 9), *gtid(1, 1, 3)}},
		{Type: replication.MARIADB_BINLOG_CHECKPOINT_EVENT, Time: 90, Start: 300},
		{Type: replication.MARIADB_GTID_EVENT, Time: 100, Start: 340, GTID: gtid(0, 1, 10)}, // BEGIN ... COMMIT at 100
		{Type: replication.QUERY_EVENT, Time: 100, Start: 380, Query: "BEGIN"},
		{Type: replication.TABLE_MAP_EVENT, Time: 100, Start: 420},
		{Type: replication.WRITE_ROWS_EVENTv1, Time: 101, Start: 480}, // a row written in the next second: same group
		{Type: replication.XID_EVENT, Time: 101, Start: 520},
		{Type: replication.MARIADB_GTID_EVENT, Time: 101, Start: 560, GTID: gtid(1, 1, 4)}, // a DDL at 101
		{Type: replication.QUERY_EVENT, Time: 101, Start: 600, Query: "ALTER TABLE t ADD c INT"},
		{Type: replication.MARIADB_GTID_EVENT, Time: 103, Start: 700, GTID: gtid(0, 1, 11)},
		{Type: replication.QUERY_EVENT, Time: 103, Start: 740, Query: "BEGIN"},
	}
	for _, c := range []struct {
		ts    uint32
		start uint32
		gtids string
	}{
		{50, 340, "0-2-9,1-1-3"},
		{100, 340, "0-2-9,1-1-3"},
		{101, 560, "0-1-10,1-1-3"},
		{102, 700, "0-1-10,1-1-4"},
		{103, 700, "0-1-10,1-1-4"},
		{104, 0, "0-1-11,1-1-4"},
	} {
		sc := newScanner(c.ts)
		var got uint32
		for _, ev := range file {
			if sc.step(ev) {
				got = ev.Start
				break
			}
		}
		if got != c.start || sc.gtids.String() != c.gtids {
			t.Errorf("ts %d: group at %d with GTIDs %q; want %d with %q", c.ts, got, sc.gtids, c.start, c.gtids)
		}
	}
}

// A binlog without GTID events: a group begins at BEGIN or at a statement outside a transaction, never
// inside one (a statement-format DML of a later second inside a transaction is not a start).
func TestScannerNoGTID(t *testing.T) {
	file := []event{
		{Type: replication.FORMAT_DESCRIPTION_EVENT, Time: 90, Start: 4},
		{Type: replication.QUERY_EVENT, Time: 100, Start: 120, Query: "BEGIN"},
		{Type: replication.QUERY_EVENT, Time: 102, Start: 160, Query: "INSERT INTO t VALUES (1)"},
		{Type: replication.XID_EVENT, Time: 102, Start: 200},
		{Type: replication.QUERY_EVENT, Time: 102, Start: 240, Query: "create table t2 (a int)"},
		{Type: replication.QUERY_EVENT, Time: 103, Start: 300, Query: "begin"},
		{Type: replication.QUERY_EVENT, Time: 103, Start: 340, Query: "INSERT INTO m VALUES (1)"},
		{Type: replication.QUERY_EVENT, Time: 103, Start: 380, Query: "COMMIT"},
		{Type: replication.QUERY_EVENT, Time: 104, Start: 420, Query: "DROP TABLE t2"},
	}
	for ts, want := range map[uint32]uint32{99: 120, 100: 120, 101: 240, 102: 240, 103: 300, 104: 420, 105: 0} {
		sc := newScanner(ts)
		var got uint32
		for _, ev := range file {
			if sc.step(ev) {
				got = ev.Start
				break
			}
		}
		if got != want {
			t.Errorf("ts %d: group at %d, want %d", ts, got, want)
		}
		if sc.gtids.String() != "" {
			t.Errorf("ts %d: GTIDs %q in a binlog without them", ts, sc.gtids)
		}
	}
}

func TestTooEarlyError(t *testing.T) {
	e := &TooEarlyError{Oldest: "mysql-bin.000003", First: 1700000000, Zone: "2023-11-14 23:13:20"}
	for _, want := range []string{"before the oldest binlog", "mysql-bin.000003", "2023-11-14 23:13:20 in the source's time zone", "2023-11-14T22:13:20Z"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%q lacks %q", e.Error(), want)
		}
	}
}
