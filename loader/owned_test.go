package loader

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// notOursHeader writes the load header of source s1 of task "task" naming db.t loaded under hidden,
// as a load of this version writes it (with its load id).
func notOursHeader(t *testing.T, s *mariadbtest.Server, hidden string) {
	t.Helper()
	db := s.DB(t)
	ctx := context.Background()
	if err := meta.Init(ctx, db, "dm_meta", "task"); err != nil {
		t.Fatal(err)
	}
	data := `{"state":"loaded","load_id":"0123456789abcdef","targets":[{"target":{"schema":"db","name":"t"},"hidden":"` + hidden + `"}]}`
	st := meta.NewStore(db, "dm_meta", "task", "s1")
	if err := st.WriteLoad(ctx, db, meta.LoadRow{ID: meta.LoadPrefix, Pos: vocab.Position{File: "mysql-bin.000001", Pos: 4}, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// userTableKept checks that the user's table db.<name> still holds its one row, and that db.t does
// not exist.
func userTableKept(t *testing.T, s *mariadbtest.Server, name string) {
	t.Helper()
	db := s.DB(t)
	var v string
	if err := db.QueryRow("SELECT v FROM db.`" + name + "`").Scan(&v); err != nil || v != "mine" {
		t.Fatalf("the user's table db.%s: %q, %v", name, v, err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("db.t exists (%d, %v): the user's table was renamed into place", n, err)
	}
}

// A table of the hidden table's name that the load did not create (it carries no mark of the load
// its header names: here the user's, made after a stop) is neither renamed by the cut-over nor
// dropped by start-task --remove-meta, and the errors do not ask to drop it.
func TestNotOwnedHiddenTableIsNeitherRenamedNorDropped(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	hidden := HiddenPrefix + "t" // the name an older version loaded db.t under, for any task
	s.Exec(t, db, "CREATE DATABASE db", "CREATE TABLE db.`"+hidden+"` (id INT PRIMARY KEY, v TEXT)", "INSERT INTO db.`"+hidden+"` VALUES (1, 'mine')")
	notOursHeader(t, s, hidden)

	u := New(Config{Task: "task", Source: "s1", Downstream: db, Store: meta.NewStore(db, "dm_meta", "task", "s1")})
	err := u.cutOver(ctx)
	if err == nil {
		t.Fatal("the cut-over renamed a table the load did not create")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), hidden) || !strings.Contains(err.Error(), "did not create") || strings.Contains(strings.ToLower(err.Error()), "drop") {
		t.Fatalf("cut-over error: %v", err)
	}
	userTableKept(t, s, hidden)

	dropped, err := DropHidden(ctx, db, "dm_meta", "task")
	if err == nil || len(dropped) != 0 {
		t.Fatalf("DropHidden: dropped %v, err %v", dropped, err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), hidden) || !strings.Contains(err.Error(), "did not create") || strings.Contains(strings.ToLower(err.Error()), "drop it") {
		t.Fatalf("DropHidden error: %v", err)
	}
	userTableKept(t, s, hidden)
}

// The cut-over renames a hidden table that carries the mark of the load whose header names it, and
// gives the target its upstream comment back; run again (a crash after the rename), it gives the
// comment back to a target that still carries the mark.
func TestCutOverRenamesTheLoadsTableAndRestoresItsComment(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()
	target := vocab.TableName{Schema: "db", Name: "t"}
	hidden := HiddenName("task", target)
	const id, upstream = "0123456789abcdef", `the upstream's \ comment`
	s.Exec(t, db, "CREATE DATABASE db", "CREATE TABLE db.`"+hidden+"` (id INT PRIMARY KEY) COMMENT='"+hiddenMark("task", id)+"'",
		"CREATE TABLE db.u (id INT PRIMARY KEY) COMMENT='"+hiddenMark("task", id)+"'")
	removeHeader(t, db, "task", "s1", stateLoaded, id,
		hiddenMap{Target: target, Hidden: hidden, Comment: upstream}, hiddenMap{Target: vocab.TableName{Schema: "db", Name: "u"}, Hidden: HiddenName("task", vocab.TableName{Schema: "db", Name: "u"})})
	comment := func(name string) string {
		var c string
		if err := db.QueryRow("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = ?", name).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	u := New(Config{Task: "task", Source: "s1", Downstream: db, Store: meta.NewStore(db, "dm_meta", "task", "s1")})
	if err := u.cutOver(ctx); err != nil {
		t.Fatal(err)
	}
	if c := comment("t"); c != upstream {
		t.Fatalf("db.t's comment after the cut-over: %q", c)
	}
	// db.u stands for a target renamed before a crash, its comment not given back yet.
	if c := comment("u"); c != "" {
		t.Fatalf("db.u's comment after the cut-over: %q", c)
	}
	if err := u.cutOver(ctx); err != nil {
		t.Fatalf("the cut-over run again: %v", err)
	}
}
