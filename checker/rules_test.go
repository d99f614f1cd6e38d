package checker

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

func tables(names ...string) []vocab.TableName {
	out := make([]vocab.TableName, len(names))
	for i, n := range names {
		schema, table, _ := strings.Cut(n, ".")
		out[i] = vocab.TableName{Schema: schema, Name: table}
	}
	return out
}

func TestUnmatchedRules(t *testing.T) {
	all := tables("db_1.events_1", "db_1.events_2", "db_1.users", "tmp.scratch")
	task := &config.Task{
		BlockAllowList: map[string]config.BAList{
			"bw": {
				DoDBs:        []string{"db_*", "tmp", "gone_*"},
				IgnoreTables: []config.TableRef{{DBName: "tmp", TblName: "*"}, {DBName: "db_1", TblName: "nope"}},
			},
			"none": {DoDBs: []string{"elsewhere"}},
		},
		Routes: map[string]config.RouteRule{
			"typo":     {SchemaPattern: "db_*", TablePattern: "evnts_*", TargetSchema: "db", TargetTable: "events"},
			"good":     {SchemaPattern: "db_*", TablePattern: "events_*", TargetSchema: "db", TargetTable: "events"},
			"shadowed": {SchemaPattern: "db_1", TablePattern: "events_1", TargetSchema: "x", TargetTable: "y"},
			"blocked":  {SchemaPattern: "tmp", TablePattern: "scratch", TargetSchema: "t", TargetTable: "s"},
			"nowhere":  {SchemaPattern: "nowhere", TargetSchema: "n"},
			"schema":   {SchemaPattern: "db_*", TargetSchema: "db"},
			"schema-2": {SchemaPattern: "db_1", TargetSchema: "db"}, // routes the schema: no warning
		},
		Filters: map[string]config.FilterRule{
			"f-good": {SchemaPattern: "db_*", TablePattern: "events_*", Events: []string{"truncate table"}, Action: "Ignore"},
			"f-typo": {SchemaPattern: "db_*", TablePattern: "evnts_*", Events: []string{"truncate table"}, Action: "Ignore"},
			"f-db":   {SchemaPattern: "db_1", Events: []string{"drop database"}, Action: "Ignore"},
		},
	}
	inst := config.Instance{SourceID: "s1", BlockAllowList: "bw",
		RouteRules:  []string{"typo", "good", "shadowed", "blocked", "nowhere", "schema", "schema-2"},
		FilterRules: []string{"f-good", "f-typo", "f-db"}}
	got, err := unmatchedRules(task, inst, all)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		`do-dbs "gone_*" matches no schema`,
		`ignore-tables {db-name: "db_1", tbl-name: "nope"} matches no table of the source: it drops nothing`,
		`route rule typo (schema-pattern "db_*", table-pattern "evnts_*") matches no table of the source: nothing is merged into ` + "`db`.`events`" +
			", and the tables of its schemas that no rule merges are copied one to one instead (`db_1`.`users` to `db`.`users`)",
		`route rule shadowed (schema-pattern "db_1", table-pattern "events_1") routes no table of the source: an earlier rule routes every table it matches`,
		`route rule blocked (schema-pattern "tmp", table-pattern "scratch") matches only tables the block-allow-list drops`,
		`route rule nowhere (schema-pattern "nowhere") matches no table of the source: nothing is routed to nowhere`[:60],
		`binlog event filter f-typo (schema-pattern "db_*", table-pattern "evnts_*") matches no table`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("no warning %q in:\n%s", want, joined)
		}
	}
	// Rules that match: no warning of them.
	for _, not := range []string{"route rule good", "route rule schema", "f-good", "f-db", `do-dbs "db_*"`, `do-dbs "tmp"`, `ignore-tables {db-name: "tmp"`} {
		if strings.Contains(joined, not) {
			t.Errorf("a warning of %q, which matches:\n%s", not, joined)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d warnings, want 7:\n%s", len(got), joined)
	}

	// A block-allow-list that lets nothing through says so.
	inst = config.Instance{SourceID: "s1", BlockAllowList: "none"}
	got, _ = unmatchedRules(task, inst, all)
	if joined = strings.Join(got, "\n"); !strings.Contains(joined, "lets none of the source's 4 tables through") {
		t.Errorf("no warning of a list that lets nothing through:\n%s", joined)
	}

	// The typo alone: the shards land one to one.
	inst = config.Instance{SourceID: "s1", RouteRules: []string{"typo"}}
	got, _ = unmatchedRules(task, inst, all)
	if joined = strings.Join(got, "\n"); len(got) != 1 || !strings.Contains(joined, "nothing is merged into `db`.`events`, and the tables of its schemas that no rule merges are copied one to one instead (`db_1`.`events_1` to `db_1`.`events_1`, ") {
		t.Errorf("the typo alone:\n%s", joined)
	}

	// No rules, or rules that all match: nothing.
	if got, _ := unmatchedRules(task, config.Instance{SourceID: "s1", RouteRules: []string{"good"}}, all); len(got) != 0 {
		t.Errorf("warnings of rules that match: %v", got)
	}
}
