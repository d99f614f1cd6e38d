package router

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
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
		in      vocab.TableName
		skip    bool
		out     vocab.TableName
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

func tn(schema, name string) vocab.TableName { return vocab.TableName{Schema: schema, Name: name} }

func TestMergedSchema(t *testing.T) {
	r, err := NewRouter(nil, []config.RouteRule{
		{SchemaPattern: "shard_db_*", TablePattern: "t_*", TargetSchema: "merged_db", TargetTable: "t"},
		{SchemaPattern: "shard_db_*", TargetSchema: "merged_db"},
		{SchemaPattern: "app", TargetSchema: "app_copy"},
		{SchemaPattern: "one", TargetSchema: "both"},
		{SchemaPattern: "two", TargetSchema: "both"},
		{SchemaPattern: "orders", TablePattern: "o_*", TargetSchema: "orders", TargetTable: "o"},
		{SchemaPattern: "legacy", TargetSchema: "plain"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for schema, want := range map[string]bool{
		"shard_db_1": true,  // wildcard schema route
		"app":        false, // one to one, renamed
		"one":        true,  // two schemas onto one
		"two":        true,
		"orders":     true, // holds shard tables (a wildcard table rule)
		"plain":      true, // legacy is routed onto plain's name
		"untouched":  false,
	} {
		if got := r.MergedSchema(schema); got != want {
			t.Errorf("MergedSchema(%s) = %v, want %v", schema, got, want)
		}
	}
}

func TestSharedTarget(t *testing.T) {
	r, err := NewRouter(nil, []config.RouteRule{
		{SchemaPattern: "shard_db_*", TablePattern: "t_*", TargetSchema: "merged_db", TargetTable: "t"},
		{SchemaPattern: "shard_db_*", TargetSchema: "merged_db"},
		{SchemaPattern: "orders", TablePattern: "o_*", TargetSchema: "orders", TargetTable: "o"},
		{SchemaPattern: "one", TargetSchema: "both"},
		{SchemaPattern: "two", TargetSchema: "both"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for tbl, want := range map[vocab.TableName]bool{
		{Schema: "shard_db_1", Name: "plain"}: true,  // db_1.plain and db_2.plain both go to merged_db.plain
		{Schema: "orders", Name: "customers"}: false, // one to one, beside the shards
		{Schema: "one", Name: "x"}:            true,
		{Schema: "app", Name: "x"}:            false,
	} {
		if got := r.SharedTarget(tbl); got != want {
			t.Errorf("SharedTarget(%s) = %v, want %v", tbl, got, want)
		}
	}
}

func TestExplicitRulesOntoOneTargetAreShards(t *testing.T) {
	r, err := NewRouter(nil, []config.RouteRule{
		{SchemaPattern: "db_1", TablePattern: "a", TargetSchema: "db", TargetTable: "t"},
		{SchemaPattern: "db_1", TablePattern: "b", TargetSchema: "db", TargetTable: "t"},
		{SchemaPattern: "db_1", TablePattern: "c", TargetSchema: "db", TargetTable: "c2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sharded(vocab.TableName{Schema: "db_1", Name: "a"}) || !r.Sharded(vocab.TableName{Schema: "db_1", Name: "b"}) {
		t.Error("two explicit rules onto db.t: both tables are shards of it")
	}
	if r.Sharded(vocab.TableName{Schema: "db_1", Name: "c"}) {
		t.Error("db_1.c alone routes to db.c2: not a shard")
	}
}
