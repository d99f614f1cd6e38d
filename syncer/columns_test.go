package syncer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestGeneratedAndUnsignedColumns: shard tables with virtual and stored generated columns and unsigned
// integers at their limits, present at the task's start, then a generated column added and one dropped
// through the shard lock, with updates and deletes. Generated columns are never written downstream
// (Error 1906 under strict sql_mode), unsigned values above the signed range arrive unchanged (Error
// 1264 before), and rows are matched by their non-generated key. With FULL row metadata and with
// MINIMAL, where names come from the tracked schema.
func TestGeneratedAndUnsignedColumns(t *testing.T) {
	for _, variant := range []struct {
		name string
		args []string
	}{
		{"FULL", []string{"--binlog-row-metadata=FULL"}},
		{"MINIMAL", []string{"--binlog-row-metadata=MINIMAL"}},
		{"latin1", append([]string{"--binlog-row-metadata=FULL"}, mariadbtest.Latin1...)},
		{"NO_LOG", []string{"--binlog-row-metadata=NO_LOG"}}, // MariaDB's default: no names, no signedness, no charsets
	} {
		t.Run(variant.name, func(t *testing.T) {
			c := newClusterTB(t, variant.args...)
			for i := range c.ups {
				for _, table := range c.shards[i] {
					c.up(i, "ALTER TABLE "+table+" ADD COLUMN g INT AS (id + 1) VIRTUAL, ADD COLUMN s BIGINT AS (id * 2) STORED, "+
						"ADD COLUMN u8 TINYINT UNSIGNED, ADD COLUMN u16 SMALLINT UNSIGNED, ADD COLUMN u24 MEDIUMINT UNSIGNED, "+
						"ADD COLUMN u32 INT UNSIGNED, ADD COLUMN u64 BIGINT UNSIGNED, ADD COLUMN i64 BIGINT, ADD COLUMN txt VARCHAR(20), ADD COLUMN bin VARBINARY(8), "+
						"ADD COLUMN dt DATETIME(6), ADD COLUMN dt0 DATETIME, ADD COLUMN d DATE")
				}
			}
			// A table without a key whose rows are matched by every column, a BINARY(4) among them: the
			// binlog strips its trailing zero bytes.
			c.up(0, "CREATE TABLE db_1.nopk (b BINARY(4), v INT UNSIGNED, s VARCHAR(10), gv BIGINT AS (v + 1) VIRTUAL, gs VARCHAR(12) AS (CONCAT(s, '!')) STORED)")
			c.startSyncer(0)
			c.startSyncer(1)
			// Rows equal under the case-insensitive collation ('a', 'A', 'a '): each change hits its own row.
			c.up(0, "INSERT INTO db_1.nopk (b, v, s) VALUES (x'61', 4294967295, 'x'), (x'61', 4294967295, 'x'), (x'6200', 2, 'x'), (x'61626364', 3, 'x')",
				"UPDATE db_1.nopk SET v = 5 WHERE b = x'61' LIMIT 1", "DELETE FROM db_1.nopk WHERE b = x'6200'", "UPDATE db_1.nopk SET b = x'00' WHERE v = 3",
				"INSERT INTO db_1.nopk (b, v, s) VALUES (NULL, 1, 'a'), (NULL, 1, 'A'), (NULL, 1, 'a ')",
				"UPDATE db_1.nopk SET v = 7 WHERE s = BINARY 'A'", "DELETE FROM db_1.nopk WHERE s = BINARY 'a '")
			c.same(0, "SELECT HEX(b), v, HEX(s), gv, HEX(gs) FROM db_1.nopk ORDER BY 1, 2, 3", "SELECT HEX(b), v, HEX(s), gv, HEX(gs) FROM db.nopk ORDER BY 1, 2, 3")
			const cols = "id, v, g, s, u8, u16, u24, u32, u64, i64, txt, HEX(bin), CAST(dt AS CHAR), CAST(dt0 AS CHAR), CAST(d AS CHAR)"
			for i := range c.ups {
				for j, table := range c.shards[i] {
					base := (i*2 + j) * 1000
					c.up(i,
						fmt.Sprintf("INSERT INTO %s (id, v, u8, u16, u24, u32, u64, i64) VALUES (%d, 'max', 255, 65535, 16777215, 4294967295, 18446744073709551615, 9223372036854775807)", table, base+1),
						fmt.Sprintf("INSERT INTO %s (id, v, u8, u16, u24, u32, u64, i64) VALUES (%d, 'mid', 128, 32768, 8388608, 2147483648, 9223372036854775808, -9223372036854775808)", table, base+2),
						fmt.Sprintf("INSERT INTO %s (id, v, u8, u16, u24, u32, u64, i64) VALUES (%d, 'zero', 0, 0, 0, 0, 0, 0), (%d, 'null', NULL, NULL, NULL, NULL, NULL, NULL)", table, base+3, base+4),
						fmt.Sprintf("UPDATE %s SET u64 = 18446744073709551614, v = 'upd' WHERE id = %d", table, base+2),
						// Non-ASCII text in the server's charset (latin1 bytes on a latin1 server) and binary with zero bytes.
						fmt.Sprintf("UPDATE %s SET txt = 'café ñ', bin = X'00FF0080' WHERE id = %d", table, base+1),
						// Dates with a zero month or day, which the server's default sql_mode accepts.
						fmt.Sprintf("UPDATE %s SET dt = '2024-05-00 10:11:12.123456', dt0 = '2024-00-00 01:02:03', d = '2024-05-00' WHERE id = %d", table, base+1),
						fmt.Sprintf("UPDATE %s SET dt = '1999-12-31 23:59:59.5', dt0 = '0000-00-00 00:00:00', d = '0000-00-00' WHERE id = %d", table, base+2),
						fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, base+3),
					)
				}
			}
			c.converge(cols)

			// A generated column added by a sharding DDL, then a generated column dropped.
			for i := range c.ups {
				for j, table := range c.shards[i] {
					base := (i*2+j)*1000 + 100
					c.up(i, "ALTER TABLE "+table+" ADD COLUMN c INT AS (id + 1) PERSISTENT",
						fmt.Sprintf("INSERT INTO %s (id, v, u16) VALUES (%d, 'after add', 65535)", table, base),
						fmt.Sprintf("UPDATE %s SET u8 = 254 WHERE id = %d", table, base-99))
				}
			}
			c.converge(cols + ", c")
			for i := range c.ups {
				for j, table := range c.shards[i] {
					base := (i*2+j)*1000 + 200
					c.up(i, "ALTER TABLE "+table+" DROP COLUMN g",
						fmt.Sprintf("INSERT INTO %s (id, v, u32) VALUES (%d, 'after drop', 4294967295)", table, base),
						fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, base-199))
				}
			}
			c.converge("id, v, s, c, u8, u16, u24, u32, u64, i64, txt, HEX(bin), CAST(dt AS CHAR), CAST(dt0 AS CHAR), CAST(d AS CHAR)")
		})
	}
}

// TestSpatialAndUnparsableDefinitions: a table the TiDB parser cannot read (spatial columns and index,
// an INVISIBLE column, an expression default) is created downstream from the server's own definition,
// and its rows, geometry values included, replicate exactly.
func TestSpatialAndUnparsableDefinitions(t *testing.T) {
	c := newCluster(t)
	c.up(0, "CREATE TABLE db_1.geo (id INT PRIMARY KEY, g GEOMETRY NOT NULL, p POINT NULL, d INT DEFAULT (1 + 2), h INT INVISIBLE, SPATIAL KEY sg (g))")
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, "INSERT INTO db_1.geo (id, g, p, h) VALUES (1, ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'), ST_GeomFromText('POINT(1.5 -2.25)'), 7)",
		"INSERT INTO db_1.geo (id, g, p) VALUES (2, ST_GeomFromText('LINESTRING(0 0,1 1,2 1)'), NULL), (3, ST_GeomFromText('POINT(0 0)'), NULL)",
		"UPDATE db_1.geo SET p = ST_GeomFromText('POINT(3 4)'), h = 8 WHERE id = 2",
		"DELETE FROM db_1.geo WHERE id = 3")
	const q = "SELECT id, ST_AsText(g), HEX(p), d, h FROM %s ORDER BY id"
	c.same(0, fmt.Sprintf(q, "db_1.geo"), fmt.Sprintf(q, "db.geo"))
	var name, def string
	if err := c.downDB.QueryRow("SHOW CREATE TABLE db.geo").Scan(&name, &def); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SPATIAL KEY `sg`", "INVISIBLE", "DEFAULT (1 + 2)"} {
		if !strings.Contains(def, want) {
			t.Fatalf("downstream definition lacks %q:\n%s", want, def)
		}
	}
}
