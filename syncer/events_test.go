package syncer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

func (c *cluster) downColumnsOf(schema, table string) int {
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, table).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// xaConn runs statements on one upstream connection (XA START ... XA PREPARE must share one).
func (c *cluster) xaConn(i int) (run func(stmts ...string), closeConn func()) {
	c.t.Helper()
	conn, err := c.upDBs[i].Conn(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	run = func(stmts ...string) {
		c.t.Helper()
		for _, q := range stmts {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				c.t.Fatalf("%s: %v", q, err)
			}
		}
	}
	return run, func() { disconnect(conn) }
}

// XA transactions arrive as upstream decided them: committed ones once, at their commit, rolled-back
// ones never; also across a restart of the syncer between PREPARE and COMMIT, and committed from
// another session. Savepoints: rows rolled back to one never arrive, also when MariaDB writes them
// (a non-transactional table took part).
func TestXAAndSavepoints(t *testing.T) {
	c := newCluster(t)
	stop, s1 := c.startSyncerGet(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11))
	c.up(1, insert("db_2.t_1", 2001, 2011))
	c.converge("id, v")

	// Committed in two phases, rolled back after prepare, committed in one phase.
	x, closeX := c.xaConn(0)
	x("XA START 'x1'", "INSERT INTO db_1.t_1 VALUES (100, 'xa-commit')", "UPDATE db_1.t_1 SET v = 'xa-upd' WHERE id = 1", "XA END 'x1'", "XA PREPARE 'x1'")
	x2, closeX2 := c.xaConn(0) // a session holds one prepared XA transaction at a time
	x2("XA START 'x2'", "INSERT INTO db_1.t_2 VALUES (101, 'xa-rollback')", "DELETE FROM db_1.t_1 WHERE id = 2", "XA END 'x2'", "XA PREPARE 'x2'")
	c.up(0, insert("db_1.t_2", 200, 201)) // after the prepares: arrives while they wait
	c.waitRow(200)
	if c.hasRow(100) {
		t.Fatal("a prepared XA transaction's row reached the downstream before its XA COMMIT")
	}
	wait.Eventually(t, 10*time.Second, func() bool { return len(s1.Status().PreparedXA) == 2 }, func() string {
		return "query-status does not show the two prepared XA transactions"
	})
	if got := s1.Status().PreparedXA[0].XID; got != "X'7831',X'',1" {
		t.Fatalf("prepared XA shows xid %q, want X'7831',X'',1", got)
	}
	closeX() // a prepared XA transaction survives its session
	closeX2()

	// The syncer restarts while both wait: the checkpoint did not pass them, their rows are read again.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stop, s1 = c.startSyncerGet(0)
	y, closeY := c.xaConn(0)
	defer closeY()
	y("XA COMMIT 'x1'", "XA ROLLBACK 'x2'")
	y("XA START 'x3'", "INSERT INTO db_1.t_1 VALUES (102, 'one-phase')", "XA END 'x3'", "XA COMMIT 'x3' ONE PHASE")

	// Savepoints, InnoDB only: the rolled-back row is not in the binlog.
	y("BEGIN", "INSERT INTO db_1.t_1 VALUES (110, 'sp')", "SAVEPOINT a", "INSERT INTO db_1.t_1 VALUES (111, 'gone')",
		"ROLLBACK TO SAVEPOINT a", "INSERT INTO db_1.t_1 VALUES (112, 'kept')", "COMMIT")
	// With a MyISAM table in the transaction MariaDB writes the rolled-back row and a ROLLBACK TO.
	c.up(0, "CREATE TABLE db_1.m (id INT PRIMARY KEY) ENGINE=MyISAM")
	y("BEGIN", "INSERT INTO db_1.t_1 VALUES (120, 'before')", "SAVEPOINT s1", "INSERT INTO db_1.m VALUES (1)",
		"INSERT INTO db_1.t_1 VALUES (121, 'rolled-back')", "UPDATE db_1.t_1 SET v = 'rolled-back' WHERE id = 3",
		"ROLLBACK TO SAVEPOINT s1", "INSERT INTO db_1.t_1 VALUES (122, 'after')", "COMMIT")
	c.up(0, insert("db_1.t_2", 300, 301))
	c.waitRow(300)
	c.converge("id, v")
	if c.hasRow(101) || c.hasRow(111) || c.hasRow(121) {
		t.Fatal("rolled-back rows reached the downstream")
	}
	if n := len(s1.Status().PreparedXA); n != 0 {
		t.Fatalf("%d prepared XA transactions still shown after their outcomes", n)
	}
	_ = stop
}

// Statement-format DML on a table of the task stops the syncer naming the statement; on a table
// outside the task it is skipped.
func TestStatementFormatDMLStops(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.up(0, "CREATE DATABASE other", "CREATE TABLE other.x (id INT PRIMARY KEY)")
	conn, closeConn := c.xaConn(0)
	defer closeConn()
	conn("SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO other.x VALUES (1)")
	c.up(0, insert("db_1.t_1", 1, 2))
	c.waitRow(1) // the statement on other.x was skipped
	conn("INSERT INTO db_1.t_1 VALUES (5, 'stmt')")
	err := c.failure(0)
	var ee *EventError
	if !errors.As(err, &ee) || !sink.IsPermanent(err) {
		t.Fatalf("statement-format DML: %v, want a permanent EventError", err)
	}
	for _, want := range []string{"INSERT INTO db_1.t_1 VALUES (5, 'stmt')", "STATEMENT", "binlog skip test -b", "db_1.t_1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// A compressed transaction (MySQL 8's TRANSACTION_PAYLOAD_EVENT, built here: no MySQL server can be
// run) is handled event by event, written as one, with its DDL through the DDL path; an event type
// without a decision stops with its name.
func TestCompressedTransaction(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	s := NewSyncer(SyncerConfig{Task: c.task, Source: "s1", Host: "127.0.0.1", Port: uint16(c.ups[0].Port), User: "root", ServerID: 9100,
		Router: c.router, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true, MetaSchema: "dm_meta", BatchRows: 1, TxnRows: 1,
		Flavor: mysql.MySQLFlavor, Start: vocab.Position{File: "binlog.000001", Pos: 4}, Log: c.logger(),
		Agent: pessimist.NewAgent(c.cli, c.layout, c.task, "s1", nil)})
	if err := s.init(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.upstream.Close()
	at := func(ev replication.Event, typ replication.EventType, end uint32) *replication.BinlogEvent {
		return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: typ, LogPos: end, EventSize: 1}, Event: ev}
	}
	must := func(ev *replication.BinlogEvent) {
		t.Helper()
		if err := s.handle(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	must(at(&replication.RotateEvent{NextLogName: []byte("binlog.000002")}, replication.ROTATE_EVENT, 0))
	must(at(&replication.FormatDescriptionEvent{ServerVersion: "8.0.36"}, replication.FORMAT_DESCRIPTION_EVENT, 120))
	tm := &replication.TableMapEvent{Schema: []byte("db_1"), Table: []byte("t_1"), ColumnCount: 2,
		ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_VARCHAR}, ColumnMeta: []uint16{0, 128},
		ColumnName: [][]byte{[]byte("id"), []byte("v")}}
	rows := func(from int32) *replication.RowsEvent {
		r := &replication.RowsEvent{Table: tm}
		for i := from; i < from+3; i++ {
			r.Rows = append(r.Rows, []any{i, []byte("zstd")})
		}
		return r
	}
	const start, end = 1000, 1400 // the payload's; go-mysql stamps the inner events with them
	payload := func(inner ...*replication.BinlogEvent) *replication.BinlogEvent {
		p := at(&replication.TransactionPayloadEvent{Events: inner}, replication.TRANSACTION_PAYLOAD_EVENT, end)
		p.Header.EventSize = end - start
		return p
	}
	if _, err := c.downDB.Exec("CREATE DATABASE IF NOT EXISTS db"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.downDB.Exec("CREATE TABLE IF NOT EXISTS db.t (id INT PRIMARY KEY, v VARCHAR(32))"); err != nil {
		t.Fatal(err)
	}
	// A DDL inside a payload (MySQL compresses transactions only, but the events inside are decided
	// alike): a table of the merged schema, created downstream.
	ddl := payload(at(&replication.QueryEvent{Schema: []byte("db_1"), Query: []byte("CREATE TABLE k (id INT PRIMARY KEY)")}, replication.QUERY_EVENT, 900))
	ddl.Header.LogPos, ddl.Header.EventSize = 900, 100
	must(ddl)
	if n := c.downColumnsOf("db", "k"); n != 1 {
		t.Fatalf("the DDL inside a payload: db.k has %d columns downstream, want 1", n)
	}
	p := payload(
		at(&replication.QueryEvent{Query: []byte("BEGIN")}, replication.QUERY_EVENT, start),
		at(tm, replication.TABLE_MAP_EVENT, start),
		at(rows(1), replication.WRITE_ROWS_EVENTv2, start),
		at(rows(10), replication.WRITE_ROWS_EVENTv2, start),
		at(&replication.XIDEvent{}, replication.XID_EVENT, end),
	)
	must(p)
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE v = 'zstd'").Scan(&n); err != nil || n != 6 {
		t.Fatalf("rows of the compressed transaction downstream: %d (%v), want 6", n, err)
	}
	if got := s.cur.lastPos; got != (vocab.Position{File: "binlog.000002", Pos: end}) {
		t.Fatalf("resume point after the payload: %s, want its end", got)
	}
	if got := s.ckpt.Tables[vocab.TableName{Schema: "db_1", Name: "t_1"}]; got.Pos != end {
		t.Fatalf("table checkpoint after the payload: %s, want the payload's end", got)
	}
	// The same payload read again (a restart before the resume point moved) applies nothing twice.
	must(p)
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE v = 'zstd'").Scan(&n); err != nil || n != 6 {
		t.Fatalf("rows after the payload was read again: %d (%v), want 6", n, err)
	}

	err := s.handle(ctx, at(&replication.GenericEvent{}, replication.EventType(200), 1500), "")
	var ee *EventError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "type 200") || !strings.Contains(err.Error(), "binlog skip") {
		t.Fatalf("an unknown event type: %v, want a stop naming it", err)
	}
	err = s.handle(ctx, at(&replication.RowsEvent{Table: tm}, replication.PARTIAL_UPDATE_ROWS_EVENT, 1600), "")
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "PARTIAL_JSON") {
		t.Fatalf("a partial JSON update: %v, want a stop naming binlog_row_value_options", err)
	}
}
