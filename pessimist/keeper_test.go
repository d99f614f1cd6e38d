package pessimist

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	d1 = "ALTER TABLE `db`.`t` ADD COLUMN `c1` INT"
	d2 = "ALTER TABLE `db`.`t` ADD COLUMN `c2` INT"
	dF = "ALTER TABLE `db`.`t` ADD COLUMN `c1` FLOAT"
)

func TestLockResolvesInOrder(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s2", d1)
	h.info("s1", d1)
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("decided %v before every source arrived", got)
	}
	l := h.lock()
	if l.Owner != "s2" || !eqStrings(l.Synced, []string{"s1", "s2"}) || !eqStrings(l.Unsynced, []string{"s3"}) || l.Stage != "waiting" {
		t.Fatalf("lock %+v", l)
	}
	h.info("s3", d1)
	h.settle()
	h.expectOps("s2:exec") // the first source to arrive owns the lock
	h.done("s2")
	h.settle()
	h.expectOps("s1:skip(implicit) s2:exec+done s3:skip(implicit)") // the owner's done is their skip
	h.done("s1")
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("cleaned up before s3 was done: %v", got)
	}
	h.done("s3")
	h.settle()
	h.expectNoKeys()
	if len(h.k.Locks()) != 0 {
		t.Fatalf("locks left: %+v", h.k.Locks())
	}
}

// TestRestartAtEveryStage restarts the Keeper (a new coordinator reading etcd) before every step of a
// lock's life and checks that the lock resolves the same way, with one exec.
func TestRestartAtEveryStage(t *testing.T) {
	steps := []func(h *harness){
		func(h *harness) { h.info("s1", d1) }, // un-synced lock
		func(h *harness) { h.info("s2", d1) },
		func(h *harness) { h.info("s3", d1) },
		func(h *harness) { h.settle(); h.expectOps("s1:exec") }, // owner op not done
		func(h *harness) { h.done("s1") },                       // owner done, skips not sent
		func(h *harness) { h.settle(); h.expectOps("s1:exec+done s2:skip(implicit) s3:skip(implicit)") },
		func(h *harness) { h.done("s3") }, // owner and some non-owners done
		func(h *harness) { h.settle(); h.expectOps("s1:exec+done s2:skip(implicit)") },
		func(h *harness) { h.done("s2") },
		func(h *harness) { h.settle(); h.expectNoKeys() }, // resolved
	}
	for at := 0; at <= len(steps); at++ {
		h := newHarness(t, "s1", "s2", "s3")
		execs := 0
		for i, step := range steps {
			if i == at {
				h.restart()
			}
			step(h)
			if o, ok := h.op("s1"); ok && o.Exec && i == 3 {
				execs++
			}
		}
		if execs != 1 {
			t.Fatalf("restart at %d: %d execs", at, execs)
		}
	}
}

func TestStaleDecisionsFail(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s2", d1)
	stale := h.k.Decide() // a coordinator that will be deposed
	if len(stale) != 1 {
		t.Fatalf("want one exec decision, got %v", stale)
	}
	h.restart()
	h.settle() // the new leader issues the exec
	h.expectOps("s1:exec")
	if h.write(stale[0]) {
		t.Fatal("a deposed leader's exec was written twice")
	}
	h.done("s1")
	h.settle()
	h.done("s2")
	h.settle()
	h.expectNoKeys()
	// Long after the lock resolved, the stale exec still fails.
	if h.write(stale[0]) {
		t.Fatal("a stale exec was written after the lock resolved")
	}
}

func TestSourceRePutsInfo(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s1", d1) // a restarted worker posts again
	h.info("s2", d1)
	h.settle()
	h.expectOps("s1:exec")
	// s2 re-puts while the exec is pending: nothing changes, and it still gets its skip.
	h.info("s2", d1)
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("re-put changed the decision: %v", got)
	}
	h.done("s1")
	h.settle()
	h.expectOps("s1:exec+done s2:skip(implicit)")
}

func TestConflictAndForceRemove(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s2", dF)
	h.infoFor("`db`.`other`", "s1", d2) // another target of the same sources
	h.settle()
	h.expectOps("") // nothing executed for the conflict, the other lock waits for s2
	l := h.lock()
	if l.Stage != "conflict" || len(l.Conflict) != 2 || l.Conflict[1].DDLs[0] != dF {
		t.Fatalf("lock %+v", l)
	}
	if h.marked(h.target) {
		t.Fatal("a removal mark before any removal")
	}
	if err := h.unlock("", true); err != nil {
		t.Fatal(err)
	}
	keys := h.keys()
	if len(keys) != 1 || !strings.Contains(keys[0], "other") {
		t.Fatalf("force-remove must delete only this lock's keys, left %v", keys)
	}
	// The removal mark ends the sources' waits; it is no lock state for the Keeper.
	if !h.marked(h.target) || h.marked("`db`.`other`") {
		t.Fatal("force-remove must put this lock's removal mark, and only this one's")
	}
	if l := h.k.Locks(); len(l) != 1 || l[0].ID != LockID(h.task, "`db`.`other`") {
		t.Fatalf("locks after force-remove: %+v", l)
	}
	if _, _, err := h.k.Unlock(h.lockID(), "", false); !errors.Is(err, ErrLockNotFound) {
		t.Fatalf("unlock of removed lock: %v", err)
	}
}

func TestLocksOfDifferentTargetsAreIndependent(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	ta, tb := "`db`.`a`", "`db`.`b`"
	h.infoFor(ta, "s1", d1)
	h.infoFor(tb, "s2", d2)
	h.infoFor(tb, "s1", d2)
	h.settle()
	if o, ok := h.opFor(tb, "s2"); !ok || !o.Exec {
		t.Fatal("lock b must resolve while lock a waits")
	}
	h.infoFor(ta, "s2", d1)
	h.settle()
	if o, ok := h.opFor(ta, "s1"); !ok || !o.Exec {
		t.Fatal("lock a resolves once complete")
	}
}

// TestBackToBackDDLs is DM's classic hang: a source finishes ddl1 and posts ddl2 on the same lock
// before the others are done with ddl1.
func TestBackToBackDDLs(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s2", d1)
	h.settle()
	h.done("s1")
	h.settle()
	h.expectOps("s1:exec+done s2:skip(implicit)")
	h.info("s1", d2) // s1 runs ahead
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("ddl2 info of s1 must wait for the ddl1 round: %v", got)
	}
	h.done("s2")
	h.settle()
	h.expectOps("")
	h.info("s2", d2)
	h.settle()
	h.expectOps("s1:exec")
	if o, _ := h.op("s1"); !eqStrings(o.DDLs, []string{d2}) {
		t.Fatalf("second round executes %q", o.DDLs)
	}
	h.done("s1")
	h.settle()
	h.done("s2")
	h.settle()
	h.expectNoKeys()
}

func TestUnlockWithMissingSource(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s1", d1)
	h.info("s2", d1)
	h.settle()
	if err := h.unlock("s4", false); err == nil || !strings.Contains(err.Error(), "not a source") {
		t.Fatalf("unlock with unknown owner: %v", err)
	}
	if err := h.unlock("s3", false); err == nil || !strings.Contains(err.Error(), "has not reached") {
		t.Fatalf("unlock with unsynced owner: %v", err)
	}
	if err := h.unlock("s2", false); err != nil {
		t.Fatal(err)
	}
	h.restart() // an unlock interrupted half way continues on a new coordinator
	h.settle()
	h.expectOps("s2:exec")
	h.done("s2")
	h.settle()
	h.expectOps("s1:skip(implicit) s2:exec+done")
	h.done("s1")
	h.settle()
	h.expectOps("")
	if l := h.lock(); l.Stage != "unlocked" || !eqStrings(l.Unsynced, []string{"s3"}) {
		t.Fatalf("lock waiting for the missing source: %+v", l)
	}
	if err := h.unlock("", false); err == nil || !strings.Contains(err.Error(), "already unlocked") {
		t.Fatalf("second unlock: %v", err)
	}
	h.info("s3", d1) // the missing source arrives later and skips
	h.settle()
	h.expectOps("s3:skip")
	h.done("s3")
	h.settle()
	h.expectNoKeys()
}

func TestUnlockReassignsPendingExec(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s2", d1)
	h.settle()
	h.expectOps("s1:exec") // s1's worker is dead and never runs it
	if err := h.unlock("s2", false); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.expectOps("s2:exec")
	h.done("s2")
	h.settle()
	h.expectOps("s1:skip(implicit) s2:exec+done") // the old owner takes part in the new exec's round
	h.done("s1")
	h.settle()
	h.expectNoKeys()
}

func TestUnlockAfterExecWithDeadNonOwner(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s1", d1)
	h.info("s2", d1)
	if err := h.unlock("", false); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.done("s1")
	h.settle()
	h.expectOps("s1:exec+done s2:skip(implicit)")
	h.done("s2")
	h.settle()
	h.expectOps("") // s3 (missing) is the only thing left, in the unlock request
	if keys := h.keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], "unlock/") {
		t.Fatalf("keys %v", keys)
	}
	// The user gives up on s3: force-remove clears the request too.
	if err := h.unlock("", true); err != nil {
		t.Fatal(err)
	}
	h.expectNoKeys()
}

func TestOwnerRemovedFromTask(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s1", d1)
	h.info("s2", d1)
	h.info("s3", d1)
	h.settle()
	h.expectOps("s1:exec")
	h.setSources("s2", "s3") // s1 leaves the task before executing
	h.settle()
	h.expectOps("s2:exec")
	if _, ok := h.kv.kv[h.layout.InfoKey(h.task, h.target, "s1")]; ok {
		t.Fatal("the removed owner's info is left behind")
	}
	h.done("s2")
	h.settle()
	h.done("s3")
	h.settle()
	h.expectNoKeys()
}

func TestSourceRemovedWhileWaiting(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s1", d1)
	h.info("s2", d1)
	h.settle()
	h.setSources("s1", "s2") // s3, which never arrived, leaves: the lock is complete
	h.settle()
	h.expectOps("s1:exec")
}

func TestUnknownTaskIsNeverDecided(t *testing.T) {
	h := newHarness(t, "s1")
	h.write(Txn{Deletes: []string{h.layout.TaskKey(h.task)}})
	h.info("s1", d1)
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("decided %v without knowing the task's sources", got)
	}
	h.setSources("s1")
	h.settle()
	h.expectOps("s1:exec")
}

func TestMultiTableRenameSplitAcrossTables(t *testing.T) {
	// One RENAME event touching two shard tables of one source gives two items; the worker's group
	// posts one info with the target's DDLs only when both tables reached it. Here the Keeper sees the
	// per-target infos that result: each target lock is attributed to the right table's target.
	h := newHarness(t, "s1", "s2")
	r1 := "RENAME TABLE `db`.`a` TO `db`.`a_old`"
	r2 := "RENAME TABLE `db`.`a_new` TO `db`.`a`"
	h.infoFor("`db`.`a`", "s1", r1)
	h.infoFor("`db`.`a_new`", "s1", r2)
	h.infoFor("`db`.`a`", "s2", r1)
	h.settle()
	if o, ok := h.opFor("`db`.`a`", "s1"); !ok || !o.Exec || o.DDLs[0] != r1 {
		t.Fatalf("lock of `db`.`a` executes %+v", o)
	}
	if _, ok := h.opFor("`db`.`a_new`", "s1"); ok {
		t.Fatal("lock of `db`.`a_new` must still wait for s2")
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	l := NewLayout("/x")
	for _, c := range []struct{ task, target, source string }{
		{"t", "`db`.`t`", "s"},
		{"a/b", "`d/b`.`t%2F`", "s/1"},
	} {
		p, err := l.parse(l.InfoKey(c.task, c.target, c.source))
		if err != nil || p.kind != kindInfo || p.task != c.task || p.target != c.target || p.source != c.source {
			t.Fatalf("%+v: %+v %v", c, p, err)
		}
	}
	if !strings.HasPrefix(l.InfoKey("t", "`db`.`t2`", "s"), l.lockPrefix(kindInfo, "t", "`db`.`t2`")) ||
		strings.HasPrefix(l.InfoKey("t", "`db`.`t2`", "s"), l.lockPrefix(kindInfo, "t", "`db`.`t`")) {
		t.Fatal("lock prefixes overlap")
	}
	if _, err := l.parse("/x/info/a"); err == nil {
		t.Fatal("short key parsed")
	}
}

// lateSources returns a lock under a limit of 6 operations per transaction whose exec, by sources[0],
// is done, and whose other sources, added to the task after the exec was written, all wait: they
// take no part in the exec's round, so each needs a skip operation of its own.
func lateSources(t *testing.T, sources []string) *harness {
	h := newHarness(t, sources[0])
	h.maxOps = 6
	h.restart()
	h.info(sources[0], d1)
	h.settle()
	h.expectOps(sources[0] + ":exec")
	h.setSources(sources...)
	for _, s := range sources[1:] {
		h.info(s, d1)
	}
	if got := h.settle(); len(got) != 0 {
		t.Fatalf("decided %v while the owner executes", got)
	}
	h.done(sources[0])
	return h
}

func TestLargeLocksRespectTxnLimit(t *testing.T) {
	var sources []string
	for i := 0; i < 20; i++ {
		sources = append(sources, fmt.Sprintf("s%02d", i))
	}
	h := lateSources(t, sources)
	applied := h.settle()
	if len(applied) < 2 {
		t.Fatalf("19 skips fit in %d transactions under a limit of 6", len(applied))
	}
	for _, s := range sources[1:] {
		if o, ok := h.op(s); !ok || o.Exec {
			t.Fatalf("%s has no skip", s)
		}
		h.done(s)
	}
	h.settle()
	h.expectNoKeys()
}

// A lock whose skips take several transactions: the dones of the sources skipped by one transaction,
// arriving before the next is written, do not fail it (its guard covers only its own operations'
// key range), while a duplicate of a skip transaction, or one whose range changed, still fails.
func TestSkipBatchesSurviveEarlierDones(t *testing.T) {
	var sources []string
	for i := 0; i < 12; i++ {
		sources = append(sources, fmt.Sprintf("s%02d", i))
	}
	h := lateSources(t, sources)
	var skipped []string
	var prev []KV
	for round := 0; ; round++ {
		// The coordinator decides the next transaction as soon as it has seen the previous one's
		// puts; the sources that one skipped finish before it is written.
		txns := h.k.Decide()
		for _, p := range prev {
			src := p.Key[strings.LastIndex(p.Key, "/")+1:]
			skipped = append(skipped, src)
			h.done(src)
		}
		if len(txns) == 0 || !strings.HasPrefix(txns[0].Reason, "skip after owner") {
			break
		}
		if len(txns) != 1 {
			t.Fatalf("round %d: want one skip transaction, got %v", round, txns)
		}
		if !h.write(txns[0]) {
			t.Fatalf("round %d: skip transaction %s failed", round, txns[0])
		}
		if h.write(txns[0]) {
			t.Fatalf("round %d: a duplicate skip transaction was written", round)
		}
		prev = txns[0].Puts
	}
	if want := strings.Join(sources[1:], " "); strings.Join(skipped, " ") != want {
		t.Fatalf("skipped %v, want %s in order", skipped, want)
	}
	h.settle()
	h.expectNoKeys()
}

// A skip transaction decided before a source in its range got an operation some other way fails.
func TestSkipBatchGuardedByItsRange(t *testing.T) {
	h := lateSources(t, []string{"s1", "s2", "s3"})
	txns := h.k.Decide()
	if len(txns) != 1 {
		t.Fatalf("want one skip transaction, got %v", txns)
	}
	// An operation for s2 appears (written by a decision this Keeper has not seen yet).
	h.write(Txn{Puts: []KV{{h.layout.OperationKey(h.task, h.target, "s2"), encode(Operation{Task: h.task, Source: "s2", Target: h.target, DDLs: []string{d1}})}}})
	if h.write(txns[0]) {
		t.Fatal("a skip transaction was written over an operation it did not know")
	}
	h.settle()
	h.expectOps("s1:exec+done s2:skip s3:skip")
}

// After a successful write, a lock is not decided again until the Keeper has seen that write's
// revision: the decision in between would repeat the one just written.
func TestNoDecisionBeforeOwnWriteSeen(t *testing.T) {
	h := newHarness(t, "s1", "s2")
	h.info("s1", d1)
	h.info("s2", d1)
	rev := h.kv.rev
	h.k.Written(h.lockID(), rev+2)
	if txns := h.k.Decide(); len(txns) != 0 {
		t.Fatalf("decided before its own write was seen: %v", txns)
	}
	h.k.SetRevision(rev + 2)
	if txns := h.k.Decide(); len(txns) != 1 || !strings.HasPrefix(txns[0].Reason, "exec by owner") {
		t.Fatalf("want the exec once the write is seen, got %v", txns)
	}
}

// A participant that leaves the task after the exec never finishes: the count of dones stays short,
// so the agents cannot tell the last, and the coordinator clears the round (operations, Round, done
// counter) once the remaining participants are done.
func TestParticipantRemovedAfterExec(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	h.info("s1", d1)
	h.info("s2", d1)
	h.info("s3", d1)
	h.settle()
	h.done("s1")
	h.settle()
	h.expectOps("s1:exec+done s2:skip(implicit) s3:skip(implicit)")
	h.setSources("s1", "s2")
	h.settle()
	h.expectOps("s1:exec+done s2:skip(implicit)") // s3's info was dropped with it
	if !h.marked(h.target) {
		t.Fatal("dropping s3's info must put the lock's removal mark (s3 may still wait on it)")
	}
	arrive := h.layout.ArriveKey(h.task, h.target)
	if got := h.kv.kv[arrive].val; got != arrivePoison {
		t.Fatalf("dropping s3's info must poison the count of arrivals (Agent.PutInfo), got %q", got)
	}
	h.done("s2")
	if got := h.settle(); len(got) != 1 || got[0] != "clean up resolved round" {
		t.Fatalf("applied %v, want the cleanup", got)
	}
	if k := h.keys(); len(k) != 1 || h.layout.Root()+k[0] != arrive {
		t.Fatalf("keys left behind: %v, want only the poisoned count of arrivals", k)
	}
	if l := h.k.Locks(); len(l) != 0 {
		t.Fatalf("locks left: %+v", l)
	}
	// The next new round deletes the count: the round after it may complete itself again.
	h.info("s1", d2)
	h.info("s2", d2)
	h.settle()
	h.expectOps("s1:exec")
	if _, ok := h.kv.kv[arrive]; ok {
		t.Fatal("a new round must delete the count of arrivals")
	}
}

// TestOtherSession: an info whose DDL events ran in other session settings than another source's of
// the same lock is found (the coordinator logs it); infos of other locks do not count.
func TestOtherSession(t *testing.T) {
	k := NewKeeper(NewLayout("/t/"), 0)
	a := Info{Task: "task", Source: "s1", Target: "`db`.`t`", DDLs: []string{"ALTER TABLE `db`.`t` ADD COLUMN c INT"}, Session: "time_zone='+08:00'"}
	k.PutInfo(a)
	if _, ok := k.OtherSession(a); ok {
		t.Fatal("the only info differs from itself")
	}
	b := a
	b.Source = "s2"
	k.PutInfo(b)
	if _, ok := k.OtherSession(b); ok {
		t.Fatal("the same settings differ")
	}
	c := a
	c.Source, c.Session = "s3", ""
	k.PutInfo(c)
	if o, ok := k.OtherSession(c); !ok || o.Source != "s1" {
		t.Fatalf("other settings not found: %+v %v", o, ok)
	}
	d := c
	d.Target = "`db`.`u`"
	k.PutInfo(d)
	if _, ok := k.OtherSession(d); ok {
		t.Fatal("another lock's info counted")
	}
}

// TestWaitingOwnerIsWhoWillRun: while the agents' arrival count holds, the info that completes the
// lock writes the exec for its own source, so a waiting lock shows as owner the source still missing
// (the first of them while several are); once the count is poisoned the coordinator decides, and the
// owner shown is the first source to arrive, as DM's.
func TestWaitingOwnerIsWhoWillRun(t *testing.T) {
	h := newHarness(t, "s1", "s2", "s3")
	arrive := h.layout.ArriveKey(h.task, h.target)
	h.info("s3", d1)
	h.write(Txn{Puts: []KV{{arrive, arriveValue([]string{d1}, 1)}}})
	if l := h.lock(); l.Owner != "s1" || l.Stage != "waiting" {
		t.Fatalf("two missing: owner %s, want s1 (the first missing): %+v", l.Owner, l)
	}
	h.info("s1", d1)
	if l := h.lock(); l.Owner != "s2" {
		t.Fatalf("s2 missing: owner %s, want s2: %+v", l.Owner, l)
	}
	h.write(Txn{Puts: []KV{{arrive, arrivePoison}}})
	if l := h.lock(); l.Owner != "s3" {
		t.Fatalf("poisoned: owner %s, want s3 (the first to arrive): %+v", l.Owner, l)
	}
}
