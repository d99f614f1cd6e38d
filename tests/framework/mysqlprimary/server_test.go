package mysqlprimary

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/go-sql-driver/mysql"

	"github.com/google/uuid"
	"github.com/tributary-db/tributary/tests/framework/certtest"
)

func startPrimary(t *testing.T, opts Options) *Primary {
	t.Helper()
	p, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

var testTable = &Table{ID: 70, Schema: "db_1", Name: "t_1", PK: []int{0}, Columns: []Column{
	{Name: "id", Type: mysql.MYSQL_TYPE_LONG},
	{Name: "v", Type: mysql.MYSQL_TYPE_VARCHAR, Meta: 400, Nullable: true},
}}

func insert(p *Primary, tag string, ids ...int) string {
	var rows [][]any
	for _, id := range ids {
		rows = append(rows, []any{id, fmt.Sprint("v", id)})
	}
	return p.Commit(tag, TableMap{Table: testTable}, Rows{Kind: replication.WRITE_ROWS_EVENTv2, Table: testTable, Rows: rows, Last: true})
}

// TestQueriesAsMySQL8And84: what a source is asked, answered as each version answers; 8.4 has no
// SHOW MASTER STATUS; caching_sha2_password's full authentication goes over RSA key exchange.
func TestQueriesAsMySQL8And84(t *testing.T) {
	for _, v := range []string{"8.0.36", "8.4.3"} {
		t.Run(v, func(t *testing.T) {
			p := startPrimary(t, Options{Version: v, Password: "sEcret-1"})
			gtid := insert(p, "", 1, 2)
			db, err := sql.Open("mysql", fmt.Sprintf("root:sEcret-1@tcp(%s)/?allowPublicKeyRetrieval=true", p.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var file, doDB, ignoreDB, executed string
			var pos uint64
			if err := db.QueryRow("SHOW BINARY LOG STATUS").Scan(&file, &pos, &doDB, &ignoreDB, &executed); err != nil {
				t.Fatal(err)
			}
			if file != "binlog.000001" || executed != gtid || pos <= 4 {
				t.Errorf("status %s %d %q, want the GTID %s", file, pos, executed, gtid)
			}
			_, err = db.Exec("SHOW MASTER STATUS")
			if strings.HasPrefix(v, "8.4") != (err != nil) {
				t.Errorf("SHOW MASTER STATUS on %s: %v", v, err)
			}
			var uuid, mode, meta string
			if err := db.QueryRow("SELECT @@server_uuid, @@gtid_mode, @@binlog_row_metadata").Scan(&uuid, &mode, &meta); err != nil {
				t.Fatal(err)
			}
			if uuid != p.UUID().String() || mode != "ON" || meta != "MINIMAL" {
				t.Errorf("variables %s %s %s", uuid, mode, meta)
			}
			if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(new(string)); err == nil || !strings.Contains(err.Error(), "1193") {
				t.Errorf("MariaDB's variable on MySQL: %v, want error 1193", err)
			}
			bad, err := sql.Open("mysql", fmt.Sprintf("root:wrong@tcp(%s)/?allowPublicKeyRetrieval=true", p.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			if err := bad.Ping(); err == nil || !strings.Contains(err.Error(), "1045") {
				t.Errorf("a wrong password: %v, want error 1045", err)
			}
		})
	}
}

// read takes n events from a streamer, leaving out the ones a replica does not apply (the fake
// rotate, format descriptions, previous GTIDs).
func read(t *testing.T, s *replication.BinlogStreamer, n int) []*replication.BinlogEvent {
	t.Helper()
	var out []*replication.BinlogEvent
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ev, err := s.GetEvent(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		switch ev.Header.EventType {
		case replication.FORMAT_DESCRIPTION_EVENT, replication.PREVIOUS_GTIDS_EVENT, replication.HEARTBEAT_EVENT:
			continue
		case replication.ROTATE_EVENT:
			if ev.Header.Timestamp == 0 {
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func syncer(p *Primary, password string) *replication.BinlogSyncer {
	return replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 1001, Flavor: mysql.MySQLFlavor, Host: "127.0.0.1", Port: uint16(p.Port()),
		User: "root", Password: password, MaxReconnectAttempts: 10, Logger: quiet,
	})
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func gtidsOf(evs []*replication.BinlogEvent) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.Event.(type) {
		case *replication.GtidTaggedLogEvent:
			out = append(out, fmt.Sprintf("%s:%d", e.Tag, e.GNO))
		case *replication.GTIDEvent:
			out = append(out, fmt.Sprint(e.GNO))
		}
	}
	return out
}

// TestDumpByPositionFollowsRotations: go-mysql's syncer reads from a file and position, across a
// rotation, then what is written while it waits; a dropped connection resumes where it was.
func TestDumpByPositionFollowsRotations(t *testing.T) {
	p := startPrimary(t, Options{Password: "pw"})
	insert(p, "", 1)
	pos, _ := p.Status()
	insert(p, "", 2)
	p.Rotate()
	p.SetCompression(true)
	insert(p, "", 3)
	s := syncer(p, "pw")
	defer s.Close()
	st, err := s.StartSync(pos)
	if err != nil {
		t.Fatal(err)
	}
	// GTID 2: GTID, BEGIN, TABLE_MAP, WRITE_ROWS, XID; the rotate; GTID 3: GTID, PAYLOAD
	evs := read(t, st, 8)
	if got := gtidsOf(evs); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("GTIDs %v", got)
	}
	if pay, ok := evs[7].Event.(*replication.TransactionPayloadEvent); !ok || len(pay.Events) != 4 {
		t.Fatalf("event 8 is %T, want a payload of 4 events", evs[7].Event)
	}
	p.SetCompression(false)
	insert(p, "", 4)
	if got := gtidsOf(read(t, st, 5)); fmt.Sprint(got) != "[4]" {
		t.Fatalf("GTIDs while waiting: %v", got)
	}
	p.DropConnections()
	insert(p, "", 5)
	if got := gtidsOf(read(t, st, 5)); fmt.Sprint(got) != "[5]" {
		t.Fatalf("GTIDs after a dropped connection: %v", got)
	}
}

// TestDumpByGTIDSetLeavesOutWhatTheReplicaHas: a GTID dump starts at the right file and leaves out
// the transactions of the replica's set, tagged ones included; a set the primary purged is refused.
func TestDumpByGTIDSetLeavesOutWhatTheReplicaHas(t *testing.T) {
	p := startPrimary(t, Options{Version: "8.4.3"})
	insert(p, "", 1)
	insert(p, "", 2)
	p.Rotate()
	insert(p, "blue", 3)
	insert(p, "", 4)
	has, err := mysql.ParseMysqlGTIDSet(p.UUID().String() + ":1-2")
	if err != nil {
		t.Fatal(err)
	}
	s := syncer(p, "")
	defer s.Close()
	st, err := s.StartSyncGTID(has)
	if err != nil {
		t.Fatal(err)
	}
	if got := gtidsOf(read(t, st, 10)); fmt.Sprint(got) != "[blue:1 3]" {
		t.Fatalf("GTIDs %v, want blue:1 and 3", got)
	}
	p.Rotate()
	p.Purge("binlog.000003")
	s2 := syncer(p, "")
	defer s2.Close()
	st2, err := s2.StartSyncGTID(has)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		_, err := st2.GetEvent(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "purged required binary logs") {
				t.Fatalf("a purged set: %v", err)
			}
			return
		}
	}
}

// TestSwitchPrimaryKeepsTheGTIDHistory: after a switch, a replica with the GTID set it had goes on
// from the new primary's files: the transactions it has are not sent again, the new ones are.
func TestSwitchPrimaryKeepsTheGTIDHistory(t *testing.T) {
	p := startPrimary(t, Options{})
	old := p.UUID()
	insert(p, "", 1)
	insert(p, "", 2)
	has, err := mysql.ParseMysqlGTIDSet(p.Executed())
	if err != nil {
		t.Fatal(err)
	}
	next := uuid.New()
	p.SwitchPrimary(next, 9, "replica-bin")
	insert(p, "", 3)
	if pos, executed := p.Status(); pos.Name != "replica-bin.000001" || executed != strings.Join(sortedSets(old.String()+":1-2", next.String()+":1"), ",") {
		t.Fatalf("after the switch: %s, %s", pos.Name, executed)
	}
	s := syncer(p, "")
	defer s.Close()
	st, err := s.StartSyncGTID(has)
	if err != nil {
		t.Fatal(err)
	}
	evs := read(t, st, 5)
	g, ok := evs[0].Event.(*replication.GTIDEvent)
	if !ok || g.GNO != 1 || !bytes.Equal(g.SID, next[:]) {
		t.Fatalf("first event after the switch: %#v", evs[0].Event)
	}
}

// sortedSets orders GTID set parts as go-mysql's String does (by UUID).
func sortedSets(parts ...string) []string {
	sort.Strings(parts)
	return parts
}

// TestCachingSHA2OverTLS: with TLS, caching_sha2_password's full authentication goes over it, for a
// query connection and for a binlog dump.
func TestCachingSHA2OverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certtest.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(dir, "primary", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	p := startPrimary(t, Options{Version: "8.4.3", Password: "over-TLS", TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	insert(p, "", 1)
	db, err := sql.Open("mysql", fmt.Sprintf("root:over-TLS@tcp(%s)/?tls=skip-verify", p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version string
	if err := db.QueryRow("SELECT @@version").Scan(&version); err != nil || version != "8.4.3" {
		t.Fatalf("over TLS: %q, %v", version, err)
	}
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 1002, Flavor: mysql.MySQLFlavor, Host: "127.0.0.1", Port: uint16(p.Port()),
		User: "root", Password: "over-TLS", TLSConfig: &tls.Config{InsecureSkipVerify: true}, Logger: quiet,
	})
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := gtidsOf(read(t, st, 5)); fmt.Sprint(got) != "[1]" {
		t.Fatalf("GTIDs over TLS: %v", got)
	}
}
