package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestDDLGeneratorKeepsItsColumnsTrue: over many draws, each DDL is one the shard's columns allow as
// the generator tracks them (no drop or change of an indexed column, no index on a missing column, at
// most 4 added columns), and the same seed draws the same DDLs.
func TestDDLGeneratorKeepsItsColumnsTrue(t *testing.T) {
	draw := func(seed uint64) []string {
		r := &ddlRunner{rng: rand.New(rand.NewPCG(seed, 1)), t: targets()[0], indexed: map[string]bool{}}
		var out []string
		for i := 0; i < 2000; i++ {
			cols := map[string]bool{}
			for _, c := range r.extra {
				cols[c.name] = true
			}
			indexed := map[string]bool{}
			for k := range r.indexed {
				indexed[k] = true
			}
			d, ok := r.next()
			if !ok {
				t.Fatalf("draw %d: no DDL with columns %v", i, r.extra)
			}
			f := strings.Fields(d.clause)
			switch f[0] + " " + f[1] {
			case "ADD COLUMN":
				if cols[f[2]] || len(cols) >= 4 {
					t.Fatalf("draw %d: %s with columns %v", i, d.clause, cols)
				}
			case "DROP COLUMN", "CHANGE COLUMN":
				if !cols[f[2]] || indexed[f[2]] {
					t.Fatalf("draw %d: %s with columns %v, indexed %v", i, d.clause, cols, indexed)
				}
			case "MODIFY COLUMN", "ADD INDEX":
				name := f[2]
				if f[1] == "INDEX" {
					name = strings.TrimPrefix(name, "ix_")
				}
				if !cols[name] || f[1] == "INDEX" && indexed[name] {
					t.Fatalf("draw %d: %s with columns %v, indexed %v", i, d.clause, cols, indexed)
				}
			case "DROP INDEX":
				if !indexed[strings.TrimPrefix(f[2], "ix_")] {
					t.Fatalf("draw %d: %s with indexed %v", i, d.clause, indexed)
				}
			default:
				t.Fatalf("draw %d: unknown DDL %s", i, d.clause)
			}
			out = append(out, d.clause)
		}
		return out
	}
	a, b := draw(7), draw(7)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different DDLs")
	}
	if slices.Equal(a, draw(8)) {
		t.Fatal("two seeds drew the same DDLs")
	}
}

// TestInterruptedPtOSCIsCleared: a pt-online-schema-change killed with its server between creating
// its triggers and the swap leaves them and its new table behind, and every later run refuses the
// table ("has triggers but --preserve-triggers was not specified"): seed 10's orders runner retried
// one shard for half an hour and its lock waited all that time. The runner now clears what such a run
// left before running the tool again. The leftovers are made here as the killed run left them.
func TestInterruptedPtOSCIsCleared(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a mariadbd")
	}
	pt, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		t.Skip("pt-online-schema-change is not installed")
	}
	srv := mariadbtest.Start(t)
	db := srv.DB(t)
	srv.Exec(t, db,
		"CREATE DATABASE shop_2",
		"CREATE TABLE shop_2.orders_6 (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(12,2) NOT NULL)",
		"INSERT INTO shop_2.orders_6 VALUES (1, 1.50), (2, 2.50)",
		// What the killed run had done: its new table, altered, and its insert trigger.
		"CREATE TABLE shop_2._orders_6_new LIKE shop_2.orders_6",
		"ALTER TABLE shop_2._orders_6_new ADD COLUMN c16 INT NOT NULL DEFAULT 0",
		"CREATE TRIGGER shop_2.pt_osc_shop_2_orders_6_ins AFTER INSERT ON shop_2.orders_6 FOR EACH ROW "+
			"REPLACE INTO shop_2._orders_6_new (id, amount) VALUES (NEW.id, NEW.amount)",
	)
	var logged []string
	r := &ddlRunner{dbs: []*sql.DB{db}, ports: []int{srv.Port}, ptOSC: pt,
		logf: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
	l := &liveShard{s: &shard{source: 0, schema: "shop_2", name: "orders_6"}, mu: &sync.Mutex{}}
	d := ddl{clause: "ADD COLUMN c16 INT NOT NULL DEFAULT 0", about: "c16", has: hasColumn("c16", "int"), ptOSC: true}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.applyOne(ctx, l, d); err != nil {
		t.Fatalf("pt-online-schema-change after an interrupted run: %v", err)
	}
	if ok, err := d.has(ctx, db, "shop_2", "orders_6"); err != nil || !ok {
		t.Fatalf("shop_2.orders_6 has c16: %v, %v", ok, err)
	}
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = 'shop_2'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("triggers left on shop_2: %d, %v", left, err)
	}
	var rows int
	if err := db.QueryRow("SELECT COUNT(*) FROM shop_2.orders_6").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("shop_2.orders_6 holds %d rows, want 2: %v", rows, err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "DROP TRIGGER") || !strings.Contains(logged[0], "_orders_6_new") {
		t.Fatalf("the clearing was not logged as it ran: %q", logged)
	}
}
