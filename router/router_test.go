package router

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
)

func TestRouterDMSemantics(t *testing.T) {
	r, err := NewRouter(&config.BAList{
		DoDBs:        []string{"db_*", "keep"},
		IgnoreTables: []config.TableRef{{DBName: "db_*", TblName: "tmp_*"}},
	}, []config.RouteRule{
		{SchemaPattern: "db_*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t"},
		{SchemaPattern: "db_*", TargetSchema: "db"},
		{SchemaPattern: "keep", TablePattern: "x", TargetSchema: "kept"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in      TableName
		skip    bool
		out     TableName
		sharded bool
	}{
		{tn("db_01", "t_01"), false, tn("db", "t"), true},
		{tn("DB_02", "T_7"), false, tn("db", "t"), true},
		{tn("db_01", "other"), false, tn("db", "other"), false}, // schema route alone renames the schema
		{tn("db_01", "tmp_1"), true, tn("db", "tmp_1"), false},
		{tn("keep", "x"), false, tn("kept", "x"), false},
		{tn("elsewhere", "t_01"), true, tn("elsewhere", "t_01"), false},
		{tn("mysql", "user"), true, tn("mysql", "user"), false},
		{tn("db_09", ""), false, tn("db", ""), false},
	}
	for _, c := range cases {
		if got := r.Skip(c.in); got != c.skip {
			t.Errorf("Skip(%s) = %v", c.in, got)
		}
		if got := r.Route(c.in); got != c.out {
			t.Errorf("Route(%s) = %s, want %s", c.in, got, c.out)
		}
		if got := r.Sharded(c.in); got != c.sharded {
			t.Errorf("Sharded(%s) = %v", c.in, got)
		}
	}
}

func TestRouterErrorsNameTheRule(t *testing.T) {
	cases := []struct {
		ba    *config.BAList
		rules []config.RouteRule
		want  string
	}{
		{nil, []config.RouteRule{{TablePattern: "t", TargetSchema: "x"}}, "route rule 1: schema-pattern is empty"},
		{nil, []config.RouteRule{{SchemaPattern: "a"}, {SchemaPattern: "b"}}, "route rule 1 (a): target-schema is empty"},
		{nil, []config.RouteRule{{SchemaPattern: "a", TargetSchema: "b", TargetTable: "c"}}, "target-table needs a table-pattern"},
		{&config.BAList{DoDBs: []string{"~("}}, nil, `do-dbs: "~("`},
	}
	for _, c := range cases {
		if _, err := NewRouter(c.ba, c.rules); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func tn(schema, name string) TableName { return TableName{Schema: schema, Name: name} }
