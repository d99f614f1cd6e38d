package syncer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// TestCursorGroupsAndResumePoints: the reader stage alone, for each flavor's GTID sets. A group's
// GTID joins the set only when the group ends; the resume point at the last complete group carries
// the set there, one at a DDL the set recorded there, and without GTID mode none. MariaDB's set keeps
// the newest GTID per domain; MySQL's every transaction, tagged ones too.
func TestCursorGroupsAndResumePoints(t *testing.T) {
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	for _, tc := range []struct {
		flavor, start string
		gtids         []string
		want          string
	}{
		{"mariadb", "", []string{"0-1-7"}, "0-1-7"},
		{"mariadb", "0-1-5,1-2-9", []string{"0-1-7"}, "0-1-7,1-2-9"},
		{"mysql", "", []string{u + ":7"}, u + ":7"},
		{"mysql", u + ":1-5", []string{u + ":6"}, u + ":1-6"},
		{"mysql", u + ":1-5", []string{u + ":blue:1"}, u + ":1-5:blue:1"},
	} {
		t.Run(tc.flavor+"/"+tc.start, func(t *testing.T) {
			at := func(p uint32) vocab.Position { return vocab.Position{File: "bin.000001", Pos: p} }
			set, err := newGTIDSet(tc.flavor, tc.start)
			if err != nil {
				t.Fatal(err)
			}
			c := cursor{gtidMode: true, flavor: tc.flavor, gtids: set, gtidAt: map[vocab.Position]string{}}
			for _, g := range tc.gtids {
				c.curGTID = g
				if got := c.gtidFor(c.lastPos); got != tc.start {
					t.Fatalf("before the group ends: %q, want %q", got, tc.start)
				}
			}
			c.endGroup(at(400))
			if c.curGTID != "" || c.lastPos != at(400) {
				t.Fatalf("after endGroup: current %v, last %v", c.curGTID, c.lastPos)
			}
			if got := c.gtidFor(at(400)); got != tc.want {
				t.Fatalf("resume point at the last group: %q, want %s", got, tc.want)
			}
			c.gtidAt[at(200)] = tc.start
			if got := c.gtidFor(at(200)); got != tc.start {
				t.Fatalf("resume point at a DDL: %q, want the set recorded there", got)
			}
			from, err := c.rewind(at(200))
			if err != nil || from.gtid != tc.start || c.gtids.String() != tc.start {
				t.Fatalf("rewind to the DDL: %+v %v, set %s", from, err, c.gtids)
			}
			if got := c.gtidFor(at(300)); got != "" {
				t.Fatalf("a position with nothing recorded: %q", got)
			}
			c.gtidMode = false
			if got := c.gtidFor(at(200)); got != "" {
				t.Fatalf("file/pos mode: %q, want no GTID set", got)
			}
		})
	}
}

// TestApplierClaimsAndHotTables: the applier stage alone, without a downstream. A table whose rows are
// all on one connection gets its table position there (the later of its own and its lane's); one on
// several gets a lane position on each and comes back as spread with its last position. A full batch
// makes a table hot when it holds more than twice a connection's share; a small one changes nothing.
func TestApplierClaimsAndHotTables(t *testing.T) {
	at := func(p uint32) vocab.Position { return vocab.Position{File: "bin.000001", Pos: p} }
	one, spread := vocab.TableName{Schema: "d", Name: "one"}, vocab.TableName{Schema: "d", Name: "spread"}
	a := applier{txnRows: 100}
	for i := 0; i < 4; i++ {
		a.parts = append(a.parts, &partition{idx: i})
	}
	a.resetBatch()
	if a.partitionOf(one) != a.partitionOf(one) {
		t.Fatal("a table's connection is not stable")
	}
	a.parts[0].pos[one] = at(100)
	a.parts[0].lanes[one] = laneClaim{pos: at(150)}
	a.parts[1].lanes[spread] = laneClaim{pos: at(300), cols: []string{"id"}, chunk: 1024}
	a.parts[2].lanes[spread] = laneClaim{pos: at(250), cols: []string{"id"}, chunk: 1024}
	a.parts[2].pos[spread] = at(200)
	tables, lanes, spreads := a.claims(a.parts[:3])
	if tables[0][one] != at(150) || len(lanes[0]) != 0 {
		t.Fatalf("one connection: table %v lanes %v, want the lane's later position 150 and no lanes", tables[0], lanes[0])
	}
	if want := []meta.Lane{{N: 4, Index: 1, Chunk: 1024, Cols: []string{"id"}, Pos: at(300)}}; len(lanes[1][spread]) != 1 || lanes[1][spread][0].Pos != want[0].Pos || lanes[1][spread][0].Index != 1 || lanes[1][spread][0].N != 4 {
		t.Fatalf("spread table's lane on connection 1: %+v, want %+v", lanes[1][spread], want)
	}
	if tables[2][spread] != at(200) || len(lanes[2][spread]) != 1 {
		t.Fatalf("spread table on connection 2: table %v lanes %v", tables[2], lanes[2])
	}
	if spreads[spread] != at(300) || len(spreads) != 1 {
		t.Fatalf("spread: %v, want %s at 300 only", spreads, spread)
	}
	a.tableRows[one], a.tableRows[spread] = 10, 90
	a.chooseHot(20) // under half of txnRows: says little
	if len(a.hot) != 0 || len(a.tableRows) != 0 {
		t.Fatalf("a small batch chose %v (rows %v)", a.hot, a.tableRows)
	}
	a.tableRows[one], a.tableRows[spread] = 40, 60 // 60 rows of 100 on 4 connections: over twice a share
	a.chooseHot(100)
	if !a.hot[spread] || a.hot[one] {
		t.Fatalf("hot after a full batch: %v, want %s only", a.hot, spread)
	}
	a.rows = 100
	if !a.batchFull() {
		t.Fatal("a batch of txnRows rows is not full")
	}
}

// TestApplierFlushPipeline: the applier stage with its sinks and a real downstream, without a reader or
// a DDL path. One busy connection commits the resume position it is given in its own transaction;
// several commit their rows and table positions, and the resume position they carry is the previous
// flush's (which committed whole), so the persisted one trails by one flush while the committed one
// is the newest. A flush with no batch commits a moved resume position at once.
func TestApplierFlushPipeline(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(8))")
	at := func(p uint32) vocab.Position { return vocab.Position{File: "bin.000001", Pos: p} }
	ckpt := meta.Checkpoint{Tables: map[vocab.TableName]vocab.Position{}}
	a := applier{txnRows: 100, ckpt: &ckpt, task: "task", source: "s1", log: zap.NewNop()}
	for i := 0; i < 2; i++ {
		sk := sink.NewSink(db, "meta", "task", "s1")
		if err := sk.Init(ctx); err != nil {
			t.Fatal(err)
		}
		a.parts = append(a.parts, &partition{idx: i, sink: sk})
	}
	a.resetBatch()
	target := vocab.TableName{Schema: "d", Name: "t"}
	add := func(p *partition, src vocab.TableName, id int64, end vocab.Position) {
		p.batch = append(p.batch, sink.Change{Kind: sink.Insert, Row: []any{id, "v"}, ChangeOrigin: &sink.ChangeOrigin{Source: src, Target: target, Columns: []string{"id", "v"}, Pos: end}})
		p.pos[src] = end
		a.rows++
	}
	t1, t2 := vocab.TableName{Schema: "u", Name: "t_1"}, vocab.TableName{Schema: "u", Name: "t_2"}
	flush := func(global vocab.Position) {
		t.Helper()
		if committed, err := a.start(ctx, flushExtras{global: global}); err != nil || committed {
			t.Fatalf("start: committed %v, %v", committed, err)
		}
		if committed, err := a.wait(ctx); err != nil || !committed {
			t.Fatalf("wait: committed %v, %v", committed, err)
		}
	}
	add(a.parts[0], t1, 1, at(100))
	flush(at(120))
	if a.persisted != at(120) || a.committed != at(120) || ckpt.Tables[t1] != at(100) || ckpt.Global != at(120) {
		t.Fatalf("one connection: persisted %v committed %v tables %v global %v", a.persisted, a.committed, ckpt.Tables, ckpt.Global)
	}
	add(a.parts[0], t1, 2, at(200))
	add(a.parts[1], t2, 3, at(210))
	flush(at(220))
	if a.persisted != at(120) || a.committed != at(220) || ckpt.Tables[t2] != at(210) {
		t.Fatalf("two connections: persisted %v (want the previous flush's 120), committed %v, tables %v", a.persisted, a.committed, ckpt.Tables)
	}
	add(a.parts[0], t1, 4, at(300))
	add(a.parts[1], t2, 5, at(310))
	flush(at(320))
	if a.persisted != at(220) || a.committed != at(320) {
		t.Fatalf("next two: persisted %v, want 220; committed %v", a.persisted, a.committed)
	}
	if committed, err := a.start(ctx, flushExtras{global: at(320)}); err != nil || !committed || a.flushing != nil || a.persisted != at(320) {
		t.Fatalf("no batch, a moved position: committed %v flushing %v persisted %v, %v", committed, a.flushing, a.persisted, err)
	}
	if committed, err := a.start(ctx, flushExtras{global: at(320)}); err != nil || committed {
		t.Fatalf("nothing to write: committed %v, %v", committed, err)
	}
	saved, err := a.parts[0].sink.Load(ctx)
	if err != nil || saved.Global != at(320) || saved.Tables[t1] != at(300) || saved.Tables[t2] != at(310) {
		t.Fatalf("checkpoint downstream: global %v tables %v, %v", saved.Global, saved.Tables, err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM d.t").Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows downstream: %d, %v", n, err)
	}
}

// TestRowDecoder: the rows stage alone, from a table map and rows as go-mysql decodes them. Without
// column names in the binlog the tracked schema names the columns and says which is generated (not
// written); a tracked schema that does not fit the event is an error that names the way out. Inserts,
// updates and deletes become changes with their images, rows applied before are left out, the shape
// is kept while the table map is the same, and an event of another kind is no rows event.
func TestRowDecoder(t *testing.T) {
	src := vocab.TableName{Schema: "db_1", Name: "t_1"}
	at := func(p uint32) vocab.Position { return vocab.Position{File: "bin.000001", Pos: p} }
	d := rowDecoder{source: "s1", mariadb: true, schemas: newSchemaTracker(), shapes: map[vocab.TableName]cachedShape{}}
	tm := &replication.TableMapEvent{ColumnCount: 3, ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_LONG}, ColumnMeta: []uint16{0, 32, 0}}
	if _, err := d.shapeOf(src, tm, at(100)); err == nil || !strings.Contains(err.Error(), "binlog_row_metadata=FULL") || !sink.IsPermanent(err) {
		t.Fatalf("no names and no tracked schema: %v", err)
	}
	d.schemas.set(src, at(4), []vocab.Column{{Name: "id"}, {Name: "v"}, {Name: "g", Generated: true}})
	shape, err := d.shapeOf(src, tm, at(100))
	if err != nil || !slices.Equal(shape.cols, []string{"id", "v"}) {
		t.Fatalf("shape: %v, %v; want id and v (g is generated)", shape, err)
	}
	if again, _ := d.shapeOf(src, tm, at(200)); again != shape {
		t.Fatal("the shape of the same table map was not kept")
	}
	origin := &sink.ChangeOrigin{Source: src, Columns: shape.cols, Pos: at(100)}
	row := func(id int32, v string) []any { return []any{id, []byte(v), id * 2} }
	ins := &replication.RowsEvent{Table: tm, Rows: [][]any{row(1, "a"), row(2, "b"), row(3, "c")}}
	skip2 := func(c *sink.Change) bool { return c.Row[0] == int32(2) }
	changes, ok := d.decode(nil, replication.WRITE_ROWS_EVENTv2, ins, shape, origin, at(150), skip2)
	if !ok || len(changes) != 2 || changes[0].Kind != sink.Insert || len(changes[0].Row) != 2 || string(changes[1].Row[1].([]byte)) != "c" {
		t.Fatalf("inserts: %v %+v", ok, changes)
	}
	upd := &replication.RowsEvent{Table: tm, Rows: [][]any{row(1, "a"), row(1, "z")}}
	changes, ok = d.decode(changes[:0], replication.UPDATE_ROWS_EVENTv1, upd, shape, origin, at(160), nil)
	if !ok || len(changes) != 1 || changes[0].Kind != sink.Update || string(changes[0].Old[1].([]byte)) != "a" || string(changes[0].Row[1].([]byte)) != "z" {
		t.Fatalf("update: %v %+v", ok, changes)
	}
	changes, ok = d.decode(changes[:0], replication.DELETE_ROWS_EVENTv2, ins, shape, origin, at(170), nil)
	if !ok || len(changes) != 3 || changes[2].Kind != sink.Delete || changes[2].Row != nil || len(changes[2].Old) != 2 {
		t.Fatalf("deletes: %v %+v", ok, changes)
	}
	if _, ok := d.decode(nil, replication.TABLE_MAP_EVENT, ins, shape, origin, at(180), nil); ok {
		t.Fatal("a table map event decoded as rows")
	}
}
