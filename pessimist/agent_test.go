package pessimist

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitSeesInfoRemovedAfterRead: a wait watches its info before it reads the lock, so removing the
// info after the read (what unlock --force-remove of a lock with no operation and stop-task do) ends
// the wait with ErrLockRemoved at once, although no operation key ever changes.
func TestWaitSeesInfoRemovedAfterRead(t *testing.T) {
	cli := etcdClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	layout := testLayout(t)
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	a := NewAgent(cli, layout, "task", "s1", nil)
	watching := make(chan struct{})
	a.onInfoWatch = func() { close(watching) }
	info, err := a.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a.WaitOperation(ctx, info); errc <- err }()
	<-watching
	if _, err := cli.Delete(ctx, layout.InfoKey("task", "`db`.`t`", "s1")); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrLockRemoved) {
		t.Fatalf("wait after its info was removed: %v", err)
	}
}

// TestOpsWatchSharedBetweenLocks: an agent's waits share one watch of the task's operations, kept
// between locks (no watch to create on the owner's path); an exec of another lock with the same DDLs
// is not taken as this lock's skip; a failed watch is replaced by the next wait; an idle one ends.
func TestOpsWatchSharedBetweenLocks(t *testing.T) {
	cli := etcdClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	layout := testLayout(t)
	if err := PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	coord := start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	defer coord.stop()
	a1, a2 := NewAgent(cli, layout, "task", "s1", nil), NewAgent(cli, layout, "task", "s2", nil)
	watchOf := func(a *Agent) *opsWatch {
		a.wmu.Lock()
		defer a.wmu.Unlock()
		return a.ops
	}
	// s2 waits on B first, so it owns B; both locks carry the same DDL text.
	infoB2, err := a2.PutInfo(ctx, "`db`.`b`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	opB2 := make(chan Operation, 1)
	errc := make(chan error, 2)
	go func() {
		op, err := a2.WaitOperation(ctx, infoB2)
		opB2 <- op
		errc <- err
	}()
	waitFor(t, "s2's operations watch", func() bool { return watchOf(a2) != nil })
	shared := watchOf(a2)
	// Lock A: s1 owns it, s2 takes part; its done exec reaches s2's wait on B too.
	infoA1, err := a1.PutInfo(ctx, "`db`.`a`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	infoA2, err := a2.PutInfo(ctx, "`db`.`a`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	execA, err := a1.WaitOperation(ctx, infoA1)
	if err != nil || !execA.Exec {
		t.Fatalf("s1 on A: %+v %v", execA, err)
	}
	if err := a1.DoneOperationDeleteInfo(ctx, execA, infoA1); err != nil {
		t.Fatal(err)
	}
	skipA, err := a2.WaitOperation(ctx, infoA2)
	if err != nil || skipA.Exec || skipA.Owner != "s1" || skipA.Target != "`db`.`a`" {
		t.Fatalf("s2 on A: %+v %v", skipA, err)
	}
	if w := watchOf(a2); w != shared {
		t.Fatal("the wait on A made a watch of its own")
	}
	if err := a2.DoneOperationDeleteInfo(ctx, skipA, infoA2); err != nil {
		t.Fatal(err)
	}
	// Lock B: s1 arrives; s2, waiting since before A, gets B's exec, not A's skip.
	infoB1, err := a1.PutInfo(ctx, "`db`.`b`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	op := <-opB2
	if !op.Exec || op.Target != "`db`.`b`" || op.Source != "s2" {
		t.Fatalf("s2 on B: %+v %v", op, <-errc)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	opB1 := make(chan Operation, 1)
	go func() {
		op, err := a1.WaitOperation(ctx, infoB1)
		opB1 <- op
		errc <- err
	}()
	if err := a2.DoneOperationDeleteInfo(ctx, op, infoB2); err != nil {
		t.Fatal(err)
	}
	if op := <-opB1; op.Exec || op.Owner != "s2" || op.Target != "`db`.`b`" {
		t.Fatalf("s1 on B: %+v %v", op, <-errc)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// s2's watch ends (as on a lost leader): its next wait starts a new one and still gets its answer;
	// once no wait uses it, the new watch ends after opsIdle.
	shared.cancel()
	waitFor(t, "the failed watch to be dropped", func() bool { return watchOf(a2) != shared })
	a2.opsIdle = 10 * time.Millisecond
	infoC1, err := a1.PutInfo(ctx, "`db`.`c`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	infoC2, err := a2.PutInfo(ctx, "`db`.`c`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		execC, err := a1.WaitOperation(ctx, infoC1)
		if err == nil {
			err = a1.DoneOperationDeleteInfo(ctx, execC, infoC1)
		}
		errc <- err
	}()
	skipC, err := a2.WaitOperation(ctx, infoC2)
	if err != nil || skipC.Exec || skipC.Owner != "s1" {
		t.Fatalf("s2 on C with a new watch: %+v %v", skipC, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := a2.DoneOperationDeleteInfo(ctx, skipC, infoC2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle watch to end", func() bool { return watchOf(a2) == nil })
}
