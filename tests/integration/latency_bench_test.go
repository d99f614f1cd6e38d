package integration

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// BenchmarkLockLatency measures a pessimistic lock end to end through real processes: one mariadbd per
// source and a downstream one, dm-master, one dm-worker per source (built without failpoints, run with
// --log-level debug for the lock trace), the harness's shard-merge task (2 shard tables per source into
// db.t). Each round adds a column on every shard table but the last source's second one, waits until
// every other source has put its info and the last source has read past its first table's DDL (a row
// written after it is downstream), then adds the column on that last table. Latency runs from the
// return of that upstream ALTER (its commit) to the column visible downstream, polled every
// TRIBUTARY_LATENCY_POLL (default 1ms) with TRIBUTARY_LATENCY_PROBE: "select" (the default) selects the
// column from db.t with LIMIT 0, an error until it exists (0.17 ms a query on this machine, a round
// trip); "columns" counts it in information_schema.COLUMNS, as rounds one to seven did (0.49 ms a query:
// polled every millisecond, it kept a third of one of the downstream's two cores busy while the owner's
// statements ran there). Then the round waits until
// the lock is gone from etcd and a row written on each source after its DDLs is downstream.
//
// From the workers' lock trace (worker/trace.go) and a watch on the pessimist keys it prints, per round
// and as medians, where the time goes; alter is the owner's downstream ALTER as the worker timed it, and
// overhead is latency minus alter. Knobs: TRIBUTARY_LATENCY_SOURCES (default "2,8"),
// TRIBUTARY_LATENCY_ROUNDS (20, after one warm-up round that is printed but not counted),
// TRIBUTARY_LATENCY_BIN (prebuilt dm-master, dm-worker and dmctl; default: built from this module),
// TRIBUTARY_LATENCY_SETTLE (100ms: pause before the last ALTER, so that the 50 ms flush tick's
// checkpoint write of the row before it has passed), TRIBUTARY_LATENCY_MARIADB_ARGS (mariadbd options
// of every instance; default --innodb-flush-log-at-trx-commit=2 as side-by-side.sh; "" for the
// harness's durable defaults), TRIBUTARY_LATENCY_LOG_LEVEL (the workers' --log-level, default debug for
// the trace; info measures without it: the trace's log writes cost about 2 ms a lock at 8 sources). twin is the same ALTER run by the benchmark on an empty table of db.t's
// shape after each round: the DDL's own time for binaries without the trace; "etcd put (twin)" is one
// put of a key nobody watches after the same idle time as the info put had, etcd's own share of that
// step. watch-events/lock is what the master's etcd sent to all watches over the rounds, per lock. Run:
//
//	go test -run XXX -bench LockLatency -benchtime 1x ./integration/
func BenchmarkLockLatency(b *testing.B) {
	e2e.SkipShort(b)
	counts := []int{2, 8}
	if v := os.Getenv("TRIBUTARY_LATENCY_SOURCES"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("TRIBUTARY_LATENCY_SOURCES %q: want source counts of at least 2", v)
			}
			counts = append(counts, n)
		}
	}
	rounds := envInt(b, "TRIBUTARY_LATENCY_ROUNDS", 20)
	poll := envDuration(b, "TRIBUTARY_LATENCY_POLL", time.Millisecond)
	settle := envDuration(b, "TRIBUTARY_LATENCY_SETTLE", 100*time.Millisecond)
	probe := cmp.Or(os.Getenv("TRIBUTARY_LATENCY_PROBE"), "select")
	if probe != "select" && probe != "columns" {
		b.Fatalf("TRIBUTARY_LATENCY_PROBE %q: want select or columns", probe)
	}
	mariadbArgs, ok := os.LookupEnv("TRIBUTARY_LATENCY_MARIADB_ARGS")
	if !ok {
		mariadbArgs = "--innodb-flush-log-at-trx-commit=2"
	}
	bin := os.Getenv("TRIBUTARY_LATENCY_BIN")
	if bin == "" {
		dir, err := os.MkdirTemp("", "tributary-bench-bin-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		if err := e2e.Build(root, dir); err != nil {
			b.Fatal(err)
		}
		bin = dir
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lb := startLatencyBench(b, bin, n, mariadbArgs)
				lb.run(rounds, poll, settle, probe)
				lb.close()
			}
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s %q: want a positive number", name, v)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s %q: %v", name, v, err)
	}
	return d
}

type latencyBench struct {
	b     *testing.B
	c     *e2e.Cluster
	n     int
	cli   *clientv3.Client
	watch *keyWatch
	stop  context.CancelFunc
}

// keyWatch records every change of the pessimist keys with the time this process saw it.
type keyWatch struct {
	mu     sync.Mutex
	events []keyEvent
}

type keyEvent struct {
	at     time.Time
	kind   string // "info" or "op"
	source string
	del    bool
	exec   bool // op: exec (not skip)
	done   bool // op: done
}

func (w *keyWatch) since(t time.Time) []keyEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []keyEvent
	for _, e := range w.events {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// infos returns the sources whose info is present now (by the events so far).
func (w *keyWatch) infos() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string]bool{}
	for _, e := range w.events {
		if e.kind == "info" {
			m[e.source] = !e.del
		}
	}
	for s, ok := range m {
		if !ok {
			delete(m, s)
		}
	}
	return m
}

// keysLeft reports whether any info or operation key of the lock is present.
func (w *keyWatch) keysLeft() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	present := map[string]bool{}
	for _, e := range w.events {
		present[e.kind+"/"+e.source] = !e.del
	}
	for _, p := range present {
		if p {
			return true
		}
	}
	return false
}

func startLatencyBench(b *testing.B, bin string, n int, mariadbArgs string) *latencyBench {
	b.Helper()
	level := cmp.Or(os.Getenv("TRIBUTARY_LATENCY_LOG_LEVEL"), "debug") // info: no trace, no breakdown
	c, err := e2e.Start(e2e.Options{Bin: bin, Upstreams: n, Workers: n, TaskMode: "incremental", WorkerArgs: []string{"--log-level", level},
		MariaDBArgs: strings.Fields(mariadbArgs)})
	if err != nil {
		b.Fatal(err)
	}
	lb := &latencyBench{b: b, c: c, n: n, watch: &keyWatch{}}
	// The harness logs every downstream statement for the tests; a benchmark measures without.
	if _, err := c.DownDB.Exec("SET GLOBAL general_log = 0"); err != nil {
		lb.fail(err)
	}
	c.DownDB.SetMaxOpenConns(4)
	// twin has the shape of db.t and gets the same ALTER after each round: the DDL's own time, measured
	// alike for any binaries (the trace's alter is the owner's own measure of the real one).
	if _, err := c.DownDB.Exec("CREATE DATABASE IF NOT EXISTS db"); err != nil {
		lb.fail(err)
	}
	if _, err := c.DownDB.Exec("CREATE TABLE db.twin (id INT PRIMARY KEY, v VARCHAR(32))"); err != nil {
		lb.fail(err)
	}
	for i := range c.Ups {
		db := fmt.Sprintf("db_%d", i+1)
		if err := c.Exec(i, "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".t_1 (id INT PRIMARY KEY, v VARCHAR(32))",
			"CREATE TABLE "+db+".t_2 (id INT PRIMARY KEY, v VARCHAR(32))"); err != nil {
			lb.fail(err)
		}
		f, err := c.SourceFile(i)
		if err != nil {
			lb.fail(err)
		}
		lb.dmctl("operate-source", "create", f)
	}
	f, err := c.TaskFile("shard")
	if err != nil {
		lb.fail(err)
	}
	lb.dmctl("start-task", f)
	if _, err := c.Until(90*time.Second, func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			if s.Str("stage") != "Running" {
				return false
			}
		}
		return len(subs) == n
	}, "query-status", "shard"); err != nil {
		lb.fail(err)
	}
	lb.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{c.Master.Addr}, DialTimeout: 10 * time.Second})
	if err != nil {
		lb.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lb.stop = cancel
	root := pessimist.NewLayout("").Root()
	wch := lb.cli.Watch(ctx, root, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	<-wch // created
	go func() {
		for wr := range wch {
			now := time.Now()
			for _, ev := range wr.Events {
				segs := strings.Split(strings.TrimPrefix(string(ev.Kv.Key), root), "/")
				if len(segs) != 4 || (segs[0] != "info" && segs[0] != "op") {
					continue
				}
				e := keyEvent{at: now, kind: segs[0], source: segs[3], del: ev.Type == clientv3.EventTypeDelete}
				if e.kind == "op" && !e.del {
					var op pessimist.Operation
					if json.Unmarshal(ev.Kv.Value, &op) == nil {
						e.exec, e.done = op.Exec, op.Done
					}
				}
				lb.watch.mu.Lock()
				lb.watch.events = append(lb.watch.events, e)
				lb.watch.mu.Unlock()
			}
		}
	}()
	return lb
}

func (lb *latencyBench) fail(err error) {
	lb.b.Helper()
	for _, p := range append(append([]*e2e.Proc{}, lb.c.Masters...), lb.c.Workers...) {
		lb.b.Logf("--- %s log (last lines):\n%s", p.Name, e2e.Tail(p.LogFile, 20))
	}
	lb.close()
	lb.b.Fatal(err)
}

func (lb *latencyBench) close() {
	if lb.stop != nil {
		lb.stop()
	}
	if lb.cli != nil {
		lb.cli.Close()
	}
	lb.c.Close()
}

func (lb *latencyBench) dmctl(args ...string) {
	lb.b.Helper()
	r, out, err := lb.c.Dmctl(args...)
	if err != nil {
		lb.fail(err)
	}
	if !r.Bool("result") {
		lb.fail(fmt.Errorf("dmctl %s: %s", strings.Join(args, " "), out))
	}
}

// pollEvery polls cond every interval until it holds (60 s at most). A measurement, not a wait: the
// fixed interval (1 ms, or TRIBUTARY_LATENCY_POLL) is the resolution of the latencies measured, which
// wait.Until's backing off would coarsen.
func (lb *latencyBench) pollEvery(what string, every time.Duration, cond func() (bool, error)) {
	lb.b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			lb.fail(fmt.Errorf("%s: %w", what, err))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			lb.fail(fmt.Errorf("%s: not after 60s", what))
		}
		time.Sleep(every)
	}
}

func (lb *latencyBench) rowsDown(ids []int) (bool, error) {
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.Itoa(id)
	}
	var n int
	err := lb.c.DownDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id IN (" + strings.Join(args, ",") + ")").Scan(&n)
	return n == len(ids), err
}

// benchIdleKey is outside every prefix a process of the cluster watches.
const benchIdleKey = "/tributary-bench/idle-put"

// round is one measured lock.
type round struct {
	start, committed, visible time.Time // before and after the last upstream ALTER; column seen downstream
	last                      string    // the last source
	twin                      float64   // ms of the same ALTER on db.twin
	etcdPut                   float64   // ms of one etcd put by this process after settle's idle time
}

func (lb *latencyBench) run(rounds int, poll, settle time.Duration, probe string) {
	c, last := lb.c, lb.n-1
	var rs []round
	sentBefore := lb.watchEventsSent()
	for r := 0; r <= rounds; r++ { // round 0 warms up
		col := fmt.Sprintf("lc%d", r)
		var wg sync.WaitGroup
		errs := make([]error, lb.n)
		for i := 0; i < last; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.Exec(i, fmt.Sprintf("ALTER TABLE db_%d.t_1 ADD COLUMN %s INT", i+1, col), fmt.Sprintf("ALTER TABLE db_%d.t_2 ADD COLUMN %s INT", i+1, col))
			}()
		}
		wg.Wait()
		marker := 1_000_000 + r
		if err := c.Exec(last, fmt.Sprintf("ALTER TABLE db_%d.t_1 ADD COLUMN %s INT", last+1, col),
			fmt.Sprintf("INSERT INTO db_%d.t_2 (id, v) VALUES (%d, 'marker')", last+1, marker)); err != nil {
			errs[last] = err
		}
		for _, err := range errs {
			if err != nil {
				lb.fail(err)
			}
		}
		lb.pollEvery("the other sources' infos and the last source past its first DDL", time.Millisecond, func() (bool, error) {
			if len(lb.watch.infos()) != last {
				return false, nil
			}
			return lb.rowsDown([]int{marker})
		})
		time.Sleep(settle)
		var rd round
		rd.last = e2e.SourceID(last)
		rd.start = time.Now()
		if err := c.Exec(last, fmt.Sprintf("ALTER TABLE db_%d.t_2 ADD COLUMN %s INT", last+1, col)); err != nil {
			lb.fail(err)
		}
		rd.committed = time.Now()
		lb.pollEvery("column "+col+" downstream", poll, func() (bool, error) {
			if probe == "columns" {
				var n int
				err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = ?", col).Scan(&n)
				rd.visible = time.Now()
				return n == 1, err
			}
			rows, err := c.DownDB.Query("SELECT `" + col + "` FROM db.t LIMIT 0")
			rd.visible = time.Now()
			if err != nil {
				var me *mysql.MySQLError
				if errors.As(err, &me) && me.Number == 1054 { // unknown column: not yet
					return false, nil
				}
				return false, err
			}
			return true, rows.Close()
		})
		lb.pollEvery("lock "+col+" gone from etcd", time.Millisecond, func() (bool, error) { return !lb.watch.keysLeft(), nil })
		// Every source resumed after the lock: a row written after its DDLs arrives.
		var ids []int
		for i := range c.Ups {
			id := 2_000_000 + r*1000 + i
			ids = append(ids, id)
			if err := c.Exec(i, fmt.Sprintf("INSERT INTO db_%d.t_1 (id, v) VALUES (%d, 'after')", i+1, id)); err != nil {
				lb.fail(err)
			}
		}
		lb.pollEvery("rows after the lock downstream", time.Millisecond, func() (bool, error) { return lb.rowsDown(ids) })
		t := time.Now()
		if _, err := c.DownDB.Exec("ALTER TABLE db.twin ADD COLUMN " + col + " INT"); err != nil {
			lb.fail(err)
		}
		rd.twin = float64(time.Since(t).Microseconds()) / 1000
		// One etcd put after the same idle time as the last shard's info put had: etcd's own share of it.
		time.Sleep(settle)
		t = time.Now()
		if _, err := lb.cli.Put(context.Background(), benchIdleKey, col); err != nil {
			lb.fail(err)
		}
		rd.etcdPut = float64(time.Since(t).Microseconds()) / 1000
		rs = append(rs, rd)
	}
	sent := (lb.watchEventsSent() - sentBefore) / float64(len(rs))
	lb.report(rs)
	fmt.Printf("sources=%d etcd watch events sent per lock: %.1f\n", lb.n, sent)
	lb.b.ReportMetric(sent, "watch-events/lock")
}

// watchEventsSent is the master's etcd count of the events its watches have sent (to the master's own
// coordinator, the workers and this benchmark's watch): the fan-out of every etcd write.
func (lb *latencyBench) watchEventsSent() float64 {
	const name = "etcd_debugging_mvcc_events_total"
	v := scrape(lb.b, "http://"+lb.c.Master.Addr).value(name)
	if v < 0 {
		lb.fail(fmt.Errorf("the master's /metrics has no %s", name))
	}
	return v
}

// traceLine is one "lock trace" line of a worker log.
type traceLine struct {
	Msg    string `json:"msg"`
	Source string `json:"source"`
	Step   string `json:"step"`
	AtUS   int64  `json:"at_us"`
}

func (lb *latencyBench) traces() []traceLine {
	var out []traceLine
	for _, w := range lb.c.Workers {
		f, err := os.Open(w.LogFile)
		if err != nil {
			lb.fail(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"lock trace"`) {
				continue
			}
			var l traceLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				out = append(out, l)
			}
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b traceLine) int { return int(a.AtUS - b.AtUS) })
	return out
}

// report prints each round's path and the medians.
func (lb *latencyBench) report(rs []round) {
	trace := lb.traces()
	// at returns the first trace step of source in [from, to).
	at := func(source, step string, from, to time.Time) (time.Time, bool) {
		for _, l := range trace {
			t := time.UnixMicro(l.AtUS)
			if l.Source == source && l.Step == step && !t.Before(from) && t.Before(to) {
				return t, true
			}
		}
		return time.Time{}, false
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// The path of a lock, each segment from the previous mark: names and values per round.
	segments := []string{"upstream alter", "binlog->ddl read", "->info putting", "->info put", "->info seen", "->exec op seen", "->op received", "->op applying", "->flushed",
		"->ddl prepared", "alter", "->visible (poll)", "done put after alter", "skips seen after done", "lock gone after alter", "re-sync started after alter", "alter (twin)", "etcd put (twin)"}
	values := map[string][]float64{}
	var lat, over, alters, twins, overTwin []float64
	for i, rd := range rs {
		end := rd.visible.Add(10 * time.Second)
		if i+1 < len(rs) {
			end = rs[i+1].start
		}
		evs := lb.watch.since(rd.start)
		var infoSeen, execSeen, doneSeen, skipsSeen, goneAt time.Time
		owner := ""
		skips, left := 0, map[string]bool{}
		for _, e := range evs {
			if !e.at.Before(end) {
				break
			}
			switch {
			case e.kind == "info" && !e.del && e.source == rd.last:
				infoSeen = e.at
			case e.kind == "op" && !e.del && e.exec && !e.done && execSeen.IsZero():
				execSeen, owner = e.at, e.source
			case e.kind == "op" && !e.del && e.exec && e.done:
				doneSeen = e.at
			case e.kind == "op" && !e.del && !e.exec && !e.done:
				if skips++; skips == lb.n-1 {
					skipsSeen = e.at
				}
			}
			left[e.kind+"/"+e.source] = !e.del
			if e.del && !slices.Contains(mapValues(left), true) && goneAt.IsZero() {
				goneAt = e.at
			}
		}
		read, _ := at(rd.last, "ddl read", rd.start, end)
		putting, _ := at(rd.last, "info putting", rd.start, end)
		put, _ := at(rd.last, "info put", rd.start, end)
		recv, _ := at(owner, "op received", rd.start, end)
		applying, _ := at(owner, "op applying", rd.start, end)
		flushed, _ := at(owner, "flushed", rd.start, end)
		prepared, _ := at(owner, "ddl prepared", rd.start, end)
		executed, ok := at(owner, "ddl executed", rd.start, end)
		done, _ := at(owner, "done", rd.start, end)
		var resync time.Time
		for s := range lb.n {
			if t, ok := at(e2e.SourceID(s), "re-sync started", rd.start, end); ok && t.After(resync) {
				resync = t
			}
		}
		l := ms(rd.visible.Sub(rd.committed))
		seg := map[string]float64{"upstream alter": ms(rd.committed.Sub(rd.start)), "alter (twin)": rd.twin, "etcd put (twin)": rd.etcdPut}
		if ok {
			maps.Copy(seg, map[string]float64{
				"binlog->ddl read": ms(read.Sub(rd.committed)), "->info putting": ms(putting.Sub(read)), "->info put": ms(put.Sub(putting)), "->info seen": ms(infoSeen.Sub(put)),
				"->exec op seen": ms(execSeen.Sub(infoSeen)), "->op received": ms(recv.Sub(execSeen)), "->op applying": ms(applying.Sub(recv)),
				"->flushed": ms(flushed.Sub(applying)), "->ddl prepared": ms(prepared.Sub(flushed)), "alter": ms(executed.Sub(prepared)),
				"->visible (poll)": ms(rd.visible.Sub(executed)), "done put after alter": ms(done.Sub(executed)),
				"lock gone after alter": ms(goneAt.Sub(executed)),
			})
			if !skipsSeen.IsZero() { // the owner's done is the others' skip: skip keys only for late sources
				seg["skips seen after done"] = ms(skipsSeen.Sub(doneSeen))
			}
			if !resync.IsZero() {
				seg["re-sync started after alter"] = ms(resync.Sub(executed))
			}
		}
		var parts []string
		for _, name := range segments {
			if v, ok := seg[name]; ok {
				parts = append(parts, fmt.Sprintf("%s %.2f", name, v))
			}
		}
		label := fmt.Sprintf("round %d", i)
		if i == 0 {
			label = "warm-up"
		}
		fmt.Printf("sources=%d %s: latency %.2f ms (owner %s, last %s): %s\n", lb.n, label, l, owner, rd.last, strings.Join(parts, ", "))
		if i == 0 {
			continue
		}
		lat = append(lat, l)
		twins = append(twins, rd.twin)
		overTwin = append(overTwin, l-rd.twin)
		for name, v := range seg {
			values[name] = append(values[name], v)
		}
		if ok {
			alters = append(alters, seg["alter"])
			over = append(over, l-seg["alter"])
		}
	}
	var parts []string
	for _, name := range segments {
		if len(values[name]) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, median(values[name])))
		}
	}
	fmt.Printf("sources=%d medians of %d rounds: %s\n", lb.n, len(lat), strings.Join(parts, ", "))
	lb.b.ReportMetric(median(lat), "ms-median")
	lb.b.ReportMetric(slices.Max(lat), "ms-max")
	lb.b.ReportMetric(median(twins), "twin-alter-ms-median")
	lb.b.ReportMetric(median(overTwin), "overhead-twin-ms-median")
	lb.b.ReportMetric(slices.Max(overTwin), "overhead-twin-ms-max")
	if len(over) > 0 { // the trace's figures (binaries with worker/trace.go)
		lb.b.ReportMetric(median(alters), "alter-ms-median")
		lb.b.ReportMetric(median(over), "overhead-ms-median")
		lb.b.ReportMetric(slices.Max(over), "overhead-ms-max")
	}
}

func mapValues(m map[string]bool) []bool {
	out := make([]bool, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
