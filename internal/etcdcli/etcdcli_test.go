package etcdcli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/netutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

// TestWatchOutlivesASilentPath: a watch through a path whose connection then loses every byte
// without a reset gets the next change over a new connection. Without the client's pings it waits
// on the dead connection for as long as TCP lets it (for an idle one: for ever).
func TestWatchOutlivesASilentPath(t *testing.T) {
	direct := etcdtest.Client(t)
	p, err := netutil.NewFaultProxy(strings.TrimPrefix(direct.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cli, err := New([]string{"http://" + p.Addr()}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	key := "/etcdcli-test/" + t.Name()
	wch := cli.Watch(ctx, key)
	put := func(v string) {
		t.Helper()
		if _, err := direct.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	// next waits for the watch to show v; it fails when the watch ends or time runs out.
	next := func(v string, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case resp, ok := <-wch:
				if !ok {
					t.Fatalf("watch closed before %q: %v", v, ctx.Err())
				}
				for _, ev := range resp.Events {
					if string(ev.Kv.Value) == v {
						return
					}
				}
			case <-deadline:
				t.Fatalf("the watch did not show %q within %v", v, within)
			}
		}
	}
	// The watch is established once a change reaches it.
	put("before")
	next("before", 20*time.Second)

	p.Strand()
	put("after")
	// Two pings' time and a redial; a client without pings never gets it.
	next("after", 4*KeepAlive+10*time.Second)
}
