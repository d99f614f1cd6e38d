// Command bench runs Tributary's benchmarks (`make bench`) and prints their figures as one table, each
// throughput beside the limit measured in the same run, and the machine they ran on.
//
//	go run ./tests/bench [-lock-benchtime 20x] [-rows 1000000] [-latency-rounds 20]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	lockTime := flag.String("lock-benchtime", "20x", "benchtime of the lock benchmarks")
	rows := flag.Int("rows", 1000000, "rows of the catch-up backlog (TRIBUTARY_BENCH_ROWS)")
	rounds := flag.Int("latency-rounds", 20, "locks per source count of the end-to-end lock latency through real processes (TRIBUTARY_LATENCY_ROUNDS; 0: skip it)")
	flag.Parse()
	var results []result
	type run struct {
		pkg, bench, benchtime string
		env                   []string
	}
	runs := []run{
		{"./pessimist/", ".", *lockTime, nil},
		{"./syncer/", "CatchUp|HotTable|RemoteUpdates|ThroughputWhileLockWaits", "1x", []string{fmt.Sprintf("TRIBUTARY_BENCH_ROWS=%d", *rows)}},
	}
	if *rounds > 0 {
		runs = append(runs, run{"./tests/integration/", "LockLatency", "1x", []string{fmt.Sprintf("TRIBUTARY_LATENCY_ROUNDS=%d", *rounds)}})
	}
	for _, run := range runs {
		rs, err := runBench(run.pkg, run.bench, run.benchtime, run.env)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		results = append(results, rs...)
	}
	fmt.Println()
	fmt.Println("machine:", machine())
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "benchmark\tfigure\tlimit (same run)\tof limit\textra")
	for _, r := range results {
		fmt.Fprintln(w, r.row())
	}
	w.Flush()
}

// result is one benchmark line: its name and metrics by unit.
type result struct {
	name    string
	metrics map[string]float64
	units   []string
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func runBench(pkg, bench, benchtime string, env []string) ([]result, error) {
	cmd := exec.Command("go", "test", "-run", "XXX", "-bench", bench, "-benchtime", benchtime, pkg)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	fmt.Fprintln(os.Stderr, "+", strings.Join(cmd.Args, " "))
	err := cmd.Run()
	os.Stdout.Write(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	var rs []result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := result{name: strings.TrimPrefix(m[1], "Benchmark"), metrics: map[string]float64{}}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			r.metrics[f[i+1]] = v
			r.units = append(r.units, f[i+1])
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func (r result) row() string {
	m := r.metrics
	if v, ok := m["sync-rows/s"]; ok {
		extra := ""
		if c, ok := m["worker-cpu-ns/row"]; ok {
			extra = fmt.Sprintf("worker CPU %.0f ns/row", c)
		}
		if d, ok := m["downstream-cpu-ns/row"]; ok {
			// What the downstream server spent a row: on the syncers' transactions, and on the limit's.
			extra += fmt.Sprintf(", downstream CPU %.0f ns/row (limit %.0f)", d, m["limit-downstream-cpu-ns/row"])
		}
		if rt, ok := m["rtt-ms"]; ok {
			// The downstream behind a delaying proxy: its round trip as measured, and the limit is over
			// the same link.
			extra += fmt.Sprintf(", downstream round trip %.1f ms", rt)
		}
		return fmt.Sprintf("%s\t%.0f rows/s\t%.0f rows/s\t%.0f %%\t%s", r.name, v, m["limit-rows/s"], m["%-of-limit"], extra)
	}
	if v, ok := m["update-rows/s"]; ok {
		return fmt.Sprintf("%s\t%.0f updates/s (downstream 1 ms of proxy away)\t\t\t", r.name, v)
	}
	if v, ok := m["rows/s-during-lock"]; ok {
		// Goal: the tables a waiting lock does not block keep 90 % of their rate, and the rows held back
		// behind it cost no memory.
		return fmt.Sprintf("%s\t%.0f rows/s while a lock waits\t%.0f rows/s with none\t%.0f %%\tmin %.0f %%, with held-back writes %.0f %%, RSS growth %.0f MB (peak %.0f MB)",
			r.name, v, m["rows/s-free"], m["%-during-lock"], m["%-during-lock-min"], m["%-during-lock+held-writes"], m["MB-rss-growth"], m["MB-rss-peak"])
	}
	if v, ok := m["ms-median"]; ok {
		var extra []string
		for _, u := range r.units {
			if u != "ms-median" && u != "ns/op" {
				extra = append(extra, fmt.Sprintf("%s %.4g", u, m[u]))
			}
		}
		return fmt.Sprintf("%s\t%.1f ms median\t\t\t%s", r.name, v, strings.Join(extra, ", "))
	}
	var extra []string
	for _, u := range r.units {
		extra = append(extra, fmt.Sprintf("%s %.4g", u, m[u]))
	}
	return fmt.Sprintf("%s\t\t\t\t%s", r.name, strings.Join(extra, ", "))
}

// machine describes the CPU, the core count, Go and MariaDB.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	db := "mariadbd not found"
	if out, err := exec.Command("mariadbd", "--version").Output(); err == nil {
		db = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d cores, %s, %s", cpu, runtime.NumCPU(), runtime.Version(), db)
}
