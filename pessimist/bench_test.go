package pessimist

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkLockResolution measures one lock on embedded etcd with N sources: the time from the last
// info put to the last operation done (median and p99 over b.N locks), and the etcd writes (revisions)
// per source per lock, cleanup included. Set TRIBUTARY_ETCD_FSYNC=1 to measure with fsync on.
func BenchmarkLockResolution(b *testing.B) {
	for _, n := range []int{2, 8, 64, 256} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) { benchLock(b, n) })
	}
}

func benchLock(b *testing.B, n int) {
	cli := etcdClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := NewLayout(fmt.Sprintf("/bench/%d/%d/", n, time.Now().UnixNano()))
	defer cli.Delete(context.Background(), layout.Root(), clientv3.WithPrefix())
	sources := make([]string, n)
	agents := make([]*Agent, n)
	for i := range sources {
		sources[i] = fmt.Sprintf("source-%03d", i)
		agents[i] = NewAgent(cli, layout, "bench", sources[i], nil)
	}
	if err := PutTaskSources(ctx, cli, layout, "bench", sources); err != nil {
		b.Fatal(err)
	}
	coord := start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	defer coord.stop()

	var latencies []time.Duration
	var writes int64
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		target := fmt.Sprintf("`db`.`t%d`", it)
		ddls := []string{fmt.Sprintf("ALTER TABLE %s ADD COLUMN `c` INT", target)}
		before, err := cli.Get(ctx, "/bench-revision-probe")
		if err != nil {
			b.Fatal(err)
		}
		var (
			mu       sync.Mutex
			lastPut  time.Time
			lastDone time.Time
			wg       sync.WaitGroup
			errs     = make(chan error, n)
		)
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := a.PutInfo(ctx, target, ddls)
				if err != nil {
					errs <- err
					return
				}
				now := time.Now()
				mu.Lock()
				if now.After(lastPut) {
					lastPut = now
				}
				mu.Unlock()
				op, err := a.WaitOperation(ctx, info)
				if err == nil {
					err = a.DoneOperationDeleteInfo(ctx, op, info)
				}
				if err != nil {
					errs <- err
					return
				}
				now = time.Now()
				mu.Lock()
				if now.After(lastDone) {
					lastDone = now
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		latencies = append(latencies, lastDone.Sub(lastPut))
		// Wait for the cleanup so its write is counted and the next lock starts clean.
		var after int64
		for {
			resp, err := cli.Get(ctx, layout.Root()+kindOp+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			if resp.Count == 0 {
				after = resp.Header.Revision
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		writes += after - before.Header.Revision
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
	b.ReportMetric(float64(writes)/float64(b.N)/float64(n), "writes/source")
}
