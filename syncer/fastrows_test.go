package syncer

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestFastRowsDecodeAsGoMySQL: the syncer's decoding of rows events (the fast path of fastrows.go
// where it applies) gives every event of a binlog the rows go-mysql gives it, values and their types:
// inserts, updates and deletes of tables of every type the fast path reads (NULLs, extreme values,
// empty strings, 2-byte lengths, CHAR of more than 255 bytes, BINARY with zero bytes), multi-row
// events, and tables it leaves to go-mysql (other types, a MINIMAL row image).
func TestFastRowsDecodeAsGoMySQL(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	var file string
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, new(any), new(any), new(any)); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "CREATE DATABASE d",
		`CREATE TABLE d.fast (id INT PRIMARY KEY, t TINYINT, tu TINYINT UNSIGNED, sm SMALLINT, m MEDIUMINT, mu MEDIUMINT UNSIGNED,
			b BIGINT, bu BIGINT UNSIGNED, f FLOAT, g DOUBLE, v VARCHAR(32), vl VARCHAR(300), vb VARBINARY(20), c CHAR(10),
			cl CHAR(100) CHARACTER SET utf8mb4, bn BINARY(4), lat VARCHAR(10) CHARACTER SET latin1)`,
		"CREATE TABLE d.slow (id INT PRIMARY KEY, dt DATETIME(3), e ENUM('a','b'), dc DECIMAL(10,2), txt TEXT, j JSON)",
		"CREATE TABLE d.narrow (id BIGINT PRIMARY KEY)",
	)
	long := strings.Repeat("x", 290)
	s.Exec(t, db,
		"INSERT INTO d.fast VALUES (1, -128, 255, -32768, -8388608, 16777215, -9223372036854775808, 18446744073709551615, -1.5, 1e300, '', '"+long+"', x'00ff00', 'a', '🙂🙂', x'6100', x'e9')",
		"INSERT INTO d.fast VALUES (2, 127, 0, 32767, 8388607, 0, 9223372036854775807, 0, 3.25, -0.1, 'it''s', '', '', '', '', x'00000000', '')",
		"INSERT INTO d.fast (id) VALUES (3), (4), (5)",
		"INSERT INTO d.fast SELECT seq, seq % 100, seq % 256, seq, seq * 100, seq, seq * 1000000000, seq, seq / 3, seq / 7, CONCAT('value-', seq), REPEAT('y', seq % 300), UNHEX(HEX(seq)), 'c', REPEAT('é', seq % 100), UNHEX(HEX(seq % 10)), 'l' FROM d.seq_10_to_2000",
		"UPDATE d.fast SET v = CONCAT(v, '!'), m = NULL WHERE id < 1000",
		"DELETE FROM d.fast WHERE id % 3 = 0",
		"INSERT INTO d.slow VALUES (1, '2024-05-06 07:08:09.123', 'b', 12.5, 'text', '{\"a\": 1}'), (2, NULL, NULL, NULL, NULL, NULL)",
		"UPDATE d.slow SET e = 'a'",
		"INSERT INTO d.narrow SELECT seq FROM d.seq_1_to_5000",
		"SET SESSION binlog_row_image = MINIMAL",
		"UPDATE d.fast SET t = 1 WHERE id < 50",
		"DELETE FROM d.narrow WHERE id < 10",
		"FLUSH BINARY LOGS",
	)
	parse := func(fast bool) (events []*replication.RowsEvent, fastEvents int) {
		p := replication.NewBinlogParser()
		p.SetFlavor(mysql.MariaDBFlavor)
		p.SetTimestampStringLocation(time.UTC)
		if !fast { // go-mysql's own decoding, integers signed as the fast path and the row shape take them
			p.SetRowsEventDecodeFunc(func(e *replication.RowsEvent, data []byte) error {
				pos, err := e.DecodeHeader(data)
				if err == nil {
					err = e.DecodeData(pos, data)
				}
				resignRows(e)
				return err
			})
		}
		if fast {
			p.SetRowsEventDecodeFunc(func(e *replication.RowsEvent, data []byte) error {
				if _, err := e.DecodeHeader(data); err == nil && fastRowsKind(e) > 0 {
					fastEvents++
				}
				return decodeRows(e, data)
			})
		}
		err := p.ParseFile(filepath.Join(s.Dir, "binlog", file), 0, func(ev *replication.BinlogEvent) error {
			if e, ok := ev.Event.(*replication.RowsEvent); ok {
				events = append(events, e)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return events, fastEvents
	}
	want, _ := parse(false)
	got, fast := parse(true)
	if len(got) != len(want) {
		t.Fatalf("%d rows events, go-mysql reads %d", len(got), len(want))
	}
	rows := 0
	for i := range want {
		if !reflect.DeepEqual(got[i].Rows, want[i].Rows) || !reflect.DeepEqual(got[i].SkippedColumns, want[i].SkippedColumns) {
			t.Fatalf("event %d of %s.%s differs:\n got  %s\n want %s", i, want[i].Table.Schema, want[i].Table.Table, typed(got[i].Rows), typed(want[i].Rows))
		}
		rows += len(want[i].Rows)
	}
	if fast < 4 || fast == len(want) {
		t.Fatalf("%d of %d events on the fast path", fast, len(want))
	}
	t.Logf("%d events (%d on the fast path), %d row images: the same", len(want), fast, rows)
}

func typed(rows [][]any) string {
	var sb strings.Builder
	for i, r := range rows {
		if i == 3 {
			sb.WriteString("...")
			break
		}
		for _, v := range r {
			fmt.Fprintf(&sb, "%T(%v) ", v, v)
		}
		sb.WriteString("| ")
	}
	return sb.String()
}
