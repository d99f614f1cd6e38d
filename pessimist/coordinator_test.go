package pessimist

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

func testLayout(t *testing.T) Layout {
	return NewLayout(fmt.Sprintf("/test/%s/%d/", t.Name(), time.Now().UnixNano()))
}

// TestCoordinatorRebuildsAfterCompaction: infos arrive while the coordinator sits between its full
// read and its watch, and etcd compacts those revisions away; the watch fails with ErrCompacted and the
// coordinator must rebuild from a new full read, then resolve the lock.
func TestCoordinatorRebuildsAfterCompaction(t *testing.T) {
	cli := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := testLayout(t)
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	a1, a2 := coordinated(NewAgent(cli, layout, "task", "s1", nil)), coordinated(NewAgent(cli, layout, "task", "s2", nil))
	loads := 0
	c := NewCoordinator(cli, layout, WithRetryInterval(10*time.Millisecond))
	c.afterLoad = func() {
		loads++
		if loads != 1 {
			return
		}
		// Between the first read and the watch: write, then compact past the read's revision.
		for _, a := range []*Agent{a1, a2} {
			if _, err := a.PutInfo(ctx, "`db`.`t`", []string{d1}); err != nil {
				t.Error(err)
			}
		}
		resp, err := cli.Put(ctx, "/test/compaction-marker", "x")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Error(err)
		}
	}
	run := start(ctx, func(ctx context.Context) { c.Run(ctx) })
	defer run.stop()
	var info Info
	var err error
	wait.Eventually(t, 10*time.Second, func() bool { info, _, err = a1.Info(ctx, "`db`.`t`"); return err != nil || info.ModRevision != 0 },
		func() string { return "s1's info never written" })
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	op, err := a1.WaitOperation(wctx, info)
	if err != nil {
		t.Fatalf("lock not resolved after compaction: %v (loads %d)", err, loads)
	}
	if !op.Exec || loads < 2 {
		t.Fatalf("op %+v after %d loads; want exec after a rebuild", op, loads)
	}
}

// TestCoordinatorFence: once the leader key changes, the coordinator's next write fails and Run
// returns ErrNotLeader without having written anything.
func TestCoordinatorFence(t *testing.T) {
	cli := etcdClient(t)
	ctx := context.Background()
	layout := testLayout(t)
	leaderKey := layout.Root() + "leader"
	resp, err := cli.Put(ctx, leaderKey, "me")
	if err != nil {
		t.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision(leaderKey), "=", resp.Header.Revision)
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	// Leadership moves: the key is re-created by someone else.
	if _, err := cli.Delete(ctx, leaderKey); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, leaderKey, "other"); err != nil {
		t.Fatal(err)
	}
	a := coordinated(NewAgent(cli, layout, "task", "s1", nil))
	if _, err := a.PutInfo(ctx, "`db`.`t`", []string{d1}); err != nil {
		t.Fatal(err)
	}
	c := NewCoordinator(cli, layout, WithFence(fence))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Run(rctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Run: %v, want ErrNotLeader", err)
	}
	ops, err := a.Operations(ctx)
	if err != nil || len(ops) != 0 {
		t.Fatalf("a deposed coordinator wrote %v (%v)", ops, err)
	}
}

// TestCoordinatorUnlockAndLocks drives dmctl's two lock commands against a real coordinator.
func TestCoordinatorUnlockAndLocks(t *testing.T) {
	cli := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := testLayout(t)
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	c := NewCoordinator(cli, layout)
	if _, err := c.Locks(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Locks before the first read: %v", err)
	}
	run := start(ctx, func(ctx context.Context) { c.Run(ctx) })
	defer run.stop()
	a1 := coordinated(NewAgent(cli, layout, "task", "s1", nil))
	info, err := a1.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	id := LockID("task", "`db`.`t`")
	wait.Eventually(t, 10*time.Second, func() bool {
		l, err := c.Locks()
		return err == nil && len(l) == 1 && l[0].ID == id && len(l[0].Unsynced) == 1 && l[0].Unsynced[0] == "s2"
	}, func() string { return "the lock to show" })
	if _, err := c.UnlockLock(ctx, "task-`db`.`nope`", "", false); !errors.Is(err, ErrLockNotFound) {
		t.Fatalf("unlock of unknown lock: %v", err)
	}
	if _, err := c.UnlockLock(ctx, id, "", false); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	op, err := a1.WaitOperation(wctx, info)
	if err != nil || !op.Exec {
		t.Fatalf("owner after unlock: %+v %v", op, err)
	}
	if err := a1.DoneOperationDeleteInfo(ctx, op, info); err != nil {
		t.Fatal(err)
	}
	// s2 was missing; the lock waits for it as "unlocked" until it arrives and skips.
	wait.Eventually(t, 10*time.Second, func() bool {
		l, err := c.Locks()
		return err == nil && len(l) == 1 && l[0].Stage == "unlocked"
	}, func() string { return "the unlocked stage" })
	a2 := coordinated(NewAgent(cli, layout, "task", "s2", nil))
	info2, err := a2.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	op2, err := a2.WaitOperation(wctx, info2)
	if err != nil || op2.Exec {
		t.Fatalf("missing source after unlock: %+v %v", op2, err)
	}
	if err := a2.DoneOperationDeleteInfo(ctx, op2, info2); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool {
		l, err := c.Locks()
		return err == nil && len(l) == 0
	}, func() string { return "no lock" })
	// Force-remove while a source waits: the waiting agent learns the lock is gone.
	info, err = a1.PutInfo(ctx, "`db`.`t`", []string{d2})
	if err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, _ := c.Locks(); return len(l) == 1 }, func() string { return "the second lock" })
	errc := make(chan error, 1)
	go func() { _, err := a1.WaitOperation(wctx, info); errc <- err }()
	if _, err := c.UnlockLock(ctx, id, "", true); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrLockRemoved) {
		t.Fatalf("waiting agent after force-remove: %v", err)
	}
}

// TestAgentPutInfoIsIdempotent: the same info again writes nothing.
func TestAgentPutInfoIsIdempotent(t *testing.T) {
	cli := etcdClient(t)
	ctx := context.Background()
	layout := testLayout(t)
	a := coordinated(NewAgent(cli, layout, "task", "s1", nil))
	i1, err := a.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	i2, err := a.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	if i1.ModRevision != i2.ModRevision {
		t.Fatalf("re-put wrote again: %d then %d", i1.ModRevision, i2.ModRevision)
	}
	i3, err := a.PutInfo(ctx, "`db`.`t`", []string{d2})
	if err != nil || i3.ModRevision == i2.ModRevision || i3.CreateRevision != i1.CreateRevision {
		t.Fatalf("changed info: %+v %v", i3, err)
	}
	// A newer incarnation of the source takes over: the old one can no longer put infos (a late
	// request of a dead worker must not leave an info nobody answers).
	b := coordinated(NewAgent(cli, layout, "task", "s1", nil))
	if _, err := b.PutInfo(ctx, "`db`.`t`", []string{d2}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutInfo(ctx, "`db`.`other`", []string{d1}); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("put by a superseded agent: %v", err)
	}
	if _, found, _ := a.Info(ctx, "`db`.`other`"); found {
		t.Fatal("a superseded agent wrote an info")
	}
}

// TestImplicitSkipsAndLastDone: the owner's done exec operation is every participant's skip (no
// operation key of their own), a restarted participant finds it with Operations, and the last source
// to finish clears the lock itself, with no coordinator running: 2N+1 writes for N sources.
func TestImplicitSkipsAndLastDone(t *testing.T) {
	// fast: the last info writes the exec (Agent.PutInfo), with no coordinator running at all: 2N
	// writes. coordinated: the coordinator writes it for the first source: 2N+1.
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%t", fast), func(t *testing.T) { implicitSkipsAndLastDone(t, fast) })
	}
}

func implicitSkipsAndLastDone(t *testing.T, fast bool) {
	cli := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := testLayout(t)
	sources := []string{"s1", "s2", "s3"}
	if err := PutTaskSources(ctx, cli, layout, "task", sources); err != nil {
		t.Fatal(err)
	}
	var coord *runner
	if !fast {
		coord = start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	}
	before, err := cli.Get(ctx, "/test/revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]*Agent{}
	infos := map[string]Info{}
	for _, s := range sources {
		agents[s] = NewAgent(cli, layout, "task", s, nil)
		if !fast {
			agents[s].LeaveExecToCoordinator()
		}
		if infos[s], err = agents[s].PutInfo(ctx, "`db`.`t`", []string{d1}); err != nil {
			t.Fatal(err)
		}
	}
	owner, others := "s1", []string{"s2", "s3"}
	if fast {
		owner, others = "s3", []string{"s1", "s2"}
		if infos["s3"].exec == nil || infos["s1"].exec != nil || infos["s2"].exec != nil {
			t.Fatalf("only the last info writes the exec: %+v %+v %+v", infos["s1"].exec, infos["s2"].exec, infos["s3"].exec)
		}
	}
	exec, err := agents[owner].WaitOperation(ctx, infos[owner])
	if err != nil || !exec.Exec || exec.Sources != 3 || exec.Source != owner {
		t.Fatalf("owner's operation %+v, %v", exec, err)
	}
	if r, err := cli.Get(ctx, layout.RoundKey("task", "`db`.`t`")); err != nil || len(r.Kvs) != 1 ||
		string(r.Kvs[0].Value) != encode(Round{Task: "task", Target: "`db`.`t`", Owner: owner, Participants: others}) || r.Kvs[0].ModRevision != exec.CreateRevision {
		t.Fatalf("the round: %v %v", r, err)
	}
	if coord != nil {
		coord.stop() // from here on the agents alone finish the lock
	}
	if err := agents[owner].DoneOperationDeleteInfo(ctx, exec, infos[owner]); err != nil {
		t.Fatal(err)
	}
	for _, s := range others {
		skip, err := agents[s].WaitOperation(ctx, infos[s])
		if err != nil || skip.Exec || skip.Owner != owner || !eqStrings(skip.DDLs, []string{d1}) {
			t.Fatalf("%s: skip %+v, %v", s, skip, err)
		}
		// A restarted worker finds the same skip among its operations.
		ops, err := NewAgent(cli, layout, "task", s, nil).Operations(ctx)
		if err != nil || len(ops) != 1 || ops[0].Owner != owner || ops[0].ModRevision != skip.ModRevision {
			t.Fatalf("%s: operations %+v, %v", s, ops, err)
		}
		if own, err := cli.Get(ctx, layout.OperationKey("task", "`db`.`t`", s)); err != nil || len(own.Kvs) != 0 {
			t.Fatalf("%s: an operation key of its own: %v %v", s, own.Kvs, err)
		}
		if err := agents[s].DoneOperationDeleteInfo(ctx, skip, infos[s]); err != nil {
			t.Fatal(err)
		}
	}
	resp := onlyTaskKeysLeft(t, ctx, cli, layout)
	want := 2*len(sources) + 1
	if fast {
		want = 2 * len(sources)
	}
	if writes := resp.Header.Revision - before.Header.Revision; writes != int64(want) {
		t.Errorf("%d writes for %d sources, want %d", writes, len(sources), want)
	}
}

// TestOwnSkipPoisonsTheCount: a source sent a skip of its own (missing at an unlock) was counted as an
// arrival; its done deletes its info, so it poisons the count. Otherwise the next lock with the same
// DDLs would count the deleted info and complete without that source.
func TestOwnSkipPoisonsTheCount(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 30*time.Second, "s1", "s2")
	c := NewCoordinator(cli, layout)
	run := start(ctx, func(ctx context.Context) { c.Run(ctx) })
	defer run.stop()
	a1, a2 := NewAgent(cli, layout, "task", "s1", nil), NewAgent(cli, layout, "task", "s2", nil)
	const target = "`db`.`t`"
	info, err := a1.PutInfo(ctx, target, []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	id := LockID("task", target)
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 1 }, func() string { return "the lock to show" })
	if _, err := c.UnlockLock(ctx, id, "", false); err != nil {
		t.Fatal(err)
	}
	op, err := a1.WaitOperation(ctx, info)
	if err != nil || !op.Exec {
		t.Fatalf("owner after unlock: %+v %v", op, err)
	}
	if err := a1.DoneOperationDeleteInfo(ctx, op, info); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 1 && l[0].Stage == "unlocked" }, func() string { return "the unlocked stage" })
	info2, err := a2.PutInfo(ctx, target, []string{d1})
	if err != nil || info2.exec != nil {
		t.Fatalf("the missing source's info: %+v %v", info2, err)
	}
	op2, err := a2.WaitOperation(ctx, info2)
	if err != nil || op2.Exec || op2.Implicit() {
		t.Fatalf("missing source after unlock: %+v %v", op2, err)
	}
	if err := a2.DoneOperationDeleteInfo(ctx, op2, info2); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 0 }, func() string { return "no lock" })
	if r, err := cli.Get(ctx, layout.ArriveKey("task", target)); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != arrivePoison {
		t.Fatalf("the count after a skip of its own: %v %v", r, err)
	}
	// The next lock of the target, with the same DDLs: s1 alone must not complete it.
	info, err = a1.PutInfo(ctx, target, []string{d1})
	if err != nil || info.exec != nil {
		t.Fatalf("s1's next info completed the lock without s2: %+v %v", info, err)
	}
	info2, err = a2.PutInfo(ctx, target, []string{d1})
	if err != nil || info2.exec != nil {
		t.Fatalf("s2's next info on a poisoned count: %+v %v", info2, err)
	}
	if op, err = a1.WaitOperation(ctx, info); err != nil || !op.Exec || op.Source != "s1" {
		t.Fatalf("the coordinator's exec: %+v %v", op, err)
	}
}
