package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamplesParse(t *testing.T) {
	task, err := LoadTask(filepath.Join("..", "examples", "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Name != "shard-merge" || len(task.MySQLInstances) != 2 || task.MySQLInstances[0].Meta.BinlogPos != 4 {
		t.Fatalf("task %+v", task)
	}
	ba, rules := task.Rules(task.MySQLInstances[0])
	if ba == nil || ba.DoDBs[0] != "db_*" || len(rules) != 2 || rules[0].TargetTable != "t" {
		t.Fatalf("rules %+v %+v", ba, rules)
	}
	if s := task.SyncerOf(task.MySQLInstances[1]); s.WorkerCount != 4 || s.Batch != 1024 {
		t.Fatalf("syncer %+v", s)
	}
	src, err := LoadSource(filepath.Join("..", "examples", "source1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if src.SourceID != "mysql-replica-01" || src.Flavor != "mariadb" || src.From.Port != 3307 {
		t.Fatalf("source %+v", src)
	}
	// The docker-compose files.
	task, err = LoadTask(filepath.Join("..", "examples", "compose", "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if task.TargetDatabase.Host != "downstream" || task.MySQLInstances[0].Meta != nil {
		t.Fatalf("compose task %+v", task)
	}
	for i, host := range []string{"mysql1", "mysql2"} {
		src, err := LoadSource(filepath.Join("..", "examples", "compose", fmt.Sprintf("source%d.yaml", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if src.From.Host != host || src.Flavor != "mysql" {
			t.Fatalf("compose source %+v", src)
		}
	}
}

func mutate(t *testing.T, from, to string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("example has no %q", from)
	}
	return []byte(strings.Replace(string(data), from, to, 1))
}

func TestTaskErrorsNameFileAndField(t *testing.T) {
	cases := []struct{ from, to, want string }{
		{"mysql-instances:", "mysql-instance:", `task.yaml: line 13: field mysql-instance is not a known key`},
		{"task-mode: incremental", "task-mode: all", "task.yaml: task-mode all is not supported yet"},
		{"shard-mode: pessimistic", "shard-mode: optimistic", "shard-mode optimistic is not supported yet"},
		{"online-ddl: false", "online-ddl: true", "task.yaml: online-ddl is not supported yet"},
		{"route-rules: [route-table, route-schema]\n    syncer", "route-rules: [route-tables, route-schema]\n    syncer", `mysql-instances[0].route-rules: "route-tables" is not defined in routes`},
		{"block-allow-list: bw-rule-1", "block-allow-list: bw-rule-2", `mysql-instances[0].block-allow-list "bw-rule-2" is not defined`},
		{"source-id: mysql-replica-02", "source-id: mysql-replica-01", `mysql-instances[1].source-id "mysql-replica-01" appears twice`},
		{"syncer-config-name: global", "syncer-config-name: globl", `syncer-config-name "globl" is not defined in syncers`},
		{`do-dbs: ["db_*"]`, `do-dbs: ["~("]`, `block-allow-list bw-rule-1: pattern "~("`},
		{"target-schema: db\n    target-table", "target-schema: \"\"\n    target-table", "routes route-table: target-schema is empty"},
		{"  port: 3306", "  port: 0", "target-database.port 0 is not a TCP port"},
	}
	for _, c := range cases {
		_, err := ParseTask("task.yaml", mutate(t, c.from, c.to))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: got %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

func TestSourceErrors(t *testing.T) {
	good := "source-id: s1\nflavor: mysql\nfrom: {host: h, port: 3306, user: u}\n"
	if _, err := ParseSource("s.yaml", []byte(good)); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ yaml, want string }{
		{good + "enable-relay: true\n", "s.yaml: enable-relay is not supported yet"},
		{good + "relay-dirr: x\n", "field relay-dirr is not a known key"},
		{strings.Replace(good, "flavor: mysql", "flavor: oracle", 1), `flavor "oracle" must be mysql or mariadb`},
		{strings.Replace(good, "source-id: s1", "source-id: \"a b\"", 1), `source-id "a b"`},
		{strings.Replace(good, "user: u", "user: \"\"", 1), "from.user is empty"},
	}
	for _, c := range cases {
		if _, err := ParseSource("s.yaml", []byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestPasswordNotPrinted(t *testing.T) {
	d := Database{Host: "h", Port: 1, User: "u", Password: "secret"}
	if strings.Contains(d.String(), "secret") {
		t.Fatal(d.String())
	}
}

func TestFilterRules(t *testing.T) {
	withFilter := func(rule, ref string) []byte {
		data := string(mutate(t, "syncer-config-name: global\n  - source-id", "syncer-config-name: global\n    filter-rules: ["+ref+"]\n  - source-id"))
		return []byte(data + "filters:\n  skip-rename:\n" + rule)
	}
	good := "    schema-pattern: \"db_*\"\n    table-pattern: \"t_*\"\n    events: [\"rename table\", \"truncate table\"]\n    sql-pattern: [\"^DROP\\\\s+TABLE\"]\n    action: Ignore\n"
	task, err := ParseTask("task.yaml", withFilter(good, "skip-rename"))
	if err != nil {
		t.Fatal(err)
	}
	rules := task.FilterRulesOf(task.MySQLInstances[0])
	if len(rules) != 1 || rules[0].Name != "skip-rename" || rules[0].Events[0] != "rename table" || len(task.FilterRulesOf(task.MySQLInstances[1])) != 0 {
		t.Fatalf("filter rules %+v", rules)
	}
	cases := []struct{ rule, ref, want string }{
		{good, "skip-renam", `mysql-instances[0].filter-rules: "skip-renam" is not defined in filters`},
		{strings.Replace(good, "rename table", "rename tables", 1), "skip-rename", `filters skip-rename: unknown event "rename tables"`},
		{strings.Replace(good, "action: Ignore", "action: Skip", 1), "skip-rename", `filters skip-rename: action "Skip" must be Ignore, Do or Error`},
		{strings.Replace(good, `"^DROP\\s+TABLE"`, `"("`, 1), "skip-rename", `filters skip-rename: sql-pattern "("`},
		{strings.Replace(good, `schema-pattern: "db_*"`, `schema-pattern: ""`, 1), "skip-rename", `filters skip-rename: schema-pattern is empty`},
	}
	for _, c := range cases {
		if _, err := ParseTask("task.yaml", withFilter(c.rule, c.ref)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}
