package master

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/leak"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestMain stops the tests' embedded etcd, then fails a run that leaves a goroutine.
func TestMain(m *testing.M) { leak.VerifyTestMain(m, etcdtest.Stop) }

// TestLeaderFailoverResolvesLock: the leader master dies (its etcd client goes away, its session
// lease expires); the other master is elected, rebuilds the lock from etcd alone and resolves it; a
// write fenced with the old leader's key fails.
func TestLeaderFailoverResolvesLock(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("/test/%s/%d/election", t.Name(), time.Now().UnixNano())
	layout := pessimist.NewLayout(fmt.Sprintf("/test/%s/%d/pessimist/", t.Name(), time.Now().UnixNano()))
	if err := pessimist.PutTaskSources(ctx, cli, layout, "task", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	// m1 has its own client, so that it can die without taking the test's client along.
	cli1, err := clientv3.New(clientv3.Config{Endpoints: cli.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fences []clientv3.Cmp
	// The campaigns end with ctx (the deferred cancel); the test waits for them after it (a cleanup
	// runs after the defers), so that no resign is still on its way when etcd stops.
	var campaigns sync.WaitGroup
	t.Cleanup(campaigns.Wait)
	start := func(c *clientv3.Client, name string) {
		l := NewLeadership(c, name, prefix, 1, nil)
		run := LeaderRun(c, layout, &Service{}, nil)
		l.Run = func(ctx context.Context, fence clientv3.Cmp) error {
			mu.Lock()
			fences = append(fences, fence)
			mu.Unlock()
			return run(ctx, fence)
		}
		campaigns.Go(func() { l.Campaign(ctx) })
	}
	waitLeader := func(want string) {
		t.Helper()
		var got string
		wait.Eventually(t, 20*time.Second, func() bool { got, _ = Leader(ctx, cli, prefix); return got == want },
			func() string { return fmt.Sprintf("leader %q, want %q", got, want) })
	}
	start(cli1, "m1")
	waitLeader("m1")
	// The election shows m1 a moment before its Run starts: wait for its fence, or fences[0] below may
	// be m2's.
	wait.Eventually(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(fences) == 1 },
		func() string { return "m1 leads but its Run never started" })
	start(cli, "m2")

	a1 := pessimist.NewAgent(cli, layout, "task", "s1", nil)
	a2 := pessimist.NewAgent(cli, layout, "task", "s2", nil)
	// The new leader must decide this lock: s2's info does not write the exec itself.
	a1.LeaveExecToCoordinator()
	a2.LeaveExecToCoordinator()
	ddls := []string{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT"}
	info1, err := a1.PutInfo(ctx, "`db`.`t`", ddls)
	if err != nil {
		t.Fatal(err)
	}
	cli1.Close() // m1 dies: no resign, its lease runs out
	waitLeader("m2")
	info2, err := a2.PutInfo(ctx, "`db`.`t`", ddls)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	op1, err := a1.WaitOperation(wctx, info1)
	if err != nil || !op1.Exec {
		t.Fatalf("owner after failover: %+v %v", op1, err)
	}
	if err := a1.DoneOperationDeleteInfo(ctx, op1, info1); err != nil {
		t.Fatal(err)
	}
	op2, err := a2.WaitOperation(wctx, info2)
	if err != nil || op2.Exec {
		t.Fatalf("non-owner after failover: %+v %v", op2, err)
	}
	if err := a2.DoneOperationDeleteInfo(ctx, op2, info2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	old := fences[0]
	mu.Unlock()
	resp, err := cli.Txn(ctx).If(old).Then(clientv3.OpPut(prefix+"-probe", "x")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("a write fenced by the deposed leader went through (%v)", err)
	}
}
