package syncer

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

// BenchmarkThroughputWhileLockWaits measures what a waiting shard DDL lock costs the tables it does not
// block (issue 13, goal 4). Two sources, each with shard tables t_1, t_2 (routed to db.t) and u_1
// (routed to db.u); Tributary's syncer settings (worker-count 4, batch 1024).
//
//  1. Throughput, in TRIBUTARY_BENCH_ROUNDS paired rounds (default 3; the machine is shared, so each
//     lock catch-up is compared with the free one just before it). A catch-up: a backlog of
//     TRIBUTARY_BENCH_BACKLOG rows (default 1000000) over the five tables that have not reached the DDL
//     (db_1.t_2, db_1.u_1, db_2.t_1, db_2.t_2, db_2.u_1) is written while the syncers are stopped, and
//     timed from the syncers' start until each table's last row is downstream. Each round: a catch-up
//     with no lock pending ("rows/s-free"); db_1.t_1 runs ALTER TABLE ... ADD COLUMN while the other
//     shards of db.t do not, so the lock waits; a catch-up during the lock ("rows/s-during-lock");
//     another during the lock in which db_1.t_1 writes as many rows as each measured table (read and
//     held back); then the other shards run the DDL and the lock resolves (not in the last round).
//     Reported: the medians of the rates and of the per-round ratios "%-during-lock" (the goal: at
//     least 90), "%-during-lock-min", "s1-%-during-lock" (source 1 alone, the source whose shard
//     group waits), "%-during-lock+held-writes" and its source 1 figure.
//  2. Memory: while the last round's lock waits, TRIBUTARY_BENCH_ROWS rows (default 1000000) are
//     written to db_1.t_1, the shard that passed the DDL; once the syncer has read past them (a row of
//     db_1.t_2 written after them arrived), the growth of the process's peak RSS over the baseline
//     after debug.FreeOSMemory (VmHWM reset through /proc/self/clear_refs, and VmRSS sampled every
//     50 ms: "MB-rss-growth", "MB-rss-peak"; the goal: under 300 MB) and of the Go heap in use
//     ("MB-heap-growth") are reported. Then the other shards run the DDL, the lock resolves, and the
//     held-back rows must arrive ("rows/s-resync") and the downstream counts be right.
//
// Run with -benchtime 1x (-v logs each catch-up and round), e.g.
//
//	go test ./worker -run '^$' -bench ThroughputWhileLockWaits -benchtime 1x
func BenchmarkThroughputWhileLockWaits(b *testing.B) {
	for i := 0; i < b.N; i++ {
		lockWait(b, 4, 1024)
	}
}

// lockWaitTable is an upstream table of the benchmark and where its rows go.
type lockWaitTable struct {
	src    int
	name   string // schema.table upstream
	target string // downstream table
	base   int    // its ids are above base
}

func lockWait(b *testing.B, workers, batch int) {
	backlog, held, rounds := benchEnv("TRIBUTARY_BENCH_BACKLOG", 1000000), benchEnv("TRIBUTARY_BENCH_ROWS", 1000000), benchEnv("TRIBUTARY_BENCH_ROUNDS", 3)
	b.StopTimer()
	c := newClusterTB(b)
	c.workers, c.batch = workers, batch
	for i := range c.ups {
		c.up(i, fmt.Sprintf("CREATE TABLE db_%d.u_1 (id INT PRIMARY KEY, v VARCHAR(32))", i+1))
	}
	passed := lockWaitTable{0, "db_1.t_1", "db.t", 0}
	measured := []lockWaitTable{
		{0, "db_1.t_2", "db.t", 100_000_000},
		{0, "db_1.u_1", "db.u", 200_000_000},
		{1, "db_2.t_1", "db.t", 300_000_000},
		{1, "db_2.t_2", "db.t", 400_000_000},
		{1, "db_2.u_1", "db.u", 500_000_000},
	}
	perTable := backlog / len(measured)
	if 3*rounds*perTable >= 99_000_000 {
		b.Fatal("TRIBUTARY_BENCH_BACKLOG * TRIBUTARY_BENCH_ROUNDS too large for the id ranges")
	}
	want := map[string]int{} // downstream rows by target

	stops := make([]func() error, len(c.ups))
	syncers := make([]*Syncer, len(c.ups))
	startAll := func() {
		for i := range c.ups {
			stops[i], syncers[i] = c.startSyncerGet(i)
		}
	}
	stopAll := func() {
		for i, stop := range stops {
			if err := stop(); err != nil {
				b.Fatalf("syncer s%d: %v", i+1, err)
			}
		}
	}
	has := func(target string, id int) bool {
		var n int
		err := c.downDB.QueryRow("SELECT COUNT(*) FROM "+target+" WHERE id = ?", id).Scan(&n)
		return err == nil && n == 1
	}
	waitRow := func(target string, id int, timeout time.Duration) {
		wait.Eventually(b, timeout, func() bool { return has(target, id) },
			func() string { return fmt.Sprintf("row %d never arrived in %s", id, target) })
	}
	startAll()

	// catchUp writes perTable rows to each measured table (ids base+from+1 .. base+from+perTable) while
	// the syncers are stopped, then times their catch-up: the whole backlog and source 1's tables.
	// With heldToo, db_1.t_1 (past the DDL) gets perTable rows of its own in the same backlog: they are
	// read and held back, and the rate still counts only the measured tables' rows.
	catchUp := func(from int, heldToo bool) (all, s1 float64) {
		stopAll()
		var wg sync.WaitGroup
		if heldToo {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.writeRange(b, passed.src, passed.name, passed.base+from+1, passed.base+from+perTable)
			}()
			want[passed.target] += perTable
		}
		for _, t := range measured {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.writeRange(b, t.src, t.name, t.base+from+1, t.base+from+perTable)
			}()
			want[t.target] += perTable
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		b.StartTimer()
		start := time.Now()
		startAll()
		startedAt := make([]time.Duration, len(syncers))
		for i, sy := range syncers {
			go func() { <-sy.Started(); startedAt[i] = time.Since(start) }()
		}
		// Poll every table's last row; each source's time is its last table's. A measurement, not a
		// wait: its fixed 10 ms poll is the arrival times' resolution (wait.Until backs off to 50 ms).
		arrived := make([]time.Duration, len(measured))
		left := len(measured)
		for deadline := start.Add(10 * time.Minute); left > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("the backlog did not arrive in 10 minutes: %v", arrived)
			}
			for k, t := range measured {
				if arrived[k] == 0 && has(t.target, t.base+from+perTable) {
					arrived[k] = time.Since(start)
					left--
				}
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		var s1Done time.Duration
		s1Rows := 0
		for k, t := range measured {
			if t.src == 0 {
				s1Rows += perTable
				s1Done = max(s1Done, arrived[k])
			}
		}
		b.Logf("catch-up from %d (held rows too: %v): %d rows in %v; syncers started after %v; per table %v", from, heldToo, perTable*len(measured), elapsed, startedAt, arrived)
		return float64(perTable*len(measured)) / elapsed.Seconds(), float64(s1Rows) / s1Done.Seconds()
	}

	// Paired rounds (the machine is shared and noisy: each lock catch-up is compared with the free one
	// just before it). Round r: a free catch-up; db_1.t_1 runs ADD COLUMN c<r> (the lock waits: the
	// other shards of db.t have not); a catch-up during the lock; one during the lock with held-back
	// writes too; then, but for the last round, the other shards run the DDL and the lock resolves.
	// The last round's lock stays pending for the memory phase.
	var pctLock, pctLockS1, pctHeld, pctHeldS1, freeRates, lockRates []float64
	for r := 0; r < rounds; r++ {
		off := 3 * r * perTable
		freeRate, freeS1 := catchUp(off, false)

		// The lock. A row of db_1.t_1 after the DDL is held back; one of db_1.t_2 after it shows the
		// syncer read the DDL.
		after, sync := passed.base+99_000_000+r, measured[0].base+99_000_000+r
		c.up(0, fmt.Sprintf("ALTER TABLE db_1.t_1 ADD COLUMN c%d INT", r),
			fmt.Sprintf("INSERT INTO db_1.t_1 (id, v) VALUES (%d, 'after-ddl')", after),
			fmt.Sprintf("INSERT INTO db_1.t_2 (id, v) VALUES (%d, 'sync-point')", sync))
		want["db.t"] += 2
		waitRow("db.t", sync, time.Minute)
		if has("db.t", after) {
			b.Fatal("a row written after the shard's DDL reached the downstream while the lock waits")
		}
		// The same backlog while the lock waits; then again while the shard that passed the DDL writes
		// as much (its rows are read and skipped; source 1's restart also re-reads the previous
		// catch-up, since its resume position stays at the pending DDL).
		lockRate, lockS1 := catchUp(off+perTable, false)
		heldRate, heldS1 := catchUp(off+2*perTable, true)
		if has("db.t", after) || has("db.t", passed.base+off+3*perTable) {
			b.Fatal("a held-back row reached the downstream while the lock waits")
		}
		pctLock, pctLockS1 = append(pctLock, 100*lockRate/freeRate), append(pctLockS1, 100*lockS1/freeS1)
		pctHeld, pctHeldS1 = append(pctHeld, 100*heldRate/freeRate), append(pctHeldS1, 100*heldS1/freeS1)
		freeRates, lockRates = append(freeRates, freeRate), append(lockRates, lockRate)
		b.Logf("round %d: free %.0f rows/s, during the lock %.0f (%.1f %%, source 1 %.1f %%), with held-back writes %.0f (%.1f %%, source 1 %.1f %%)",
			r, freeRate, lockRate, 100*lockRate/freeRate, 100*lockS1/freeS1, heldRate, 100*heldRate/freeRate, 100*heldS1/freeS1)
		if r < rounds-1 {
			c.up(0, fmt.Sprintf("ALTER TABLE db_1.t_2 ADD COLUMN c%d INT", r))
			c.up(1, fmt.Sprintf("ALTER TABLE db_2.t_1 ADD COLUMN c%d INT", r), fmt.Sprintf("ALTER TABLE db_2.t_2 ADD COLUMN c%d INT", r))
			waitRow("db.t", passed.base+off+3*perTable, 10*time.Minute)
		}
	}
	b.ReportMetric(median(freeRates), "rows/s-free")
	b.ReportMetric(median(lockRates), "rows/s-during-lock")
	b.ReportMetric(median(pctLock), "%-during-lock")
	b.ReportMetric(slices.Min(pctLock), "%-during-lock-min")
	b.ReportMetric(median(pctLockS1), "s1-%-during-lock")
	b.ReportMetric(median(pctHeld), "%-during-lock+held-writes")
	b.ReportMetric(median(pctHeldS1), "s1-%-during-lock+held-writes")

	// 2. Memory: held rows written to the shard that passed the DDL, while the lock waits (the syncers
	// run and read them as they come).
	debug.FreeOSMemory() // the catch-ups' heap, returned: the baseline is what the process needs
	rssBefore, _ := procStatus("VmRSS")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	hwmReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil // VmHWM := VmRSS
	var peakRSS, peakHeap atomic.Uint64
	peakRSS.Store(rssBefore)
	peakHeap.Store(before.HeapInuse)
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if rss, err := procStatus("VmRSS"); err == nil && rss > peakRSS.Load() {
				peakRSS.Store(rss)
			}
			if n%4 == 0 { // ReadMemStats stops the world: every 200 ms
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peakHeap.Load() {
					peakHeap.Store(m.HeapInuse)
				}
			}
		}
	}()
	heldStart := time.Now()
	heldFrom := passed.base + 1_000_000_000
	c.writeRange(b, 0, passed.name, heldFrom+1, heldFrom+held)
	want["db.t"] += held
	sync := measured[0].base + 99_500_000
	c.up(0, fmt.Sprintf("INSERT INTO db_1.t_2 (id, v) VALUES (%d, 'sync-point')", sync))
	want["db.t"]++
	waitRow("db.t", sync, 10*time.Minute)
	heldRead := time.Since(heldStart)
	close(done)
	sampler.Wait()
	rssAfter, _ := procStatus("VmRSS")
	hwm, _ := procStatus("VmHWM")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak := peakRSS.Load()
	if hwmReset {
		peak = max(peak, hwm)
	}
	growth := peak - min(peak, rssBefore)
	b.ReportMetric(float64(growth)/(1<<20), "MB-rss-growth")
	b.ReportMetric(float64(peak)/(1<<20), "MB-rss-peak")
	b.ReportMetric(float64(rssAfter)/(1<<20), "MB-rss-after")
	b.ReportMetric(float64(peakHeap.Load()-min(peakHeap.Load(), before.HeapInuse))/(1<<20), "MB-heap-growth")
	b.ReportMetric(float64(held)/heldRead.Seconds(), "rows/s-held-written+read")
	b.ReportMetric(float64(syncers[0].PeakBatchedRows()), "s1-peak-batched-rows")
	var early int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id BETWEEN ? AND ?", heldFrom+1, heldFrom+held).Scan(&early); err != nil || early != 0 {
		b.Fatalf("%d held-back rows downstream before the lock resolved (%v)", early, err)
	}

	// The other shards reach the DDL: the lock resolves and the held-back rows (the memory phase's and
	// the last round's) are re-read.
	resolveStart := time.Now()
	last := rounds - 1
	c.up(0, fmt.Sprintf("ALTER TABLE db_1.t_2 ADD COLUMN c%d INT", last))
	c.up(1, fmt.Sprintf("ALTER TABLE db_2.t_1 ADD COLUMN c%d INT", last), fmt.Sprintf("ALTER TABLE db_2.t_2 ADD COLUMN c%d INT", last))
	waitRow("db.t", heldFrom+held, 10*time.Minute)
	waitRow("db.t", passed.base+3*last*perTable+3*perTable, 10*time.Minute)
	b.ReportMetric(float64(held+perTable+1)/time.Since(resolveStart).Seconds(), "rows/s-resync")
	for target, n := range want {
		var got int
		if err := c.downDB.QueryRow("SELECT COUNT(*) FROM " + target).Scan(&got); err != nil || got != n {
			b.Fatalf("%s has %d rows downstream, want %d (%v)", target, got, n, err)
		}
	}
	var heldDown, cols int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id BETWEEN ? AND ?", heldFrom+1, heldFrom+held).Scan(&heldDown); err != nil || heldDown != held {
		b.Fatalf("%d of the %d held-back rows downstream after the lock resolved (%v)", heldDown, held, err)
	}
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME LIKE 'c%'").Scan(&cols); err != nil || cols != rounds {
		b.Fatalf("db.t has %d of the %d added columns (%v)", cols, rounds, err)
	}
}

// median of xs (not empty); sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// writeRange inserts the rows from..to (ids, values 'value-<id>') into table of source i, 5000 rows a
// transaction.
func (c *cluster) writeRange(tb testing.TB, i int, table string, from, to int) {
	schema := strings.Split(table, ".")[0]
	for k := from; k <= to; k += 5000 {
		q := fmt.Sprintf("INSERT INTO %s (id, v) SELECT seq, CONCAT('value-', seq) FROM %s.seq_%d_to_%d", table, schema, k, min(k+4999, to))
		if _, err := c.upDBs[i].Exec(q); err != nil {
			tb.Error(err)
			return
		}
	}
}

// procStatus reads a size field (kB) of /proc/self/status, in bytes.
func procStatus(field string) (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var kb uint64
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s not in /proc/self/status", field)
}
