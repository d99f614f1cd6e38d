package mysqlprimary

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"
)

var sid = uuid.MustParse("3e11fa47-71ca-11e1-9e33-c80aa9429562")

// encodeFile writes events as a binlog file and returns it with each event's end position.
func encodeFile(s Server, evs ...Event) []byte {
	out := append([]byte(nil), fileHeader...)
	for _, ev := range evs {
		end := uint32(len(out) + s.Size(ev))
		out = append(out, s.Encode(ev, 1700000000, end)...)
	}
	return out
}

// TestEventsReadBackWithGoMySQL is the encoder's check: go-mysql's parser, which Tributary reads
// binlogs with, decodes every event as it was built, with and without checksums.
func TestEventsReadBackWithGoMySQL(t *testing.T) {
	for _, s := range []Server{{Version: "8.0.36", ServerID: 7, Checksum: true}, {Version: "8.4.3", ServerID: 8}} {
		t.Run(s.Version, func(t *testing.T) {
			tbl := &Table{ID: 91, Schema: "db_1", Name: "t_1", PK: []int{0}, Columns: []Column{
				{Name: "id", Type: mysql.MYSQL_TYPE_LONGLONG},
				{Name: "v", Type: mysql.MYSQL_TYPE_VARCHAR, Meta: 1020, Nullable: true},
				{Name: "doc", Type: mysql.MYSQL_TYPE_JSON, Meta: 4, Nullable: true},
				{Name: "at", Type: mysql.MYSQL_TYPE_DATETIME2, Meta: 3, Nullable: true},
				{Name: "n", Type: mysql.MYSQL_TYPE_LONG, Unsigned: true, Nullable: true},
				{Name: "my_row_id", Type: mysql.MYSQL_TYPE_LONGLONG, Unsigned: true, Invisible: true},
			}}
			at := time.Date(2026, 12, 6, 18, 30, 59, 123000000, time.UTC)
			gtids, err := mysql.ParseMysqlGTIDSet(sid.String() + ":1-5")
			if err != nil {
				t.Fatal(err)
			}
			doc := map[string]any{"name": "ä", "tags": []any{1, "x", true, nil}, "big": int64(1) << 40, "f": 1.5}
			file := encodeFile(s,
				FormatDescription{},
				PreviousGTIDs{Set: gtids.(*mysql.MysqlGTIDSet)},
				GTID{SID: sid, GNO: 6, SequenceNumber: 1},
				Query{Schema: "db_1", SQL: "BEGIN"},
				TableMap{Table: tbl},
				Rows{Kind: replication.WRITE_ROWS_EVENTv2, Table: tbl, Last: true, Rows: [][]any{
					{int64(1), "a", doc, at, int64(4000000000), uint64(1)},
					{int64(2), nil, nil, nil, nil, uint64(2)},
				}},
				XID{XID: 42},
				GTID{SID: sid, GNO: 1, Tag: "blue", SequenceNumber: 2, CommitMicros: 1700000000000000},
				TransactionPayload{Events: []Event{
					Query{Schema: "db_1", SQL: "BEGIN"},
					TableMap{Table: tbl},
					Rows{Kind: replication.UPDATE_ROWS_EVENTv2, Table: tbl, Last: true, Rows: [][]any{
						{int64(2), nil, nil, nil, nil, uint64(2)}, {int64(2), "b", nil, nil, int64(7), uint64(2)},
					}},
					XID{XID: 43},
				}},
				Rotate{Next: "binlog.000002", Pos: 4},
			)
			p := replication.NewBinlogParser()
			p.SetVerifyChecksum(true)
			p.SetUseDecimal(false)
			var got []*replication.BinlogEvent
			err = p.ParseReader(bytes.NewReader(file[len(fileHeader):]), func(e *replication.BinlogEvent) error {
				got = append(got, e)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 10 {
				t.Fatalf("%d events read back, want 10", len(got))
			}
			if fde := got[0].Event.(*replication.FormatDescriptionEvent); fde.ServerVersion != s.Version {
				t.Errorf("format description: version %q", fde.ServerVersion)
			}
			if prev := got[1].Event.(*replication.PreviousGTIDsEvent); prev.GTIDSets != sid.String()+":1-5" {
				t.Errorf("previous GTIDs %q", prev.GTIDSets)
			}
			if g := got[2].Event.(*replication.GTIDEvent); g.GNO != 6 || !bytes.Equal(g.SID, sid[:]) || g.SequenceNumber != 1 {
				t.Errorf("GTID %+v", g)
			}
			if q := got[3].Event.(*replication.QueryEvent); string(q.Query) != "BEGIN" || string(q.Schema) != "db_1" {
				t.Errorf("query %q on %q", q.Query, q.Schema)
			}
			tm := got[4].Event.(*replication.TableMapEvent)
			if string(tm.Table) != "t_1" || tm.TableID != 91 || len(tm.ColumnName) != 6 || string(tm.ColumnName[5]) != "my_row_id" {
				t.Errorf("table map %s id %d names %q", tm.Table, tm.TableID, tm.ColumnName)
			}
			if vis := tm.VisibilityMap(); !vis[0] || vis[5] {
				t.Errorf("visibility %v", vis)
			}
			if u := tm.UnsignedMap(); !u[4] || u[0] {
				t.Errorf("signedness %v", u)
			}
			rows := got[5].Event.(*replication.RowsEvent)
			if len(rows.Rows) != 2 {
				t.Fatalf("%d rows", len(rows.Rows))
			}
			r0 := rows.Rows[0]
			if r0[0] != int64(1) || r0[1] != "a" || r0[4] != uint32(4000000000) && r0[4] != int32(-294967296) {
				t.Errorf("row 0 %#v", r0)
			}
			if js, _ := r0[2].(string); !strings.Contains(js, `"name":"ä"`) || !strings.Contains(js, `"tags":[1,"x",true,null]`) || !strings.Contains(js, `"big":1099511627776`) || !strings.Contains(js, `"f":1.5`) {
				t.Errorf("json %s", js)
			}
			if d, ok := r0[3].(string); !ok || d != "2026-12-06 18:30:59.123" {
				t.Errorf("datetime %#v", r0[3])
			}
			if r1 := rows.Rows[1]; r1[1] != nil || r1[2] != nil || r1[3] != nil || r1[4] != nil {
				t.Errorf("row 1 %#v", r1)
			}
			if x := got[6].Event.(*replication.XIDEvent); x.XID != 42 {
				t.Errorf("xid %d", x.XID)
			}
			tg := got[7].Event.(*replication.GtidTaggedLogEvent)
			if tg.GNO != 1 || tg.Tag.String() != "blue" || !bytes.Equal(tg.SID, sid[:]) || tg.ImmediateCommitTimestamp != 1700000000000000 {
				t.Errorf("tagged GTID %+v", tg)
			}
			pay := got[8].Event.(*replication.TransactionPayloadEvent)
			if len(pay.Events) != 4 {
				t.Fatalf("payload of %d events", len(pay.Events))
			}
			up := pay.Events[2].Event.(*replication.RowsEvent)
			if len(up.Rows) != 2 || up.Rows[1][1] != "b" {
				t.Errorf("update in payload %#v", up.Rows)
			}
			if r := got[9].Event.(*replication.RotateEvent); string(r.NextLogName) != "binlog.000002" || r.Position != 4 {
				t.Errorf("rotate %+v", r)
			}
			if got[9].Header.LogPos != uint32(len(file)) {
				t.Errorf("last event ends at %d, the file at %d", got[9].Header.LogPos, len(file))
			}
		})
	}
}

// TestPartialUpdateReadsBack: a PARTIAL_UPDATE_ROWS_EVENT (binlog_row_value_options=PARTIAL_JSON)
// with whole JSON values reads back as an update with both images.
func TestPartialUpdateReadsBack(t *testing.T) {
	s := Server{Version: "8.0.36", ServerID: 7, Checksum: true}
	tbl := &Table{ID: 5, Schema: "d", Name: "t", Columns: []Column{
		{Name: "id", Type: mysql.MYSQL_TYPE_LONG},
		{Name: "doc", Type: mysql.MYSQL_TYPE_JSON, Meta: 4, Nullable: true},
	}}
	file := encodeFile(s, FormatDescription{}, TableMap{Table: tbl}, Rows{Kind: replication.PARTIAL_UPDATE_ROWS_EVENT, Table: tbl, Last: true,
		Rows: [][]any{{1, map[string]any{"a": 1}}, {1, map[string]any{"a": 2}}}})
	p := replication.NewBinlogParser()
	var rows *replication.RowsEvent
	err := p.ParseReader(bytes.NewReader(file[len(fileHeader):]), func(e *replication.BinlogEvent) error {
		if r, ok := e.Event.(*replication.RowsEvent); ok {
			rows = r
		}
		return nil
	})
	if err != nil || rows == nil {
		t.Fatalf("parse: %v (rows %v)", err, rows)
	}
	if len(rows.Rows) != 2 || rows.Rows[1][1] != `{"a":2}` {
		t.Fatalf("rows %#v", rows.Rows)
	}
}
