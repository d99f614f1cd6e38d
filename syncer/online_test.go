package syncer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/tests/framework/onlinetest"
)

func (c *cluster) comAlter() int {
	var name string
	var n int
	if err := c.downDB.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// TestOnlineDDLToolsOnShards: one shard altered with gh-ost, one with pt-osc, two with a plain ALTER
// (one of them after a gh-ost run that gave up): one lock, the same DDL, run once downstream; no ghost
// or trash table downstream, and the rows written around the cut-overs arrive. Source 1's syncer is
// restarted between gh-ost's ALTER and its cut-over, while pt-osc swaps db_1.t_2: its group is rebuilt
// as it was at the resume position, not from the tables a RENAME may be swapping as it starts.
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
	gh := onlinetest.Ghost("db_1", "t_1", alter)
	c.up(0, gh[:4]...) // up to the ghost ALTER
	c.up(0, insert("db_1.t_1", 51, 55))
	c.waitRow(54)
	if err := stop0(); err != nil {
		t.Fatal(err)
	}
	c.startSyncer(0)
	c.up(0, gh[4:]...)
	c.up(0, "INSERT INTO db_1.t_1 (id, v, c) VALUES (100, 'after gh-ost', 1)")
	c.up(0, onlinetest.PT("db_1", "t_2", alter)...)
	c.up(0, "INSERT INTO db_1.t_2 (id, v, c) VALUES (1100, 'after pt-osc', 2)")
	// an aborted gh-ost run: its ALTER must not reach anyone
	c.up(1, onlinetest.Ghost("db_2", "t_2", "ADD COLUMN d INT")[:4]...)
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
