package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// fails runs dmctl and returns its output, failing the test unless the command was refused (exit
// status non-zero, or "result": false).
func (c *e2eCluster) fails(args ...string) string {
	c.t.Helper()
	r, out, err := c.Dmctl(args...)
	if err == nil && r.Bool("result") {
		c.t.Fatalf("dmctl %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return out
}

func contains(t *testing.T, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Fatalf("output does not mention %q:\n%s", s, out)
		}
	}
}

func (c *e2eCluster) noTask() {
	c.t.Helper()
	out := c.fails("query-status", c.task)
	contains(c.t, out, "has no source or not exist")
}

func (c *e2eCluster) writeFile(name, body string) string {
	c.t.Helper()
	path := filepath.Join(c.Dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// Bad task and source files, missing sources, unreachable databases and failing prechecks are
// refused with the file, field or check item named, and nothing is started or changed.
func TestE2EBadInputIsRefusedAndChangesNothing(t *testing.T) {
	c := startCluster(t, 2, false)
	good, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(good)

	// A typo in a key: refused by dmctl before anything is sent, naming the file and the key.
	typo := c.writeFile("typo.yaml", strings.Replace(string(body), "meta-schema:", "meta-shema:", 1))
	out := c.fails("start-task", typo)
	contains(t, out, "typo.yaml", "meta-shema")
	// A route rule that does not exist.
	norule := c.writeFile("norule.yaml", strings.Replace(string(body), "route-rules: [route-table, route-schema]", "route-rules: [route-tabel]", 1))
	contains(t, c.fails("start-task", norule), "norule.yaml", "mysql-instances[0].route-rules", "route-tabel")
	// A task-mode that does not exist.
	badMode := c.writeFile("badmode.yaml", strings.Replace(string(body), "task-mode: incremental", "task-mode: everything", 1))
	contains(t, c.fails("start-task", badMode), "badmode.yaml", `task-mode "everything" must be all, full or incremental`)
	// A source that was never created.
	nosrc := c.writeFile("nosrc.yaml", strings.Replace(string(body), "source-id: "+s2, "source-id: mysql-replica-09", 1))
	contains(t, c.fails("start-task", nosrc), "mysql-instances[1].source-id mysql-replica-09", "operate-source create")
	// An unreachable downstream.
	down := c.writeFile("down.yaml", strings.Replace(string(body), "port: "+strconv.Itoa(c.Down.Port), "port: 1", 1))
	contains(t, c.fails("start-task", down), "[connection] downstream", "target-database")
	c.noTask()

	// Failing prechecks name the item and the source; ignore-checking-items skips an item.
	c.up(1, "SET GLOBAL binlog_format = 'STATEMENT'")
	contains(t, c.fails("check-task", good), "[binlog_format] source "+s2, "STATEMENT")
	contains(t, c.fails("start-task", good), "[binlog_format] source "+s2)
	c.noTask()
	ignore := c.writeFile("ignore.yaml", string(body)+"ignore-checking-items: [\"binlog_format\"]\n")
	if r := c.ok("check-task", ignore); !strings.Contains(r.Str("msg"), "pre-check is passed") {
		t.Fatalf("check-task with ignore-checking-items: %v", r)
	}
	c.up(1, "SET GLOBAL binlog_format = 'ROW'")

	// A source user without replication privileges.
	c.up(1, "CREATE USER 'plain'@'127.0.0.1' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'plain'@'127.0.0.1'")
	c.ok("operate-source", "stop", s2)
	plain := c.writeFile("plain.yaml", fmt.Sprintf("source-id: %s\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: %d\n  user: plain\n  password: pw\n", s2, c.Ups[1].Port))
	c.ok("operate-source", "create", plain)
	out = c.fails("check-task", good)
	contains(t, out, "[replication_privilege] source "+s2, "REPLICATION SLAVE", "REPLICATION CLIENT")
	if strings.Contains(out, "pw") {
		t.Fatalf("the password is in the output:\n%s", out)
	}
	c.ok("operate-source", "stop", s2)
	root, err := c.SourceFile(1)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("operate-source", "create", root)

	// Shards of one target with different schemas.
	c.up(1, "ALTER TABLE db_2.t_2 ADD COLUMN extra INT")
	contains(t, c.fails("check-task", good), "[schema_of_shard_tables] source "+s2, "`db_2`.`t_2`", "extra")
	c.up(1, "ALTER TABLE db_2.t_2 DROP COLUMN extra")

	// An existing downstream table of another schema is reported and left as it is.
	if _, err := c.DownDB.Exec("CREATE DATABASE db"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DownDB.Exec("CREATE TABLE db.t (id INT PRIMARY KEY, name TEXT)"); err != nil {
		t.Fatal(err)
	}
	contains(t, c.fails("start-task", good), "[table_schema] downstream", "`db`.`t`", "left untouched")
	c.noTask()
	if n := downColumnsNamed(t, c, "name"); n != 1 {
		t.Fatal("the existing downstream table was changed")
	}
	if _, err := c.DownDB.Exec("DROP TABLE db.t"); err != nil {
		t.Fatal(err)
	}

	// A target user without privileges on the meta schema: the precheck names the schema and what
	// the server refused, and nothing starts.
	asUser := func(name, user string) string {
		target := fmt.Sprintf("port: %d\n  user: root\n  password: \"\"", c.Down.Port)
		if !strings.Contains(string(body), target) {
			t.Fatalf("no target-database in the task file:\n%s", body)
		}
		return c.writeFile(name, strings.Replace(string(body), target, fmt.Sprintf("port: %d\n  user: %s\n  password: pw", c.Down.Port, user), 1))
	}
	for _, q := range []string{
		"CREATE USER 'nometa'@'%' IDENTIFIED BY 'pw'", "GRANT ALL ON db.* TO 'nometa'@'%'",
		"CREATE USER 'nodb'@'%' IDENTIFIED BY 'pw'", "GRANT " + meta.Privileges + " ON dm_meta.* TO 'nodb'@'%'", "GRANT SELECT, INSERT, UPDATE, DELETE ON db.* TO 'nodb'@'%'",
	} {
		if _, err := c.DownDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	nometa := asUser("nometa.yaml", "nometa")
	contains(t, c.fails("check-task", nometa), "[meta_schema] downstream", "meta-schema `dm_meta`", "Access denied for user 'nometa'", meta.Privileges)
	contains(t, c.fails("start-task", nometa), "precheck failed; nothing started", "[meta_schema] downstream", "`dm_meta`")
	c.noTask()
	// A target user that may not create the target table: the precheck names the grant, and nothing
	// starts. With that check ignored, the subtasks cannot start: start-task answers false with each
	// source's cause, and stop-task removes the task.
	nodb := asUser("nodb.yaml", "nodb")
	contains(t, c.fails("start-task", nodb), "precheck failed; nothing started", "[target_privilege]", "lacks CREATE, DROP, ALTER", "GRANT CREATE, DROP, ALTER")
	c.noTask()
	ignoring, err := os.ReadFile(nodb)
	if err != nil {
		t.Fatal(err)
	}
	out = c.fails("start-task", c.writeFile("nodb-ignoring.yaml", string(ignoring)+"ignore-checking-items: [\"target_privilege\"]\n"))
	contains(t, out, "did not start on "+s1+", "+s2, "denied", "'nodb'@", "stop-task "+c.task)
	c.ok("stop-task", c.task)
	c.noTask()

	// Sources: an unreachable one is not created; one in use cannot be stopped.
	bad := c.writeFile("badsrc.yaml", "source-id: mysql-replica-03\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: 1\n  user: root\n")
	contains(t, c.fails("operate-source", "create", bad), "mysql-replica-03", "cannot connect")
	if r := c.ok("operate-source", "show"); len(r.List("sources")) != 2 {
		t.Fatalf("operate-source show after a refused create: %v", r)
	}
	contains(t, c.fails("operate-source", "create", c.writeFile("typo-src.yaml", "source-id: x\nfrom:\n  host: h\n  port: 3306\n  user: u\n  pasword: p\n")),
		"typo-src.yaml", "pasword")

	// Now the good task starts; its source cannot be stopped under it; unknown tasks are named.
	c.ok("start-task", good)
	contains(t, c.fails("operate-source", "stop", s1), "used by task shard")
	contains(t, c.fails("start-task", good), "already started")
	contains(t, c.fails("pause-task", "nosuchtask"), "nosuchtask has no source or not exist")
	c.up(0, insertRows("db_1.t_1", 0, 10, ""))
	c.converge("id, v")

	// A dmctl usage error exits 2 with the usage.
	cmd := exec.Command(filepath.Join(c.Bin, "dmctl"), "--master-addr", c.Master.Addr, "shard-ddl-lock", "unlock")
	outb, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(outb), "LOCK-ID") {
		t.Fatalf("dmctl usage error: %v\n%s", err, outb)
	}
}

func downColumnsNamed(t *testing.T, c *e2eCluster, col string) int {
	t.Helper()
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = ?", col).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestE2EDmctlDMForms: the dmctl forms DM's documentation uses beside the ones the other tests use.
// -s/--source (repeated or comma-separated) filters query-status and operate-source show; on a task
// command it is refused, changing nothing, when it names a source the task does not have (the
// commands on a part of the sources are sources_test.go's). config task|source (and DM's
// get-config) prints the file as stored, its password encrypted. DM commands Tributary lacks are refused,
// saying why.
func TestE2EDmctlDMForms(t *testing.T) {
	c := startE2E(t, 2)
	s1, s2 := e2e.SourceID(0), e2e.SourceID(1)
	r := c.ok("query-status", "-s", s2, c.task)
	if srcs := r.List("sources"); len(srcs) != 1 || srcs[0].Get("sourceStatus").Str("source") != s2 {
		t.Fatalf("query-status -s %s: %v", s2, r)
	}
	r = c.ok("operate-source", "show", "--source", s1)
	if srcs := r.List("sources"); len(srcs) != 1 || srcs[0].Str("source") != s1 {
		t.Fatalf("operate-source show --source %s: %v", s1, r)
	}
	contains(t, c.fails("query-status", "-s", "mysql-replica-09", c.task), "mysql-replica-09: not a source of task "+c.task)
	contains(t, c.fails("stop-task", "-s", s1+",mysql-replica-09", c.task), "stop-task -s mysql-replica-09: not a source of task")
	c.waitStage("Running") // nothing was paused or stopped
	// query-status's sync counters, as DM's: rows committed, and no lag once synced.
	for i := range 10 {
		c.up(0, fmt.Sprintf("INSERT INTO db_1.t_1 (id, v) VALUES (%d, 'counted')", 5001+i))
	}
	c.waitRow(5010)
	c.waitSynced()
	rows := 0
	for _, sub := range subtasks(c.ok("query-status", c.task)) {
		n, err := strconv.Atoi(sub.Get("sync").Str("totalRows"))
		if err != nil || sub.Get("sync").Str("secondsBehindMaster") != "0" {
			t.Fatalf("sync status %v", sub.Get("sync"))
		}
		rows += n
	}
	if rows < 10 {
		t.Fatalf("query-status counts %d rows committed, want at least 10", rows)
	}

	// Without a task name, DM's list of tasks; --more gives every source's subtasks.
	taskStatus := func() (string, []string) {
		t.Helper()
		r := c.ok("query-status")
		tasks := r.List("tasks")
		if len(tasks) != 1 || tasks[0].Str("taskName") != c.task || len(r.List("sources")) != 0 {
			t.Fatalf("query-status without a task: %v", r)
		}
		return tasks[0].Str("taskStatus"), tasks[0].Strings("sources")
	}
	if st, srcs := taskStatus(); st != "Running" || !slices.Equal(srcs, []string{s1, s2}) {
		t.Fatalf("query-status: task %s is %q on %q", c.task, st, srcs)
	}
	if r := c.ok("query-status", "--more"); len(r.List("sources")) != 2 || len(r.List("tasks")) != 0 {
		t.Fatalf("query-status --more: %v", r)
	}
	c.ok("pause-task", "-s", s1, "-s", s2, c.task)
	c.waitStage("Paused")
	if st, _ := taskStatus(); st != "Paused" {
		t.Fatalf("query-status after pause-task: %q", st)
	}
	c.ok("resume-task", "--source", s1+","+s2, c.task)
	c.waitStage("Running")

	// The task file as stored: the password was encrypted before it went into etcd.
	c.up(0, "CREATE USER 'tr_cfg'@'%' IDENTIFIED BY 'Pl4in-Secret'", "GRANT ALL ON *.* TO 'tr_cfg'@'%'")
	f, err := c.SourceFile(0)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(f)
	body := strings.Replace(strings.Replace(string(data), `password: ""`, `password: "Pl4in-Secret"`, 1), "user: root", "user: tr_cfg", 1)
	body = strings.Replace(body, "source-id: "+s1, "source-id: cfg-src", 1)
	c.ok("operate-source", "create", c.writeFile("cfg-src.yaml", body))
	for _, cmd := range []string{"config", "get-config"} {
		cfg := c.ok(cmd, "source", "cfg-src").Str("cfg")
		if !strings.Contains(cfg, "cfg-src") || !strings.Contains(cfg, "tr_cfg") || strings.Contains(cfg, "Pl4in-Secret") {
			t.Fatalf("%s source cfg-src printed:\n%s", cmd, cfg)
		}
	}
	if cfg := c.ok("config", "task", c.task).Str("cfg"); !strings.Contains(cfg, "name: "+c.task) && !strings.Contains(cfg, `name: "`+c.task+`"`) {
		t.Fatalf("config task %s printed:\n%s", c.task, cfg)
	}
	contains(t, c.fails("config", "source", "nope"), "source nope not found")
	contains(t, c.fails("config", "worker", "w1"), "config needs task TASK-NAME or source SOURCE-ID")
	contains(t, c.fails("transfer-source", s1, "nope"), "worker nope is not registered")
	taskFile, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, c.fails("update-task", taskFile), "update-task is a DM command Tributary does not support yet")
	contains(t, c.fails("start-task", "--start-time", "2021-10-21", taskFile), `--start-time "2021-10-21" is not a time`, "YYYY-MM-DD HH:MM:SS")
}

// TestE2ESourceFilters: a source file's filters (DM's source-level binlog event filter) apply to every
// task of the source, after the task's own: here a RENAME of one shard, which a task refuses, is
// ignored, and the task goes on. A bad rule is refused at operate-source create, naming it.
func TestE2ESourceFilters(t *testing.T) {
	c := startCluster(t, 2, false)
	s2 := e2e.SourceID(1)
	f, err := c.SourceFile(1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	bad := c.writeFile("bad-source.yaml", strings.Replace(string(data), "source-id: "+s2, "source-id: bad-src", 1)+
		"filters:\n  - schema-pattern: \"db_2\"\n    events: [\"rename tables\"]\n    action: Ignore\n")
	contains(t, c.fails("operate-source", "create", bad), `filters[0]: unknown event "rename tables"`)
	c.ok("operate-source", "stop", s2)
	withFilter := c.writeFile("source2-filters.yaml", string(data)+
		"filters:\n  - schema-pattern: \"db_2\"\n    table-pattern: \"t_2\"\n    events: [\"rename table\"]\n    action: Ignore\n")
	c.ok("operate-source", "create", withFilter)
	task, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	c.ok("start-task", task)
	c.waitStage("Running")
	c.up(1, "INSERT INTO db_2.t_2 (id, v) VALUES (1, 'before')", "RENAME TABLE db_2.t_2 TO db_2.t_old",
		"INSERT INTO db_2.t_1 (id, v) VALUES (901, 'after the rename')")
	c.waitRow(901)
	c.waitStage("Running")
	wantCut := 0 // the load's cut-over renames db.t into place, once
	if c.TaskMode() != "incremental" {
		wantCut = 1
	}
	if cut, other := c.renames(); other != 0 || cut != wantCut {
		t.Fatalf("%d RENAME statements downstream besides the load's cut-over (%d, want %d)", other, cut, wantCut)
	}
}
