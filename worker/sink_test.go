package worker

import (
	"context"
	"testing"

	"github.com/tributary-db/tributary/internal/mariadbtest"
	"github.com/tributary-db/tributary/shardgroup"
)

// TestExecDDLTwiceIsIdempotent: a DDL re-run after a crash between the DDL and its checkpoint is
// recognised as applied, for every kind the worker runs downstream.
func TestExecDDLTwiceIsIdempotent(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	sink := NewSink(db, "meta", "task", "s1")
	ctx := context.Background()
	if err := sink.Init(ctx); err != nil {
		t.Fatal(err)
	}
	ddls := []string{
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id INT PRIMARY KEY)",
		"ALTER TABLE d.t ADD COLUMN c INT",
		"ALTER TABLE d.t ADD INDEX ic (c)",
		"ALTER TABLE d.t DROP INDEX ic",
		"ALTER TABLE d.t DROP COLUMN c",
		"DROP TABLE d.t",
		"DROP DATABASE d",
	}
	pos := shardgroup.Position{File: "bin.000001", Pos: 4}
	for _, q := range ddls {
		for run := 0; run < 2; run++ {
			if err := sink.ExecDDL(ctx, []string{q}, CheckpointUpdate{Global: pos}); err != nil {
				t.Fatalf("%s (run %d): %v", q, run+1, err)
			}
		}
	}
	// A real error is still an error.
	if err := sink.ExecDDL(ctx, []string{"ALTER TABLE nowhere.t ADD COLUMN c INT"}, CheckpointUpdate{}); err == nil {
		t.Fatal("ALTER of a missing table succeeded")
	}
	cp, err := sink.Load(ctx)
	if err != nil || cp.Global != pos {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
}
