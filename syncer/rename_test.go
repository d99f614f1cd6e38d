package syncer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestShardRenameFollowsGroup: RENAME TABLE of a shard to a name that routes to the same target keeps
// it in its group, with nothing run downstream: a rename with no lock pending, one of a shard whose
// rows wait behind a pending lock (they are held back, then re-read under the old and the new name), a
// swap of two shards through a third name in one statement, and a rename followed by a restart before
// the next shard DDL. Every lock resolves with the new names, each ALTER runs once, and the merged
// table equals the shards row by row.
func TestShardRenameFollowsGroup(t *testing.T) {
	c := newCluster(t)
	stop := c.startSyncer(0)
	c.startSyncer(1)
	alters := c.comAlter()
	for i := range c.ups {
		for j, table := range c.shards[i] {
			c.up(i, insert(table, (i*2+j)*1000, (i*2+j)*1000+5))
		}
	}
	c.converge("id, v")
	before := c.downTables("db")

	// No lock pending: the shard goes on under its new name.
	c.up(0, "RENAME TABLE db_1.t_1 TO db_1.t_3", insert("db_1.t_3", 100, 105))
	c.shards[0][0] = "db_1.t_3"
	c.converge("id, v")

	// Source 1 reaches a DDL; its rows after it are held back while source 2 has not. One shard is
	// renamed in the middle of that; source 2 swaps its two shards through a third name meanwhile.
	// db_1.t_2 first: the re-sync then reads db_1.t_3's DDL again under the name it had before the rename.
	c.up(0, "ALTER TABLE db_1.t_2 ADD COLUMN c INT", "INSERT INTO db_1.t_2 VALUES (1006, 'held', 0)", "ALTER TABLE db_1.t_3 ADD COLUMN c INT",
		"INSERT INTO db_1.t_3 VALUES (106, 'held', 1)",
		"RENAME TABLE db_1.t_3 TO db_1.t_5",
		"INSERT INTO db_1.t_5 VALUES (107, 'held after the rename', 2)", "UPDATE db_1.t_5 SET c = 3 WHERE id = 100")
	c.shards[0][0] = "db_1.t_5"
	c.up(1, "RENAME TABLE db_2.t_1 TO db_2.t_tmp, db_2.t_2 TO db_2.t_1, db_2.t_tmp TO db_2.t_2",
		insert("db_2.t_1", 3100, 3103), insert("db_2.t_2", 2100, 2103))
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT",
		"INSERT INTO db_2.t_2 VALUES (2200, 'after', 4)")
	c.converge("id, v, IFNULL(c, -1)")

	// A rename, then a restart of source 1's syncer before the next shard DDL.
	c.up(0, "RENAME TABLE db_1.t_2 TO db_1.t_6", insert("db_1.t_6", 1100, 1103))
	c.shards[0][1] = "db_1.t_6"
	c.converge("id, v, IFNULL(c, -1)")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.startSyncer(0)
	for i := range c.ups {
		for _, table := range c.shards[i] {
			c.up(i, "ALTER TABLE "+table+" ADD COLUMN d INT")
		}
	}
	c.up(0, "INSERT INTO db_1.t_6 VALUES (1200, 'last', 5, 6)")
	c.converge("id, v, IFNULL(c, -1), IFNULL(d, -1)")
	if got := c.comAlter() - alters; got != 2 {
		t.Fatalf("the downstream ran %d ALTER TABLE, want 2 (ADD COLUMN c and d, once each; no rename)", got)
	}
	if after := c.downTables("db"); !slices.Equal(after, before) {
		t.Fatalf("downstream tables of db changed: %v, was %v", after, before)
	}
	if strings.Contains(strings.Join(c.downTables("db"), ","), "t_5") {
		t.Fatal("a shard's new name reached the downstream")
	}

	// Refused: a swap while one of the two shards waits behind a pending lock (its held-back rows would
	// be read again under a name another table has taken), and a rename out of the merged table.
	// Nothing runs downstream; the syncer stops before the statement.
	defs := c.downDefinitions()
	c.up(0, "ALTER TABLE db_1.t_5 ADD COLUMN e INT", "INSERT INTO db_1.t_5 VALUES (108, 'held', 7, 8, 9)",
		"RENAME TABLE db_1.t_5 TO db_1.t_tmp, db_1.t_6 TO db_1.t_5, db_1.t_tmp TO db_1.t_6")
	var refused *RefusedDDLError
	if err := c.failure(0); !errors.As(err, &refused) || refused.Table.Name != "t_6" || !strings.Contains(err.Error(), "wait behind the pending lock") {
		t.Fatalf("the swap while db_1.t_5 waits on a lock: %v; want it refused", err)
	}
	if after := c.downDefinitions(); !slices.Equal(after, defs) {
		t.Fatalf("the refused swap changed the downstream:\nbefore %v\nafter  %v", defs, after)
	}
}
