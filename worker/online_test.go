package worker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/onlineddl"
)

// ghostStatements is what gh-ost writes to the binlog for `--alter` on schema.table (its statement
// sequence, recorded from a real run; the module proxy does not serve gh-ost), with the row copy and
// the cut-over.
func ghostStatements(schema, table, alter string) []string {
	g, c, d := "`"+schema+"`.`_"+table+"_gho`", "`"+schema+"`.`_"+table+"_ghc`", "`"+schema+"`.`_"+table+"_del`"
	real := "`" + schema + "`.`" + table + "`"
	return []string{
		"drop /* gh-ost */ table if exists " + g,
		"create /* gh-ost */ table " + c + " (id bigint auto_increment, last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256",
		"create /* gh-ost */ table " + g + " like " + real,
		"alter /* gh-ost */ table " + g + " " + alter,
		"replace /* gh-ost */ into " + c + " (id, hint, value) values (NULLIF(2, 0), 'state', 'migrating')",
		"insert /* gh-ost */ ignore into " + g + " (id, v) (select id, v from " + real + " force index (`PRIMARY`))",
		"create /* gh-ost */ table " + d + " (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'",
		"drop /* gh-ost */ table if exists " + d,
		"rename /* gh-ost */ table " + real + " to " + d + ", " + g + " to " + real,
		"drop /* gh-ost */ table if exists " + c,
		"drop /* gh-ost */ table if exists " + d,
	}
}

// ptStatements is what pt-online-schema-change writes (triggers keep the new table in step).
func ptStatements(schema, table, alter string) []string {
	n, o := "`"+schema+"`.`_"+table+"_new`", "`"+schema+"`.`_"+table+"_old`"
	real := "`" + schema + "`.`" + table + "`"
	trig := "`" + schema + "`.`pt_osc_" + schema + "_" + table + "_ins`"
	return []string{
		"CREATE TABLE " + n + " LIKE " + real,
		"ALTER TABLE " + n + " " + alter,
		"CREATE TRIGGER " + trig + " AFTER INSERT ON " + real + " FOR EACH ROW REPLACE INTO " + n + " (id, v) VALUES (NEW.id, NEW.v)",
		"INSERT LOW_PRIORITY IGNORE INTO " + n + " (id, v) SELECT id, v FROM " + real + " LOCK IN SHARE MODE",
		"RENAME TABLE " + real + " TO " + o + ", " + n + " TO " + real,
		"DROP TABLE IF EXISTS " + o,
		"DROP TRIGGER IF EXISTS " + trig,
	}
}

func (c *cluster) comAlter() int {
	var name string
	var n int
	if err := c.downDB.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// TestOnlineDDLToolsOnShards: one shard altered with gh-ost, one with pt-osc, two with a plain ALTER
// (one of them after a gh-ost run that gave up), a syncer restarted between a tool's ghost ALTER and
// its cut-over: one lock, the same DDL, run once downstream; no ghost or trash table downstream, and
// the rows written around the cut-overs arrive.
func TestOnlineDDLToolsOnShards(t *testing.T) {
	c := newCluster(t)
	rules, err := onlineddl.NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.online = rules
	c.router.SkipToolTables(rules.Tool)
	stop0 := c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 51), insert("db_1.t_2", 1001, 1051))
	c.up(1, insert("db_2.t_1", 2001, 2051), insert("db_2.t_2", 3001, 3051))
	c.converge("id, v")
	alters := c.comAlter()

	const alter = "ADD COLUMN c INT NOT NULL DEFAULT 0"
	gh := ghostStatements("db_1", "t_1", alter)
	c.up(0, gh[:4]...) // up to the ghost ALTER
	c.up(0, insert("db_1.t_1", 51, 55))
	c.waitRow(54)
	// restart between the ghost ALTER and the cut-over: what the ALTER said is in the checkpoint
	if err := stop0(); err != nil {
		t.Fatal(err)
	}
	c.startSyncer(0)
	c.up(0, gh[4:]...)
	c.up(0, "INSERT INTO db_1.t_1 (id, v, c) VALUES (100, 'after gh-ost', 1)")
	c.up(0, ptStatements("db_1", "t_2", alter)...)
	c.up(0, "INSERT INTO db_1.t_2 (id, v, c) VALUES (1100, 'after pt-osc', 2)")
	// an aborted gh-ost run: its ALTER must not reach anyone
	c.up(1, ghostStatements("db_2", "t_2", "ADD COLUMN d INT")[:4]...)
	c.up(1, "DROP TABLE `db_2`.`_t_2_gho`", "DROP TABLE `db_2`.`_t_2_ghc`")
	if c.hasRow(100) {
		t.Fatal("a row written after the cut-over reached the downstream before every shard reached the DDL")
	}
	c.up(1, "ALTER TABLE db_2.t_1 "+alter, "ALTER TABLE db_2.t_2 "+alter, insert("db_2.t_2", 3100, 3110))
	c.converge("id, v, c")
	if got := c.comAlter() - alters; got != 1 {
		t.Fatalf("downstream ran %d ALTER TABLE statements, want 1", got)
	}
	rows, err := c.downDB.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	if strings.Join(names, ",") != "t" {
		t.Fatalf("downstream tables in db: %v, want only t (no ghost or trash table)", names)
	}
	var d int
	c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = 'd'").Scan(&d)
	if d != 0 {
		t.Fatal(fmt.Sprintf("the aborted run's column d reached the downstream"))
	}
}
