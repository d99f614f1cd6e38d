package pessimist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

// taskEnv is an agent test's etcd client, a context that ends with the test (or after timeout), and a
// layout of its own in which task "task" has sources (none: the task is not started).
func taskEnv(t *testing.T, timeout time.Duration, sources ...string) (*clientv3.Client, context.Context, Layout) {
	t.Helper()
	cli := etcdClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	layout := testLayout(t)
	if len(sources) > 0 {
		if err := PutTaskSources(ctx, cli, layout, "task", sources); err != nil {
			t.Fatal(err)
		}
	}
	return cli, ctx, layout
}

// onlyTaskKeysLeft fails t for every key of the layout other than task "task"'s sources and its
// agents' generations, which live as long as the task, and returns the read (its revision counts writes).
func onlyTaskKeysLeft(t *testing.T, ctx context.Context, cli *clientv3.Client, layout Layout) *clientv3.GetResponse {
	t.Helper()
	resp, err := cli.Get(ctx, layout.Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); k != layout.TaskKey("task") && !strings.HasPrefix(k, layout.Root()+kindAgent+"/") {
			t.Errorf("key left behind: %s", k)
		}
	}
	return resp
}

// coordinated makes a leave every exec to the coordinator (LeaveExecToCoordinator), for tests of the
// coordinator's path.
func coordinated(a *Agent) *Agent {
	a.LeaveExecToCoordinator()
	return a
}

// firstWait returns a channel closed once the first of a's waits is in place.
func firstWait(a *Agent) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	a.onWait = func(bool) { once.Do(func() { close(ch) }) }
	return ch
}

// handedPast waits until a's operations watch has handed out an event of a revision above rev.
func handedPast(t *testing.T, a *Agent, rev int64) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, func() bool {
		a.wmu.Lock()
		defer a.wmu.Unlock()
		return a.ops != nil && a.ops.handed > rev
	}, func() string { return "the operations watch to hand out an event after the info" })
}

// TestWaitSeesForceRemoveAfterRead: a wait has no watch of its info, only the agent's watch of the
// task's operations; unlock --force-remove of a lock with no operation after the wait read it (so no
// operation key ever changes) still ends the wait with ErrLockRemoved at once, through the lock's
// removal mark. The mark is no operation to anyone: the agent's list of operations skips it, and the
// next lock of the same target is decided as usual.
func TestWaitSeesForceRemoveAfterRead(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 20*time.Second, "s1", "s2")
	c := NewCoordinator(cli, layout)
	run := start(ctx, func(ctx context.Context) { c.Run(ctx) })
	defer run.stop()
	a1, a2 := coordinated(NewAgent(cli, layout, "task", "s1", nil)), coordinated(NewAgent(cli, layout, "task", "s2", nil))
	read := firstWait(a1)
	const target = "`db`.`t`"
	info, err := a1.PutInfo(ctx, target, []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a1.WaitOperation(ctx, info); errc <- err }()
	<-read
	id := LockID("task", target)
	wait.Eventually(t, 10*time.Second, func() bool { l, _ := c.Locks(); return len(l) == 1 }, func() string { return "the lock to show" })
	if _, err := c.UnlockLock(ctx, id, "", true); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrLockRemoved) {
		t.Fatalf("wait after its lock was force-removed: %v", err)
	}
	if resp, err := cli.Get(ctx, layout.RemovedKey("task", target)); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the removal mark: %v %v", resp, err)
	}
	if ops, err := a1.Operations(ctx); err != nil || len(ops) != 0 {
		t.Fatalf("operations beside a removal mark: %+v %v", ops, err)
	}
	// The next lock of the target, with the mark in place.
	i1, err := a1.PutInfo(ctx, target, []string{d2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.PutInfo(ctx, target, []string{d2}); err != nil {
		t.Fatal(err)
	}
	if op, err := a1.WaitOperation(ctx, i1); err != nil || !op.Exec || op.Source != "s1" {
		t.Fatalf("the next lock of the target: %+v %v", op, err)
	}
}

// TestOpsWatchSharedBetweenLocks: an agent's waits share one watch of the task's operations, kept
// between locks (no watch to create on the owner's path); an exec of another lock with the same DDLs
// is not taken as this lock's skip; a failed watch is replaced by the next wait; an idle one ends.
func TestOpsWatchSharedBetweenLocks(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 30*time.Second, "s1", "s2")
	coord := start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	defer coord.stop()
	a1, a2 := coordinated(NewAgent(cli, layout, "task", "s1", nil)), coordinated(NewAgent(cli, layout, "task", "s2", nil))
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
	wait.Eventually(t, 10*time.Second, func() bool { return watchOf(a2) != nil }, func() string { return "s2's operations watch" })
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
	wait.Eventually(t, 10*time.Second, func() bool { return watchOf(a2) != shared }, func() string { return "the failed watch to be dropped" })
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
	wait.Eventually(t, 10*time.Second, func() bool { return watchOf(a2) == nil }, func() string { return "the idle watch to end" })
}

// TestWaitReadsOnlyWhenItMayHaveMissedSomething: a wait on an info its agent has just created, with
// the agent's operations watch running since before it and nothing handed out after it, reads
// nothing (every answer is written after the info, and the watch brings it); a wait whose watch is
// new, or that handed out events after the info before the wait subscribed, reads the lock, and
// finds there the exec it would otherwise wait for forever.
func TestWaitReadsOnlyWhenItMayHaveMissedSomething(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 20*time.Second, "s1", "s2")
	run := start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	defer run.stop()
	a1, a2 := coordinated(NewAgent(cli, layout, "task", "s1", nil)), coordinated(NewAgent(cli, layout, "task", "s2", nil))
	reads1, reads2 := make(chan bool, 10), make(chan bool, 10)
	a1.onWait = func(read bool) { reads1 <- read }
	a2.onWait = func(read bool) { reads2 <- read }
	// wait runs one wait to its answer and marks it done.
	wait := func(a *Agent, info Info, reads chan bool, wantRead, wantExec bool) {
		t.Helper()
		op, err := a.WaitOperation(ctx, info)
		if err != nil || op.Exec != wantExec {
			t.Fatalf("%s on %s: %+v %v", a.source, info.Target, op, err)
		}
		select {
		case read := <-reads:
			if read != wantRead {
				t.Fatalf("%s on %s: read the lock %v, want %v", a.source, info.Target, read, wantRead)
			}
		default: // answered by the read itself: it read
			if !wantRead {
				t.Fatalf("%s on %s: answered by a read it should not have made", a.source, info.Target)
			}
		}
		if err := a.DoneOperationDeleteInfo(ctx, op, info); err != nil {
			t.Fatal(err)
		}
	}
	// Lock A: the agents' first waits start their watches after their infos: both read.
	a1A, err := a1.PutInfo(ctx, "`db`.`a`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	a2A, err := a2.PutInfo(ctx, "`db`.`a`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	wait(a1, a1A, reads1, true, true)
	wait(a2, a2A, reads2, true, false)
	// Lock B: s1's watch runs since before its new info and has handed nothing out since: no read.
	a1B, err := a1.PutInfo(ctx, "`db`.`b`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		op, err := a1.WaitOperation(ctx, a1B)
		if err == nil && !op.Exec {
			err = fmt.Errorf("s1 on B: %+v", op)
		}
		if err == nil {
			err = a1.DoneOperationDeleteInfo(ctx, op, a1B)
		}
		errc <- err
	}()
	if read := <-reads1; read {
		t.Fatal("s1 on B read the lock, its watch brings every answer")
	}
	a2B, err := a2.PutInfo(ctx, "`db`.`b`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// s1's exec and done were handed out before s2 waits: s2 reads. (Without waiting for s2's watch
	// to hand them out, the wait could start before their events arrive and, rightly, not read.)
	handedPast(t, a2, a2B.ModRevision)
	wait(a2, a2B, reads2, true, false)
	// Lock C: s2 is first, so it owns C; its watch hands out the exec before s2 waits on C. That wait
	// must read the lock: the exec's event is gone.
	a2C, err := a2.PutInfo(ctx, "`db`.`c`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a1.PutInfo(ctx, "`db`.`c`", []string{d1}); err != nil {
		t.Fatal(err)
	}
	handedPast(t, a2, a2C.ModRevision) // C's exec
	wait(a2, a2C, reads2, true, true)
}

// TestWaitOnChangedInfoReads: an info put over another of the same source (other DDLs) may already
// have its answer, written before the put: the wait reads the lock although its watch runs since
// before and handed nothing out after the put.
func TestWaitOnChangedInfoReads(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 20*time.Second)
	a := NewAgent(cli, layout, "task", "s1", nil)
	// Start the agent's watch with a wait that nobody answers.
	other, err := a.PutInfo(ctx, "`db`.`other`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := a.WaitOperation(wctx, other); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered wait: %v", err)
	}
	wcancel()
	const target = "`db`.`t`"
	if _, err := a.PutInfo(ctx, target, []string{d2}); err != nil {
		t.Fatal(err)
	}
	op := Operation{Task: "task", Source: "s1", Target: target, DDLs: []string{d1}}
	if _, err := cli.Put(ctx, layout.OperationKey("task", target, "s1"), encode(op)); err != nil {
		t.Fatal(err)
	}
	handedPast(t, a, other.ModRevision)               // the operation
	info, err := a.PutInfo(ctx, target, []string{d1}) // changed, not created
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.WaitOperation(ctx, info)
	if err != nil || got.Source != "s1" || !sameDDLs(got.DDLs, op.DDLs) {
		t.Fatalf("wait on a changed info: %+v %v", got, err)
	}
}

// TestWaitSeesTaskRemoved: stop-task (DeleteTask) while a source waits on a lock with no operation
// ends the wait with ErrLockRemoved through the task's removal mark, which is gone afterwards with every
// other key of the task.
func TestWaitSeesTaskRemoved(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 20*time.Second, "s1", "s2")
	a := NewAgent(cli, layout, "task", "s1", nil)
	waiting := firstWait(a)
	info, err := a.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a.WaitOperation(ctx, info); errc <- err }()
	<-waiting
	if err := DeleteTask(ctx, cli, layout, "task"); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrLockRemoved) {
		t.Fatalf("wait after stop-task: %v", err)
	}
	if started, err := a.TaskStarted(ctx); err != nil || started {
		t.Fatalf("task started after DeleteTask: %v %v", started, err)
	}
	resp, err := cli.Get(ctx, layout.Root(), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("keys left after DeleteTask: %v %v", resp.Kvs, err)
	}
}

// TestFastExecOnlyWhenTheCountHolds: an info completes its lock (writes the exec itself) only when the
// count of arrivals shows every other source of the task with the same DDLs, against the source set
// the agent read, and the lock has no round, operation or unlock request; anything else poisons the
// count and leaves the lock to the coordinator (none runs here, so nothing else writes an exec).
func TestFastExecOnlyWhenTheCountHolds(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 30*time.Second, "s1", "s2", "s3")
	agents := map[string]*Agent{}
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		agents[s] = NewAgent(cli, layout, "task", s, nil)
	}
	type put struct{ source, ddl string }
	for _, c := range []struct {
		name   string
		before func(target string) // what else is in etcd before the puts
		puts   []put
		exec   string // the source whose put writes the exec ("": none)
		poison bool   // the count ends poisoned
	}{
		{name: "agree", puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}, exec: "s3"},
		{name: "agree in another order", puts: []put{{"s3", d1}, {"s1", d1}, {"s2", d1}}, exec: "s2"},
		{name: "put again", puts: []put{{"s1", d1}, {"s1", d1}, {"s2", d1}, {"s2", d1}, {"s3", d1}}, exec: "s3"},
		{name: "conflict", puts: []put{{"s1", d1}, {"s2", d2}, {"s3", d1}}, poison: true},
		{name: "changed info", puts: []put{{"s1", d1}, {"s1", d2}, {"s2", d2}, {"s3", d2}}, poison: true},
		{name: "source outside the task", puts: []put{{"s4", d1}, {"s1", d1}, {"s2", d1}, {"s3", d1}}, poison: true},
		{name: "unlock request", before: func(target string) {
			if _, err := cli.Put(ctx, layout.UnlockKey("task", target), encode(Unlock{Task: "task", Target: target, DDLs: []string{d1}, Owner: "s1"})); err != nil {
				t.Fatal(err)
			}
		}, puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}},
		{name: "round in progress", before: func(target string) {
			if _, err := cli.Put(ctx, layout.RoundKey("task", target), encode(Round{Task: "task", Target: target, Owner: "s1"})); err != nil {
				t.Fatal(err)
			}
		}, puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}},
		{name: "operation left", before: func(target string) {
			if _, err := cli.Put(ctx, layout.OperationKey("task", target, "s2"), encode(Operation{Task: "task", Source: "s2", Target: target, DDLs: []string{d1}, Done: true})); err != nil {
				t.Fatal(err)
			}
		}, puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}},
		{name: "source set rewritten", before: func(string) {
			// The same sources at a new revision (PutTaskSources writes nothing for them, a plain put
			// does): the agents' reads are stale until a put tells them.
			if _, err := cli.Put(ctx, layout.TaskKey("task"), encode(TaskSources{Task: "task", Sources: []string{"s1", "s2", "s3"}})); err != nil {
				t.Fatal(err)
			}
		}, puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}, poison: true},
		{name: "after the sources were read again", puts: []put{{"s1", d1}, {"s2", d1}, {"s3", d1}}, exec: "s3"},
	} {
		target := "`db`.`" + strings.ReplaceAll(c.name, " ", "_") + "`"
		if c.before != nil {
			c.before(target)
		}
		got := ""
		for _, p := range c.puts {
			info, err := agents[p.source].PutInfo(ctx, target, []string{p.ddl})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if info.exec != nil {
				if got != "" {
					t.Fatalf("%s: %s wrote an exec after %s did", c.name, p.source, got)
				}
				got = p.source
				if !info.exec.Exec || info.exec.Sources != 3 || info.exec.CreateRevision != info.CreateRevision {
					t.Fatalf("%s: exec %+v of info %+v", c.name, *info.exec, info)
				}
			}
		}
		if got != c.exec {
			t.Fatalf("%s: exec written by %q, want %q", c.name, got, c.exec)
		}
		resp, err := cli.Get(ctx, layout.lockPrefix(kindOp, "task", target), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var execs []string
		for _, kv := range resp.Kvs {
			var o Operation
			if decodeKV(kv, &o) == nil && o.Exec {
				execs = append(execs, o.Source)
			}
		}
		if want := []string{c.exec}; c.exec == "" && len(execs) != 0 || c.exec != "" && !slices.Equal(execs, want) {
			t.Fatalf("%s: exec operations in etcd %v, want %q", c.name, execs, c.exec)
		}
		arrive, err := cli.Get(ctx, layout.ArriveKey("task", target))
		if err != nil {
			t.Fatal(err)
		}
		switch poisoned := len(arrive.Kvs) == 1 && string(arrive.Kvs[0].Value) == arrivePoison; {
		case c.exec != "" && len(arrive.Kvs) != 0:
			t.Fatalf("%s: the exec must delete the count, found %q", c.name, arrive.Kvs[0].Value)
		case poisoned != c.poison:
			t.Fatalf("%s: count %v, want poisoned %t", c.name, arrive.Kvs, c.poison)
		}
	}
}

// TestFastExecOfOneSource: a task of one source has its lock complete at its first info.
func TestFastExecOfOneSource(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 30*time.Second, "s1")
	a := NewAgent(cli, layout, "task", "s1", nil)
	info, err := a.PutInfo(ctx, "`db`.`t`", []string{d1})
	if err != nil || info.exec == nil || info.exec.Sources != 1 {
		t.Fatalf("info %+v, %v: want its exec", info, err)
	}
	op, err := a.WaitOperation(ctx, info)
	if err != nil || !op.Exec {
		t.Fatalf("wait: %+v %v", op, err)
	}
	if err := a.DoneOperationDeleteInfo(ctx, op, info); err != nil {
		t.Fatal(err)
	}
	onlyTaskKeysLeft(t, ctx, cli, layout)
}

// TestTaskStartedNeedsTheMastersTaskKey: with the master's task key named (SetTaskKey), a task whose
// pessimist key survives stop-task (with its locks) is not started once that key is gone: a lock
// unlocked while the stopped task's subtasks wind down is then not taken for a force-remove.
func TestTaskStartedNeedsTheMastersTaskKey(t *testing.T) {
	cli, ctx, layout := taskEnv(t, 20*time.Second, "s1", "s2")
	a := NewAgent(cli, layout, "task", "s1", nil)
	if started, err := a.TaskStarted(ctx); err != nil || !started {
		t.Fatalf("without a master's key: %v %v", started, err)
	}
	masterKey := "/test-master/task/" + t.Name()
	a.SetTaskKey(masterKey)
	if started, err := a.TaskStarted(ctx); err != nil || started {
		t.Fatalf("the master's task key is absent (stop-task), yet started: %v %v", started, err)
	}
	if _, err := cli.Put(ctx, masterKey, "{}"); err != nil {
		t.Fatal(err)
	}
	if started, err := a.TaskStarted(ctx); err != nil || !started {
		t.Fatalf("both keys there: %v %v", started, err)
	}
}
