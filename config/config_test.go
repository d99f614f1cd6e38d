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
	if task.Name != "shard-merge" || len(task.MySQLInstances) != 2 || task.TaskMode != "all" || task.MySQLInstances[0].Meta != nil {
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
	// The cases below change an incremental task: the example's all, made incremental.
	base := strings.Replace(string(data), "\ntask-mode: all\n", "\ntask-mode: incremental\n", 1)
	if !strings.Contains(base, from) {
		t.Fatalf("example has no %q", from)
	}
	return []byte(strings.Replace(base, from, to, 1))
}

func TestTaskErrorsNameFileAndField(t *testing.T) {
	cases := []struct{ from, to, want string }{
		{"mysql-instances:", "mysql-instance:", `task.yaml: line 23: field mysql-instance is not a known key`},
		{"task-mode: incremental", "task-mode: everything", `task.yaml: task-mode "everything" must be all, full or incremental`},
		{"task-mode: incremental", "task-mode: Incremental", `task.yaml: task-mode "Incremental" must be all, full or incremental`},
		{"shard-mode: pessimistic", "shard-mode: optimistic", "shard-mode optimistic is not supported yet"},
		{"online-ddl: false", "online-ddl-scheme: ghost", `task.yaml: online-ddl-scheme "ghost" must be gh-ost or pt`},
		{"online-ddl: false", "online-ddl: true\nshadow-table-rules: ['^_tmp_.*$']", `task.yaml: shadow-table-rules[0] "^_tmp_.*$" needs a group`},
		{"online-ddl: false", "online-ddl: true\ntrash-table-rules: ['^_(.+_del$']", `task.yaml: trash-table-rules[0] "^_(.+_del$": error parsing regexp`},
		{"online-ddl: false", "online-ddl: false\ntrash-table-rules: ['^_(.+)_del$']", `task.yaml: trash-table-rules is set but online-ddl is not true`},
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

// fullTask is the example task with task-mode mode, more keys for its first instance (inst0, each line
// indented as the instance's keys) and sections in place of its mydumpers.
func fullTask(t *testing.T, mode, inst0, sections string) []byte {
	t.Helper()
	data := string(mutate(t, "task-mode: incremental", "task-mode: "+mode))
	if inst0 != "" {
		data = strings.Replace(data, "syncer-config-name: global\n  - source-id", "syncer-config-name: global\n    "+inst0+"\n  - source-id", 1)
	}
	data, ok := strings.CutSuffix(data, "mydumpers:\n  global:\n    threads: 4\n")
	if !ok {
		t.Fatal("the example does not end with its mydumpers")
	}
	return []byte(data + sections)
}

func TestTaskModes(t *testing.T) {
	for _, c := range []struct {
		mode         string
		dumps, syncs bool
	}{{"incremental", false, true}, {"all", true, true}, {"full", true, false}} {
		task, err := ParseTask("task.yaml", fullTask(t, c.mode, "", ""))
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		if task.Dumps() != c.dumps || task.Syncs() != c.syncs {
			t.Errorf("%s: Dumps %v Syncs %v, want %v %v", c.mode, task.Dumps(), task.Syncs(), c.dumps, c.syncs)
		}
	}
}

func TestDumpAndLoadConfig(t *testing.T) {
	sections := `mydumpers:
  named:
    threads: 8
    rows: 1000
    chunk-filesize: 128
    skip-tz-utc: true
    mydumper-path: ./bin/mydumper
  str:
    chunk-filesize: "32"
  unit:
    chunk-filesize: 1GiB
loaders:
  named:
    pool-size: 6
    dir: ./dumped_data
    import-mode: sql
    on-duplicate: Replace
    on-duplicate-physical: none
    checksum-physical: required
    analyze: optional
  both:
    import-mode: LOGICAL
    on-duplicate: ignore
    on-duplicate-logical: IGNORE
clean-dump-file: true
`
	defDump, defLoad := DumpConfig{Threads: 4, ChunkFileSizeMB: 64}, LoadConfig{PoolSize: 4, OnDuplicate: "error"}
	cases := []struct {
		inst0 string
		dump  DumpConfig
		load  LoadConfig
	}{
		{"", defDump, defLoad},
		{"mydumper-config-name: named\n    loader-config-name: named", DumpConfig{8, 1000, 128}, LoadConfig{6, "replace"}},
		{"mydumper-config-name: named\n    loader-config-name: named\n    mydumper-thread: 3\n    loader-thread: 2", DumpConfig{3, 1000, 128}, LoadConfig{2, "replace"}},
		{"mydumper-thread: 3\n    loader-thread: 2", DumpConfig{3, 0, 64}, LoadConfig{2, "error"}},
		// The inline object replaces the named one, as a whole.
		{"mydumper-config-name: named\n    mydumper: {threads: 2}\n    loader-config-name: named\n    loader: {on-duplicate-logical: ignore}", DumpConfig{2, 0, 64}, LoadConfig{4, "ignore"}},
		{"mydumper: {threads: 2, rows: 10, chunk-filesize: 8}\n    mydumper-thread: 5\n    loader: {pool-size: 3}\n    loader-thread: 7", DumpConfig{5, 10, 8}, LoadConfig{7, "error"}},
		{"mydumper-config-name: str\n    loader-config-name: both", DumpConfig{4, 0, 32}, LoadConfig{4, "ignore"}},
		{"mydumper-config-name: unit", DumpConfig{4, 0, 1024}, defLoad},
	}
	for _, c := range cases {
		task, err := ParseTask("task.yaml", fullTask(t, "all", c.inst0, sections))
		if err != nil {
			t.Fatalf("%q: %v", c.inst0, err)
		}
		if d, l := task.DumpOf(task.MySQLInstances[0]), task.LoadOf(task.MySQLInstances[0]); d != c.dump || l != c.load {
			t.Errorf("%q: %+v %+v, want %+v %+v", c.inst0, d, l, c.dump, c.load)
		}
		// The second instance has neither: the defaults.
		if d, l := task.DumpOf(task.MySQLInstances[1]), task.LoadOf(task.MySQLInstances[1]); d != defDump || l != defLoad {
			t.Errorf("%q: second instance %+v %+v", c.inst0, d, l)
		}
	}
}

func TestChunkFilesize(t *testing.T) {
	for in, want := range map[MB]int{"": 0, "64": 64, " 64 ": 64, "64MiB": 64, "64m": 64, "64 MB": 64, "2g": 2048, "1TiB": 1 << 20, "2048KiB": 2} {
		if got, err := in.Megabytes(); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []MB{"0", "-1", "abc", "1.5", "64b", "64PiB", "100KiB", "99999999999999999999"} {
		if got, err := in.Megabytes(); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
}

func TestDumpAndLoadErrors(t *testing.T) {
	dump := func(keys string) string { return "mydumpers:\n  bad:\n    " + keys + "\n" }
	load := func(keys string) string { return "loaders:\n  bad:\n    " + keys + "\n" }
	cases := []struct{ mode, inst0, sections, want string }{
		{"all", "", dump("chunk-filesize: abc"), `task.yaml: mydumpers.bad.chunk-filesize "abc" must be a positive number of MB`},
		{"all", "", dump("chunk-filesize: 0"), `task.yaml: mydumpers.bad.chunk-filesize "0" must be a positive number of MB`},
		{"all", "", dump("chunk-filesize: [64]"), "chunk-filesize must be a number of MB or a string"},
		{"all", "", dump("threads: -1"), "task.yaml: mydumpers.bad.threads -1 is negative"},
		{"all", "", dump("rows: -1"), "task.yaml: mydumpers.bad.rows -1 is negative"},
		{"all", "", dump("treads: 4"), "field treads is not a known key"},
		{"all", "", dump(`extra-args: "--consistency auto"`), "task.yaml: mydumpers.bad.extra-args is not supported: no dumpling here: the dump is Tributary's own"},
		{"full", "", dump("mydumper-path: /usr/bin/mydumper"), "task.yaml: mydumpers.bad.mydumper-path is not supported: no mydumper is run"},
		{"all", "", dump("statement-size: 100"), "task.yaml: mydumpers.bad.statement-size is not supported yet"},
		{"all", "", dump(`where: "id > 0"`), "task.yaml: mydumpers.bad.where is not supported yet"},
		{"all", "", load("pool-size: -1"), "task.yaml: loaders.bad.pool-size -1 is negative"},
		{"all", "", load("import-mode: physical"), "task.yaml: loaders.bad.import-mode physical needs TiDB Lightning's physical import; use logical"},
		{"all", "", load("import-mode: fast"), `task.yaml: loaders.bad.import-mode "fast" must be logical`},
		{"all", "", load("on-duplicate: overwrite"), `task.yaml: loaders.bad.on-duplicate "overwrite" must be error, ignore or replace`},
		{"all", "", load("on-duplicate-logical: skip"), `task.yaml: loaders.bad.on-duplicate-logical "skip" must be error, ignore or replace`},
		{"all", "", load("on-duplicate: ignore\n    on-duplicate-logical: replace"), `task.yaml: loaders.bad.on-duplicate "ignore" and on-duplicate-logical "replace" differ`},
		{"all", "", load("on-duplicate-physical: manual"), "task.yaml: loaders.bad.on-duplicate-physical is not supported: it configures TiDB Lightning's physical import"},
		{"all", "", load("checksum-physical: off"), "loaders.bad.checksum-physical is not supported"},
		{"all", "", load("analyze: required"), "loaders.bad.analyze is not supported"},
		{"all", "", load("sorting-dir-physical: /tmp/sort"), "loaders.bad.sorting-dir-physical is not supported"},
		{"all", "", load("disk-quota-physical: 10GB"), "loaders.bad.disk-quota-physical is not supported"},
		{"all", "", load("range-concurrency: 16"), "loaders.bad.range-concurrency is not supported"},
		{"all", "", load("compress-kv-pairs: gz"), "loaders.bad.compress-kv-pairs is not supported"},
		{"all", "", load("pd-addr: pd:2379"), "loaders.bad.pd-addr is not supported"},
		{"all", "mydumper: {extra-args: -x}", "", "task.yaml: mysql-instances[0].mydumper.extra-args is not supported"},
		{"all", "mydumper: {chunk-filesize: 1.5}", "", `task.yaml: mysql-instances[0].mydumper.chunk-filesize "1.5" must be a positive number of MB`},
		{"all", "loader: {pool-size: -2}", "", "task.yaml: mysql-instances[0].loader.pool-size -2 is negative"},
		{"all", "loader: {import-mode: physical}", "", "task.yaml: mysql-instances[0].loader.import-mode physical needs"},
		{"all", "loader: {dri: x}", "", "field dri is not a known key"},
		{"all", "mydumper-config-name: nope", "", `task.yaml: mysql-instances[0].mydumper-config-name "nope" is not defined in mydumpers`},
		{"all", "loader-config-name: nope", dump("threads: 2"), `task.yaml: mysql-instances[0].loader-config-name "nope" is not defined in loaders`},
		{"all", "mydumper-thread: -1", "", "task.yaml: mysql-instances[0].mydumper-thread -1 is negative"},
		{"all", "loader-thread: -1", "", "task.yaml: mysql-instances[0].loader-thread -1 is negative"},
		// An incremental task uses no dump or load settings: their refused keys are accepted (as DM
		// does), their wrong values and names are not.
		{"incremental", "", dump("chunk-filesize: abc"), `mydumpers.bad.chunk-filesize "abc" must be a positive number of MB`},
		{"incremental", "", load("on-duplicate: overwrite"), `loaders.bad.on-duplicate "overwrite" must be`},
		{"incremental", "mydumper-config-name: nope", "", `mysql-instances[0].mydumper-config-name "nope" is not defined in mydumpers`},
	}
	for _, c := range cases {
		_, err := ParseTask("task.yaml", fullTask(t, c.mode, c.inst0, c.sections))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q %q: got %v, want %q", c.mode, c.inst0, c.sections, err, c.want)
		}
	}
	// The keys refused for a full load are accepted in an incremental task.
	refused := dump(`extra-args: "--consistency auto"`+"\n    mydumper-path: /usr/bin/mydumper") + load("import-mode: physical\n    pd-addr: pd:2379")
	if _, err := ParseTask("task.yaml", fullTask(t, "incremental", "mydumper: {where: x}", refused)); err != nil {
		t.Errorf("incremental task with dump settings: %v", err)
	}
	if _, err := ParseTask("task.yaml", fullTask(t, "all", "", refused)); err == nil {
		t.Error("task-mode all with extra-args, mydumper-path, import-mode physical and pd-addr was accepted")
	}
}

func TestSpreadHotTables(t *testing.T) {
	task, err := ParseTask("task.yaml", mutate(t, "syncers:\n  global:\n", "syncers:\n  global:\n    spread-hot-tables: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := task.SyncerOf(task.MySQLInstances[0]); !s.SpreadHotTables {
		t.Fatalf("syncers.global.spread-hot-tables: true read as %+v", s)
	}
	task, err = ParseTask("task.yaml", mutate(t, "task-mode: incremental", "task-mode: incremental"))
	if err != nil {
		t.Fatal(err)
	}
	if s := task.SyncerOf(task.MySQLInstances[0]); s.SpreadHotTables {
		t.Fatal("spread-hot-tables is on without being set")
	}
}

// A source file's filters (DM's, a list) are checked like a task's, each named by its index; for a
// task they come after the task's rules, except one for the same schema and table patterns as a task
// rule, which the task's replaces (as in DM).
func TestSourceFilters(t *testing.T) {
	good := "source-id: s1\nfrom: {host: h, port: 3306, user: u}\nfilters:\n" +
		"  - schema-pattern: \"db_*\"\n    table-pattern: \"t_*\"\n    events: [\"truncate table\"]\n    action: Ignore\n" +
		"  - schema-pattern: \"logs\"\n    events: [\"all dml\"]\n    action: Do\n"
	s, err := ParseSource("s.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Filters) != 2 || s.Filters[1].Name != "filters[1]" || s.Filters[1].Action != "Do" {
		t.Fatalf("source filters %+v", s.Filters)
	}
	for bad, want := range map[string]string{
		strings.Replace(good, "action: Do", "action: Keep", 1):                  `s.yaml: filters[1]: action "Keep" must be Ignore, Do or Error`,
		strings.Replace(good, `"truncate table"`, `"truncate"`, 1):              `s.yaml: filters[0]: unknown event "truncate"`,
		strings.Replace(good, `schema-pattern: "logs"`, `x: 1`, 1):              "field x is not a known key",
		strings.Replace(good, `table-pattern: "t_*"`, `table-pattern: "~("`, 1): `s.yaml: filters[0]: pattern "~("`,
	} {
		if _, err := ParseSource("s.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	task := []FilterRule{{Name: "filters mine", SchemaPattern: "DB_*", TablePattern: "T_*", Events: []string{"rename table"}, Action: "Ignore"}}
	rules, skipped := MergeFilters(task, s.Filters)
	if len(rules) != 2 || rules[0].Name != "filters mine" || rules[1].Name != "filters[1]" || len(skipped) != 1 || skipped[0].Name != "filters[0]" {
		t.Fatalf("merged %+v, skipped %+v", rules, skipped)
	}
	if rules, skipped := MergeFilters(nil, s.Filters); len(rules) != 2 || len(skipped) != 0 {
		t.Fatalf("no task rules: merged %+v, skipped %+v", rules, skipped)
	}
}

// DM's advanced task file template (DM's documentation, comments left out) parses, except for the four
// features it turns on that Tributary does not have, each named; without those it is accepted, DM's
// deprecated and default-valued keys included (max-allowed-packet, validators with mode none,
// sorting-dir-physical equal to dir, disk-quota-physical "0").
func TestDMTaskTemplate(t *testing.T) {
	data, err := os.ReadFile("testdata/dm-task-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseTask("task.yaml", data)
	want := []string{
		"task.yaml: mysql-instances[0].expression-filters is not supported yet",
		"task.yaml: expression-filter is not supported yet",
		"task.yaml: validators.global.mode full is not supported yet",
		"task.yaml: mydumpers.global.extra-args is not supported",
	}
	if err == nil {
		t.Fatal("DM's template with expression filters and validation accepted")
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("errors:\n%v\nwant the %d of %q", err, len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d is %q, want %q", i, lines[i], w)
		}
	}
	s := string(data)
	for _, cut := range []struct{ from, to string }{
		{"expression-filter:\n  even_c:\n    schema: \"expr_filter\"\n    table: \"tbl\"\n    insert-value-expr: \"c % 2 = 0\"\n", ""},
		{"    expression-filters: [\"even_c\"]\n", ""},
		{"    mode: full\n", "    mode: none\n"},
		{"    extra-args: \"--consistency none\"\n", ""},
	} {
		if !strings.Contains(s, cut.from) {
			t.Fatalf("the template has no %q", cut.from)
		}
		s = strings.Replace(s, cut.from, cut.to, 1)
	}
	task, err := ParseTask("task.yaml", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	if task.Name != "test" || len(task.MySQLInstances) != 2 || task.MySQLInstances[0].ValidatorConfigName != "global" {
		t.Fatalf("parsed %+v", task)
	}
	bad := strings.Replace(s, `validator-config-name: "global"`, `validator-config-name: "nope"`, 1)
	if _, err := ParseTask("task.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), `mysql-instances[0].validator-config-name: "nope" is not defined in validators`) {
		t.Errorf("an undefined validator: %v", err)
	}
}

// TestUnknownKeyNamesTheNearest: a misspelled key names its line, the part of the file (never a Go
// type) and the known key nearest to it.
func TestUnknownKeyNamesTheNearest(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"name: t\ntask-mdoe: all\n", "task.yaml: line 2: field task-mdoe is not a known key of the task file (did you mean task-mode?)"},
		{"name: t\nzzz: 1\n", "task.yaml: line 2: field zzz is not a known key of the task file"},
		{"name: t\nmydumpers:\n  m:\n    treads: 4\n", "line 4: field treads is not a known key of its section (did you mean threads?)"},
	} {
		_, err := ParseTask("task.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "config.") {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
	_, err := ParseSource("source.yaml", []byte("source-id: s\nfrom:\n  hots: x\n"))
	if err == nil || !strings.Contains(err.Error(), "field hots is not a known key of its section (did you mean host?)") {
		t.Errorf("source: %v", err)
	}
}
