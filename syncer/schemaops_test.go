package syncer

import (
	"reflect"
	"testing"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/vocab"
)

func TestReplaceFrom(t *testing.T) {
	at := func(p uint32) vocab.Position { return vocab.Position{File: "bin.000002", Pos: p} }
	a := []vocab.Column{{Name: "id"}}
	b := []vocab.Column{{Name: "id"}, {Name: "v"}}
	c := []vocab.Column{{Name: "id"}, {Name: "v"}, {Name: "w"}}
	vs := []schemaVersion{{From: vocab.Position{}, Cols: a}, {From: at(100), Cols: b}, {From: at(300), Cols: nil}}
	cases := []struct {
		name string
		at   vocab.Position
		want []schemaVersion
	}{
		{"between versions: later ones go", at(200), []schemaVersion{vs[0], vs[1], {From: at(200), Cols: c}}},
		{"at a version: it is replaced", at(100), []schemaVersion{vs[0], {From: at(100), Cols: c}}},
		{"after all", at(400), []schemaVersion{vs[0], vs[1], vs[2], {From: at(400), Cols: c}}},
		{"before all but the first start's", at(50), []schemaVersion{vs[0], {From: at(50), Cols: c}}},
	}
	for _, tc := range cases {
		got := replaceFrom(append([]schemaVersion(nil), vs...), tc.at, c)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		// What a resume at that point reads is the new schema, and the tracker agrees.
		v, ok := versionAt(got, tc.at)
		if !ok || !reflect.DeepEqual(v.Cols, c) {
			t.Errorf("%s: versionAt = %+v, %v", tc.name, v, ok)
		}
		tr := newSchemaTracker()
		tr.tables[vocab.TableName{Schema: "d", Name: "t"}] = got
		if cols, ok := tr.at(vocab.TableName{Schema: "d", Name: "t"}, vocab.Position{File: tc.at.File, Pos: tc.at.Pos + 10}); !ok || !reflect.DeepEqual(cols, c) {
			t.Errorf("%s: the tracker reads %+v after the point", tc.name, cols)
		}
	}
	if _, ok := versionAt([]schemaVersion{{From: at(100), Cols: a}}, at(50)); ok {
		t.Error("a version that starts after the point applied at it")
	}
}

func TestCreateTableSQLReadsBack(t *testing.T) {
	tb := vocab.TableName{Schema: "db_1", Name: "t 1"}
	cols := []vocab.Column{
		{Name: "id", Type: "bigint(20) unsigned", Unsigned: true},
		{Name: "v", Type: "varchar(32)"},
		{Name: "b", Type: "binary(4)", BinaryLen: 4},
		{Name: "g", Type: "int(11)", Generated: true},
		{Name: "x"}, // tracked before types were kept
		{Name: "u", Unsigned: true},
	}
	sql := CreateTableSQL(tb, cols)
	got, err := ddl.CreateTableColumns(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(got) != len(cols) {
		t.Fatalf("%s read back as %+v", sql, got)
	}
	for i, c := range cols {
		g := got[i]
		if g.Name != c.Name || g.Unsigned != c.Unsigned || g.Generated != c.Generated || g.BinaryLen != c.BinaryLen {
			t.Errorf("column %d: wrote %+v, read %+v (%s)", i, c, g, sql)
		}
		if c.Type != "" && g.Type != c.Type {
			t.Errorf("column %d: type %q read back as %q", i, c.Type, g.Type)
		}
	}
}
