package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// topologyTask merges four targets from the same-named tables of both sources, each in another routing
// style: shop.orders with no route at all (sharding by instance), inv.stock by one explicit rule both
// sources list, wild_N.t_N by a wildcard table rule, and the time-partitioned part.events with no route.
func topologyTask(c *e2eCluster) string {
	c.t.Helper()
	var inst strings.Builder
	for i := range c.Ups {
		fmt.Fprintf(&inst, "  - source-id: %s\n    block-allow-list: bal\n    route-rules: [stock, wild]\n", e2e.SourceID(i))
	}
	body := fmt.Sprintf(`name: topo
task-mode: %s
shard-mode: pessimistic
meta-schema: dm_meta
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
mysql-instances:
%sblock-allow-list:
  bal:
    do-dbs: ["shop", "inv", "wild_*", "part", "solo_*"]
routes:
  stock:
    schema-pattern: "inv"
    table-pattern: "stock"
    target-schema: merged
    target-table: stock
  wild:
    schema-pattern: "wild_*"
    table-pattern: "t_*"
    target-schema: merged
    target-table: w
`, c.TaskMode(), c.Down.Port, inst.String())
	path := filepath.Join(c.Dir, "topo.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// downInt is the number of rows of the downstream query's first column, or -1 if it fails (a
// table not there).
func (c *e2eCluster) downInt(q string) int {
	var n int
	if err := c.DownDB.QueryRow(q).Scan(&n); err != nil {
		return -1
	}
	return n
}

func (c *e2eCluster) waitDown(q string, want int) {
	c.t.Helper()
	c.until(fmt.Sprintf("%s = %d", q, want), func(e2e.Result) bool { return c.downInt(q) == want }, "query-status", c.task)
}

// waitLockOf waits until the task's lock of target shows exactly these synced and unsynced sources.
func (c *e2eCluster) waitLockOf(target string, synced, unsynced []string) {
	c.t.Helper()
	id := c.task + "-" + target
	c.until(fmt.Sprintf("lock %s synced=%v unsynced=%v", id, synced, unsynced), func(r e2e.Result) bool {
		for _, l := range r.List("locks") {
			if l.Str("ID") == id {
				return slices.Equal(l.Strings("synced"), synced) && slices.Equal(l.Strings("unsynced"), unsynced)
			}
		}
		return false
	}, "shard-ddl-lock", c.task)
}

func (c *e2eCluster) downColumnsOf(schema, table string) int {
	return c.downInt(fmt.Sprintf("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = '%s'", schema, table))
}

// Whether a target is merged is the whole task's answer: the same-named tables of two sources are
// shards of one target whatever routes them (none, one explicit rule both list, a wildcard). One
// source's ALTER forms a lock that waits for the other; its TRUNCATE, DROP TABLE and DROP DATABASE
// leave the other source's rows in the merged table, and the other's later writes keep arriving. A
// DROP PARTITION that both sources run goes through the lock and runs once.
func TestE2ESameNamedShardsAcrossSources(t *testing.T) {
	c, targets, upName := startTopology(t)
	// The table of one source alone: its ALTER runs at once, as before.
	c.up(0, "ALTER TABLE solo_1.only ADD COLUMN c INT")
	c.until("solo_1.only altered downstream", func(e2e.Result) bool { return c.downColumnsOf("solo_1", "only") == 2 }, "query-status", c.task)

	for _, tg := range targets {
		t.Logf("target %s (upstream %s)", tg.down, tg.up)
		lockTarget := fmt.Sprintf("`%s`.`%s`", tg.schema, tg.table)
		// One source's ALTER waits for the other's.
		c.up(0, "ALTER TABLE "+upName(tg, 0)+" ADD COLUMN c INT", "INSERT INTO "+upName(tg, 0)+" VALUES (1100, 'after', 1)")
		c.waitLockOf(lockTarget, []string{s1}, []string{s2})
		if n := c.downColumnsOf(tg.schema, tg.table); n != 2 {
			t.Fatalf("%s has %d columns downstream while source 2 has not run the ALTER, want 2", tg.down, n)
		}
		c.up(1, "ALTER TABLE "+upName(tg, 1)+" ADD COLUMN c INT", "INSERT INTO "+upName(tg, 1)+" VALUES (2100, 'after', 2)")
		c.waitDown("SELECT COUNT(*) FROM "+tg.down+" WHERE c IS NOT NULL", 2)
		if n := c.downColumnsOf(tg.schema, tg.table); n != 3 {
			t.Fatalf("%s has %d columns downstream, want 3", tg.down, n)
		}
		// One source's TRUNCATE leaves the other source's rows; its writes keep arriving.
		c.up(0, "TRUNCATE TABLE "+upName(tg, 0))
		c.up(1, "INSERT INTO "+upName(tg, 1)+" VALUES (2200, 'post-truncate', 3)")
		c.waitDown("SELECT COUNT(*) FROM "+tg.down+" WHERE id = 2200", 1)
		if n := c.downInt("SELECT COUNT(*) FROM " + tg.down + " WHERE id BETWEEN 2000 AND 2999"); n != 12 {
			t.Fatalf("%s holds %d of source 2's rows after source 1's TRUNCATE, want 12", tg.down, n)
		}
		// One source's DROP TABLE (and DROP DATABASE) leaves the merged table and the other's rows.
		c.up(0, "DROP TABLE "+upName(tg, 0))
		if tg.dropDB != "" {
			c.up(0, "DROP DATABASE "+tg.dropDB)
		}
		c.up(1, "INSERT INTO "+upName(tg, 1)+" VALUES (2300, 'post-drop', 4)")
		c.waitDown("SELECT COUNT(*) FROM "+tg.down+" WHERE id = 2300", 1)
		if n := c.downInt("SELECT COUNT(*) FROM " + tg.down + " WHERE id BETWEEN 2000 AND 2999"); n != 13 {
			t.Fatalf("%s holds %d of source 2's rows after source 1's DROP, want 13", tg.down, n)
		}
	}
	c.allRunning()
}

// allRunning fails the test unless every subtask of the task is Running.
func (c *e2eCluster) allRunning() {
	c.t.Helper()
	r := c.ok("query-status", c.task)
	for _, s := range subtasks(r) {
		if s.Str("stage") != "Running" {
			c.t.Fatalf("a subtask is not Running: %v", s)
		}
	}
}

// startTopology starts the cluster with topologyTask's tables on both sources, runs check-task (which
// must name the groups across sources) and start-task, and waits for every target's first rows.
func startTopology(t *testing.T) (*e2eCluster, []topoTarget, func(topoTarget, int) string) {
	c := startWith(t, e2e.Options{}, false)
	targets := []topoTarget{
		{up: "shop.orders", down: "shop.orders", schema: "shop", table: "orders", dropDB: "shop"},
		{up: "inv.stock", down: "merged.stock", schema: "merged", table: "stock", dropDB: "inv"},
		{up: "wild_%d.t_1", down: "merged.w", schema: "merged", table: "w", upSchemaPerSrc: true},
	}
	upName := func(tg topoTarget, i int) string {
		if tg.upSchemaPerSrc {
			return fmt.Sprintf(tg.up, i+1)
		}
		return tg.up
	}
	for i := range c.Ups {
		c.up(i, "CREATE DATABASE shop", "CREATE DATABASE inv", fmt.Sprintf("CREATE DATABASE wild_%d", i+1), "CREATE DATABASE part",
			fmt.Sprintf("CREATE DATABASE solo_%d", i+1))
		for _, tg := range targets {
			c.up(i, "CREATE TABLE "+upName(tg, i)+" (id INT PRIMARY KEY, v VARCHAR(32))")
		}
		c.up(i, "CREATE TABLE part.events (id INT PRIMARY KEY, v VARCHAR(32)) PARTITION BY RANGE (id) "+
			"(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (10000), PARTITION p2 VALUES LESS THAN MAXVALUE)")
		if c.TaskMode() == "all" { // the load copies these; in incremental mode they are written after the start
			insertInitial(c, i, targets, upName)
		}
		// A table only this source holds: routed one to one, its own DDL runs at once.
		c.up(i, fmt.Sprintf("CREATE TABLE solo_%d.only (id INT PRIMARY KEY)", i+1))
	}
	c.task = "topo"
	r := c.ok("check-task", topologyTask(c))
	for _, want := range []string{"`shop`.`orders` is written by tables of sources", "`merged`.`stock` is written by tables of sources"} {
		if !strings.Contains(r.Str("msg"), want) {
			t.Errorf("check-task does not name the group across sources (%q): %s", want, r.Str("msg"))
		}
	}
	c.ok("start-task", topologyTask(c))
	c.waitStage("Running")
	c.until("every source in the sync unit", func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			if s.Str("unit") != "Sync" || s.Str("stage") != "Running" {
				return false
			}
		}
		return len(subs) == len(c.Ups)
	}, "query-status", c.task)
	if c.TaskMode() != "all" {
		for i := range c.Ups {
			insertInitial(c, i, targets, upName)
		}
	}
	for _, tg := range targets {
		c.waitDown("SELECT COUNT(*) FROM "+tg.down, 20)
	}
	c.waitDown("SELECT COUNT(*) FROM part.events", 40)
	return c, targets, upName
}

type topoTarget struct {
	up, down       string // upstream table (on both sources), downstream target
	schema, table  string // the target's parts
	dropDB         string // the upstream schema its DROP DATABASE drops ("" for none)
	upSchemaPerSrc bool   // the upstream table's schema differs per source (wild_1, wild_2)
}

// insertInitial writes source i's first rows: 10 into each target's table, 10 into each of part.events'
// partitions p0 and p1.
func insertInitial(c *e2eCluster, i int, targets []topoTarget, upName func(topoTarget, int) string) {
	c.t.Helper()
	for _, tg := range targets {
		c.up(i, insertRows(upName(tg, i), 1000*(i+1), 1000*(i+1)+10, ""))
	}
	c.up(i, insertRows("part.events", 10*i, 10*i+10, ""), insertRows("part.events", 1000*(i+1), 1000*(i+1)+10, ""))
}

// The monthly retention every shard runs (ALTER TABLE ... DROP PARTITION) goes through the lock and
// runs once, so the merged table keeps what its shards keep; one shard's alone does not run.
func TestE2EPartitionRetentionThroughTheLock(t *testing.T) {
	c, _, _ := startTopology(t)
	c.up(0, "ALTER TABLE part.events DROP PARTITION p0")
	c.waitLockOf("`part`.`events`", []string{s1}, []string{s2})
	if n := c.downInt("SELECT COUNT(*) FROM part.events WHERE id < 100"); n != 20 {
		t.Fatalf("part.events holds %d rows of p0 while source 2 has not dropped it, want 20", n)
	}
	c.up(1, "ALTER TABLE part.events DROP PARTITION p0", "INSERT INTO part.events VALUES (2500, 'after-drop')")
	c.waitDown("SELECT COUNT(*) FROM part.events WHERE id = 2500", 1)
	if n := c.downInt("SELECT COUNT(*) FROM part.events"); n != 21 {
		t.Fatalf("part.events holds %d rows after both shards dropped p0, want 21 (the merge of its shards)", n)
	}
	if n, err := c.DownstreamStatements("ALTER TABLE `part`.`events` DROP PARTITION"); err != nil || n != 1 {
		t.Fatalf("DROP PARTITION ran %d times downstream (%v), want once", n, err)
	}
	c.allRunning()
}
