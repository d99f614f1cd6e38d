// The fidelity tests of every type's boundary values (fidelity_test.go).

package syncer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestFidelityBoundaries writes each type's boundary values, one row per value (and NULL), into a
// target table per type with a primary key (p_<type>) and one without a key (n_<type>, every row
// twice); then updates every row to the next value (and a third of the keys), then deletes half of
// them (in the table without a key, one of the two duplicates). After each step every target must
// equal its merged shards; a failure names the type.
func TestFidelityBoundaries(t *testing.T) { fidelityBoundaries(t, false) }

// TestFidelityBoundariesLoad: the same values there before the task, copied by the full load
// (task-mode all), then changed through the binlog by the sync unit that starts at the snapshot.
func TestFidelityBoundariesLoad(t *testing.T) { fidelityBoundaries(t, true) }

// TestFidelityBoundariesLoadInsert: the same on a downstream without local_infile, where the load
// writes multi-row INSERTs.
func TestFidelityBoundariesLoadInsert(t *testing.T) {
	fidelityBoundaries(t, true, "SET GLOBAL local_infile = 0")
}

func fidelityBoundaries(t *testing.T, load bool, downSetup ...string) {
	if os.Getenv("TRIBUTARY_TEST_CHARSET") == "latin1" {
		t.Skip("generates utf8mb4 schemas and values (4-byte characters in definitions): needs utf8mb4 servers")
	}
	o := fidelityOptions()
	e := newFidEnv(t)
	for _, q := range downSetup {
		if _, err := e.downDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	task := "bnd"
	if load {
		task = "bndload"
	}
	srcDBs := []string{"bnd_s1", "bnd_s2"}
	rules := []config.RouteRule{{SchemaPattern: "bnd_s*", TargetSchema: "bnd"}}
	type btable struct {
		name   string // type name
		t      ftype
		vals   []string // boundary literals, then NULL
		checks [2]fchecker
	}
	var tables []*btable
	for i, ft := range boundaryTypes() {
		if load && !o.wideShowCreate && slices.ContainsFunc(ft.elems, wide) {
			continue // the load creates every table from SHOW CREATE TABLE, which MariaDB writes lossily here
		}
		bt := &btable{name: fmt.Sprintf("%02d_%s", i, ft.name()), t: ft, vals: append(ft.boundaries(o), "NULL")}
		if len(bt.name) > 40 {
			bt.name = bt.name[:40]
		}
		tables = append(tables, bt)
		for _, kind := range []string{"p", "n"} {
			rules = slices.Insert(rules, 0, config.RouteRule{SchemaPattern: "bnd_s*", TablePattern: kind + "_" + bt.name + "_*", TargetSchema: "bnd", TargetTable: kind + "_" + bt.name})
		}
	}
	router, err := router.NewRouter(&config.BAList{DoDBs: []string{"bnd_s*"}}, rules)
	if err != nil {
		t.Fatal(err)
	}
	up := func(src int, q string) {
		t.Helper()
		if _, err := e.upDBs[src].Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	shard := func(kind, name string, j int) (int, string) {
		return j % 2, fmt.Sprintf("`%s`.`%s_%s_%d`", srcDBs[j%2], kind, name, 1+j/2%2)
	}
	for i := range srcDBs {
		up(i, "CREATE DATABASE "+srcDBs[i])
	}
	// Tables of spatial types are there at start (the DDL parser refuses them in the binlog, see
	// fidOptions.spatial); the others are created through the binlog.
	var fs *fidSyncers
	for _, spatial := range []bool{true, false} {
		if !spatial && !load {
			fs = e.start(t, task, router, 64, 2)
		}
		for _, bt := range tables {
			if (load && spatial) || (!load && bt.t.isSpatial() == spatial) {
				createBoundaryTables(e, bt.name, bt.t, up, shard, &bt.checks)
			}
		}
	}
	failed := func() error { return nil }
	check := func(step string) {
		t.Helper()
		diffs := map[string]string{}
		var err error
		pending := 0
		wait.Until(60*time.Second, func() bool {
			pending = 0
			for _, bt := range tables {
				for _, fc := range bt.checks {
					d, err := fc.state()
					if err != nil {
						d = err.Error()
					}
					if d != "" {
						diffs[bt.name] = fmt.Sprintf("%s: %s", fc.c.down, d)
						pending++
					} else {
						delete(diffs, bt.name)
					}
				}
			}
			err = failed()
			return pending == 0 || err != nil
		})
		if pending == 0 {
			return
		}
		for _, bt := range tables {
			if d, ok := diffs[bt.name]; ok {
				t.Errorf("%s, type %s: downstream differs from the merged upstream: %s", step, bt.t.sql(), d)
			}
		}
		t.Fatalf("%s: syncer error: %v", step, err)
	}
	// One row per value; in the table without a key, each row twice.
	for _, bt := range tables {
		for j, lit := range bt.vals {
			src, table := shard("p", bt.name, j)
			up(src, fmt.Sprintf("INSERT INTO %s VALUES (%d, %s)", table, j, lit))
			src, table = shard("n", bt.name, j)
			up(src, fmt.Sprintf("INSERT INTO %s VALUES (%d, %s), (%d, %s)", table, j, lit, j, lit))
		}
	}
	if load {
		if err := pessimist.PutTaskSources(context.Background(), e.cli, e.layout, task, []string{"s1", "s2"}); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, len(e.ups))
		for i := range e.ups {
			src := fmt.Sprintf("s%d", i+1)
			p := LoadParams{Task: task, Source: src, MetaSchema: "dm_meta", Upstream: config.Database{Host: "127.0.0.1", Port: e.ups[i].Port, User: "root"},
				Down: e.syncDB, Router: router, Agent: pessimist.NewAgent(e.cli, e.layout, task, src, nil),
				Dump: config.DumpConfig{Threads: 2, Rows: 2}, Load: config.LoadConfig{PoolSize: 2, OnDuplicate: "error"}, Log: testLogger()}
			go func() { errs <- RunLoad(t.Context(), p) }()
		}
		for range e.ups {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		check("load")
		fs = e.start(t, task, router, 64, 2)
	}
	failed = fs.failed
	check("insert")
	// Every row to the next value (the last, NULL, to the first); a third of the keys change.
	for _, bt := range tables {
		for j := range bt.vals {
			next := bt.vals[(j+1)%len(bt.vals)]
			src, table := shard("p", bt.name, j)
			up(src, fmt.Sprintf("UPDATE %s SET v = %s WHERE id = %d", table, next, j))
			if j%3 == 1 {
				up(src, fmt.Sprintf("UPDATE %s SET id = %d WHERE id = %d", table, 1000+j, j))
			}
			src, table = shard("n", bt.name, j)
			up(src, fmt.Sprintf("UPDATE %s SET v = %s WHERE k = %d LIMIT 1", table, next, j))
		}
	}
	check("update")
	for _, bt := range tables {
		for j := range bt.vals {
			if j%2 == 1 {
				continue
			}
			src, table := shard("p", bt.name, j)
			up(src, fmt.Sprintf("DELETE FROM %s WHERE id IN (%d, %d)", table, j, 1000+j))
			src, table = shard("n", bt.name, j)
			up(src, fmt.Sprintf("DELETE FROM %s WHERE k = %d LIMIT 1", table, j))
		}
	}
	check("delete")
	fs.stop()
	e.cleanup(t, task, srcDBs, "bnd")
}

// createBoundaryTables creates the shard tables of one type of the boundary test and their checks.
func createBoundaryTables(e *fidEnv, name string, ft ftype, up func(int, string), shard func(string, string, int) (int, string), checks *[2]fchecker) {
	v := &fcol{name: "v", t: ft}
	for k, kind := range []string{"p", "n"} {
		key, keyCol := "id INT PRIMARY KEY", "id"
		if kind == "n" {
			key, keyCol = "k INT", "k"
		}
		c := fcompare{down: "`bnd`.`" + kind + "_" + name + "`", cols: []*fcol{{name: keyCol, t: ftype{kind: kInt}}, v}}
		for j := 0; j < 4; j++ {
			src, table := shard(kind, name, j)
			up(src, "CREATE TABLE "+table+" ("+key+", v "+ft.sql()+" NULL)")
			c.shards = append(c.shards, fshardRef{db: e.upDBs[src], table: table})
		}
		checks[k] = fchecker{down: e.downDB, c: c}
	}
}
