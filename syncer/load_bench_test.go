package syncer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/config"
)

// BenchmarkFullLoad: 4 shard tables (2 sources x 2) of TRIBUTARY_BENCH_LOAD_ROWS rows each (default
// 1 000 000) loaded by task-mode all's load unit with its defaults, from snapshot to cut-over; reports
// the load rate beside the downstream's LOAD DATA LOCAL INFILE rate for the same rows (4 connections,
// one per shard table) measured in the same run, the time from the load's end to the sync unit's start,
// and the peak RSS of this process during the load. Run with -benchtime 1x.
func BenchmarkFullLoad(b *testing.B) {
	perTable := benchEnv("TRIBUTARY_BENCH_LOAD_ROWS", 1_000_000)
	for i := 0; i < b.N; i++ {
		fullLoad(b, perTable)
	}
}

func fullLoad(b *testing.B, perTable int) {
	c := newClusterTB(b)
	c.fillShards(b, perTable, 10000, true)
	if b.Failed() {
		return
	}
	total := 4 * perTable
	resetPeakRSS()

	b.ResetTimer()
	start := time.Now()
	errs := make(chan error, len(c.ups))
	for i := range c.ups {
		p := c.loadParams(i)
		p.Dump, p.Load = config.DumpConfig{Threads: 4, ChunkFileSizeMB: 64}, config.LoadConfig{PoolSize: 4, OnDuplicate: "error"}
		go func() { errs <- RunLoad(context.Background(), p) }()
	}
	for range c.ups {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	loaded := time.Now()
	loadRate := float64(total) / loaded.Sub(start).Seconds()
	peak := peakRSS()
	_, s1 := c.startSyncerGet(0)
	<-s1.Started()
	handover := time.Since(loaded)
	b.StopTimer()
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&n); err != nil || n != total {
		b.Fatalf("downstream has %d rows, want %d (%v)", n, total, err)
	}

	// The limit: the same rows by LOAD DATA LOCAL INFILE into the same downstream, one connection per
	// shard table.
	c.down.Exec(b, c.downDB, "CREATE TABLE db.t_limit LIKE db.t")
	limitStart := time.Now()
	var lwg sync.WaitGroup
	for shard := 0; shard < 4; shard++ {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			name := fmt.Sprintf("bench-%d-%d", shard, time.Now().UnixNano())
			mysql.RegisterReaderHandler(name, func() io.Reader {
				pr, pw := io.Pipe()
				go func() {
					w := bufio.NewWriterSize(pw, 1<<16)
					base := shard * perTable
					for r := 1; r <= perTable; r++ {
						fmt.Fprintf(w, "%d\tvalue-%d\n", base+r, base+r)
					}
					w.Flush()
					pw.Close()
				}()
				return pr
			})
			defer mysql.DeregisterReaderHandler(name)
			if _, err := c.downDB.Exec("LOAD DATA LOCAL INFILE 'Reader::" + name + "' INTO TABLE db.t_limit (id, v)"); err != nil {
				b.Error(err)
			}
		}()
	}
	lwg.Wait()
	limitRate := float64(total) / time.Since(limitStart).Seconds()
	b.ReportMetric(loadRate, "load-rows/s")
	b.ReportMetric(limitRate, "loaddata-rows/s")
	b.ReportMetric(100*loadRate/limitRate, "%-of-limit")
	b.ReportMetric(float64(handover.Milliseconds()), "ms-to-sync")
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
}

// resetPeakRSS resets the kernel's high-water mark of this process's RSS (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is this process's RSS high-water mark in KiB (0 where /proc is missing).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmHWM:"), "kB")), &kb)
			return kb
		}
	}
	return 0
}
