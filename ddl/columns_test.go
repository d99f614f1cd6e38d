package ddl

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tributary-db/tributary/vocab"
)

func TestTrackColumns(t *testing.T) {
	known := map[vocab.TableName][]vocab.Column{{Schema: "db", Name: "t"}: {{Name: "id"}, {Name: "v"}}}
	lookup := func(tb vocab.TableName) ([]vocab.Column, bool) { c, ok := known[tb]; return c, ok }
	cases := []struct {
		sql  string
		want map[vocab.TableName][]string
	}{
		{"ALTER TABLE t ADD COLUMN c INT", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id", "v", "c"}}},
		{"ALTER TABLE t ADD COLUMN c INT FIRST, ADD d INT AFTER id", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"c", "id", "d", "v"}}},
		{"ALTER TABLE t ADD (a INT, b INT)", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id", "v", "a", "b"}}},
		{"ALTER TABLE t DROP COLUMN v", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id"}}},
		{"ALTER TABLE t CHANGE v w VARCHAR(3) FIRST", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"w", "id"}}},
		{"ALTER TABLE t MODIFY v INT AFTER id", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id", "v"}}},
		{"ALTER TABLE t RENAME COLUMN v TO w", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id", "w"}}},
		{"ALTER TABLE t ADD INDEX i (v)", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: {"id", "v"}}},
		{"ALTER TABLE t RENAME TO u", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: nil, {Schema: "db", Name: "u"}: {"id", "v"}}},
		{"CREATE TABLE x (a INT, b INT)", map[vocab.TableName][]string{{Schema: "db", Name: "x"}: {"a", "b"}}},
		{"CREATE TABLE x LIKE t", map[vocab.TableName][]string{{Schema: "db", Name: "x"}: {"id", "v"}}},
		{"RENAME TABLE t TO t_old, other.n TO t", map[vocab.TableName][]string{{Schema: "db", Name: "t_old"}: {"id", "v"}, {Schema: "other", Name: "n"}: nil, {Schema: "db", Name: "t"}: nil}},
		{"DROP TABLE t", map[vocab.TableName][]string{{Schema: "db", Name: "t"}: nil}},
		{"CREATE INDEX i ON t (v)", map[vocab.TableName][]string{}},
	}
	for _, c := range cases {
		got, err := TrackColumns(c.sql, "db", lookup)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		names := map[vocab.TableName][]string{}
		for tb, cols := range got {
			names[tb] = nil
			if cols != nil {
				names[tb] = vocab.ColumnNames(cols)
			}
		}
		if !reflect.DeepEqual(names, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.sql, names, c.want)
		}
		if !reflect.DeepEqual(known[vocab.TableName{Schema: "db", Name: "t"}], []vocab.Column{{Name: "id"}, {Name: "v"}}) {
			t.Fatalf("%s modified the looked-up columns", c.sql)
		}
	}
	if _, err := TrackColumns("ALTER TABLE nope ADD c INT", "db", lookup); err == nil {
		t.Error("ALTER of an unknown table must be an error")
	}
}

func FuzzTrackColumns(f *testing.F) {
	for _, s := range []string{
		"ALTER TABLE t ADD COLUMN c INT FIRST, DROP v, CHANGE id id2 INT AFTER c, MODIFY c INT, RENAME COLUMN c TO d",
		"ALTER TABLE t RENAME TO u", "CREATE TABLE x LIKE t", "RENAME TABLE t TO a, a TO b", "DROP TABLE t, u",
		"CREATE TABLE y (a INT, b INT)", "ALTER TABLE t ADD (a INT, b INT)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		lookup := func(tb vocab.TableName) ([]vocab.Column, bool) {
			return []vocab.Column{{Name: "id"}, {Name: "v"}}, tb.Name == "t"
		}
		_, _ = TrackColumns(sql, "db", lookup) // must return, never panic
	})
}

// Generated and unsigned columns are tracked through CREATE and ALTER: the rows of such a table are
// written without the generated columns, and with the unsigned integers widened.
func TestTrackColumnFlags(t *testing.T) {
	known := map[vocab.TableName][]vocab.Column{{Schema: "db", Name: "t"}: {{Name: "id", Unsigned: true}, {Name: "v"}, {Name: "g", Generated: true}}}
	lookup := func(tb vocab.TableName) ([]vocab.Column, bool) { c, ok := known[tb]; return c, ok }
	cases := []struct {
		sql  string
		want []vocab.Column
	}{
		{"CREATE TABLE t (a BIGINT UNSIGNED PRIMARY KEY, b INT AS (a+1) VIRTUAL, c INT GENERATED ALWAYS AS (a*2) STORED, d SMALLINT)",
			[]vocab.Column{{Name: "a", Unsigned: true, Type: "bigint(20) unsigned"}, {Name: "b", Generated: true, Type: "int(11)"}, {Name: "c", Generated: true, Type: "int(11)"}, {Name: "d", Type: "smallint(6)"}}},
		{"ALTER TABLE t ADD COLUMN c INT AS (id+1)", []vocab.Column{{Name: "id", Unsigned: true}, {Name: "v"}, {Name: "g", Generated: true}, {Name: "c", Generated: true, Type: "int(11)"}}},
		{"ALTER TABLE t ADD COLUMN c INT AS (id+1) PERSISTENT FIRST", []vocab.Column{{Name: "c", Generated: true, Type: "int(11)"}, {Name: "id", Unsigned: true}, {Name: "v"}, {Name: "g", Generated: true}}},
		{"ALTER TABLE t MODIFY g INT", []vocab.Column{{Name: "id", Unsigned: true}, {Name: "v"}, {Name: "g", Type: "int(11)"}}},
		{"ALTER TABLE t MODIFY id INT", []vocab.Column{{Name: "id", Type: "int(11)"}, {Name: "v"}, {Name: "g", Generated: true}}},
		{"ALTER TABLE t CHANGE v v TINYINT UNSIGNED", []vocab.Column{{Name: "id", Unsigned: true}, {Name: "v", Unsigned: true, Type: "tinyint(4) unsigned"}, {Name: "g", Generated: true}}},
		{"ALTER TABLE t DROP COLUMN g", []vocab.Column{{Name: "id", Unsigned: true}, {Name: "v"}}},
		{"ALTER TABLE t RENAME COLUMN g TO h", []vocab.Column{{Name: "id", Unsigned: true}, {Name: "v"}, {Name: "h", Generated: true}}},
		{"ALTER TABLE t ADD COLUMN b BINARY(4), ADD COLUMN c CHAR(3) CHARACTER SET binary, ADD COLUMN d CHAR(3), ADD COLUMN e VARBINARY(4)",
			[]vocab.Column{{Name: "id", Unsigned: true}, {Name: "v"}, {Name: "g", Generated: true}, {Name: "b", BinaryLen: 4, Type: "binary(4)"}, {Name: "c", BinaryLen: 3, Type: "binary(3)"}, {Name: "d", Type: "char(3)"}, {Name: "e", Type: "varbinary(4)"}}},
	}
	for _, c := range cases {
		got, err := TrackColumns(c.sql, "db", lookup)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if !reflect.DeepEqual(got[vocab.TableName{Schema: "db", Name: "t"}], c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.sql, got[vocab.TableName{Schema: "db", Name: "t"}], c.want)
		}
	}
	// Checkpoints written before the flags were tracked hold plain names.
	var cols []vocab.Column
	if err := json.Unmarshal([]byte(`["id",{"name":"g","gen":true}]`), &cols); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cols, []vocab.Column{{Name: "id"}, {Name: "g", Generated: true}}) {
		t.Fatalf("old and new JSON: %+v", cols)
	}
}

// binlog-schema update reads the columns of the CREATE TABLE it is given, and refuses anything else.
func TestCreateTableColumns(t *testing.T) {
	cols, err := CreateTableColumns("CREATE TABLE `x`.`t` (`id` int(11) NOT NULL, `c` varchar(20) DEFAULT NULL, `g` int AS (id+1), PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
	want := []vocab.Column{{Name: "id", Type: "int(11)"}, {Name: "c", Type: "varchar(20)"}, {Name: "g", Generated: true, Type: "int(11)"}}
	if err != nil || !reflect.DeepEqual(cols, want) {
		t.Fatalf("got %+v, %v; want %+v", cols, err, want)
	}
	for _, bad := range []string{"ALTER TABLE t ADD c INT", "CREATE TABLE t LIKE u", "CREATE TABLE t SELECT 1", "CREATE TABLE a (id INT); CREATE TABLE b (id INT)", "CREATE TABLE t (", ""} {
		if cols, err := CreateTableColumns(bad); err == nil {
			t.Errorf("%q: got %+v, want an error", bad, cols)
		}
	}
}
