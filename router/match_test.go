package router

import (
	"slices"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

func TestMatching(t *testing.T) {
	tables := []vocab.TableName{tn("db_1", "events_1"), tn("db_1", "events_2"), tn("db_2", "events_1"), tn("other", "x")}
	cases := []struct {
		schema, table string
		want          []vocab.TableName
	}{
		{"db_*", "events_*", tables[:3]},
		{"db_*", "evnts_*", nil}, // the typo matches nothing
		{"DB_1", "", tables[:2]}, // no table pattern: every table of the schema; case is ignored
		{"~^db_[12]$", "events_1", []vocab.TableName{tables[0], tables[2]}},
		{"oth?r", "x", tables[3:]},
		{"nowhere", "", nil},
	}
	for _, c := range cases {
		got, err := Matching(c.schema, c.table, tables)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Matching(%q, %q) = %v, want %v", c.schema, c.table, got, c.want)
		}
	}
	if _, err := Matching("~(", "", tables); err == nil {
		t.Error("a bad regular expression is accepted")
	}
}

func TestRuleOf(t *testing.T) {
	r, err := NewRouter(nil, []config.RouteRule{
		{SchemaPattern: "db_*", TargetSchema: "db"},                                        // 0: schema rule
		{SchemaPattern: "db_*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t"}, // 1
		{SchemaPattern: "db_1", TablePattern: "t_1", TargetSchema: "x", TargetTable: "y"},  // 2: shadowed by 1
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   vocab.TableName
		want int
	}{
		{tn("db_1", "t_1"), 1},
		{tn("db_1", "other"), 0},
		{tn("db_2", ""), 0},
		{tn("else", "t_1"), -1},
	} {
		if got := r.RuleOf(c.in); got != c.want {
			t.Errorf("RuleOf(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}
