package router

import (
	"slices"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

// The commonest shard layout outside DM's test suite: every upstream server holds the same tables,
// merged with no route, or with one explicit rule listed by every source. One source's rules see a
// table routed one to one; only the task's sources together tell it is a shard.
func TestTopologyAcrossSources(t *testing.T) {
	mk := func(ba *config.BAList, rules ...config.RouteRule) *Router {
		r, err := NewRouter(ba, rules)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	explicit := config.RouteRule{SchemaPattern: "inv", TablePattern: "stock", TargetSchema: "merged", TargetTable: "stock"}
	wildSchema := config.RouteRule{SchemaPattern: "logs_*", TargetSchema: "logs"}
	literalSchema := config.RouteRule{SchemaPattern: "crm", TargetSchema: "crm_all"}
	s1 := mk(nil, explicit, wildSchema, literalSchema)
	s2 := mk(nil, explicit, wildSchema, literalSchema)
	s3 := mk(&config.BAList{DoDBs: []string{"solo", "shop"}})
	tp := NewTopology([]SourceTables{
		{"s1", s1, []vocab.TableName{tn("shop", "orders"), tn("inv", "stock"), tn("logs_1", "entries"), tn("crm", "people"), tn("app", "only1"), tn("solo", "accounts")}},
		{"s2", s2, []vocab.TableName{tn("SHOP", "Orders"), tn("inv", "stock"), tn("logs_2", "entries"), tn("crm", "people"), tn("app", "only2")}},
		{"s3", s3, []vocab.TableName{tn("shop", "orders"), tn("inv", "stock"), tn("other", "x")}},
	})
	names := func(ts []vocab.TableName) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.String())
		}
		return out
	}
	if got, want := names(tp.Shards), []string{"`crm_all`.`people`", "`merged`.`stock`", "`shop`.`orders`"}; !slices.Equal(got, want) {
		t.Errorf("Shards = %v, want %v", got, want)
	}
	// logs_1.entries and logs_2.entries meet through a wildcard schema route only: shared, no group.
	if got, want := names(tp.Shared), []string{"`crm_all`.`people`", "`logs`.`entries`", "`merged`.`stock`", "`shop`.`orders`"}; !slices.Equal(got, want) {
		t.Errorf("Shared = %v, want %v", got, want)
	}
	if got, want := tp.Schemas, []string{"app", "crm_all", "logs", "merged", "shop"}; !slices.Equal(got, want) {
		t.Errorf("Schemas = %v, want %v", got, want)
	}
	// s3's do-dbs leaves inv out: only s1 and s2 write merged.stock.
	if got, want := tp.Sources["`merged`.`stock`"], []string{"s1", "s2"}; !slices.Equal(got, want) {
		t.Errorf("Sources[merged.stock] = %v, want %v", got, want)
	}
	if got, want := tp.Sources["`shop`.`orders`"], []string{"s1", "s2", "s3"}; !slices.Equal(got, want) {
		t.Errorf("Sources[shop.orders] = %v, want %v", got, want)
	}

	for _, r := range []*Router{s1, s2, s3} {
		r.SetTopology(tp)
	}
	cases := []struct {
		r                     *Router
		t                     vocab.TableName
		sharded, sharedTarget bool
	}{
		{s1, tn("shop", "orders"), true, true},
		{s2, tn("Shop", "ORDERS"), true, true},
		{s1, tn("inv", "stock"), true, true},
		{s1, tn("crm", "people"), true, true},
		{s1, tn("logs_1", "entries"), false, true}, // wildcard schema route: docs/ddl.md's rule (c)
		{s1, tn("app", "only1"), false, false},     // only s1 has it: its own DDL, its own TRUNCATE
		{s1, tn("solo", "accounts"), false, false},
	}
	for _, c := range cases {
		if got := c.r.Sharded(c.t); got != c.sharded {
			t.Errorf("Sharded(%s) = %v, want %v", c.t, got, c.sharded)
		}
		if got := c.r.SharedTarget(c.t); got != c.sharedTarget {
			t.Errorf("SharedTarget(%s) = %v, want %v", c.t, got, c.sharedTarget)
		}
	}
	for schema, want := range map[string]bool{"shop": true, "app": true, "solo": false, "crm": true} {
		if got := s1.MergedSchema(schema); got != want {
			t.Errorf("MergedSchema(%s) = %v, want %v", schema, got, want)
		}
	}
	// Without the task's topology each source decides alone (a task stored by an earlier version).
	s1.SetTopology(nil)
	if s1.Sharded(tn("shop", "orders")) {
		t.Error("Sharded(shop.orders) without a topology: one source's rules route it one to one")
	}
}
