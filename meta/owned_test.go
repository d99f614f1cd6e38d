package meta

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// A table named as a task's meta table that the task did not create (here of the checkpoint table's
// very layout, but with a comment of its own) is not written, migrated or dropped: Init, Probe and
// Remove refuse it, naming the conflict without asking to drop it.
func TestMetaTableOfAnotherIsNotTaken(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	ckpt := CheckpointTable("dm_meta", "task")
	s.Exec(t, db, "CREATE DATABASE dm_meta", CreateCheckpoint(ckpt, "task")+" COMMENT='the user''s own'",
		"INSERT INTO "+ckpt.String()+" (source, id_hash, id) VALUES ('mine', '"+Hash("x")+"', 'x')")
	kept := func(what string, err error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if err == nil || !strings.Contains(err.Error(), ckpt.String()) || !strings.Contains(err.Error(), "did not create") ||
			strings.Contains(strings.ToLower(err.Error()), "drop it") {
			t.Fatalf("%s over the user's %s: %v", what, ckpt, err)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + ckpt.String() + " WHERE source = 'mine'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("after %s, the user's %s: %d rows, %v", what, ckpt, n, err)
		}
	}
	kept("Init", Init(ctx, db, "dm_meta", "task"))
	kept("Store.Init", NewStore(db, "dm_meta", "task", "s1").Init(ctx))
	kept("Probe", Probe(ctx, db, "dm_meta", "task"))
	kept("Remove", Remove(ctx, db, "dm_meta", "task"))
	// Nothing of the task was created beside it either: the marker table is not made.
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dm_meta' AND TABLE_NAME = ?", MarkerTable("dm_meta", "task").Name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("marker table: %d, %v", n, err)
	}
}

// Meta tables an older version created (no comment, the layout's columns) are the task's: Init writes
// the mark on them, Remove drops them. Tables of this version carry the mark from their CREATE.
func TestMetaTablesOfOlderVersionsAreAdopted(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	ckpt, marker := CheckpointTable("dm_meta", "old"), MarkerTable("dm_meta", "old")
	s.Exec(t, db, "CREATE DATABASE dm_meta", checkpointLayout.create(ckpt, ""), markerLayout.create(marker, ""))
	comment := func(tbl vocab.TableName) string {
		var c string
		if err := db.QueryRow("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", tbl.Schema, tbl.Name).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := Init(ctx, db, "dm_meta", "old"); err != nil {
		t.Fatal(err)
	}
	if c := comment(ckpt); c != "tributary checkpoint table of task old" {
		t.Fatalf("the adopted checkpoint table's comment: %q", c)
	}
	if c := comment(marker); c != "tributary DDL marker table of task old" {
		t.Fatalf("the adopted marker table's comment: %q", c)
	}
	if err := Init(ctx, db, "dm_meta", "new"); err != nil {
		t.Fatal(err)
	}
	if c := comment(CheckpointTable("dm_meta", "new")); c != "tributary checkpoint table of task new" {
		t.Fatalf("a new checkpoint table's comment: %q", c)
	}
	for _, task := range []string{"old", "new"} {
		if err := Remove(ctx, db, "dm_meta", task); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dm_meta'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables left in dm_meta (%v)", n, err)
	}
}
