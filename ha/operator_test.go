package ha

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
)

// TestOperatorStore: a worker stores decisions only while its binding is the source's and the task
// exists; they load in the order given; a used one is removed only as it was used; stop-task's
// delete takes every decision of its task and none of another whose name starts the same.
func TestOperatorStore(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	task, src := "op-store", "op-store-src"
	put := func(k, v string) int64 {
		resp, err := cli.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	positions := func(task, source string) []string {
		ops, _, err := LoadOperators(ctx, cli, task, source)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range ops {
			out = append(out, o.Pos+"="+string(o.Value))
		}
		return out
	}
	epoch := put(BoundKey(src), Encode(Binding{Source: src, Worker: "w1"}))

	var nb ErrNotBound
	if err := PutOperator(ctx, cli, task, src, epoch, "f.000001:100", []byte(`"a"`)); !errors.As(err, &nb) {
		t.Fatalf("put without the task: %v, want ErrNotBound", err)
	}
	put(TaskKey(task), Encode(Task{Name: task}))
	put(TaskKey(task+"x"), Encode(Task{Name: task + "x"}))
	for _, p := range []struct{ pos, v string }{{"f.000001:300", `"b"`}, {"f.000001:100", `"a"`}, {"f.000001:300", `"c"`}} {
		if err := PutOperator(ctx, cli, task, src, epoch, p.pos, []byte(p.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := PutOperator(ctx, cli, task+"x", src, epoch, "f.000001:100", []byte(`"x"`)); err != nil {
		t.Fatal(err)
	}
	if got := positions(task, src); len(got) != 2 || got[0] != `f.000001:100="a"` || got[1] != `f.000001:300="c"` {
		t.Fatalf("loaded %q: want 100 then 300 (given again last) with its new value", got)
	}

	// The source moves to another worker: the old worker's writes are refused, the new one's go in.
	newEpoch := put(BoundKey(src), Encode(Binding{Source: src, Worker: "w2"}))
	if err := PutOperator(ctx, cli, task, src, epoch, "f.000001:500", []byte(`"d"`)); !errors.As(err, &nb) {
		t.Fatalf("put under the old binding: %v", err)
	}
	if _, err := DeleteOperator(ctx, cli, task, src, epoch, "f.000001:100", 0); !errors.As(err, &nb) {
		t.Fatalf("revert under the old binding: %v", err)
	}

	// A used decision is removed only as it was read: one given again since stays.
	ops, _, _ := LoadOperators(ctx, cli, task, src)
	if err := PutOperator(ctx, cli, task, src, newEpoch, "f.000001:300", []byte(`"e"`)); err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if ok, err := DeleteOperator(ctx, cli, task, src, newEpoch, o.Pos, o.Rev); err != nil || ok != (o.Pos == "f.000001:100") {
			t.Fatalf("remove used %s: %v %v", o.Pos, ok, err)
		}
	}
	if got := positions(task, src); len(got) != 1 || got[0] != `f.000001:300="e"` {
		t.Fatalf("left %q, want the one given again", got)
	}
	if ok, err := DeleteOperator(ctx, cli, task, src, newEpoch, "f.000001:300", 0); !ok || err != nil {
		t.Fatalf("revert: %v %v", ok, err)
	}
	if ok, err := DeleteOperator(ctx, cli, task, src, newEpoch, "f.000001:300", 0); ok || err != nil {
		t.Fatalf("second revert: %v %v", ok, err)
	}

	// stop-task: the task key and its decisions go together; the other task keeps its own.
	if err := PutOperator(ctx, cli, task, src, newEpoch, "f.000002:4", []byte(`"f"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(TaskKey(task)), DeleteTaskOperators(task)).Commit(); err != nil {
		t.Fatal(err)
	}
	if got := positions(task, src); len(got) != 0 {
		t.Fatalf("stop-task left %q", got)
	}
	if got := positions(task+"x", src); len(got) != 1 {
		t.Fatalf("task %sx has %q, want its one decision", task, got)
	}
	if err := PutOperator(ctx, cli, task, src, newEpoch, "f.000002:4", []byte(`"g"`)); !errors.As(err, &nb) {
		t.Fatalf("put after stop-task: %v", err)
	}
}
