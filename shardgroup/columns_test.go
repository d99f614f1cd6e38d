package shardgroup

import (
	"reflect"
	"testing"
)

func TestTrackColumns(t *testing.T) {
	known := map[TableName][]string{{"db", "t"}: {"id", "v"}}
	lookup := func(tb TableName) ([]string, bool) { c, ok := known[tb]; return c, ok }
	cases := []struct {
		sql  string
		want map[TableName][]string
	}{
		{"ALTER TABLE t ADD COLUMN c INT", map[TableName][]string{{"db", "t"}: {"id", "v", "c"}}},
		{"ALTER TABLE t ADD COLUMN c INT FIRST, ADD d INT AFTER id", map[TableName][]string{{"db", "t"}: {"c", "id", "d", "v"}}},
		{"ALTER TABLE t ADD (a INT, b INT)", map[TableName][]string{{"db", "t"}: {"id", "v", "a", "b"}}},
		{"ALTER TABLE t DROP COLUMN v", map[TableName][]string{{"db", "t"}: {"id"}}},
		{"ALTER TABLE t CHANGE v w VARCHAR(3) FIRST", map[TableName][]string{{"db", "t"}: {"w", "id"}}},
		{"ALTER TABLE t MODIFY v INT AFTER id", map[TableName][]string{{"db", "t"}: {"id", "v"}}},
		{"ALTER TABLE t RENAME COLUMN v TO w", map[TableName][]string{{"db", "t"}: {"id", "w"}}},
		{"ALTER TABLE t ADD INDEX i (v)", map[TableName][]string{{"db", "t"}: {"id", "v"}}},
		{"ALTER TABLE t RENAME TO u", map[TableName][]string{{"db", "t"}: nil, {"db", "u"}: {"id", "v"}}},
		{"CREATE TABLE x (a INT, b INT)", map[TableName][]string{{"db", "x"}: {"a", "b"}}},
		{"CREATE TABLE x LIKE t", map[TableName][]string{{"db", "x"}: {"id", "v"}}},
		{"RENAME TABLE t TO t_old, other.n TO t", map[TableName][]string{{"db", "t_old"}: {"id", "v"}, {"other", "n"}: nil, {"db", "t"}: nil}},
		{"DROP TABLE t", map[TableName][]string{{"db", "t"}: nil}},
		{"CREATE INDEX i ON t (v)", map[TableName][]string{}},
	}
	for _, c := range cases {
		got, err := TrackColumns(c.sql, "db", lookup)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.sql, got, c.want)
		}
		if !reflect.DeepEqual(known[TableName{"db", "t"}], []string{"id", "v"}) {
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
		lookup := func(tb TableName) ([]string, bool) { return []string{"id", "v"}, tb.Name == "t" }
		_, _ = TrackColumns(sql, "db", lookup) // must return, never panic
	})
}
