package master

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
)

// TestMoveBindingIsFenced: on real etcd transfer-source's write gives the binding a new epoch, and it
// writes nothing when what it decided on changed: a binding made to the worker meanwhile (it is no
// longer free), a task changed (a resume), a newer binding of the source, the worker's keepalive gone,
// or the leader fence failed.
func TestMoveBindingIsFenced(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	if _, err := cli.Delete(ctx, ha.Root, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		t.Helper()
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"s1", "s2"} {
		put(ha.SourceKey(s), "source-id: "+s+"\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: 3306\n  user: root\n")
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		put(ha.WorkerKey(w), ha.Encode(ha.Worker{Name: w}))
		put(ha.KeepaliveKey(w), "")
	}
	put(ha.BoundKey("s1"), ha.Encode(ha.Binding{Source: "s1", Worker: "w1"}))
	resp, err := cli.Put(ctx, "/test/transfer-fence", "leader")
	if err != nil {
		t.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision("/test/transfer-fence"), "=", resp.Header.Revision)
	load := func() ha.State {
		t.Helper()
		st, err := ha.Load(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	move := func(st ha.State, want bool, why string) {
		t.Helper()
		ok, err := moveBinding(ctx, cli, fence, st, ha.Binding{Source: "s1", Worker: "w3"})
		if err != nil || ok != want {
			t.Fatalf("%s: wrote %v (%v), want %v", why, ok, err, want)
		}
	}

	st := load()
	put(ha.BoundKey("s2"), ha.Encode(ha.Binding{Source: "s2", Worker: "w3"}))
	move(st, false, "w3 bound to s2 meanwhile")
	if _, err := cli.Delete(ctx, ha.BoundKey("s2")); err != nil {
		t.Fatal(err)
	}

	st = load()
	put(ha.TaskKey("t"), ha.Encode(ha.Task{Name: "t", Stage: ha.StageRunning}))
	move(st, false, "a task changed meanwhile")

	st = load()
	put(ha.BoundKey("s1"), ha.Encode(ha.Binding{Source: "s1", Worker: "w2"}))
	move(st, false, "s1 rebound meanwhile")

	st = load()
	if _, err := cli.Delete(ctx, ha.KeepaliveKey("w3")); err != nil {
		t.Fatal(err)
	}
	move(st, false, "w3's keepalive gone")
	put(ha.KeepaliveKey("w3"), "")

	st = load()
	if _, err := moveBinding(ctx, cli, clientv3.Compare(clientv3.CreateRevision("/test/transfer-fence"), "=", 1), st, ha.Binding{Source: "s1", Worker: "w3"}); err == nil {
		t.Fatal("a failed leader fence wrote")
	}

	st = load()
	epoch := st.Bindings["s1"].Epoch
	move(st, true, "nothing changed")
	after := load().Bindings["s1"]
	if after.Worker != "w3" || after.Epoch <= epoch {
		t.Fatalf("binding after the move: %+v (epoch before %d)", after, epoch)
	}
}
