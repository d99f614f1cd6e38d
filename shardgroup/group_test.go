package shardgroup

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/vocab"
)

var (
	tA     = vocab.TableName{Schema: "db_1", Name: "t_1"}
	tB     = vocab.TableName{Schema: "db_1", Name: "t_2"}
	tC     = vocab.TableName{Schema: "db_2", Name: "t_1"}
	target = vocab.TableName{Schema: "db", Name: "t"}
	ddl1   = []string{"ALTER TABLE `db`.`t` ADD COLUMN `c1` INT"}
	ddl2   = []string{"ALTER TABLE `db`.`t` ADD COLUMN `c2` INT"}
)

func pos(n uint32) vocab.Position { return vocab.Position{File: "mysql-bin.000001", Pos: n} }

func item(t vocab.TableName, p uint32, ddls []string) DDLItem {
	return DDLItem{Source: t, Target: target, DDLs: ddls, Pos: pos(p)}
}

func newGroup(t *testing.T, tables ...vocab.TableName) *ShardingGroup {
	t.Helper()
	g := NewShardingGroup(target)
	for _, tb := range tables {
		if err := g.AddTable(tb, vocab.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func mustSync(t *testing.T, g *ShardingGroup, it DDLItem) SyncResult {
	t.Helper()
	res, err := g.TrySync(it)
	if err != nil {
		t.Fatalf("TrySync(%s): %v", it, err)
	}
	return res
}

func TestTrySyncBasic(t *testing.T) {
	g := newGroup(t, tA, tB)
	res := mustSync(t, g, item(tA, 100, ddl1))
	if res.Synced || !res.Active || !reflect.DeepEqual(res.Remaining, []vocab.TableName{tB}) || !slices.Equal(res.ActiveDDLs, ddl1) {
		t.Fatalf("after A: %+v", res)
	}
	if !g.Blocked(tA, pos(101)) || g.Blocked(tA, pos(99)) || g.Blocked(tB, pos(101)) {
		t.Fatal("only A's DML after its DDL is held back")
	}
	res = mustSync(t, g, item(tB, 200, ddl1))
	if !res.Synced || !res.Active || len(res.Remaining) != 0 {
		t.Fatalf("after B: %+v", res)
	}
	r, err := g.ResolveActive()
	if err != nil {
		t.Fatal(err)
	}
	if r.ResyncFrom != pos(100) || !reflect.DeepEqual(r.Tables, []vocab.TableName{tA, tB}) || !slices.Equal(r.DDLs, ddl1) ||
		!reflect.DeepEqual(r.Positions, map[vocab.TableName]vocab.Position{tA: pos(100), tB: pos(200)}) {
		t.Fatalf("resolution %+v", r)
	}
	if g.InSharding() || g.Blocked(tA, pos(101)) {
		t.Fatal("group still in sharding after its only step was resolved")
	}
}

func TestSuccessiveDDLsQueueInAnyInterleaving(t *testing.T) {
	// A runs two steps ahead of B; B then catches up one step at a time.
	g := newGroup(t, tA, tB)
	mustSync(t, g, item(tA, 10, ddl1))
	res := mustSync(t, g, item(tA, 20, ddl2))
	if res.Active || res.Synced || !slices.Equal(res.ActiveDDLs, ddl1) {
		t.Fatalf("queued ddl2 must not be active: %+v", res)
	}
	if !g.Blocked(tA, pos(15)) {
		t.Fatal("A is past ddl1 at 15")
	}
	res = mustSync(t, g, item(tB, 30, ddl1))
	if !res.Synced || !res.Active {
		t.Fatalf("ddl1 synced: %+v", res)
	}
	if _, err := g.ResolveActive(); err != nil {
		t.Fatal(err)
	}
	st := g.Status()
	if st.Synced || !slices.Equal(st.ActiveDDLs, ddl2) || !reflect.DeepEqual(st.Remaining, []vocab.TableName{tB}) {
		t.Fatalf("after ddl1 resolved: %+v", st)
	}
	if g.Blocked(tA, pos(15)) || !g.Blocked(tA, pos(25)) || g.Blocked(tB, pos(35)) {
		t.Fatal("blocking after ddl1 resolved is wrong")
	}
	res = mustSync(t, g, item(tB, 40, ddl2))
	if !res.Synced || !res.Active {
		t.Fatalf("ddl2 synced: %+v", res)
	}
	r, err := g.ResolveActive()
	if err != nil {
		t.Fatal(err)
	}
	if r.ResyncFrom != pos(20) {
		t.Fatalf("resync from %s, want A's ddl2 at 20", r.ResyncFrom)
	}
}

func TestInconsistentDDLSequence(t *testing.T) {
	g := newGroup(t, tA, tB)
	mustSync(t, g, item(tA, 10, ddl1))
	mustSync(t, g, item(tA, 20, ddl2))
	before := g.Status()
	// B applies ddl2 first: out of order.
	_, err := g.TrySync(item(tB, 15, ddl2))
	var ie *InconsistentError
	if !errors.As(err, &ie) {
		t.Fatalf("want InconsistentError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"detect inconsistent DDL sequence", tA.String(), tB.String(), ddl1[0], ddl2[0], "step 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if !reflect.DeepEqual(g.Status(), before) {
		t.Fatal("a refused item changed the group")
	}
	// The right item is still accepted afterwards.
	if res := mustSync(t, g, item(tB, 16, ddl1)); !res.Synced {
		t.Fatalf("%+v", res)
	}
}

func TestAddItemIsReentrantByPosition(t *testing.T) {
	g := newGroup(t, tA, tB)
	mustSync(t, g, item(tA, 10, ddl1))
	res := mustSync(t, g, item(tA, 10, ddl1))
	if !res.Duplicate || res.Resolved || !res.Active {
		t.Fatalf("re-read of pending item: %+v", res)
	}
	if _, err := g.TrySync(item(tA, 10, ddl2)); err == nil {
		t.Fatal("different DDLs at a known position must be an error")
	}
	mustSync(t, g, item(tA, 20, ddl2))
	mustSync(t, g, item(tB, 11, ddl1))
	if _, err := g.ResolveActive(); err != nil {
		t.Fatal(err)
	}
	// Re-sync re-reads A from 10: its ddl1 is resolved, its ddl2 is the active step.
	if res := mustSync(t, g, item(tA, 10, ddl1)); !res.Duplicate || !res.Resolved {
		t.Fatalf("re-read of resolved item: %+v", res)
	}
	if res := mustSync(t, g, item(tA, 20, ddl2)); !res.Duplicate || res.Resolved || !res.Active {
		t.Fatalf("re-read of active item: %+v", res)
	}
	mustSync(t, g, item(tB, 21, ddl2))
	if _, err := g.ResolveActive(); err != nil {
		t.Fatal(err)
	}
	// Trimmed history still counts as resolved.
	if res := mustSync(t, g, item(tB, 21, ddl2)); !res.Duplicate || !res.Resolved {
		t.Fatalf("re-read after trim: %+v", res)
	}
	// A restarted worker adds tables at their checkpoints: items up to there are resolved.
	g2 := NewShardingGroup(target)
	if err := g2.AddTable(tA, pos(20)); err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, g2, item(tA, 10, ddl1)); !res.Duplicate || !res.Resolved {
		t.Fatalf("item before checkpoint: %+v", res)
	}
}

func TestTablesJoinAndLeave(t *testing.T) {
	g := newGroup(t, tA, tB)
	mustSync(t, g, item(tA, 10, ddl1))
	if err := g.AddTable(tC, vocab.Position{}); err == nil || !strings.Contains(err.Error(), tC.String()) {
		t.Fatalf("joining during a pending step: %v", err)
	}
	res := g.RemoveTable(tB, pos(15))
	if !res.Synced {
		t.Fatalf("dropping the only unsynced table syncs the group: %+v", res)
	}
	if _, err := g.ResolveActive(); err != nil {
		t.Fatal(err)
	}
	if err := g.AddTable(tC, vocab.Position{}); err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, g, item(tA, 20, ddl2)); res.Synced || !reflect.DeepEqual(res.Remaining, []vocab.TableName{tC}) {
		t.Fatalf("new table must take part in the next step: %+v", res)
	}
	if _, err := g.TrySync(item(tB, 30, ddl2)); err == nil {
		t.Fatal("a removed table is not a member")
	}
}

func TestResolveRequiresSynced(t *testing.T) {
	g := newGroup(t, tA, tB)
	if _, err := g.ResolveActive(); err == nil {
		t.Fatal("resolve without a pending step")
	}
	mustSync(t, g, item(tA, 10, ddl1))
	if _, err := g.ResolveActive(); err == nil || !strings.Contains(err.Error(), tB.String()) {
		t.Fatalf("resolve of unsynced group: %v", err)
	}
	u, ok := g.Unresolved()
	if !ok || !reflect.DeepEqual(u.Synced, []vocab.TableName{tA}) || !reflect.DeepEqual(u.Unsynced, []vocab.TableName{tB}) || u.FirstPosition != pos(10) {
		t.Fatalf("unresolved %+v", u)
	}
}

// TestRandomInterleavings feeds each table's DDL sequence in a random interleaving, with random
// re-reads, and checks the group against a simple model: a step is synced exactly when every table
// has reached it, steps resolve in order, and nothing is reported inconsistent.
func TestRandomInterleavings(t *testing.T) {
	for seed := int64(1); seed <= 2000; seed++ {
		rng := rand.New(rand.NewSource(seed))
		nTables, nDDLs := 1+rng.Intn(6), 1+rng.Intn(5)
		if err := runInterleaving(rng, nTables, nDDLs, false); err != nil {
			t.Fatalf("seed %d (%d tables, %d DDLs): %v", seed, nTables, nDDLs, err)
		}
	}
}

// TestRandomInterleavingsWithDrops: the same with tables dropped upstream at random points (before,
// between or after their DDLs), and their DDLs and drops read again. A dropped table never blocks a
// step; one that passed a step before its drop is named in that step's resolution (its held-back DML
// is read again) and is blocked until then.
func TestRandomInterleavingsWithDrops(t *testing.T) {
	for seed := int64(1); seed <= 3000; seed++ {
		rng := rand.New(rand.NewSource(seed))
		nTables, nDDLs := 1+rng.Intn(6), 1+rng.Intn(5)
		if err := runInterleaving(rng, nTables, nDDLs, true); err != nil {
			t.Fatalf("seed %d (%d tables, %d DDLs): %v", seed, nTables, nDDLs, err)
		}
	}
}

func runInterleaving(rng *rand.Rand, nTables, nDDLs int, drops bool) error {
	g := NewShardingGroup(target)
	tables := make([]vocab.TableName, nTables)
	next := make([]int, nTables) // next DDL index each table will read
	gone := make([]bool, nTables)
	for i := range tables {
		tables[i] = vocab.TableName{Schema: "db_1", Name: fmt.Sprintf("t_%d", i)}
		if err := g.AddTable(tables[i], vocab.Position{}); err != nil {
			return err
		}
	}
	ddl := func(k int) []string { return []string{fmt.Sprintf("ALTER TABLE `db`.`t` ADD COLUMN `c%d` INT", k)} }
	position := func(ti, k int) vocab.Position {
		return vocab.Position{File: "bin.000001", Pos: uint32(1000*(k+1) + ti)}
	}
	dropPos := func(ti int) vocab.Position {
		return vocab.Position{File: "bin.000001", Pos: uint32(1000*(next[ti]+1) + ti - 500)}
	}
	resolved := 0
	steps := func() int { // steps that exist: reached by some table
		n := 0
		for i := range tables {
			n = max(n, next[i])
		}
		return n
	}
	for {
		var ready []int
		for i := range tables {
			if !gone[i] && next[i] < nDDLs {
				ready = append(ready, i)
			}
		}
		if len(ready) == 0 {
			break
		}
		ti := ready[rng.Intn(len(ready))]
		k := next[ti]
		if k > 0 && rng.Intn(4) == 0 { // re-read an earlier item of any table
			ri := rng.Intn(nTables)
			if next[ri] > 0 {
				j := rng.Intn(next[ri])
				res, err := g.TrySync(DDLItem{Source: tables[ri], Target: target, DDLs: ddl(j), Pos: position(ri, j)})
				if err != nil {
					return fmt.Errorf("re-read of table %d step %d: %w", ri, j, err)
				}
				if !res.Duplicate || res.Resolved != (j < resolved) {
					return fmt.Errorf("re-read of table %d step %d (resolved %d): %+v", ri, j, resolved, res)
				}
				if gone[ri] {
					g.RemoveTable(tables[ri], dropPos(ri)) // its drop is read again too
				}
			}
			continue
		}
		res := SyncResult{}
		if drops && rng.Intn(6) == 0 {
			res = g.RemoveTable(tables[ti], dropPos(ti))
			gone[ti] = true
			k = -1
		} else {
			var err error
			res, err = g.TrySync(DDLItem{Source: tables[ti], Target: target, DDLs: ddl(k), Pos: position(ti, k)})
			if err != nil {
				return err
			}
			next[ti]++
		}
		for {
			wantSynced := steps() > resolved
			for i := range tables {
				if !gone[i] && next[i] <= resolved {
					wantSynced = false
				}
			}
			st := g.Status()
			if st.Synced != wantSynced {
				return fmt.Errorf("step %d: synced %v, want %v (next %v, gone %v)", resolved, st.Synced, wantSynced, next, gone)
			}
			if k >= 0 && res.Active != (k == resolved) {
				return fmt.Errorf("item step %d active %v with %d resolved", k, res.Active, resolved)
			}
			if !wantSynced {
				break
			}
			r, err := g.ResolveActive()
			if err != nil {
				return err
			}
			if !slices.Equal(r.DDLs, ddl(resolved)) {
				return fmt.Errorf("resolved %q, want step %d", r.DDLs, resolved)
			}
			var passed []vocab.TableName
			from := vocab.Position{}
			for i := range tables {
				if next[i] > resolved {
					passed = append(passed, tables[i])
					if p := position(i, resolved); from.IsZero() || p.Compare(from) < 0 {
						from = p
					}
				}
			}
			if !slices.Equal(r.Tables, passed) || r.ResyncFrom != from {
				return fmt.Errorf("step %d resolved for %v from %s, want %v from %s (gone %v)", resolved, r.Tables, r.ResyncFrom, passed, from, gone)
			}
			resolved++
			for i := range tables {
				blocked := g.Blocked(tables[i], vocab.Position{File: "bin.000001", Pos: 999999})
				if blocked != (next[i] > resolved) {
					return fmt.Errorf("table %d blocked %v with next %d resolved %d", i, blocked, next[i], resolved)
				}
			}
			k = -1 // res.Active no longer relates to the new active step
		}
	}
	if resolved != steps() {
		return fmt.Errorf("%d steps reached, %d resolved (next %v, gone %v)", steps(), resolved, next, gone)
	}
	if g.InSharding() {
		return fmt.Errorf("group still in sharding after all steps")
	}
	return nil
}

// TestRenameTableKeepsTheSequence: a shard renamed while it waits behind a step keeps the step, its
// held-back DML goes by the new name, the step resolves with the new name, and the old name is free.
// A swap through a third name keeps both sequences; a rename onto a member or from a stranger is an
// error that changes nothing.
func TestRenameTableKeepsTheSequence(t *testing.T) {
	tA2 := vocab.TableName{Schema: "db_1", Name: "t_9"}
	g := newGroup(t, tA, tB)
	mustSync(t, g, item(tA, 100, ddl1))
	if err := g.RenameTable(tA, tA2, pos(120), vocab.Position{}); err != nil {
		t.Fatal(err)
	}
	if g.Member(tA) || !g.Member(tA2) || !g.Blocked(tA2, pos(150)) || g.Blocked(tA, pos(150)) {
		t.Fatalf("after the rename: members %v, blocked A2 %v", g.Tables(), g.Blocked(tA2, pos(150)))
	}
	// DML of the old name read again (a re-sync) between the step and the rename waits behind the
	// step as the renamed sequence does (the chaos soak, seed 1: it went downstream before its DDL);
	// DML before the step does not.
	if !g.Blocked(tA, pos(110)) || g.Blocked(tA, pos(90)) {
		t.Fatalf("old name read again: blocked at 110 %v (want true), at 90 %v (want false)", g.Blocked(tA, pos(110)), g.Blocked(tA, pos(90)))
	}
	if res := mustSync(t, g, item(tA2, 100, ddl1)); !res.Duplicate {
		t.Fatalf("the step read again under the new name: %+v, want a duplicate", res)
	}
	if res := mustSync(t, g, item(tA, 100, ddl1)); !res.Duplicate {
		t.Fatalf("the step read again under the old name (a re-sync from before the rename): %+v, want a duplicate", res)
	}
	if err := g.RenameTable(tB, tA2, pos(130), vocab.Position{}); err == nil {
		t.Fatal("rename onto a member accepted")
	}
	if err := g.RenameTable(tC, vocab.TableName{Schema: "db_2", Name: "t_9"}, pos(130), vocab.Position{}); err == nil {
		t.Fatal("rename of a table that is not a member accepted")
	}
	if res := mustSync(t, g, item(tB, 200, ddl1)); !res.Synced {
		t.Fatalf("after B: %+v", res)
	}
	r, err := g.ResolveActive()
	if err != nil || !reflect.DeepEqual(r.Tables, []vocab.TableName{tB, tA2}) || r.Positions[tA2] != pos(100) || r.ResyncFrom != pos(100) {
		t.Fatalf("resolution %+v %v", r, err)
	}
	// The item was read under the old name (the rename came after it): a restart from before the
	// rename reads it again under that name and must find it resolved, or its group starts with a
	// step the other shards have passed (the chaos soak, seed 3: "inconsistent DDL sequence").
	if r.Positions[tA] != pos(100) {
		t.Fatalf("resolved positions %v: want the old name %s at 100 too", r.Positions, tA)
	}
	restarted := NewShardingGroup(target)
	for _, tb := range []vocab.TableName{tA, tB} {
		if err := restarted.AddTable(tb, r.Positions[tb]); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range []DDLItem{item(tA, 100, ddl1), item(tB, 200, ddl1)} {
		if res := mustSync(t, restarted, it); !res.Duplicate {
			t.Fatalf("after a restart, %s's resolved item read again: %+v, want a duplicate", it.Source, res)
		}
	}
	// Swap A2 and B through A (free again).
	for _, mv := range [][2]vocab.TableName{{tA2, tA}, {tB, tA2}, {tA, tB}} {
		if err := g.RenameTable(mv[0], mv[1], pos(300), vocab.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(g.Tables(), []vocab.TableName{tB, tA2}) && !reflect.DeepEqual(g.Tables(), []vocab.TableName{tA2, tB}) {
		t.Fatalf("after the swap: %v", g.Tables())
	}
	// The resolved position of the new name (a restart read the rename again) makes its items duplicates.
	g2 := newGroup(t, tA)
	if err := g2.RenameTable(tA, tA2, pos(300), pos(500)); err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, g2, item(tA2, 400, ddl1)); !res.Duplicate {
		t.Fatalf("an item before the new name's resolved position: %+v", res)
	}
}
