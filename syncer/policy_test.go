package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// policyRouter routes shard tables db_*.t_* to db.t and db_*.u_* to db.u, every other table of db_*
// onto the merged schema db, and replicates schema solo one to one.
func (c *cluster) policyRouter() {
	var err error
	c.router, err = router.NewRouter(&config.BAList{DoDBs: []string{"db_*", "solo"}}, []config.RouteRule{
		{SchemaPattern: "db_*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t"},
		{SchemaPattern: "db_*", TablePattern: "u_*", TargetSchema: "db", TargetTable: "u"},
		{SchemaPattern: "db_*", TargetSchema: "db"},
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// same waits until a downstream query gives what the upstream query gives on source i.
func (c *cluster) same(i int, upQuery, downQuery string) {
	c.t.Helper()
	want, err := e2e.Rows(c.upDBs[i], upQuery)
	if err != nil {
		c.t.Fatal(err)
	}
	var got []string
	wait.Eventually(c.t, 30*time.Second, func() bool {
		got, err = e2e.Rows(c.downDB, downQuery)
		return err == nil && slices.Equal(got, want)
	}, func() string {
		return fmt.Sprintf("downstream %q never matched upstream %q: %v (%v), want %v", downQuery, upQuery, got, err, want)
	})
}

func (c *cluster) downTables(schema string) []string {
	c.t.Helper()
	r, err := e2e.Rows(c.downDB, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+schema+"' ORDER BY 1")
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c *cluster) downScalar(q string) string {
	c.t.Helper()
	r, err := e2e.Rows(c.downDB, q)
	if err != nil || len(r) != 1 {
		c.t.Fatalf("%s: %v %v", q, r, err)
	}
	return r[0]
}

// TestDDLSafetyTable drives every row of the DDL safety table (ddl.Policy) against real
// servers, in each of its scopes: an unsharded schema replicated one to one (solo), shard tables of
// merged targets (db_*.t_* -> db.t, db_*.u_* -> db.u), and tables of schemas routed onto the merged
// schema db (db_*.plain -> db.plain). Whatever would destroy or rewrite rows other shards wrote never
// runs downstream; the refused statements stop the subtask before them with an error that names them.
func TestDDLSafetyTable(t *testing.T) {
	c := newCluster(t)
	c.policyRouter()
	part := " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN (300), PARTITION pmax VALUES LESS THAN MAXVALUE)"
	for i := range c.ups {
		c.up(i, fmt.Sprintf("CREATE TABLE db_%d.u_1 (id INT PRIMARY KEY, v INT)", i+1)+part)
	}
	c.startSyncer(0)
	c.startSyncer(1)
	for i := range c.ups {
		for j, table := range c.shards[i] {
			c.up(i, insert(table, (i*2+j)*1000, (i*2+j)*1000+5))
		}
		c.up(i, fmt.Sprintf("INSERT INTO db_%d.u_1 VALUES (%d, 1), (%d, 1), (%d, 1), (%d, 1)", i+1, 10+i, 110+i, 210+i, 310+i))
	}
	c.converge("id, v")

	// (a) Unsharded: everything runs downstream as it is, but DROP DATABASE drops only the tables it
	// replicated, not the database, which holds a table the user created downstream.
	c.up(0, "CREATE DATABASE solo",
		"CREATE TABLE solo.a (id INT PRIMARY KEY, v INT)", "INSERT INTO solo.a VALUES (1, 1), (2, 2)",
		"CREATE TABLE solo.b LIKE solo.a",
		"ALTER TABLE solo.a ADD COLUMN w INT",
		"CREATE INDEX iv ON solo.a (v)",
		"CREATE TABLE solo.p (id INT PRIMARY KEY, v INT)"+part,
		"INSERT INTO solo.p VALUES (1, 1), (101, 1), (201, 1), (301, 1)",
		"CREATE TABLE solo.x (id INT PRIMARY KEY, v INT)", "INSERT INTO solo.x VALUES (250, 9)",
		"ALTER TABLE solo.p TRUNCATE PARTITION p0",
		"ALTER TABLE solo.p DROP PARTITION p1",
		"ALTER TABLE solo.p EXCHANGE PARTITION p2 WITH TABLE solo.x",
		"RENAME TABLE solo.b TO solo.b2",
		"ALTER TABLE solo.b2 RENAME TO solo.b3",
		"INSERT INTO solo.b3 VALUES (7, 7)",
		"CREATE VIEW solo.v AS SELECT id FROM solo.a",
		"CREATE TRIGGER solo.tr BEFORE INSERT ON solo.a FOR EACH ROW SET NEW.w = 42",
		"INSERT INTO solo.a (id, v) VALUES (3, 3)",
		"CREATE SEQUENCE solo.seq",
		"ALTER DATABASE solo CHARACTER SET latin1 COLLATE latin1_swedish_ci",
		"CREATE TABLE solo.gone (id INT PRIMARY KEY)", "INSERT INTO solo.gone VALUES (1)",
		"CREATE TABLE solo.trunc (id INT PRIMARY KEY)", "INSERT INTO solo.trunc VALUES (1)",
		"TRUNCATE TABLE solo.trunc",
		"INSERT INTO solo.trunc VALUES (2)", "TRUNCATE TABLE solo.trunc", // the same text again: a statement of its own
		"DROP TABLE solo.gone",
		"DROP VIEW solo.v",
		"DROP SEQUENCE solo.seq",
		"INSERT INTO solo.a (id, v) VALUES (4, 4)")
	c.same(0, "SELECT id, v, w FROM solo.a ORDER BY id", "SELECT id, v, w FROM solo.a ORDER BY id")
	for _, table := range []string{"p", "x", "b3", "trunc"} {
		c.same(0, "SELECT * FROM solo."+table+" ORDER BY 1", "SELECT * FROM solo."+table+" ORDER BY 1")
	}
	if got := c.downTables("solo"); !slices.Equal(got, []string{"a", "b3", "p", "trunc", "x"}) {
		t.Fatalf("downstream tables of solo: %v (views and sequences are not replicated; drops and renames are)", got)
	}
	if got := c.downScalar("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'solo' AND TABLE_NAME = 'a' AND INDEX_NAME = 'iv'"); got != "1" {
		t.Fatalf("CREATE INDEX of an unsharded table did not run downstream: %s", got)
	}
	if got := c.downScalar("SELECT GROUP_CONCAT(PARTITION_NAME ORDER BY PARTITION_ORDINAL_POSITION) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = 'solo' AND TABLE_NAME = 'p'"); got != "p0,p2,pmax" {
		t.Fatalf("partitions of solo.p downstream: %s", got)
	}
	if got := c.downScalar("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'solo'"); got != "latin1" {
		t.Fatalf("ALTER DATABASE of an unsharded schema did not run downstream: %s", got)
	}
	if got := c.downScalar("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'solo'"); got != "0" {
		t.Fatalf("a trigger was created downstream: %s", got)
	}
	c.up(0, "DROP INDEX iv ON solo.a", "INSERT INTO solo.a (id, v) VALUES (5, 5)")
	c.same(0, "SELECT id, v, w FROM solo.a ORDER BY id", "SELECT id, v, w FROM solo.a ORDER BY id")
	if got := c.downScalar("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'solo' AND INDEX_NAME = 'iv'"); got != "0" {
		t.Fatalf("DROP INDEX of an unsharded table did not run downstream: %s", got)
	}
	c.down.Exec(t, c.downDB, "CREATE TABLE solo.user_owned (id INT PRIMARY KEY)", "INSERT INTO solo.user_owned VALUES (1)")
	c.up(0, "DROP DATABASE solo", "INSERT INTO db_1.t_1 VALUES (90001, 'after drop database')")
	c.waitRow(90001)
	if got := c.downTables("solo"); !slices.Equal(got, []string{"user_owned"}) {
		t.Fatalf("after DROP DATABASE solo, downstream solo holds %v; want only the user's table", got)
	}

	// (c) Tables of schemas routed onto the merged schema db: both sources' db_N.plain write db.plain.
	dbCharset := c.downScalar("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'db'")
	c.up(0, "CREATE TABLE db_1.plain (id INT PRIMARY KEY, v INT)", "INSERT INTO db_1.plain VALUES (1, 1)")
	c.up(1, "CREATE TABLE db_2.plain (id INT PRIMARY KEY, v INT)", "INSERT INTO db_2.plain VALUES (2, 2)")
	c.up(0, "ALTER TABLE db_1.plain ADD COLUMN w INT", "INSERT INTO db_1.plain VALUES (3, 3, 3)")
	c.up(1, "ALTER TABLE db_2.plain ADD COLUMN w INT", "INSERT INTO db_2.plain VALUES (4, 4, 4)")
	c.up(0, "CREATE INDEX iw ON db_1.plain (w)", "CREATE TABLE db_1.plain_like LIKE db_1.plain")
	c.up(1, "CREATE INDEX iw ON db_2.plain (w)", "CREATE TABLE db_2.plain_like LIKE db_2.plain")
	c.up(0, "TRUNCATE TABLE db_1.plain", "DROP TABLE db_1.plain", "DROP INDEX iw ON db_1.plain_like",
		"ALTER DATABASE db_1 CHARACTER SET utf8", "CREATE DATABASE IF NOT EXISTS db_3",
		"INSERT INTO db_1.t_1 VALUES (90002, 'after plain')")
	c.up(1, "INSERT INTO db_2.t_1 VALUES (90003, 'after plain')")
	c.waitRow(90002)
	c.waitRow(90003)
	if got, err := e2e.Rows(c.downDB, "SELECT id, v, w FROM db.plain ORDER BY id"); err != nil || strings.Join(got, ",") != "1|1|NULL,2|2|NULL,3|3|3,4|4|4" {
		t.Fatalf("db.plain downstream after one schema's TRUNCATE and DROP: %v %v; every schema's rows must stay", got, err)
	}
	if got := c.downScalar("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'db'"); got != dbCharset {
		t.Fatalf("ALTER DATABASE of one schema changed the merged schema: %s", got)
	}
	if got := c.downScalar("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 'plain_like' AND INDEX_NAME = 'iw'"); got != "0" {
		t.Fatalf("DROP INDEX of a table in a merged schema did not run: %s", got)
	}

	// (b) Shards: new shards join their group (CREATE TABLE and CREATE TABLE LIKE), ALTER and
	// CREATE/DROP INDEX go through the lock, TRUNCATE and DROP/TRUNCATE PARTITION of one shard are
	// ignored, DROP TABLE takes the shard out of its group.
	c.up(0, "CREATE TABLE db_1.t_3 LIKE db_1.t_1", insert("db_1.t_3", 5000, 5005))
	c.up(1, "CREATE TABLE db_2.t_3 (id INT PRIMARY KEY, v VARCHAR(32))", insert("db_2.t_3", 6000, 6005))
	c.shards[0] = append(c.shards[0], "db_1.t_3")
	c.shards[1] = append(c.shards[1], "db_2.t_3")
	c.converge("id, v")
	for _, ddl := range []string{"ALTER TABLE %s ADD COLUMN c INT", "CREATE INDEX ic ON %s (c)", "DROP INDEX ic ON %s"} {
		for i := range c.ups {
			for _, table := range c.shards[i] {
				c.up(i, fmt.Sprintf(ddl, table))
			}
		}
	}
	c.converge("id, v, c")
	// The index came and went through two locks: the DROP's marker row is there and the index is not.
	wait.Eventually(t, 30*time.Second, func() bool {
		return c.downScalar("SELECT COUNT(*) FROM dm_meta.test_ddl_marker WHERE ddl LIKE 'DROP INDEX `ic`%' AND state = 'done'") == "1" &&
			c.downScalar("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND INDEX_NAME = 'ic'") == "0"
	}, func() string { return "the shard lock's CREATE/DROP INDEX did not run downstream" })
	before := c.merged("id, v, c")
	c.up(0, "TRUNCATE TABLE db_1.t_1", "ALTER TABLE db_1.u_1 TRUNCATE PARTITION p0", insert("db_1.t_2", 7000, 7001))
	c.up(1, "ALTER TABLE db_2.u_1 DROP PARTITION p1", "DROP TABLE db_2.t_3", insert("db_2.t_1", 7100, 7101))
	c.waitRow(7000)
	c.waitRow(7100)
	got, err := e2e.Rows(c.downDB, "SELECT id, v, c FROM db.t")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range before {
		if !slices.Contains(got, row) {
			t.Fatalf("row %s of db.t is gone downstream after one shard's TRUNCATE or DROP TABLE", row)
		}
	}
	if got := c.downScalar("SELECT COUNT(*) FROM db.u"); got != "8" {
		t.Fatalf("db.u holds %s rows after one shard's TRUNCATE/DROP PARTITION; want all 8", got)
	}
	// The dropped shard left its group: the next DDL resolves without it.
	c.shards[1] = c.shards[1][:2]
	for i := range c.ups {
		for _, table := range c.shards[i] {
			c.up(i, "ALTER TABLE "+table+" ADD COLUMN d INT")
		}
	}
	wait.Eventually(t, 30*time.Second, func() bool {
		return c.downScalar("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = 'd'") == "1"
	}, func() string { return "the lock waited for a dropped shard" })
	// DROP DATABASE of a schema holding shards: they leave their groups, the merged schema stays.
	c.up(0, "DROP DATABASE db_1")
	c.up(1, insert("db_2.t_1", 7200, 7201))
	c.waitRow(7200)
	if got := c.downScalar("SELECT COUNT(*) FROM db.t WHERE id < 2000 OR id BETWEEN 5000 AND 5999"); got == "0" {
		t.Fatal("DROP DATABASE of one shard schema removed its rows from the merged table")
	}

	// Refused: each stops the subtask before the statement with an error naming it, and nothing runs
	// downstream. Each runs under a task of its own, started just before it.
	c.up(0, "CREATE DATABASE db_1", "CREATE TABLE db_1.t_1 (id INT PRIMARY KEY, v VARCHAR(32), c INT, d INT)",
		"CREATE TABLE db_1.u_1 (id INT PRIMARY KEY, v INT)"+part, "CREATE TABLE db_1.swap (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE db_1.plain (id INT PRIMARY KEY, v INT, w INT)")
	c.up(1, "CREATE DATABASE solo", "CREATE TABLE solo.z (id INT PRIMARY KEY)")
	for n, r := range []struct {
		source int
		ddl    string
		kind   ddl.Kind
		scope  ddl.Scope
	}{
		// One statement, two tables: the unsharded one is not renamed either. A shard renamed to a
		// name of another target leaves its merged table (a rename within it is followed:
		// TestShardRenameFollowsGroup).
		{1, "RENAME TABLE solo.z TO solo.z2, db_2.t_1 TO db_2.x_1", ddl.KindRenameTable, ddl.Shard},
		{1, "ALTER TABLE db_2.t_2 RENAME TO db_2.u_9", ddl.KindAlterTableRename, ddl.Shard},
		{1, "ALTER TABLE db_2.u_9 ADD COLUMN z INT, RENAME TO db_2.u_8", ddl.KindAlterTableRename, ddl.Shard},
		{0, "ALTER TABLE db_1.u_1 EXCHANGE PARTITION p0 WITH TABLE db_1.swap", ddl.KindExchangePartition, ddl.Shard},
		{0, "RENAME TABLE db_1.plain TO db_1.plain2", ddl.KindRenameTable, ddl.MergedSchema},
		{0, "ALTER TABLE db_1.plain2 RENAME TO db_1.plain3", ddl.KindAlterTableRename, ddl.MergedSchema},
		{0, "RENAME TABLE db_1.swap TO db_1.t_7", ddl.KindRenameTable, ddl.Shard}, // into a shard group
	} {
		errc := c.runTask(r.source, fmt.Sprintf("refuse%d", n))
		defs := c.downDefinitions()
		c.up(r.source, r.ddl)
		select {
		case err := <-errc:
			var refused *RefusedDDLError
			if !errors.As(err, &refused) || refused.Kind != r.kind || refused.Scope != r.scope || !strings.Contains(err.Error(), r.ddl) || !strings.Contains(err.Error(), "filter") {
				t.Fatalf("%s: %v; want it refused as %s of a table %s, naming the statement and the way on", r.ddl, err, r.kind, r.scope)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was not refused", r.ddl)
		}
		if after := c.downDefinitions(); !slices.Equal(after, defs) {
			t.Fatalf("%s changed the downstream:\nbefore %v\nafter  %v", r.ddl, defs, after)
		}
	}
	// The way on that the error names: a binlog event filter ignoring the statement, and the task
	// started again from its checkpoint, which is still before the statement.
	errc := c.runTask(0, "refuse6", config.FilterRule{Name: "skip-it", SchemaPattern: "db_1", TablePattern: "swap", Events: []string{"rename table"}, Action: "Ignore"})
	c.up(0, "INSERT INTO db_1.t_1 (id, v) VALUES (95000, 'after the filter')")
	c.waitRow(95000)
	select {
	case err := <-errc:
		t.Fatalf("the filtered task stopped: %v", err)
	default:
	}
	if got := c.downTables("db"); slices.Contains(got, "t_7") {
		t.Fatalf("the ignored rename reached the downstream: %v", got)
	}
}

// downDefinitions lists every downstream table outside the meta schema with its columns.
func (c *cluster) downDefinitions() []string {
	c.t.Helper()
	r, err := e2e.Rows(c.downDB, `SELECT TABLE_SCHEMA, TABLE_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION)
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA NOT IN ('dm_meta', 'mysql', 'information_schema', 'performance_schema', 'sys')
		GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// runTask starts a syncer of source i under a task of its own from the source's current position and
// returns its Run error; it is stopped when the test ends.
func (c *cluster) runTask(i int, task string, rules ...config.FilterRule) <-chan error {
	c.t.Helper()
	start := c.binlogEnd(i)
	src := fmt.Sprintf("s%d", i+1)
	filter, err := router.NewFilter(rules)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSyncer(SyncerConfig{Start: start, Task: task, Source: src, Host: "127.0.0.1", Port: uint16(c.ups[i].Port),
		User: "root", ServerID: 9400 + uint32(i), Router: c.router, Filter: filter, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true, MetaSchema: "dm_meta",
		Agent: pessimist.NewAgent(c.cli, c.layout, task, src, nil), Log: c.logger()})
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	c.t.Cleanup(cancel)
	select {
	case <-s.Started():
	case err := <-errc:
		c.t.Fatalf("syncer of task %s did not start: %v", task, err)
	}
	return errc
}

// TestRereadCreateTableKeepsCheckpoint: a syncer restarted from a resume position before a shard's
// CREATE TABLE (held back by another group's pending lock) reads the CREATE again; the new shard's
// rows applied after it must not be applied twice (its checkpoint was set back to the CREATE).
func TestRereadCreateTableKeepsCheckpoint(t *testing.T) {
	c := newCluster(t)
	for i := range c.ups {
		c.up(i, fmt.Sprintf("CREATE TABLE db_%d.u_1 (id INT PRIMARY KEY, v INT)", i+1))
	}
	stop := c.startSyncer(0)
	c.startSyncer(1)
	// A lock of db.u waits for source 2: source 1's resume position stays before its DDL.
	c.up(0, "ALTER TABLE db_1.u_1 ADD COLUMN c INT")
	c.up(0, "CREATE TABLE db_1.t_3 (id INT PRIMARY KEY, v VARCHAR(32))", insert("db_1.t_3", 500, 510))
	c.shards[0] = append(c.shards[0], "db_1.t_3")
	c.converge("id, v")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.startSyncer(0)
	c.up(0, insert("db_1.t_3", 510, 511))
	c.up(1, "ALTER TABLE db_2.u_1 ADD COLUMN c INT")
	c.converge("id, v")
	c.waitRow(510)
}
