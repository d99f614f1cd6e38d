package checker

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// env is one upstream and one downstream, and a shard-merge task db_*.t_* -> db.t over them.
type env struct {
	t        *testing.T
	up, down *mariadbtest.Server
	upDB     *sql.DB
	downDB   *sql.DB
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, up: mariadbtest.Start(t), down: mariadbtest.Start(t)}
	e.upDB, e.downDB = e.up.DB(t), e.down.DB(t)
	e.up.Exec(t, e.upDB,
		"CREATE DATABASE db_1",
		"CREATE TABLE db_1.t_1 (id INT PRIMARY KEY, v VARCHAR(20))",
		"CREATE TABLE db_1.t_2 (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO db_1.t_1 VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"INSERT INTO db_1.t_2 VALUES (10, 'x')",
		"ANALYZE TABLE db_1.t_1, db_1.t_2",
	)
	return e
}

// task is the task of mode with extra top-level YAML, and its source as user.
func (e *env) task(mode, user, extra string) (*config.Task, map[string]*config.Source) {
	e.t.Helper()
	loaderName := ""
	if strings.Contains(extra, "loaders:") {
		loaderName = "    loader-config-name: global\n"
	}
	body := fmt.Sprintf(`name: chk
task-mode: %s
meta-schema: dm_meta
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
mysql-instances:
  - source-id: s1
    block-allow-list: bw
    route-rules: [route-table, route-schema]
%sblock-allow-list:
  bw:
    do-dbs: ["db_*"]
routes:
  route-table:
    schema-pattern: "db_*"
    table-pattern: "t_*"
    target-schema: db
    target-table: t
  route-schema:
    schema-pattern: "db_*"
    target-schema: db
%s`, mode, e.down.Port, loaderName, extra)
	task, err := config.ParseTask("task.yaml", []byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	src, err := config.ParseSource("source.yaml", []byte(fmt.Sprintf("source-id: s1\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: %d\n  user: %s\n  password: pw\n", e.up.Port, user)))
	if err != nil {
		e.t.Fatal(err)
	}
	if user == "root" {
		src.From.Password = ""
	}
	return task, map[string]*config.Source{"s1": src}
}

func (e *env) user(name string, grants ...string) {
	e.t.Helper()
	e.up.Exec(e.t, e.upDB, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'pw'", name))
	for _, g := range grants {
		e.up.Exec(e.t, e.upDB, fmt.Sprintf("GRANT %s TO '%s'@'127.0.0.1'", g, name))
	}
}

func find(fs []Failure, item string, level Level) []Failure {
	var out []Failure
	for _, f := range fs {
		if f.Item == item && f.Level == level {
			out = append(out, f)
		}
	}
	return out
}

func mustContain(t *testing.T, f []Failure, parts ...string) {
	t.Helper()
	t.Log(Report(f))
	if len(f) != 1 {
		t.Fatalf("want one result, got %d: %s", len(f), Report(f))
	}
	for _, p := range parts {
		if !strings.Contains(f[0].String(), p) {
			t.Fatalf("%q lacks %q", f[0].String(), p)
		}
	}
}

func TestDumpPrivilegeWithoutReloadOnMariaDBWarns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.user("norel", "SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*")
	e.user("withrel", "SELECT, RELOAD, REPLICATION SLAVE, BINLOG MONITOR ON *.*")
	e.user("noclient", "SELECT, RELOAD, REPLICATION SLAVE ON *.*")

	task, srcs := e.task("all", "norel", "")
	fs := Check(ctx, task, srcs, false)
	if Failed(fs) {
		t.Fatalf("a MariaDB user without RELOAD must not fail the precheck:\n%s", Report(fs))
	}
	mustContain(t, find(fs, ItemDumpPrivilege, Warning), "[dump_privilege warning] source s1", "RELOAD", "one connection")
	mustContain(t, find(fs, ItemLoadSize, Info), "[load_size info] source s1", "2 tables", "about 4 rows")

	task, srcs = e.task("all", "withrel", "")
	fs = Check(ctx, task, srcs, false)
	if Failed(fs) || len(find(fs, ItemDumpPrivilege, Warning)) != 0 {
		t.Fatalf("a user with RELOAD:\n%s", Report(fs))
	}

	// Under the read lock the load reads SHOW MASTER STATUS. (task-mode full: the replication
	// check does not run.)
	task, srcs = e.task("full", "noclient", "")
	fs = Check(ctx, task, srcs, false)
	mustContain(t, find(fs, ItemDumpPrivilege, Error), "REPLICATION CLIENT")
	if len(find(fs, ItemReplPrivilege, Error)) != 0 {
		t.Fatalf("task-mode full checks no replication privilege:\n%s", Report(fs))
	}

	// ignore-checking-items takes dump_privilege and load_size.
	task, srcs = e.task("all", "norel", `ignore-checking-items: ["dump_privilege", "load_size"]`+"\n")
	if fs = Check(ctx, task, srcs, false); len(fs) != 0 {
		t.Fatalf("ignored items reported:\n%s", Report(fs))
	}

	// An incremental task checks nothing of the load (meta_position: TestMetaPosition).
	task, srcs = e.task("incremental", "norel", `ignore-checking-items: ["meta_position"]`+"\n")
	if fs = Check(ctx, task, srcs, false); len(fs) != 0 {
		t.Fatalf("incremental task:\n%s", Report(fs))
	}
}

func TestDumpPrivilegeNamesTablesWithoutSelect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// t_2 is visible (INSERT) but not readable.
	e.user("partial", "RELOAD, BINLOG MONITOR ON *.*", "SELECT ON db_1.t_1", "INSERT ON db_1.t_2")
	task, srcs := e.task("full", "partial", "")
	fs := Check(ctx, task, srcs, false)
	mustContain(t, find(fs, ItemDumpPrivilege, Error), "SELECT on `db_1`.`t_2`")
	if f := find(fs, ItemDumpPrivilege, Error); strings.Contains(f[0].Message, "t_1") {
		t.Fatalf("t_1 is readable: %s", f[0])
	}
	mustContain(t, find(fs, ItemDumpPrivilege, Warning), "no SELECT ON *.*", "2 replicated tables")
}

func TestSnapshotGrantsOnMySQL(t *testing.T) {
	for _, c := range []struct {
		global       string
		mariadb      bool
		errs, warns  int
		errsContains string
	}{
		{"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`\n", false, 1, 0, "MySQL has no lock-free way"},
		{"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`\n", true, 0, 1, ""},
		{"GRANT SELECT, RELOAD, REPLICATION CLIENT ON *.* TO `u`@`%`\n", false, 0, 0, ""},
		{"GRANT SELECT, RELOAD ON *.* TO `u`@`%`\n", false, 1, 0, "REPLICATION CLIENT"},
		{"GRANT RELOAD, BINLOG MONITOR ON *.* TO `u`@`%`\n", true, 0, 0, ""},
		{"GRANT ALL PRIVILEGES ON *.* TO `u`@`%`\n", false, 0, 0, ""},
	} {
		errs, warns := snapshotGrants(c.global, c.mariadb)
		if len(errs) != c.errs || len(warns) != c.warns || c.errsContains != "" && !strings.Contains(strings.Join(errs, ""), c.errsContains) {
			t.Errorf("%q mariadb=%v: errors %q, warnings %q", c.global, c.mariadb, errs, warns)
		}
	}
}

func TestTableEmpty(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task, srcs := e.task("all", "root", "")

	// No target yet, or an empty one of the same shape: fine.
	if fs := Check(ctx, task, srcs, false); Failed(fs) {
		t.Fatalf("no target:\n%s", Report(fs))
	}
	e.down.Exec(t, e.downDB, "CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(20))")
	if fs := Check(ctx, task, srcs, false); Failed(fs) {
		t.Fatalf("empty target:\n%s", Report(fs))
	}

	// A target holding rows fails, naming it and the way out.
	e.down.Exec(t, e.downDB, "INSERT INTO db.t VALUES (100, 'mine')")
	fs := Check(ctx, task, srcs, false)
	mustContain(t, find(fs, ItemTableEmpty, Error), "[table_empty] downstream", "`db`.`t`", "holds rows", "source s1", "on-duplicate", "ignore or replace")
	if !Failed(fs) {
		t.Fatal("not failed")
	}
	// start-task --remove-meta checks it too.
	mustContain(t, find(Check(ctx, task, srcs, true), ItemTableEmpty, Error), "`db`.`t`")

	// on-duplicate replace (or ignore) merges into it.
	for _, od := range []string{"on-duplicate: replace", "on-duplicate-logical: ignore"} {
		task, srcs := e.task("all", "root", "loaders:\n  global:\n    "+od+"\n")
		if fs := Check(ctx, task, srcs, false); Failed(fs) {
			t.Fatalf("%s:\n%s", od, Report(fs))
		}
	}
	// An incremental task writes into existing tables as it always did.
	task2, srcs2 := e.task("incremental", "root", "")
	if fs := Check(ctx, task2, srcs2, false); Failed(fs) {
		t.Fatalf("incremental:\n%s", Report(fs))
	}

	// The existing-target compatibility check still applies.
	e.down.Exec(t, e.downDB, "ALTER TABLE db.t ADD COLUMN extra INT")
	fs = Check(ctx, task, srcs, false)
	mustContain(t, find(fs, ItemTableSchema, Error), "`db`.`t`", "left untouched")
	e.down.Exec(t, e.downDB, "DROP TABLE db.t")

	// A table of the hidden table's name that the task did not create is in the load's way: it is
	// not the task's to drop.
	hidden := vocab.TableName{Schema: "db", Name: loader.HiddenName("chk", vocab.TableName{Schema: "db", Name: "t"})}
	e.down.Exec(t, e.downDB, "CREATE TABLE "+hidden.String()+" (id INT PRIMARY KEY, v VARCHAR(20))")
	fs = find(Check(ctx, task, srcs, false), ItemTableEmpty, Error)
	mustContain(t, fs, hidden.String(), "did not create", "rename it")
	if strings.Contains(fs[0].Message, "drop") {
		t.Fatalf("asks to drop a table the task did not create: %s", fs[0])
	}
	// One marked by a load of the task whose checkpoint is gone is the task's: drop it.
	e.down.Exec(t, e.downDB, "ALTER TABLE "+hidden.String()+" COMMENT = 'tributary load 0123456789abcdef of task chk'")
	mustContain(t, find(Check(ctx, task, srcs, false), ItemTableEmpty, Error), hidden.String(), "earlier load of task chk", "drop it")

	// One that the task's load header names, marked by that load, is the load's own: resumed, or
	// dropped by --remove-meta.
	writeHeader(t, e.downDB, "s1", `{"state":"loading","load_id":"0123456789abcdef","targets":[{"target":{"schema":"db","name":"t"},"hidden":"`+hidden.Name+`"}]}`)
	for _, fresh := range []bool{false, true} {
		if fs := Check(ctx, task, srcs, fresh); Failed(fs) {
			t.Fatalf("hidden table in the task's load header (fresh %v):\n%s", fresh, Report(fs))
		}
	}
	// A resumed load placed its targets already: rows in them are the load's.
	e.down.Exec(t, e.downDB, "DROP TABLE "+hidden.String(), "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO db.t VALUES (1, 'a')")
	writeHeader(t, e.downDB, "s1", `{"state":"loading","targets":[{"target":{"schema":"db","name":"t"}}]}`)
	fs = Check(ctx, task, srcs, false)
	if Failed(fs) {
		t.Fatalf("resumed load:\n%s", Report(fs))
	}
	mustContain(t, find(fs, ItemLoadSize, Info), "resumes")
}

func TestSwitchedLoadChecksNoLoad(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.user("norel", "SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*")
	e.down.Exec(t, e.downDB, "CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO db.t VALUES (1, 'a')")
	writeHeader(t, e.downDB, "s1", `{"state":"switched","targets":[{"target":{"schema":"db","name":"t"},"hidden":"_tributary_load_t"}]}`)
	task, srcs := e.task("all", "norel", "")
	if fs := Check(ctx, task, srcs, false); len(fs) != 0 {
		t.Fatalf("a switched load:\n%s", Report(fs))
	}
	// --remove-meta loads again: the target holding rows is in the way.
	fs := Check(ctx, task, srcs, true)
	mustContain(t, find(fs, ItemTableEmpty, Error), "`db`.`t`")
	mustContain(t, find(fs, ItemDumpPrivilege, Warning), "RELOAD")
}

func writeHeader(t *testing.T, db *sql.DB, source, data string) {
	t.Helper()
	ctx := context.Background()
	if err := meta.Init(ctx, db, "dm_meta", "chk"); err != nil {
		t.Fatal(err)
	}
	st := meta.NewStore(db, "dm_meta", "chk", source)
	if err := st.WriteLoad(ctx, db, meta.LoadRow{ID: meta.LoadPrefix, Pos: vocab.Position{File: "mysql-bin.000001", Pos: 4}, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// TestMetaPosition: an incremental task's meta must name a position the source has (the file in SHOW
// BINARY LOGS, the position inside it, a GTID the binlog reaches); a source without a meta is said to
// start at its current position; a checkpoint, when there is one, is where the task resumes instead.
func TestMetaPosition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task, srcs := e.task("incremental", "root", "")
	mustContain(t, find(Check(ctx, task, srcs, false), ItemMetaPosition, Warning), NoMeta, "rows written before are not copied")

	var file string
	var pos int64
	if err := e.upDB.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, new(any), new(any)); err != nil {
		t.Fatal(err)
	}
	task.MySQLInstances[0].Meta = &config.Meta{BinlogName: file, BinlogPos: uint32(pos)}
	if fs := find(Check(ctx, task, srcs, false), ItemMetaPosition, Error); len(fs) != 0 {
		t.Fatalf("a meta at the current position: %s", Report(fs))
	}
	task.MySQLInstances[0].Meta = &config.Meta{BinlogName: "pid-bin.000001", BinlogPos: 4}
	files, err := dbutil.BinaryLogs(ctx, e.upDB) // the first file is the server's choice
	if err != nil || len(files) == 0 {
		t.Fatalf("SHOW BINARY LOGS: %v %v", files, err)
	}
	mustContain(t, find(Check(ctx, task, srcs, false), ItemMetaPosition, Error), "pid-bin.000001 is not a binlog file", files[0].Name+" to "+file)
	task.MySQLInstances[0].Meta = &config.Meta{BinlogName: file, BinlogPos: uint32(pos) + 1000000}
	mustContain(t, find(Check(ctx, task, srcs, false), ItemMetaPosition, Error), "past the end of "+file)

	srcs["s1"].EnableGTID = true
	var gtid string
	if err := e.upDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	task.MySQLInstances[0].Meta = &config.Meta{BinlogGTID: gtid}
	if fs := find(Check(ctx, task, srcs, false), ItemMetaPosition, Error); len(fs) != 0 {
		t.Fatalf("a meta at the current GTID %s: %s", gtid, Report(fs))
	}
	task.MySQLInstances[0].Meta = &config.Meta{BinlogGTID: "0-1-99999999"}
	mustContain(t, find(Check(ctx, task, srcs, false), ItemMetaPosition, Error), "0-1-99999999", "does not reach")

	// task-mode all loads first: the meta is not where it starts.
	all, allSrcs := e.task("all", "root", "")
	all.MySQLInstances[0].Meta = &config.Meta{BinlogName: "pid-bin.000001", BinlogPos: 4}
	if fs := find(Check(ctx, all, allSrcs, false), ItemMetaPosition, Error); len(fs) != 0 {
		t.Fatalf("task-mode all: %s", Report(fs))
	}
}

// Shards counting from 1 on one server collide in their target, and a route that matches nothing is
// named: both are warnings, so the precheck passes.
func TestAutoIncrementAndUnmatchedRulesWarn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.up.Exec(t, e.upDB, "ALTER TABLE db_1.t_1 MODIFY id INT NOT NULL AUTO_INCREMENT", "ALTER TABLE db_1.t_2 MODIFY id INT NOT NULL AUTO_INCREMENT")
	task, srcs := e.task("all", "root", "")
	task.Routes["typo"] = config.RouteRule{SchemaPattern: "db_*", TablePattern: "evnts_*", TargetSchema: "db", TargetTable: "events"}
	task.MySQLInstances[0].RouteRules = append([]string{"typo"}, task.MySQLInstances[0].RouteRules...)
	fs := Check(ctx, task, srcs, false)
	if Failed(fs) {
		t.Fatalf("warnings fail the precheck:\n%s", Report(fs))
	}
	mustContain(t, find(fs, ItemAutoIncrement, Warning), "[auto_increment_ID warning]", "`db_1`.`t_1` on source s1", "`db_1`.`t_2` on source s1",
		"merged into `db`.`t`", "id 1 to 3", "id 10 to 10", "auto_increment_offset 1, auto_increment_increment 1")
	mustContain(t, find(fs, ItemUnmatchedRules, Warning), "[unmatched_rules warning] source s1", "route rule typo", `table-pattern "evnts_*"`, "`db`.`events`")

	// A composite key (the shard's number and the id) does not collide; ignore-checking-items takes
	// both items.
	e.up.Exec(t, e.upDB, "ALTER TABLE db_1.t_1 ADD COLUMN shard INT NOT NULL DEFAULT 1, DROP PRIMARY KEY, ADD PRIMARY KEY (id, shard)",
		"ALTER TABLE db_1.t_2 ADD COLUMN shard INT NOT NULL DEFAULT 2, DROP PRIMARY KEY, ADD PRIMARY KEY (id, shard)")
	if fs = Check(ctx, task, srcs, false); len(find(fs, ItemAutoIncrement, Warning)) != 0 {
		t.Fatalf("a composite key:\n%s", Report(fs))
	}
	task.IgnoreCheckingItems = []string{ItemUnmatchedRules, ItemLoadSize}
	if fs = Check(ctx, task, srcs, false); len(fs) != 0 {
		t.Fatalf("ignored items reported:\n%s", Report(fs))
	}
}
