package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// injector picks a fault every few seconds (FaultGap on average) and heals it after a while; up to two
// are in flight at once, never two on the same process. Its draws come from the seed alone, so a
// seed replays the same faults in the same order (their timing follows the machine).
type injector struct {
	s      *Soak
	rng    *rand.Rand
	mu     sync.Mutex
	busy   map[string]bool // processes a fault holds
	counts map[string]int  // faults by kind
	// Longest is the longest any fault kept its process down or frozen.
	Longest time.Duration
}

// fault is one kind: what it holds, and what it does (inject runs until healed).
type fault struct {
	kind  string
	holds []string
	run   func(ctx context.Context, hold time.Duration) error
}

// run injects faults until ctx ends, then waits for the ones in flight to heal.
func (f *injector) run(ctx context.Context) {
	f.busy = map[string]bool{}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		gap := time.Duration(f.rng.Int64N(int64(2 * f.s.cfg.FaultGap)))
		hold := time.Duration(1000+f.rng.IntN(7000)) * time.Millisecond
		pick := f.rng.IntN(1 << 30)
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		ft, ok := f.choose(pick)
		if !ok {
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer f.release(ft.holds)
			f.s.logf("fault: %s for %s", ft.kind, hold)
			start := time.Now()
			// A fault heals whatever happens to ctx: the run's end must find every process up.
			if err := ft.run(context.WithoutCancel(ctx), hold); err != nil {
				f.s.logf("fault %s: %v", ft.kind, err)
			}
			f.mu.Lock()
			f.counts[ft.kind]++
			f.Longest = max(f.Longest, time.Since(start))
			f.mu.Unlock()
		}()
	}
}

// choose draws a fault whose processes are free, and holds them.
func (f *injector) choose(pick int) (fault, bool) {
	c := f.s.c
	all := f.faults(c)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range all {
		ft := all[(pick+i)%len(all)]
		free := true
		for _, h := range ft.holds {
			free = free && !f.busy[h]
		}
		if free {
			for _, h := range ft.holds {
				f.busy[h] = true
			}
			return ft, true
		}
	}
	return fault{}, false
}

func (f *injector) release(holds []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range holds {
		delete(f.busy, h)
	}
}

// faults lists every fault the cluster allows now, one entry per process it can hit.
func (f *injector) faults(c *e2e.Cluster) []fault {
	var out []fault
	sleep := func(ctx context.Context, d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	procs := append(append([]*e2e.Proc{}, c.Masters...), c.Workers...)
	for _, p := range procs {
		kind := "worker"
		if slicesContains(c.Masters, p) {
			kind = "master"
		}
		out = append(out, fault{kind: kind + " kill -9", holds: []string{p.Name}, run: func(ctx context.Context, hold time.Duration) error {
			p.Kill9()
			sleep(ctx, hold)
			return p.Restart()
		}}, fault{kind: kind + " SIGSTOP", holds: []string{p.Name}, run: func(ctx context.Context, hold time.Duration) error {
			p.Freeze()
			sleep(ctx, hold)
			p.Thaw()
			return nil
		}})
	}
	for i := range c.Masters {
		a, b := c.Masters[i], c.Masters[(i+1)%len(c.Masters)]
		out = append(out, fault{kind: "etcd quorum loss (two masters stopped)", holds: []string{a.Name, b.Name}, run: func(ctx context.Context, hold time.Duration) error {
			a.Freeze()
			b.Freeze()
			sleep(ctx, hold)
			a.Thaw()
			b.Thaw()
			return nil
		}})
	}
	for i, up := range c.Ups {
		out = append(out, fault{kind: "upstream kill -9", holds: []string{fmt.Sprintf("upstream%d", i)}, run: func(ctx context.Context, hold time.Duration) error {
			up.Kill()
			sleep(ctx, hold)
			return up.Boot()
		}})
	}
	out = append(out, fault{kind: "downstream kill -9", holds: []string{"downstream"}, run: func(ctx context.Context, hold time.Duration) error {
		c.Down.Kill()
		sleep(ctx, hold)
		return c.Down.Boot()
	}})
	for _, task := range []string{taskMain, taskSecond} {
		// The operator's second command runs even when the first seemed to fail: its answer may be
		// lost while it took effect (seed 16: the master that wrote the pause froze before it answered,
		// every retry failed for two minutes, and the task stayed paused for seven until a later fault
		// drew it), and an operator would check and resume.
		out = append(out, fault{kind: "pause-task, resume-task", holds: []string{"task " + task}, run: func(ctx context.Context, hold time.Duration) error {
			perr := f.retry(ctx, "pause-task", task)
			sleep(ctx, hold)
			return errors.Join(perr, f.retry(ctx, "resume-task", task))
		}}, fault{kind: "stop-task, start-task", holds: []string{"task " + task}, run: func(ctx context.Context, hold time.Duration) error {
			serr := f.retry(ctx, "stop-task", task)
			sleep(ctx, hold)
			// (When the stop did not happen, start-task answers "already started" until it gives up.)
			return errors.Join(serr, f.retry(ctx, "start-task", f.s.taskFile[task]))
		}})
	}
	return append(out, f.s.paths.faults(sleep)...)
}

// retry runs an operator's command until a master accepts it (masters may be down meanwhile).
func (f *injector) retry(ctx context.Context, args ...string) error {
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		r, out, err := f.s.dmctl(args...)
		if err == nil && r.Bool("result") {
			return nil
		}
		last = fmt.Errorf("%v %s", err, clip(out, 500))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("%v: %w", args, last)
}

func slicesContains(ps []*e2e.Proc, p *e2e.Proc) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
