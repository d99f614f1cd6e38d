package pessimist

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// BenchmarkLockResolution measures one lock on embedded etcd with N sources: the time from the last
// info put to the last operation done (median and p99 over b.N locks), and the etcd writes (revisions)
// per source per lock, cleanup included; ms-to-exec is the median from the last info put to the owner
// holding its exec, ms-owner-done from there to the owner's done written (the rest is the other
// sources' dones). Set TRIBUTARY_ETCD_FSYNC=1 to measure with fsync on.
// sources=64,tables=16 is one lock over 1024 shard tables: each source's worker-side ShardingGroup
// of 16 tables (shardgroup.TrySync per table) puts the source's one info once all 16 reached the DDL.
func BenchmarkLockResolution(b *testing.B) {
	for _, n := range []int{2, 8, 64, 256} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) { benchLock(b, n, 0) })
	}
	b.Run("sources=64,tables=16", func(b *testing.B) { benchLock(b, 64, 16) })
}

func benchLock(b *testing.B, n, tables int) {
	cli := etcdClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout := NewLayout(fmt.Sprintf("/bench/%d/%d/", n, time.Now().UnixNano()))
	defer cli.Delete(context.Background(), layout.Root(), clientv3.WithPrefix())
	sources := make([]string, n)
	agents := make([]*Agent, n)
	groups := make([]*shardgroup.ShardingGroup, n)
	for i := range sources {
		sources[i] = fmt.Sprintf("source-%03d", i)
		agents[i] = NewAgent(cli, layout, "bench", sources[i], nil)
		if tables > 0 {
			groups[i] = shardgroup.NewShardingGroup(vocab.TableName{Schema: "db", Name: "t"})
			for t := 0; t < tables; t++ {
				if err := groups[i].AddTable(vocab.TableName{Schema: "db_" + sources[i], Name: fmt.Sprintf("t_%02d", t)}, vocab.Position{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if err := PutTaskSources(ctx, cli, layout, "bench", sources); err != nil {
		b.Fatal(err)
	}
	coord := start(ctx, func(ctx context.Context) { NewCoordinator(cli, layout).Run(ctx) })
	defer coord.stop()

	var latencies, toExec, execToDone []time.Duration
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
			mu        sync.Mutex
			lastPut   time.Time
			lastDone  time.Time
			ownerExec time.Time // when the owner got its exec operation
			ownerDone time.Time // when its done was written
			wg        sync.WaitGroup
			errs      = make(chan error, n)
		)
		for ai, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if g := groups[ai]; g != nil {
					// Every shard table of the source reaches the DDL; the last makes the group synced.
					for t := 0; t < tables; t++ {
						res, err := g.TrySync(shardgroup.DDLItem{
							Source: vocab.TableName{Schema: "db_" + sources[ai], Name: fmt.Sprintf("t_%02d", t)},
							Target: g.Target(), DDLs: ddls, Pos: vocab.Position{File: "binlog.000001", Pos: uint32(1000*(it+1) + t)},
						})
						if err != nil || res.Synced != (t == tables-1) {
							errs <- fmt.Errorf("trysync table %d: synced %v, %v", t, res.Synced, err)
							return
						}
					}
				}
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
				execAt := time.Now()
				if err == nil {
					err = a.DoneOperationDeleteInfo(ctx, op, info)
				}
				if err == nil && op.Exec {
					mu.Lock()
					ownerExec, ownerDone = execAt, time.Now()
					mu.Unlock()
				}
				if err == nil && groups[ai] != nil {
					_, err = groups[ai].ResolveActive()
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
		toExec = append(toExec, ownerExec.Sub(lastPut))
		execToDone = append(execToDone, ownerDone.Sub(ownerExec))
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
			time.Sleep(100 * time.Microsecond) // a measurement: the poll's resolution, not a wait.Until
		}
		writes += after - before.Header.Revision
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
	for _, d := range [][]time.Duration{toExec, execToDone} {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	b.ReportMetric(float64(toExec[len(toExec)/2].Microseconds())/1000, "ms-to-exec")
	b.ReportMetric(float64(execToDone[len(execToDone)/2].Microseconds())/1000, "ms-owner-done")
	b.ReportMetric(float64(writes)/float64(b.N)/float64(n), "writes/source")
}
