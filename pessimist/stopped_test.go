package pessimist

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestLockSurvivesStoppedTask: stop-task keeps a lock's keys; a start-task of the same task (the same
// sources put again, new agents re-posting the infos they had posted) completes it on the agents'
// own path, as if nothing had happened; and an unlock while the task is stopped removes every key
// of the lock, guarded by the task's absence.
func TestLockSurvivesStoppedTask(t *testing.T) {
	cli := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := testLayout(t)
	stopped := layout.Root() + "master-task" // absent: the task is stopped
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	c := NewCoordinator(cli, layout)
	run := start(ctx, func(ctx context.Context) { c.Run(ctx) })
	defer run.stop()
	target := "`db`.`t`"
	id := LockID("task", target)
	if _, err := NewAgent(cli, layout, "task", "s1", nil).PutInfo(ctx, target, []string{d1}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 1 }, func() string { return "the lock to show" })

	// start-task again: the same sources write nothing, so the arrival counted before stays valid.
	before, err := cli.Get(ctx, layout.TaskKey("task"))
	if err != nil {
		t.Fatal(err)
	}
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	after, err := cli.Get(ctx, layout.TaskKey("task"))
	if err != nil {
		t.Fatal(err)
	}
	if before.Kvs[0].ModRevision != after.Kvs[0].ModRevision {
		t.Fatalf("PutTaskSources of the same sources rewrote the key (revision %d -> %d)", before.Kvs[0].ModRevision, after.Kvs[0].ModRevision)
	}
	a1, a2 := NewAgent(cli, layout, "task", "s1", nil), NewAgent(cli, layout, "task", "s2", nil)
	i1, err := a1.PutInfo(ctx, target, []string{d1}) // re-posted by the restarted worker
	if err != nil {
		t.Fatal(err)
	}
	i2, err := a2.PutInfo(ctx, target, []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	if i2.exec == nil {
		t.Fatal("the last info after the restart did not complete the lock on the agents' path")
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	op2, err := a2.WaitOperation(wctx, i2)
	if err != nil || !op2.Exec {
		t.Fatalf("owner after restart: %+v %v", op2, err)
	}
	if err := a2.DoneOperationDeleteInfo(ctx, op2, i2); err != nil {
		t.Fatal(err)
	}
	op1, err := a1.WaitOperation(wctx, i1) // the owner's done exec is its skip
	if err != nil {
		t.Fatalf("other source after restart: %+v %v", op1, err)
	}
	if err := a1.DoneOperationDeleteInfo(ctx, op1, i1); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 0 }, func() string { return "no lock" })

	// A lock of a stopped task, unlocked: all its keys go.
	if _, err := a1.PutInfo(ctx, target, []string{d2}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, _ := c.Locks(); return len(l) == 1 }, func() string { return "the second lock" })
	if task, err := c.LockTask(id); err != nil || task != "task" {
		t.Fatalf("LockTask: %q %v", task, err)
	}
	if _, err := cli.Put(ctx, stopped, "running"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveStoppedLock(ctx, id, stopped); !errors.Is(err, ErrTaskStarted) {
		t.Fatalf("remove while the task runs: %v", err)
	}
	if _, err := cli.Delete(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveStoppedLock(ctx, id, stopped); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { l, err := c.Locks(); return err == nil && len(l) == 0 }, func() string { return "no lock after the unlock" })
	for _, kind := range []string{kindInfo, kindOp, kindDone, kindRound, kindArrive, kindUnlock} {
		resp, err := cli.Get(ctx, layout.key(kind, "task", target), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 0 {
			t.Fatalf("%s keys of the lock left: %d %v", kind, resp.Count, err)
		}
	}
	if err := c.RemoveStoppedLock(ctx, id, stopped); !errors.Is(err, ErrLockNotFound) {
		t.Fatalf("second removal: %v", err)
	}
}
