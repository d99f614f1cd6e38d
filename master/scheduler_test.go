package master

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestSchedulerBindsMovesAndIsFenced: on real etcd the scheduler binds a source to a live worker,
// moves it (with a higher epoch) when that worker's lease ends, and once its fence fails it writes
// nothing more and returns ErrNotLeader.
func TestSchedulerBindsMovesAndIsFenced(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	if _, err := cli.Delete(ctx, ha.Root, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := cli.Put(ctx, k, v, opts...); err != nil {
			t.Fatal(err)
		}
	}
	src := func(id string) string {
		return "source-id: " + id + "\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: 3306\n  user: root\n"
	}
	put(ha.SourceKey("s1"), src("s1"))
	lease1, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		put(ha.WorkerKey(w), ha.Encode(ha.Worker{Name: w, Addr: w + ":8262"}))
	}
	put(ha.KeepaliveKey("w1"), "", clientv3.WithLease(lease1.ID))
	fenceKey := "/test/scheduler-fence"
	resp, err := cli.Put(ctx, fenceKey, "leader")
	if err != nil {
		t.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision(fenceKey), "=", resp.Header.Revision)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunScheduler(sctx, cli, fence, nil) }()

	binding := func(source, worker string) ha.Binding {
		t.Helper()
		var st ha.State
		var b ha.Binding
		var err error
		wait.Eventually(t, 10*time.Second, func() bool {
			if st, err = ha.Load(ctx, cli); err != nil {
				return false
			}
			var ok bool
			b, ok = st.Bindings[source]
			return ok && b.Worker == worker
		}, func() string { return fmt.Sprintf("%s not bound to %s: %+v (%v)", source, worker, st.Bindings, err) })
		return b
	}
	first := binding("s1", "w1")
	put(ha.KeepaliveKey("w2"), "")
	if _, err := cli.Revoke(ctx, lease1.ID); err != nil { // w1 dies
		t.Fatal(err)
	}
	moved := binding("s1", "w2")
	if moved.Epoch <= first.Epoch {
		t.Fatalf("epoch after the move %d, before %d", moved.Epoch, first.Epoch)
	}

	// Leadership is lost: the fence key is gone. A new source and a free worker appear; nothing is bound.
	if _, err := cli.Delete(ctx, fenceKey); err != nil {
		t.Fatal(err)
	}
	put(ha.KeepaliveKey("w3"), "")
	put(ha.SourceKey("s2"), src("s2"))
	select {
	case err := <-done:
		if !errors.Is(err, pessimist.ErrNotLeader) {
			t.Fatalf("scheduler returned %v, want ErrNotLeader", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler kept running without its fence")
	}
	st, err := ha.Load(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := st.Bindings["s2"]; ok {
		t.Fatalf("a deposed scheduler bound s2: %+v", b)
	}
}
