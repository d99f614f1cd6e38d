package pessimist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/tests/framework/netutil"
)

// TestLocksThroughPathFaults: two sources run lock after lock, one of them through a network path
// that is cut or stalled at random moments (as the chaos soak's proxy does to a worker's path to
// etcd). Every lock must finish once the path is back: the owner's exec, its done, the participant's
// implicit skip and the clearing of the lock.
func TestLocksThroughPathFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	direct := etcdClient(t)
	proxy, err := netutil.NewFaultProxy(direct.Endpoints()[0][len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	faulty, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + proxy.Addr()}, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 5 * time.Second, Logger: zap.NewNop()}) // as dm-worker's
	if err != nil {
		t.Fatal(err)
	}
	defer faulty.Close()
	_, ctx, layout := taskEnv(t, 10*time.Minute, "a", "b")
	agents := map[string]*Agent{
		"a": NewAgent(direct, layout, "task", "a", nil),
		"b": NewAgent(faulty, layout, "task", "b", nil),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	faultsDone := make(chan struct{})
	stopFaults := make(chan struct{})
	go func() {
		defer close(faultsDone)
		r := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stopFaults:
				proxy.Heal()
				return
			case <-time.After(time.Duration(r.IntN(800)) * time.Millisecond):
			}
			if r.IntN(2) == 0 {
				proxy.Cut()
			} else {
				proxy.Stall()
			}
			select {
			case <-stopFaults:
			case <-time.After(time.Duration(200+r.IntN(3500)) * time.Millisecond):
			}
			proxy.Heal()
		}
	}()
	rounds := 15
	for round := range rounds {
		ddls := []string{fmt.Sprintf("ALTER TABLE t ADD COLUMN c%d INT", round)}
		order := []string{"a", "b"}
		if rng.IntN(2) == 0 {
			order = []string{"b", "a"}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for i, src := range order {
			delay := time.Duration(i*rng.IntN(300)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay) // the second source reaches the DDLs a little later
				errs <- runLock(ctx, agents[src], "`db`.`t`", ddls)
			}()
		}
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(90 * time.Second):
			close(stopFaults)
			<-faultsDone
			t.Fatalf("round %d: the lock did not finish in 90s (path healed now); keys: %s", round, dumpKeys(ctx, direct, layout))
		}
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	close(stopFaults)
	<-faultsDone
	onlyTaskKeysLeft(t, ctx, direct, layout)
}

// runLock is what a worker does for one lock: put the info, wait for the operation, mark it done;
// an etcd error is retried as the syncer's restart would (the same info again).
func runLock(ctx context.Context, a *Agent, target string, ddls []string) error {
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		info, err := a.PutInfo(actx, target, ddls)
		if err != nil {
			cancel()
			if errors.Is(err, ErrSuperseded) {
				return err
			}
			continue
		}
		op, err := a.WaitOperation(actx, info)
		if err != nil {
			cancel()
			if errors.Is(err, ErrLockRemoved) {
				return err
			}
			continue
		}
		err = a.DoneOperationDeleteInfo(actx, op, info)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrLockRemoved) {
			return err
		}
	}
}

func dumpKeys(ctx context.Context, cli *clientv3.Client, layout Layout) string {
	resp, err := cli.Get(ctx, layout.Root(), clientv3.WithPrefix())
	if err != nil {
		return err.Error()
	}
	out := fmt.Sprintf("rev %d:", resp.Header.Revision)
	for _, kv := range resp.Kvs {
		out += fmt.Sprintf("\n  %s (create %d mod %d) %s", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Value)
	}
	return out
}
