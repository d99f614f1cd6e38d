package syncer

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-db/tributary/vocab"
)

// BenchmarkCatchUp: TRIBUTARY_BENCH_ROWS rows (default 1000000) over 4 or 16 shard tables (2 sources)
// already in the binlog; reports the catch-up rate into the merged target beside the rate of a plain
// batched INSERT of the same rows into the same downstream (256 rows a statement, 1024 a transaction,
// one connection per shard table), measured in the same run. Each table count runs with DM's default
// syncer settings (worker-count 16, batch 100: what DM users' task files say) and with Tributary's
// (worker-count 4, batch 1024). worker-cpu-ns/row is the CPU time of the test process (the syncers)
// per row during the catch-up: less noisy than the rates on a shared machine; downstream-cpu-ns/row and
// limit-downstream-cpu-ns/row are the downstream server's CPU per row (from /proc) during the catch-up and
// during the limit: what the syncers' statements cost the server beside plain INSERTs. Run with -benchtime 1x.
func BenchmarkCatchUp(b *testing.B) {
	total := benchEnv("TRIBUTARY_BENCH_ROWS", 1000000)
	for _, tables := range []int{4, 16} {
		for _, set := range []struct {
			name           string
			workers, batch int
		}{{"dm", 16, 100}, {"tributary", 4, 1024}} {
			b.Run(fmt.Sprintf("tables=%d/settings=%s", tables, set.name), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					catchUp(b, tables, total/tables, set.workers, set.batch)
				}
			})
		}
	}
}

func catchUp(b *testing.B, tables, perTable, workers, batch int) {
	c := newClusterTB(b)
	c.workers, c.batch = workers, batch
	for i := range c.ups {
		schema := fmt.Sprintf("db_%d", i+1)
		for j := len(c.shards[i]) + 1; j <= tables/len(c.ups); j++ {
			table := fmt.Sprintf("%s.t_%d", schema, j)
			c.up(i, "CREATE TABLE "+table+" (id INT PRIMARY KEY, v VARCHAR(32))")
			c.shards[i] = append(c.shards[i], table)
		}
	}
	// Take the start positions, then fill the binlog.
	for i := range c.ups {
		c.startPosition(i)
	}
	c.fillShards(b, perTable, 1000, false)
	if b.Failed() {
		return
	}
	ends := make([]vocab.Position, len(c.ups))
	for i := range c.ups {
		ends[i] = c.binlogEnd(i)
	}
	total := tables * perTable

	b.ResetTimer()
	start, cpu, downCPU := time.Now(), processCPU(), c.down.CPU()
	for i := range c.ups {
		c.startSyncer(i)
	}
	for i := range c.ups {
		c.waitResumePosition(i, ends[i])
	}
	syncRate := float64(total) / time.Since(start).Seconds()
	cpuPerRow := float64(processCPU()-cpu) / float64(total)
	downPerRow := float64(c.down.CPU()-downCPU) / float64(total)
	b.StopTimer()
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&n); err != nil || n != total {
		b.Fatalf("downstream has %d rows, want %d (%v)", n, total, err)
	}

	// The limit: the same rows, plain batched INSERT, same downstream, one connection per shard table
	// (the syncers write each table's changes on one connection of their own, too).
	c.down.Exec(b, c.downDB, "CREATE TABLE db.t_limit LIKE db.t")
	ranges := make([][2]int, tables)
	for shard := range ranges {
		ranges[shard] = [2]int{shard * perTable, (shard + 1) * perTable}
	}
	downCPU = c.down.CPU()
	limitRate := insertLimit(b, c.downDB, "db.t_limit", ranges)
	b.ReportMetric(float64(c.down.CPU()-downCPU)/float64(total), "limit-downstream-cpu-ns/row")
	b.ReportMetric(downPerRow, "downstream-cpu-ns/row")
	b.ReportMetric(syncRate, "sync-rows/s")
	b.ReportMetric(cpuPerRow, "worker-cpu-ns/row")
	b.ReportMetric(limitRate, "limit-rows/s")
	b.ReportMetric(100*syncRate/limitRate, "%-of-limit")
}

// fillShards writes perTable rows into each of the four shard tables (ids (shard*perTable, (shard+1)*
// perTable], values 'value-<id>'), step rows a transaction, the sources in parallel; analyze refreshes
// the tables' statistics afterwards. Errors fail tb.
func (c *cluster) fillShards(tb testing.TB, perTable, step int, analyze bool) {
	var wg sync.WaitGroup
	for i := range c.ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			before := 0 // shard tables of the sources before this one
			for _, tables := range c.shards[:i] {
				before += len(tables)
			}
			for j, table := range c.shards[i] {
				base := (before + j) * perTable
				schema := strings.Split(table, ".")[0]
				for from := 0; from < perTable; from += step {
					n := min(step, perTable-from)
					if _, err := c.upDBs[i].Exec(fmt.Sprintf("INSERT INTO %s SELECT seq, CONCAT('value-', seq) FROM %s.seq_%d_to_%d",
						table, schema, base+from+1, base+from+n)); err != nil {
						tb.Error(err)
						return
					}
				}
				if analyze {
					if _, err := c.upDBs[i].Exec("ANALYZE TABLE " + table); err != nil {
						tb.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkHotTable: TRIBUTARY_BENCH_ROWS rows (default 1000000) of ONE upstream table already in the
// binlog (one source): the catch-up rate beside the plain batched INSERT limit of the same rows into
// the same downstream over as many connections as the syncer has (256 rows a statement, 1024 a
// transaction), measured in the same run, with DM's default syncer settings and with Tributary's, each
// with and without syncers.spread-hot-tables (the table's changes spread over the connections by key;
// without it one table goes through one connection whatever worker-count says). rtt=1ms puts the
// downstream 1 ms of round trip away (a proxy that holds the bytes, as in another zone), for the syncer
// and the limit alike: what worker-count is for. Run with -benchtime 1x.
func BenchmarkHotTable(b *testing.B) {
	total := benchEnv("TRIBUTARY_BENCH_ROWS", 1000000)
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		for _, set := range []struct {
			name           string
			workers, batch int
		}{{"dm", 16, 100}, {"tributary", 4, 1024}} {
			for _, spread := range []bool{false, true} {
				name := fmt.Sprintf("settings=%s/spread=%t", set.name, spread)
				if rtt > 0 {
					name += "/rtt=" + rtt.String()
				}
				b.Run(name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						hotCatchUp(b, total, set.workers, set.batch, spread, rtt)
					}
				})
			}
		}
	}
}

func hotCatchUp(b *testing.B, total, workers, batch int, spread bool, rtt time.Duration) {
	c := newClusterTB(b)
	c.workers, c.batch, c.spread = workers, batch, spread
	limitDB := c.downDB
	if rtt > 0 {
		limitDB = c.remoteDownstream(rtt)
	}
	c.fillHot(total)
	end := c.binlogEnd(0)
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	c.startSyncer(0)
	c.waitResumePosition(0, end)
	syncRate := float64(total) / time.Since(start).Seconds()
	cpuPerRow := float64(processCPU()-cpu) / float64(total)
	b.StopTimer()
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.hot").Scan(&n); err != nil || n != total {
		b.Fatalf("downstream has %d rows, want %d (%v)", n, total, err)
	}
	c.down.Exec(b, c.downDB, "CREATE TABLE db.hot_limit LIKE db.hot")
	ranges := make([][2]int, workers)
	per := (total + workers - 1) / workers
	for w := range ranges {
		ranges[w] = [2]int{min(w*per, total), min((w+1)*per, total)}
	}
	limitRate := insertLimit(b, limitDB, "db.hot_limit", ranges)
	if rtt > 0 {
		// The round trip the proxy makes: a query's, median of 20.
		var rts []time.Duration
		for range 20 {
			t := time.Now()
			if _, err := limitDB.Exec("DO 1"); err != nil {
				b.Fatal(err)
			}
			rts = append(rts, time.Since(t))
		}
		slices.Sort(rts)
		b.ReportMetric(float64(rts[10].Microseconds())/1000, "rtt-ms")
	}
	b.ReportMetric(syncRate, "sync-rows/s")
	b.ReportMetric(cpuPerRow, "worker-cpu-ns/row")
	b.ReportMetric(limitRate, "limit-rows/s")
	b.ReportMetric(100*syncRate/limitRate, "%-of-limit")
}

// insertLimit inserts rows (id, 'value-<id>') into table, ids (lo, hi] of each range on a connection of
// its own, 256 rows a statement and 1024 a transaction, and returns the rows per second: the
// downstream's limit that a catch-up is measured against.
func insertLimit(b *testing.B, db *sql.DB, table string, ranges [][2]int) float64 {
	start := time.Now()
	total := 0
	var wg sync.WaitGroup
	for _, r := range ranges {
		total += r[1] - r[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(b.Context())
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close()
			lo, hi := r[0], r[1]
			for from := lo; from < hi; from += 1024 {
				tx, err := conn.BeginTx(b.Context(), nil)
				if err != nil {
					b.Error(err)
					return
				}
				for k := from; k < min(from+1024, hi); k += 256 {
					var sb strings.Builder
					args := make([]any, 0, 512)
					sb.WriteString("INSERT INTO " + table + " (id, v) VALUES ")
					for id := k + 1; id <= min(k+256, hi, from+1024); id++ {
						if id > k+1 {
							sb.WriteByte(',')
						}
						sb.WriteString("(?,?)")
						args = append(args, id, fmt.Sprintf("value-%d", id))
					}
					if _, err := tx.Exec(sb.String(), args...); err != nil {
						b.Error(err)
						return
					}
				}
				if err := tx.Commit(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// processCPU is the CPU time (user and system) this process has used, in nanoseconds: during a
// catch-up, the syncers' (the upstream and downstream servers are processes of their own), whatever
// else runs on the machine.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// fillHot creates the upstream table db_1.hot of source 0, takes the syncer's start position, then
// inserts total rows (id, 'value-<id>'), 1000 a transaction.
func (c *cluster) fillHot(total int) {
	c.up(0, "CREATE TABLE db_1.hot (id INT PRIMARY KEY, v VARCHAR(32))")
	c.startPosition(0)
	for from := 0; from < total; from += 1000 {
		c.up(0, fmt.Sprintf("INSERT INTO db_1.hot SELECT seq, CONCAT('value-', seq) FROM db_1.seq_%d_to_%d", from+1, min(from+1000, total)))
	}
}

// benchEnv is the integer in environment variable name, or def when it is unset.
func benchEnv(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		fmt.Sscan(v, &def)
	}
	return def
}

// BenchmarkRemoteUpdates: TRIBUTARY_BENCH_UPDATES rows (default 20000) of one upstream table, inserted
// and then each updated once (1000 rows an upstream transaction), with the downstream behind the
// delaying proxy of BenchmarkHotTable's rtt=1ms and DM's syncer settings: the rate at which a syncer
// started once the inserts are applied applies the updates (its start included). An UPDATE is one
// statement a row downstream. Run with -benchtime 1x.
func BenchmarkRemoteUpdates(b *testing.B) {
	total := benchEnv("TRIBUTARY_BENCH_UPDATES", 20000)
	for i := 0; i < b.N; i++ {
		remoteUpdates(b, total)
	}
}

func remoteUpdates(b *testing.B, total int) {
	c := newClusterTB(b)
	c.workers, c.batch = 16, 100
	c.remoteDownstream(time.Millisecond)
	c.fillHot(total)
	// The inserts first, with a syncer of their own: a flush of the backlog would hold inserts and
	// updates together, and the updates' time would start in the middle of them.
	inserted := c.binlogEnd(0)
	stop := c.startSyncer(0)
	c.waitResumePosition(0, inserted)
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	for from := 0; from < total; from += 1000 {
		c.up(0, fmt.Sprintf("UPDATE db_1.hot SET v = CONCAT('new-', id) WHERE id > %d AND id <= %d", from, min(from+1000, total)))
	}
	end := c.binlogEnd(0)
	b.ResetTimer()
	start := time.Now()
	c.startSyncer(0) // from the checkpoint: the updates alone
	c.waitResumePosition(0, end)
	rate := float64(total) / time.Since(start).Seconds()
	b.StopTimer()
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.hot WHERE v = CONCAT('new-', id)").Scan(&n); err != nil || n != total {
		b.Fatalf("downstream has %d updated rows, want %d (%v)", n, total, err)
	}
	b.ReportMetric(rate, "update-rows/s")
}
