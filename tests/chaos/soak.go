package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// Config shapes one soak run.
type Config struct {
	Duration time.Duration // how long the workload, the DDL and the faults run
	Seed     uint64        // the schedule's seed: the same seed replays the same faults, DDL order and workload
	Root     string        // module root (the binaries are built from it unless Bin is set)
	Bin      string        // prebuilt dm-master, dm-worker and dmctl
	Rate     float64       // workload operations a second per source (default 40)
	// FaultGap is the mean time between two faults (default 6s); Faults false runs without any (the
	// checker's own baseline).
	FaultGap time.Duration
	NoFaults bool
	// Settle: once the faults and writes stop, the cluster must resolve every lock and catch up, and
	// fails the run when nothing moves for this long (default 3m).
	Settle time.Duration
	Log    io.Writer
}

// Soak is one run: the cluster, its data, and what the checkers saw.
type Soak struct {
	cfg      Config
	c        *e2e.Cluster
	targets  []*target
	live     map[*shard]*liveShard
	runners  []*ddlRunner
	stats    workStats
	history  *History
	histMu   sync.Mutex
	faults   *injector
	paths    *paths
	status   *statusWatch
	taskFile map[string]string
	logMu    sync.Mutex
	// loadedAfter is how long both tasks' loads took (0: they did not finish within the run).
	loadedAfter atomic.Int64 // nanoseconds
}

// stream numbers of the seeded generators: each part of the schedule draws from its own, so that
// one part's draws do not move another's.
const (
	streamWorkload = iota + 1
	streamDDL      = 100
	streamFaults   = 200
)

func (s *Soak) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.cfg.Seed, stream))
}

func (s *Soak) logf(format string, args ...any) {
	if s.cfg.Log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// Run runs a soak and returns its report; the report's Failures say whether it passed. An error is a
// soak that could not run (the cluster did not start).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 40
	}
	if cfg.FaultGap == 0 {
		cfg.FaultGap = 6 * time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 3 * time.Minute
	}
	// The workload's connections break under every fault; the driver's own complaints about it are noise.
	mysql.SetLogger(&mysql.NopLogger{})
	s := &Soak{cfg: cfg, targets: targets(), live: map[*shard]*liveShard{}, taskFile: map[string]string{}}
	s.logf("soak: seed %d, %s, %.0f operations/s per source", cfg.Seed, cfg.Duration, cfg.Rate)
	s.paths = newPaths()
	defer s.paths.Close()
	c, err := e2e.Start(e2e.Options{Root: cfg.Root, Bin: cfg.Bin, Masters: 3, Workers: 3, Upstreams: 3, TaskMode: "all", KeepaliveTTL: 3,
		WorkerJoin: s.paths.join})
	if err != nil {
		return nil, fmt.Errorf("start the cluster: %w", err)
	}
	defer c.Close()
	s.c = c
	var upPorts []int
	for _, up := range c.Ups {
		upPorts = append(upPorts, up.Port)
	}
	if err := s.paths.route(upPorts, c.Down.Port); err != nil {
		return nil, err
	}
	// The general log would log every row of the workload; the downstream's binlog says which DDLs ran.
	if _, err := c.DownDB.Exec("SET GLOBAL general_log = 0"); err != nil {
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Seed: cfg.Seed, Duration: cfg.Duration}
	before, err := downstreamObjects(ctx, c.DownDB)
	if err != nil {
		return nil, err
	}
	stopWatch, err := s.watch(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.startTasks(); err != nil {
		return nil, err
	}
	s.status = &statusWatch{s: s, paused: map[string]time.Time{}}
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	var wg sync.WaitGroup
	// The workload stops with runCtx; the DDL runners finish the step they are in (a DDL half applied
	// to a target's shards would be a lock nobody completes), then stop.
	ddlStop := make(chan struct{})
	for i := range shardsPerSource {
		w := s.workload(i)
		wg.Add(1)
		go func() { defer wg.Done(); w.run(runCtx) }()
	}
	var ddlWG sync.WaitGroup
	// Shard DDL starts once both tasks' loads are over: DM allows no shard DDL during the full load (a
	// user migrating with DM keeps to that), and the soak holds Tributary to DM's contract there.
	loaded := make(chan struct{})
	go func() {
		start := time.Now()
		if s.waitLoaded(runCtx) {
			took := time.Since(start)
			s.loadedAfter.Store(int64(took))
			s.logf("soak: every subtask is in its sync unit after %s; shard DDL starts", took.Round(time.Millisecond))
			close(loaded)
		}
	}()
	for ti, t := range s.targets {
		r := s.runner(ti, t)
		ddlWG.Add(1)
		go func() {
			defer ddlWG.Done()
			select {
			case <-loaded:
			case <-ddlStop:
				return
			}
			pause := func() time.Duration { return time.Duration(500+r.rng.IntN(3000)) * time.Millisecond }
			for {
				select {
				case <-ddlStop:
					return
				case <-ctx.Done():
					return
				default:
				}
				r.step(ctx, pause)
			}
		}()
	}
	statusCtx, stopStatus := context.WithCancel(ctx)
	defer stopStatus()
	go s.status.run(statusCtx)
	s.faults = &injector{s: s, rng: s.rng(streamFaults), counts: map[string]int{}}
	if !cfg.NoFaults {
		wg.Add(1)
		go func() { defer wg.Done(); s.faults.run(runCtx) }()
	}
	<-runCtx.Done()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	wg.Wait() // workloads stopped, faults healed
	close(ddlStop)
	ddlWG.Wait()
	s.logf("soak: writes, DDL and faults stopped; settling (failing when nothing moves for %s)", cfg.Settle)
	settleErr := s.settle(ctx)
	stopStatus()
	stopWatch()
	rep.fill(s)
	if settleErr != nil {
		rep.Failures = append(rep.Failures, settleErr.Error())
		c.Keep = true
		rep.Failures = append(rep.Failures, s.diagnose(ctx))
	} else {
		rep.Failures = append(rep.Failures, s.checkData(ctx)...)
		rep.Failures = append(rep.Failures, s.checkDDLs(ctx)...)
	}
	after, err := downstreamObjects(ctx, c.DownDB)
	if err != nil {
		rep.Failures = append(rep.Failures, "read the downstream's objects: "+err.Error())
	} else {
		rep.Failures = append(rep.Failures, checkObjects(before, after)...)
	}
	s.histMu.Lock()
	rep.Failures = append(rep.Failures, s.history.Violations()...)
	s.histMu.Unlock()
	if len(rep.Failures) > 0 && !c.Keep {
		c.Keep = true
		rep.Failures = append(rep.Failures, "the processes' logs are kept in "+c.Dir)
	}
	return rep, nil
}

// prepare creates the upstream tables and their first rows (the load copies them), and the sources.
func (s *Soak) prepare(ctx context.Context) error {
	for _, t := range s.targets {
		for _, sh := range t.shards {
			db := s.c.UpDBs[sh.source]
			for _, q := range []string{"CREATE DATABASE IF NOT EXISTS `" + sh.schema + "`", createShard(t, sh)} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("upstream %d: %s: %w", sh.source+1, q, err)
				}
			}
			l := &liveShard{t: t, s: sh, mu: &sync.Mutex{}}
			s.live[sh] = l
			w := &workload{rng: s.rng(streamWorkload + 50), db: db, stats: &s.stats}
			for i := 0; i < 4; i++ {
				if err := w.exec(ctx, w.insert(l, 250, false)); err != nil {
					return err
				}
			}
		}
	}
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS solo", createSolo} {
		if _, err := s.c.UpDBs[0].ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for i := range shardsPerSource {
		path, err := s.c.SourceFileVia(i, i == 0, s.paths.ups[i].Port()) // GTID on the first source, positions on the others
		if err != nil {
			return err
		}
		if _, out, err := s.c.Dmctl("operate-source", "create", path); err != nil {
			return fmt.Errorf("operate-source create %s: %v: %s", path, err, out)
		}
	}
	return nil
}

func (s *Soak) startTasks() error {
	main, second, err := writeTaskFiles(s.c.Dir, s.paths.down.Port())
	if err != nil {
		return err
	}
	s.taskFile[taskMain], s.taskFile[taskSecond] = main, second
	for _, f := range []string{main, second} {
		r, out, err := s.c.Dmctl("start-task", f)
		if err != nil || !r.Bool("result") {
			return fmt.Errorf("start-task %s: %v: %s", f, err, out)
		}
	}
	return nil
}

func (s *Soak) workload(src int) *workload {
	w := &workload{rng: s.rng(streamWorkload + uint64(src)), db: s.c.UpDBs[src], src: src, solo: src == 0, rate: s.cfg.Rate, bigEvery: 90 * time.Second, stats: &s.stats}
	for _, t := range s.targets {
		for _, sh := range t.shards {
			if sh.source == src {
				w.shards = append(w.shards, s.live[sh])
			}
		}
	}
	return w
}

func (s *Soak) runner(i int, t *target) *ddlRunner {
	r := &ddlRunner{rng: s.rng(streamDDL + uint64(i)), t: t, indexed: map[string]bool{}, dbs: s.c.UpDBs, logf: s.logf}
	for _, up := range s.c.Ups {
		r.ports = append(r.ports, up.Port)
	}
	if p, err := exec.LookPath("pt-online-schema-change"); err == nil {
		r.ptOSC = p
	}
	for _, sh := range t.shards {
		r.live = append(r.live, s.live[sh])
	}
	s.runners = append(s.runners, r)
	return r
}

// dmctl runs a command on the first master that answers.
func (s *Soak) dmctl(args ...string) (e2e.Result, string, error) {
	var errs []error
	for _, m := range s.c.Masters {
		r, out, err := e2e.Dmctl(s.c.Bin, m.Addr, append([]string{"--rpc-timeout", "20s"}, args...)...)
		if err == nil {
			return r, out, nil
		}
		errs = append(errs, err)
	}
	return nil, "", errors.Join(errs...)
}

// watch follows the pessimist keys in etcd from now on into the history checker; stop ends it.
func (s *Soak) watch(ctx context.Context) (stop func(), err error) {
	var eps []string
	for _, m := range s.c.Masters {
		eps = append(eps, m.Addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	layout := pessimist.NewLayout("")
	resp, err := cli.Get(ctx, layout.Root(), clientv3.WithPrefix())
	if err != nil {
		cli.Close()
		return nil, err
	}
	keys := map[string][]byte{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv.Value
	}
	s.history = NewHistory(layout, keys)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		from := resp.Header.Revision + 1
		for wctx.Err() == nil {
			wch := cli.Watch(wctx, layout.Root(), clientv3.WithPrefix(), clientv3.WithRev(from))
			for wr := range wch {
				if err := wr.Err(); err != nil {
					if wr.CompactRevision > 0 {
						// Only a compacted history loses events: the rest of the run is not checked.
						s.histMu.Lock()
						s.history.fail(from, "the lock keys' history was compacted at %d before the watch read it (%v): the history from here is not checked", wr.CompactRevision, err)
						s.histMu.Unlock()
						return
					}
					// No leader (a quorum loss), a member gone: watch again from the next revision.
					s.logf("watch: %v; watching again from revision %d", err, from)
					break
				}
				s.applyWatch(wr.Events)
				if n := len(wr.Events); n > 0 {
					from = wr.Events[n-1].Kv.ModRevision + 1
				}
			}
			select {
			case <-wctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done; cli.Close() }, nil
}

// applyWatch feeds one watch response's events, grouped by revision, to the history.
func (s *Soak) applyWatch(evs []*clientv3.Event) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	now := time.Now()
	for i := 0; i < len(evs); {
		rev := evs[i].Kv.ModRevision
		var batch []Event
		for ; i < len(evs) && evs[i].Kv.ModRevision == rev; i++ {
			e := Event{Key: string(evs[i].Kv.Key)}
			if evs[i].Type == clientv3.EventTypePut {
				e.Value = evs[i].Kv.Value
				if e.Value == nil {
					e.Value = []byte{}
				}
			}
			batch = append(batch, e)
		}
		s.history.Apply(rev, now, batch)
	}
}

// waitLoaded returns true once every subtask of both tasks is in its sync unit, false when ctx ends
// before.
func (s *Soak) waitLoaded(ctx context.Context) bool {
	for ctx.Err() == nil {
		all := true
		for _, task := range []string{taskMain, taskSecond} {
			r, _, err := s.dmctl("query-status", task)
			n := 0
			if err == nil {
				for _, src := range r.List("sources") {
					for _, st := range src.List("subTaskStatus") {
						n++
						all = all && st.Str("unit") == "Sync"
					}
				}
			}
			all = all && n > 0
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return false
}

// settle waits until every subtask of both tasks runs, has caught up with its source, and no lock is
// left: what the soak's promise says must follow without an operator. Catching up after a run of
// faults can take a while (every lock stalls its target until each source reaches it); settle fails
// when nothing moved (no lock, stage or position changed) for the Settle time, or after 30 minutes.
func (s *Soak) settle(ctx context.Context) error {
	start := time.Now()
	moved := time.Now()
	var last, seen string
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ok, why, state := s.quiet()
		if ok {
			s.logf("soak: settled after %s", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if state != seen {
			seen, moved = state, time.Now()
		}
		last = why
		switch {
		case time.Since(moved) > s.cfg.Settle:
			return fmt.Errorf("not settled: nothing moved for %s (%s after the faults stopped): %s", s.cfg.Settle, time.Since(start).Round(time.Second), last)
		case time.Since(start) > 30*time.Minute:
			return fmt.Errorf("not settled 30m after the faults stopped: %s", last)
		}
		time.Sleep(2 * time.Second)
	}
}

// quiet reports whether the cluster has nothing left to do, or why not, and a summary of its state
// (locks, stages and positions) that changes when anything moves.
func (s *Soak) quiet() (bool, string, string) {
	r, out, err := s.dmctl("shard-ddl-lock")
	if err != nil {
		return false, err.Error(), ""
	}
	var state strings.Builder
	quiet, why := true, ""
	for _, l := range r.List("locks") {
		fmt.Fprintf(&state, "%s %s %v;", l.Str("ID"), l.Str("stage"), l.Strings("DDLs"))
		quiet, why = false, "locks left: "+strings.TrimSpace(out)
	}
	for _, task := range []string{taskMain, taskSecond} {
		r, out, err := s.dmctl("query-status", task)
		if err != nil {
			return false, err.Error(), state.String()
		}
		for _, src := range r.List("sources") {
			subs := src.List("subTaskStatus")
			if len(subs) == 0 {
				// No worker answered for the source (unbound, offline, not answering) or its worker
				// runs no subtask of the task: nothing of it is caught up.
				fmt.Fprintf(&state, "%s %s none %s;", task, src.Get("sourceStatus").Str("source"), src.Str("msg"))
				if quiet {
					quiet, why = false, fmt.Sprintf("task %s source %s: no subtask status (%s): %s", task, src.Get("sourceStatus").Str("source"),
						src.Str("msg"), clip(out, 2000))
				}
			}
			for _, st := range subs {
				sync := st.Get("sync")
				fmt.Fprintf(&state, "%s %s %s %s;", task, st.Str("stage"), st.Str("unit"), sync.Str("syncerBinlog"))
				if quiet && (st.Str("stage") != "Running" || st.Str("unit") != "Sync" || sync == nil || sync.Str("masterBinlog") != sync.Str("syncerBinlog")) {
					quiet, why = false, fmt.Sprintf("task %s source %s: stage %s unit %s, master %s, syncer %s: %s", task, src.Get("sourceStatus").Str("source"),
						st.Str("stage"), st.Str("unit"), sync.Str("masterBinlog"), sync.Str("syncerBinlog"), clip(out, 2000))
				}
			}
		}
	}
	return quiet, why, state.String()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// downTables is where the soak's targets live downstream, by task.
var downSchemas = map[string]bool{"merged": true, "merged2": true, "solo": true, "dm_meta": true}

// downstreamObjects lists the downstream's schemas and tables (the system schemas left out).
func downstreamObjects(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT CONCAT(s.SCHEMA_NAME, '.', COALESCE(t.TABLE_NAME, '')) FROM information_schema.SCHEMATA s "+
		"LEFT JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = s.SCHEMA_NAME "+
		"WHERE s.SCHEMA_NAME NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY 1")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// checkObjects: nothing downstream was dropped, and nothing was created but the tasks' targets and
// meta tables.
func checkObjects(before, after []string) []string {
	var bad []string
	had := map[string]bool{}
	for _, o := range before {
		had[o] = true
	}
	now := map[string]bool{}
	for _, o := range after {
		now[o] = true
		schema, table, _ := strings.Cut(o, ".")
		if had[o] || downSchemas[schema] && (schema == "dm_meta" || table == "" || expectedTable(schema, table)) {
			continue
		}
		bad = append(bad, "downstream object not the tasks': "+o)
	}
	for _, o := range before {
		if !now[o] {
			bad = append(bad, "downstream object dropped: "+o)
		}
	}
	return bad
}

func expectedTable(schema, table string) bool {
	switch schema {
	case "merged":
		return table == "orders" || table == "events"
	case "merged2":
		return table == "entries"
	case "solo":
		return table == "accounts"
	}
	return false
}
