package loader

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"testing"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// removeHeader writes the load header of one source of a task, listing targets.
func removeHeader(t *testing.T, db *sql.DB, task, source, state, loadID string, targets ...hiddenMap) {
	t.Helper()
	ctx := context.Background()
	if err := meta.Init(ctx, db, "dm_meta", task); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(header{State: state, LoadID: loadID, Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	st := meta.NewStore(db, "dm_meta", task, source)
	if err := st.WriteLoad(ctx, db, meta.LoadRow{ID: meta.LoadPrefix, Pos: vocab.Position{File: "mysql-bin.000001", Pos: 4}, Data: string(data)}); err != nil {
		t.Fatal(err)
	}
}

func removeTables(t *testing.T, db *sql.DB, schema string) []string {
	t.Helper()
	rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestDropHiddenDropsOnlyTheListedHiddenTables(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	ctx := context.Background()

	// No meta schema, no checkpoint table: nothing to do.
	if dropped, err := DropHidden(ctx, db, "dm_meta", "task"); err != nil || len(dropped) != 0 {
		t.Fatalf("without a checkpoint table: %v, %v", dropped, err)
	}
	if loads, err := Loads(ctx, db, "dm_meta", "task"); err != nil || len(loads) != 0 {
		t.Fatalf("loads without a checkpoint table: %v, %v", loads, err)
	}

	const id1, id2, idOld = "1111111111111111", "2222222222222222", ""
	mark := func(id string) string { return " COMMENT='" + hiddenMark("task", id) + "'" }
	t1 := vocab.TableName{Schema: "db", Name: "t"}
	t2 := vocab.TableName{Schema: "db", Name: "u"}
	t3 := vocab.TableName{Schema: "db2", Name: "v"}
	inPlace := vocab.TableName{Schema: "db", Name: "w"}
	s.Exec(t, db,
		"CREATE DATABASE db", "CREATE DATABASE db2",
		// a user table with the target's name: loaded rows renamed into place earlier, or the user's
		"CREATE TABLE db.t (id INT PRIMARY KEY)", "INSERT INTO db.t VALUES (1)",
		"CREATE TABLE db.`"+HiddenName("task", t1)+"` (id INT PRIMARY KEY)"+mark(id1), "INSERT INTO db.`"+HiddenName("task", t1)+"` VALUES (2)",
		// db.u was renamed into place: its hidden name is gone
		"CREATE TABLE db.u (id INT PRIMARY KEY)",
		"CREATE TABLE db2.`"+HiddenName("task", t3)+"` (id INT PRIMARY KEY)"+mark(id2),
		// the name an older version gave db.v, named by a header of that version: unmarked
		"CREATE TABLE db.`"+HiddenPrefix+"v` (id INT PRIMARY KEY) COMMENT='the upstream''s comment'",
		// a target loaded in place
		"CREATE TABLE db.w (id INT PRIMARY KEY)",
		// the prefix, but no header names it
		"CREATE TABLE db.`"+HiddenPrefix+"other` (id INT PRIMARY KEY)",
		// a header names it as hidden, but it lacks the prefix
		"CREATE TABLE db.not_hidden (id INT PRIMARY KEY)",
		// another task's hidden table
		"CREATE TABLE db.`"+HiddenPrefix+"x` (id INT PRIMARY KEY)",
	)
	removeHeader(t, db, "task", "s1", stateLoading, id1,
		hiddenMap{Target: t1, Hidden: HiddenName("task", t1)}, hiddenMap{Target: t2, Hidden: HiddenName("task", t2)}, hiddenMap{Target: inPlace})
	removeHeader(t, db, "task", "s2", stateLoaded, id2,
		hiddenMap{Target: t1, Hidden: HiddenName("task", t1)}, hiddenMap{Target: t3, Hidden: HiddenName("task", t3)},
		hiddenMap{Target: vocab.TableName{Schema: "db", Name: "y"}, Hidden: "not_hidden"})
	removeHeader(t, db, "task", "s3", stateLoading, idOld, hiddenMap{Target: vocab.TableName{Schema: "db", Name: "v"}, Hidden: HiddenPrefix + "v"})
	removeHeader(t, db, "other", "s1", stateLoading, id1, hiddenMap{Target: vocab.TableName{Schema: "db", Name: "x"}, Hidden: HiddenPrefix + "x"})

	loads, err := Loads(ctx, db, "dm_meta", "task")
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 3 || loads["s1"].State != stateLoading || len(loads["s1"].Targets) != 3 || loads["s2"].Switched() ||
		loads["s1"].Targets[2] != (LoadTarget{Target: inPlace}) {
		t.Fatalf("loads: %+v", loads)
	}

	dropped, err := DropHidden(ctx, db, "dm_meta", "task")
	if err != nil {
		t.Fatal(err)
	}
	want := []vocab.TableName{{Schema: "db", Name: HiddenName("task", t1)}, {Schema: "db", Name: HiddenPrefix + "v"}, {Schema: "db2", Name: HiddenName("task", t3)}}
	if !slices.Equal(dropped, want) {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}
	if got, want := removeTables(t, db, "db"), []string{HiddenPrefix + "other", HiddenPrefix + "x", "not_hidden", "t", "u", "w"}; !slices.Equal(got, want) {
		t.Fatalf("db holds %v, want %v", got, want)
	}
	if got := removeTables(t, db, "db2"); len(got) != 0 {
		t.Fatalf("db2 holds %v", got)
	}
	var n int
	if err := db.QueryRow("SELECT id FROM db.t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the user's db.t: %d, %v", n, err)
	}
	// The headers are still there (meta.Remove drops them); a second run has nothing left to drop.
	if dropped, err := DropHidden(ctx, db, "dm_meta", "task"); err != nil || len(dropped) != 0 {
		t.Fatalf("second run: %v, %v", dropped, err)
	}
	if err := meta.Remove(ctx, db, "dm_meta", "task"); err != nil {
		t.Fatal(err)
	}
	if dropped, err := DropHidden(ctx, db, "dm_meta", "task"); err != nil || len(dropped) != 0 {
		t.Fatalf("after meta.Remove: %v, %v", dropped, err)
	}
}
