package integration

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/tests/framework/mysqlprimary"
)

// mysqlShard is one emulated MySQL primary with its shard table db_N.t_1, and the rows the test
// wrote to it (id → v, with c once the table has it).
type mysqlShard struct {
	p       *mysqlprimary.Primary
	catalog *sql.DB
	db      string
	table   *mysqlprimary.Table
	want    map[int]string
}

// startCatalog starts a throw-away MariaDB for an emulated primary's information_schema and runs
// stmts on it.
func startCatalog(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	srv, err := mariadbtest.Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	catalog, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Close() })
	for _, q := range stmts {
		if _, err := catalog.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return catalog
}

func startMySQLShard(t *testing.T, version string, n int) *mysqlShard {
	t.Helper()
	db := fmt.Sprintf("db_%d", n)
	// The emulation answers information_schema from a throw-away MariaDB with the same table.
	catalog := startCatalog(t, "CREATE DATABASE "+db, "CREATE TABLE "+db+".t_1 (id INT PRIMARY KEY, v VARCHAR(32))")
	p, err := mysqlprimary.Start(mysqlprimary.Options{Version: version, ServerID: uint32(n), Password: "Secr3t!", Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// MINIMAL metadata (MySQL's default): the rows carry no column names; the tracker reads them
	// from SHOW CREATE TABLE, as MySQL 8.0.36 prints it.
	p.CreateTable(db, "t_1", "CREATE TABLE `t_1` (\n  `id` int NOT NULL,\n  `v` varchar(32) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci")
	tbl := &mysqlprimary.Table{ID: uint64(100 + n), Schema: db, Name: "t_1", Minimal: true, Columns: []mysqlprimary.Column{
		{Name: "id", Type: mysql.MYSQL_TYPE_LONG},
		{Name: "v", Type: mysql.MYSQL_TYPE_VARCHAR, Meta: 128, Nullable: true},
	}}
	return &mysqlShard{p: p, catalog: catalog, db: db, table: tbl, want: map[int]string{}}
}

// insert commits one transaction of rows from..to-1 (tag: a tagged GTID).
func (s *mysqlShard) insert(tag string, from, to int) {
	var rows [][]any
	for id := from; id < to; id++ {
		v := fmt.Sprintf("v%d", id)
		row := []any{id, v}
		if len(s.table.Columns) == 3 {
			row = append(row, id%7)
			v += fmt.Sprintf("/%d", id%7)
		}
		rows = append(rows, row)
		s.want[id] = v
	}
	s.p.Commit(tag, mysqlprimary.TableMap{Table: s.table}, mysqlprimary.Rows{Kind: replication.WRITE_ROWS_EVENTv2, Table: s.table, Rows: rows, Last: true})
}

// addColumnC writes ALTER TABLE ... ADD COLUMN c INT and maps the table with its new shape.
func (s *mysqlShard) addColumnC() {
	s.p.DDL("", s.db, "ALTER TABLE t_1 ADD COLUMN c INT")
	if _, err := s.catalog.Exec("ALTER TABLE " + s.db + ".t_1 ADD COLUMN c INT"); err != nil {
		panic(err)
	}
	next := *s.table
	next.ID += 50
	next.Columns = append(append([]mysqlprimary.Column(nil), s.table.Columns...), mysqlprimary.Column{Name: "c", Type: mysql.MYSQL_TYPE_LONG, Nullable: true})
	s.table = &next
}

func (s *mysqlShard) sourceFile(t *testing.T, dir string, i int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("mysql-source%d.yaml", i+1))
	body := fmt.Sprintf("source-id: %s\nenable-gtid: true\nflavor: mysql\nfrom:\n  host: 127.0.0.1\n  port: %d\n  user: root\n  password: \"Secr3t!\"\n",
		e2e.SourceID(i), s.p.Port())
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2EMySQL8GTIDShardMerge: two emulated MySQL primaries, 8.0 and 8.4, in GTID mode with MINIMAL
// row metadata, merged into a real MariaDB through the binaries: rows, a shard DDL lock, tagged
// GTIDs, a compressed transaction, a dropped connection and a worker killed with -9. The merged
// table equals what the events say, and the DDL ran once.
func TestE2EMySQL8GTIDShardMerge(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, NoUpstreams: true}, false)
	shards := []*mysqlShard{startMySQLShard(t, "8.0.36", 1), startMySQLShard(t, "8.4.3", 2)}
	for i, s := range shards {
		s.insert("", i*1000+1, i*1000+6) // before the task: not replicated (incremental from now)
		c.ok("operate-source", "create", s.sourceFile(t, c.Dir, i))
	}
	for _, s := range shards {
		s.want = map[int]string{}
	}
	task := filepath.Join(c.Dir, "mysql.yaml")
	body := fmt.Sprintf(`name: mysql
task-mode: incremental
shard-mode: pessimistic
meta-schema: dm_meta
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
mysql-instances:
  - source-id: %s
    block-allow-list: bw
    route-rules: [route-table, route-schema]
  - source-id: %s
    block-allow-list: bw
    route-rules: [route-table, route-schema]
block-allow-list:
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
`, c.Down.Port, e2e.SourceID(0), e2e.SourceID(1))
	if err := os.WriteFile(task, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c.task = "mysql"
	c.ok("start-task", task)
	running := func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			if s.Str("stage") != "Running" || s.Str("unit") != "Sync" {
				return false
			}
		}
		return len(subs) == 2
	}
	c.until("both MySQL sources running", running, "query-status", c.task)

	check := func(what string) {
		t.Helper()
		var want []string
		for _, s := range shards {
			for id, v := range s.want {
				want = append(want, fmt.Sprintf("%d|%s", id, v))
			}
		}
		sort.Strings(want)
		var got []string
		_, err := c.Until(90*time.Second, func(e2e.Result) bool {
			cols := "id, CONCAT(v, IF(c IS NULL, '', CONCAT('/', c)))"
			if downColumns(t, c) < 3 {
				cols = "id, v"
			}
			var err error
			got, err = e2e.Rows(c.DownDB, "SELECT "+cols+" FROM db.t ORDER BY id")
			if err != nil {
				return false
			}
			sort.Strings(got)
			return strings.Join(got, ",") == strings.Join(want, ",")
		}, "query-status", c.task)
		if err != nil {
			t.Fatalf("%s: %d rows downstream, %d written; first difference: %s", what, len(got), len(want), e2e.FirstDiff(got, want))
		}
	}

	shards[0].insert("", 1006, 1016)
	shards[1].insert("", 2006, 2016)
	check("the rows after the start")

	// a shard DDL: the lock waits for the 8.4 source while its old-shape rows go on
	shards[0].addColumnC()
	c.until("the lock waits for source 2", func(r e2e.Result) bool { return len(r.List("locks")) == 1 }, "shard-ddl-lock", c.task)
	shards[1].insert("", 2016, 2020)
	shards[1].addColumnC()
	shards[0].insert("", 1016, 1020)
	shards[1].insert("", 2020, 2024)
	check("the rows around the lock")
	if n, err := c.DownstreamStatements("ALTER TABLE"); err != nil || n != 1 {
		t.Fatalf("ALTER TABLE reached the downstream %d times (%v), want once", n, err)
	}

	// tagged GTIDs (8.3+) and a compressed transaction (binlog_transaction_compression)
	shards[1].insert("batch", 2024, 2030)
	shards[1].p.SetCompression(true)
	shards[1].insert("", 2030, 2040)
	shards[1].p.SetCompression(false)
	check("tagged and compressed transactions")

	// a dropped connection, then each source's worker killed: both resume by GTID set
	shards[0].p.DropConnections()
	shards[0].insert("", 1020, 1030)
	check("rows after a dropped connection")
	for i, s := range shards {
		w := c.Worker(c.workerOf(e2e.SourceID(i)))
		w.Kill9()
		base := (i+1)*1000 + 60
		s.insert("", base, base+10)
		s.p.Rotate()
		s.insert("blue", base+10, base+20)
		if err := w.Restart(); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("rows after the kill -9 of source %d's worker", i+1))
	}

	// a failover behind each address: another primary with the same GTID history, other file names
	// and a new server UUID. The checkpoint is a GTID set, so the source goes on from it.
	for i, s := range shards {
		s.p.SwitchPrimary(uuid.New(), uint32(20+i), "replica-bin")
		base := (i+1)*1000 + 100
		s.insert("", base, base+10)
		check(fmt.Sprintf("rows after a primary switch of source %d", i+1))
	}
	if n, err := c.DownstreamStatements("ALTER TABLE"); err != nil || n != 1 {
		t.Fatalf("ALTER TABLE reached the downstream %d times (%v), want once", n, err)
	}
	for i, s := range shards {
		if _, unknown := s.p.Queries(); len(unknown) > 0 {
			t.Logf("source %d was sent queries the emulation does not answer: %q", i+1, unknown)
		}
	}
}

// TestE2EMySQL8RowShapes: what MySQL 8's row images hold that MariaDB's do not, through the binaries
// into MariaDB: binary JSON, an invisible column and a generated invisible primary key (my_row_id,
// in the row image like any column), with MINIMAL metadata (the tracker reads the columns) and MySQL's
// SHOW CREATE TABLE (/*!80023 INVISIBLE */, utf8mb4_0900_ai_ci); then a partial JSON update
// (binlog_row_value_options=PARTIAL_JSON), which stops the subtask with the reason rather than being
// written wrong.
func TestE2EMySQL8RowShapes(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 1, NoUpstreams: true}, false)
	// the catalog (MariaDB) has the same columns, invisible ones included, for information_schema
	catalog := startCatalog(t, "CREATE DATABASE db_1",
		"CREATE TABLE db_1.t_1 (my_row_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT INVISIBLE, id INT NOT NULL, doc JSON, secret VARCHAR(20) INVISIBLE, PRIMARY KEY (my_row_id))")
	p, err := mysqlprimary.Start(mysqlprimary.Options{Version: "8.0.36", Password: "Secr3t!", Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// SHOW CREATE TABLE of a table created with sql_generate_invisible_primary_key=ON (8.0.30+),
	// as the reference manual's "Generated Invisible Primary Keys" page shows it.
	p.CreateTable("db_1", "t_1", "CREATE TABLE `t_1` (\n  `my_row_id` bigint unsigned NOT NULL AUTO_INCREMENT /*!80023 INVISIBLE */,\n  `id` int NOT NULL,\n  `doc` json DEFAULT NULL,\n  `secret` varchar(20) DEFAULT NULL /*!80023 INVISIBLE */,\n  PRIMARY KEY (`my_row_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci")
	tbl := &mysqlprimary.Table{ID: 7, Schema: "db_1", Name: "t_1", Minimal: true, Columns: []mysqlprimary.Column{
		{Name: "my_row_id", Type: mysql.MYSQL_TYPE_LONGLONG, Unsigned: true, Invisible: true},
		{Name: "id", Type: mysql.MYSQL_TYPE_LONG},
		{Name: "doc", Type: mysql.MYSQL_TYPE_JSON, Meta: 4, Nullable: true},
		{Name: "secret", Type: mysql.MYSQL_TYPE_VARCHAR, Meta: 80, Nullable: true, Invisible: true},
	}}
	src := (&mysqlShard{p: p}).sourceFile(t, c.Dir, 0)
	c.ok("operate-source", "create", src)
	task := filepath.Join(c.Dir, "shapes.yaml")
	body := fmt.Sprintf("name: shapes\ntask-mode: incremental\nshard-mode: pessimistic\nmeta-schema: dm_meta\ntarget-database:\n  host: 127.0.0.1\n  port: %d\n  user: root\n  password: \"\"\nmysql-instances:\n  - source-id: %s\n    route-rules: [r]\nroutes:\n  r:\n    schema-pattern: db_1\n    table-pattern: t_1\n    target-schema: db\n    target-table: t\n", c.Down.Port, e2e.SourceID(0))
	if err := os.WriteFile(task, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c.task = "shapes"
	c.ok("start-task", task)
	c.until("the source running", func(r e2e.Result) bool {
		subs := subtasks(r)
		return len(subs) == 1 && subs[0].Str("stage") == "Running" && subs[0].Str("unit") == "Sync"
	}, "query-status", c.task)

	docs := map[int]any{
		1: map[string]any{"name": "Zoë", "tags": []any{"a", 2, 2.5, true, nil}, "n": int64(1) << 40},
		2: []any{map[string]any{"deep": map[string]any{"x": -3}}, "日本"},
		3: "just a string",
		4: nil,
	}
	var rows [][]any
	for id := 1; id <= 4; id++ {
		rows = append(rows, []any{uint64(100 + id), id, docs[id], fmt.Sprintf("s%d", id)})
	}
	p.Commit("", mysqlprimary.TableMap{Table: tbl}, mysqlprimary.Rows{Kind: replication.WRITE_ROWS_EVENTv2, Table: tbl, Rows: rows, Last: true})
	docs[2] = map[string]any{"replaced": true}
	p.Commit("", mysqlprimary.TableMap{Table: tbl},
		mysqlprimary.Rows{Kind: replication.UPDATE_ROWS_EVENTv2, Table: tbl, Rows: [][]any{rows[1], {uint64(102), 2, docs[2], "s2b"}}},
		mysqlprimary.Rows{Kind: replication.DELETE_ROWS_EVENTv2, Table: tbl, Rows: [][]any{rows[2]}, Last: true})
	delete(docs, 3)
	secrets := map[int]string{1: "s1", 2: "s2b", 4: "s4"}

	var got map[int]string
	c.until("the JSON rows downstream", func(e2e.Result) bool {
		out, err := e2e.Rows(c.DownDB, "SELECT my_row_id, id, COALESCE(doc, 'NULL'), secret FROM db.t ORDER BY id")
		if err != nil || len(out) != len(docs) {
			return false
		}
		got = map[int]string{}
		for _, line := range out {
			f := strings.SplitN(line, "|", 4)
			var id int
			fmt.Sscan(f[1], &id)
			if f[0] != fmt.Sprint(100+id) || f[3] != secrets[id] {
				t.Fatalf("row %q: want my_row_id %d and secret %q", line, 100+id, secrets[id])
			}
			got[id] = f[2]
		}
		return true
	}, "query-status", c.task)
	for id, want := range docs {
		wantJSON, _ := json.Marshal(want)
		var a, b any
		if got[id] != "NULL" || want != nil {
			if err := json.Unmarshal([]byte(got[id]), &a); err != nil {
				t.Fatalf("row %d: downstream doc %q: %v", id, got[id], err)
			}
			json.Unmarshal(wantJSON, &b)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("row %d: doc %s downstream, %s written", id, got[id], wantJSON)
		}
	}
	if n := downColumnsOf(t, c, "db", "t"); n != 4 {
		t.Errorf("db.t has %d columns, want 4 (the invisible ones too)", n)
	}

	// binlog_row_value_options=PARTIAL_JSON: refused with the reason, nothing written
	p.Commit("", mysqlprimary.TableMap{Table: tbl}, mysqlprimary.Rows{Kind: replication.PARTIAL_UPDATE_ROWS_EVENT, Table: tbl,
		Rows: [][]any{{uint64(101), 1, docs[1], "s1"}, {uint64(101), 1, map[string]any{"name": "changed"}, "s1"}}, Last: true})
	c.until("the partial JSON update refused", func(r e2e.Result) bool {
		subs := subtasks(r)
		return len(subs) == 1 && subs[0].Str("stage") == "Paused" && strings.Contains(fmt.Sprint(subs[0]), "binlog_row_value_options")
	}, "query-status", c.task)
	var name string
	if err := c.DownDB.QueryRow("SELECT JSON_VALUE(doc, '$.name') FROM db.t WHERE id = 1").Scan(&name); err != nil || name != "Zoë" {
		t.Fatalf("row 1 after the refused partial update: name %q (%v), want it unchanged", name, err)
	}
}

// downColumnsOf counts a downstream table's columns, invisible ones included.
func downColumnsOf(t *testing.T, c *e2eCluster, db, table string) int {
	t.Helper()
	var n int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", db, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
