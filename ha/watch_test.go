package ha

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
)

// countingWatcher counts the events each watch it makes delivers, by key.
type countingWatcher struct {
	clientv3.Watcher
	mu   sync.Mutex
	keys map[string]int
}

func (w *countingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			w.mu.Lock()
			for _, ev := range resp.Events {
				w.keys[string(ev.Kv.Key)]++
			}
			w.mu.Unlock()
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestWaitChangeWatchesOnlyTheState: a lock's keys (pessimist/…) are written often and on the lock's
// path; they must neither end the wait nor reach the waiting process at all.
func TestWaitChangeWatchesOnlyTheState(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	rev := func() int64 {
		resp, err := cli.Get(ctx, Root, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put := func(k string) {
		if _, err := cli.Put(ctx, k, "{}"); err != nil {
			t.Fatal(err)
		}
	}

	// Lock keys, then one binding: the wait ends on the binding, and only the binding was delivered.
	r := rev()
	for i := 0; i < 50; i++ {
		put(Root + "pessimist/info/task/`db`.`t`/source-" + string(rune('a'+i%26)))
	}
	put(BoundKey("source-a"))
	w := &countingWatcher{Watcher: cli, keys: map[string]int{}}
	if !WaitChange(ctx, w, r, time.Minute) {
		t.Fatal("WaitChange did not see the binding written after its revision")
	}
	w.mu.Lock()
	if len(w.keys) != 1 || w.keys[BoundKey("source-a")] != 1 {
		t.Fatalf("events delivered by key: %v; want only %s once", w.keys, BoundKey("source-a"))
	}
	w.mu.Unlock()

	// Lock keys alone end the wait only by its timeout.
	r = rev()
	put(Root + "pessimist/op/task/`db`.`t`/source-a")
	put(Root + "master/members/m1")
	if WaitChange(ctx, cli, r, 300*time.Millisecond) {
		t.Fatal("WaitChange ended on a key outside the state")
	}

	// Every prefix of the state ends it.
	for _, p := range Prefixes {
		r = rev()
		put(p + "x")
		if !WaitChange(ctx, cli, r, time.Minute) {
			t.Fatalf("WaitChange did not see %s", p+"x")
		}
	}
}

// TestWaitChangeEndsWhenTheClientCloses: a closed client ends the wait at once, as the single watch of
// the root did, instead of leaving the caller until its timeout.
func TestWaitChangeEndsWhenTheClientCloses(t *testing.T) {
	// A client of its own, to close; the shared one serves the other tests.
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.Client(t).Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(context.Background(), Root, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- WaitChange(context.Background(), cli, resp.Header.Revision, time.Hour) }()
	cli.Close()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("WaitChange still waits a minute after its client closed")
	}
}
