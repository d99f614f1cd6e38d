package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tributary-db/tributary/tests/framework/netutil"
)

// paths are the network paths the workers use, each through a proxy the injector can stall or cut:
// one to each upstream (the source files name the proxy), one to the downstream (the task files name
// it), and each worker's own to every master (its --join). The workload, the DDL runners, pt-osc and
// the checkers reach the servers directly: a fault is on the replication's paths only.
type paths struct {
	mu   sync.Mutex
	ups  []*netutil.FaultProxy
	down *netutil.FaultProxy
	etcd map[string][]*netutil.FaultProxy // by worker
}

func newPaths() *paths { return &paths{etcd: map[string][]*netutil.FaultProxy{}} }

// route puts the proxies to the upstreams and the downstream in place (their ports are known once the
// cluster started; the workers' paths to etcd are made as they start, by join).
func (p *paths) route(upPorts []int, downPort int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, port := range append(upPorts, downPort) {
		fp, err := netutil.NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		p.ups = append(p.ups, fp)
	}
	p.down, p.ups = p.ups[len(upPorts)], p.ups[:len(upPorts)]
	return nil
}

// join is e2e.Options.WorkerJoin: the worker reaches each master through a proxy of its own.
func (p *paths) join(worker string, masters []string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range masters {
		fp, err := netutil.NewFaultProxy(m)
		if err != nil {
			return nil, err
		}
		p.etcd[worker] = append(p.etcd[worker], fp)
		out = append(out, fp.Addr())
	}
	return out, nil
}

// Close closes every proxy.
func (p *paths) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := append([]*netutil.FaultProxy{p.down}, p.ups...)
	for _, ps := range p.etcd {
		all = append(all, ps...)
	}
	for _, fp := range all {
		if fp != nil {
			fp.Close()
		}
	}
}

// faults lists a stall and a cut of each path.
func (p *paths) faults(sleep func(context.Context, time.Duration)) []fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	type path struct {
		hold, kind string
		proxies    []*netutil.FaultProxy
	}
	var all []path
	for i, fp := range p.ups {
		all = append(all, path{fmt.Sprintf("path upstream%d", i), "network path to an upstream", []*netutil.FaultProxy{fp}})
	}
	if p.down != nil {
		all = append(all, path{"path downstream", "network path to the downstream", []*netutil.FaultProxy{p.down}})
	}
	workers := make([]string, 0, len(p.etcd))
	for w := range p.etcd {
		workers = append(workers, w)
	}
	sort.Strings(workers) // the seed's draws must find the same list in the same order
	for _, w := range workers {
		all = append(all, path{"path etcd " + w, "network path of a worker to etcd", p.etcd[w]})
	}
	var out []fault
	for _, pa := range all {
		kind, hold := pa.kind, []string{pa.hold}
		out = append(out, fault{kind: kind + " stalled", holds: hold, run: func(ctx context.Context, d time.Duration) error {
			for _, fp := range pa.proxies {
				fp.Stall()
			}
			sleep(ctx, d)
			for _, fp := range pa.proxies {
				fp.Heal()
			}
			return nil
		}}, fault{kind: kind + " cut", holds: hold, run: func(ctx context.Context, d time.Duration) error {
			for _, fp := range pa.proxies {
				fp.Cut()
			}
			sleep(ctx, d)
			for _, fp := range pa.proxies {
				fp.Heal()
			}
			return nil
		}})
	}
	return out
}
