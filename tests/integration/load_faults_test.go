package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

// The fault matrix of a full load (task-mode all): every shard holds rows before the task starts and
// writers change the shards (inserts, value and key updates, deletes, across each shard's key range)
// during the whole load. A process is held at one step of the load, or of its cut-over lock on the
// master, and a process is killed with -9 there and restarted. Each cell checks that the downstream
// equals the merged upstream value by value, without a duplicate; that the hidden table is gone and
// db.t is there, renamed into place by exactly one RENAME TABLE; that no lock is left and the task is
// Running and synced; and that db.t was never visible before the cut-over: not while a process was
// held before the rename, and never beside its hidden table.
//
// `make test` runs one cell per step, killing the held process. `make test-faults`
// (TRIBUTARY_FAULTS=all) also kills the other processes at each step, TRIBUTARY_FAULT_RUNS times
// (even runs use GTID sources). TestLoadFaultsFirstPlans forces, with locks, an interleaving of two
// sources' first plans that the matrix met about once in 40 cells.

type lfStep struct {
	name, failpoint string
	renamed         bool   // the hidden tables are renamed into place when the failpoint is reached
	holder          string // who is held there: "worker" (found from the cut-over lock) or "master"
}

var lfSteps = []lfStep{
	{"chunk written not committed", "load-chunk-written", false, "worker"},
	{"between chunks", "load-chunk-committed", false, "worker"},
	{"source loaded before its cut-over info", "load-loaded", false, "worker"},
	{"all loaded before the exec op", "master-before-exec", false, "master"},
	{"owner renamed before its sync checkpoint", "load-renamed", true, "worker"},
	{"owner switched before done", "load-switched", true, "worker"},
}

// Victims: the held process first (the cell `make test` runs), then the others.
var (
	lfWorkerVictims = []string{"held worker", "other worker", "leader master"}
	lfMasterVictims = []string{"leader master", "owner worker", "non-owner worker"}
)

const (
	lfShardRows = 4000 // rows in each shard table before the task starts
	lfChunkRows = 500  // mydumpers rows
	lfIDSpan    = 100_000
)

func TestLoadFaults(t *testing.T) {
	all := os.Getenv("TRIBUTARY_FAULTS") == "all"
	runs := 1
	if n, err := fmt.Sscan(os.Getenv("TRIBUTARY_FAULT_RUNS"), &runs); n != 1 || err != nil || runs < 1 {
		runs = 1
	}
	for _, step := range lfSteps {
		victims := lfWorkerVictims
		if step.holder == "master" {
			victims = lfMasterVictims
		}
		for j, victim := range victims {
			if !all && j != 0 {
				continue
			}
			for run := 0; run < runs; run++ {
				gtid := run%2 == 1
				t.Run(fmt.Sprintf("%s/kill %s/run %d gtid=%t", step.name, victim, run+1, gtid), func(t *testing.T) {
					start := time.Now()
					lfCell(t, step, victim, gtid, int64(run+1))
					t.Logf("cell took %s", time.Since(start).Round(100*time.Millisecond))
				})
			}
		}
	}
}

// lfTaskFile is the harness's shard-merge task in task-mode all, each instance reading its source
// with mydumpers m (2 threads, chunks of lfChunkRows rows: lfOptions).
func (c *e2eCluster) lfTaskFile() string {
	c.t.Helper()
	f, err := c.TaskFile(c.task)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// lfOtherSource is the task's source that is not s.
func lfOtherSource(s string) string {
	if s == s1 {
		return s2
	}
	return s1
}

// lfOptions are the cluster options of the load fault tests.
func lfOptions(o e2e.Options) e2e.Options {
	o.Workers, o.TaskMode = 2, "all"
	o.TaskExtra = fmt.Sprintf("mydumpers:\n  m:\n    threads: 2\n    rows: %d\n", lfChunkRows)
	o.InstanceExtra = "    mydumper-config-name: m\n"
	return o
}

func lfCell(t *testing.T, step lfStep, victim string, gtid bool, seed int64) {
	fps := []string{step.failpoint}
	if step.failpoint == "master-before-exec" {
		// Only the coordinator's path has this step: the workers leave the exec to it (otherwise the
		// info that completes the cut-over lock writes the exec itself).
		fps = append(fps, "agent-coordinated")
	}
	c := startWith(t, lfOptions(e2e.Options{GTID: gtid, Failpoints: fps}), false)
	shards := []lfShard{{0, "db_1.t_1"}, {0, "db_1.t_2"}, {1, "db_2.t_1"}, {1, "db_2.t_2"}}
	w := newLFWriters(c, shards, seed)
	target := vocab.TableName{Schema: "db", Name: "t"}
	hidden := vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, target)}
	mon := lfWatchCutover(c, hidden.Name)
	defer mon.stop()

	w.start()
	defer w.stop()
	r := c.ok("start-task", c.lfTaskFile())
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	if err := c.Reached(step.failpoint, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if !step.renamed {
		mon.held.Store(true)
	}

	// Who is held, who owns the cut-over.
	var lock e2e.Result
	if step.holder == "worker" && !step.renamed {
		// The held source never puts its cut-over info; the other one loads and puts it.
		lock = c.lfWaitCutoverLock(func(l e2e.Result) bool { return len(l.Strings("synced")) == 1 && len(l.Strings("unsynced")) == 1 })
	} else {
		lock = c.lfWaitCutoverLock(func(l e2e.Result) bool { return len(l.Strings("synced")) == 2 })
	}
	var heldSource string
	switch {
	case step.holder == "master":
	case step.renamed: // only the owner renames; a non-owner switches only after the owner's done
		heldSource = lock.Str("owner")
	default:
		heldSource = lock.Strings("unsynced")[0]
	}
	owner := lock.Str("owner")
	if owner != s1 && owner != s2 {
		t.Fatalf("the cut-over lock names no source as owner: %v", lock)
	}
	held := "the master"
	if heldSource != "" {
		held = "the worker of " + heldSource
	}
	t.Logf("%s held at %s; cut-over lock: owner %s, synced %v", held, step.failpoint, owner, lock.Strings("synced"))
	c.lfCheckVisibility(step.renamed, target, hidden)

	var proc *e2e.Proc
	switch victim {
	case "leader master":
		proc = c.Master
	case "held worker":
		proc = c.Worker(c.workerOf(heldSource))
	case "other worker":
		proc = c.Worker(c.workerOf(lfOtherSource(heldSource)))
	case "owner worker":
		proc = c.Worker(c.workerOf(owner))
	case "non-owner worker":
		proc = c.Worker(c.workerOf(lfOtherSource(owner)))
	default:
		t.Fatalf("victim %q", victim)
	}
	w.waitProgress() // the writers change the shards while the process is held
	proc.Kill9()
	w.waitProgress() // and while it is down
	c.lfCheckVisibility(step.renamed, target, hidden)
	mon.held.Store(false)
	if err := c.Release(step.failpoint); err != nil {
		t.Fatal(err)
	}
	if err := proc.Restart(); err != nil {
		t.Fatal(err)
	}

	// The load and the cut-over complete while the writers go on; then the writers stop and the
	// downstream must catch up with them.
	c.until("cut-over done and both sources syncing", func(r e2e.Result) bool {
		subs := subtasks(r)
		if len(subs) != len(c.Ups) {
			return false
		}
		for _, s := range subs {
			if s.Str("stage") != "Running" || s.Str("unit") != "Sync" {
				return false
			}
		}
		l, _, err := c.Dmctl("shard-ddl-lock", c.task)
		return err == nil && l.Bool("result") && len(l.List("locks")) == 0
	}, "query-status", c.task)
	w.waitProgress()
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	n := c.converge("id, v")
	c.waitSynced()
	if want := w.rows(); n != want {
		t.Fatalf("%d rows downstream, the writers left %d", n, want)
	}
	var rows, keys int
	if err := c.DownDB.QueryRow("SELECT COUNT(*), COUNT(DISTINCT id) FROM db.t").Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Fatalf("db.t has %d rows for %d keys", rows, keys)
	}
	if tables := lfDownTables(t, c.DownDB, "db"); !slices.Equal(tables, []string{"t"}) {
		t.Fatalf("downstream schema db holds %v after the load, want only t", tables)
	}
	if n, err := c.DownstreamStatements("RENAME TABLE"); err != nil || n != 1 {
		t.Fatalf("%d RENAME TABLE statements ran downstream (%v), want 1", n, err)
	}
	if err := mon.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows; writers: %s", n, w.summary())
}

// lfWaitCutoverLock waits until the task's only lock is the load cut-over and ok accepts it.
func (c *e2eCluster) lfWaitCutoverLock(ok func(e2e.Result) bool) e2e.Result {
	c.t.Helper()
	r := c.until("the cut-over lock", func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && strings.Contains(locks[0].Str("ID"), "`dm_meta`.`load_cutover`") && ok(locks[0])
	}, "shard-ddl-lock", c.task)
	return r.List("locks")[0]
}

// lfCheckVisibility checks the downstream before and after the cut-over: before, the rows are in the
// hidden table and db.t does not exist; after, db.t exists and the hidden table does not.
func (c *e2eCluster) lfCheckVisibility(renamed bool, target, hidden vocab.TableName) {
	c.t.Helper()
	tables := lfDownTables(c.t, c.DownDB, target.Schema)
	hasT, hasHidden := slices.Contains(tables, target.Name), slices.Contains(tables, hidden.Name)
	switch {
	case !renamed && (hasT || !hasHidden):
		c.t.Fatalf("before the cut-over the downstream schema %s holds %v: want %s and not %s", target.Schema, tables, hidden.Name, target.Name)
	case renamed && (!hasT || hasHidden):
		c.t.Fatalf("after the cut-over the downstream schema %s holds %v: want %s and not %s", target.Schema, tables, target.Name, hidden.Name)
	}
}

func lfDownTables(t *testing.T, db *sql.DB, schema string) []string {
	t.Helper()
	tables, err := e2e.Rows(db, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+schema+"'")
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// lfWatch polls the downstream's tables during a cell: db.t must never exist while a process is
// held before the rename (held), nor beside the hidden table, and once there it must stay.
type lfWatch struct {
	held    atomic.Bool
	once    sync.Once
	quit    chan struct{}
	done    chan error
	stopErr error
}

func lfWatchCutover(c *e2eCluster, hidden string) *lfWatch {
	m := &lfWatch{quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		seen := false
		var polls, both, gone int // both, gone: consecutive polls (a directory listing during the RENAME may show a name twice or miss it)
		for {
			select {
			case <-m.quit:
				if !seen {
					m.done <- fmt.Errorf("db.t never seen by the watch (%d polls)", polls)
					return
				}
				m.done <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			held := m.held.Load()
			tables, err := e2e.Rows(c.DownDB, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db'")
			if err != nil {
				continue
			}
			polls++
			hasT, hasHidden := slices.Contains(tables, "t"), slices.Contains(tables, hidden)
			if hasT && hasHidden {
				both++
			} else {
				both = 0
			}
			if seen && !hasT {
				gone++
			} else {
				gone = 0
			}
			switch {
			case both >= 2:
				m.done <- fmt.Errorf("db.t and its hidden table %s exist at the same time", hidden)
				return
			case hasT && held && m.held.Load():
				m.done <- fmt.Errorf("db.t exists while a process is held before the cut-over")
				return
			case gone >= 2:
				m.done <- fmt.Errorf("db.t vanished after the cut-over: schema db holds %v", tables)
				return
			}
			seen = seen || hasT
		}
	}()
	return m
}

func (m *lfWatch) stop() error {
	m.once.Do(func() {
		close(m.quit)
		m.stopErr = <-m.done
	})
	return m.stopErr
}

// lfShard is an upstream shard table: upstream index and name.
type lfShard struct {
	up    int
	table string
}

// lfWriters fill the shards before the task and change them while it runs: one writer per shard,
// each owning its key span [k*lfIDSpan, (k+1)*lfIDSpan) so that the merged keys stay unique, with
// inserts anywhere in the span (inside chunks already copied and not yet copied, and past the end),
// updates of values, updates of keys to free keys of the span, deletes, and small transactions of
// several of these.
type lfWriters struct {
	c      *e2eCluster
	shards []*lfShardWriter
	quit   chan struct{}
	wg     sync.WaitGroup
	errs   chan error
	ops    atomic.Int64
	once   sync.Once
	err    error
}

type lfShardWriter struct {
	lfShard
	base                       int
	rnd                        *rand.Rand
	ids                        []int
	pos                        map[int]int // id -> index in ids
	n                          int
	ins, upd, moves, dels, txs int
}

func newLFWriters(c *e2eCluster, shards []lfShard, seed int64) *lfWriters {
	w := &lfWriters{c: c, quit: make(chan struct{}), errs: make(chan error, len(shards))}
	for k, s := range shards {
		sw := &lfShardWriter{lfShard: s, base: k * lfIDSpan, rnd: rand.New(rand.NewSource(seed*100 + int64(k))), pos: map[int]int{}}
		var vals []string
		for i := 0; i < lfShardRows; i++ {
			id := sw.base + 3*i // gaps: later inserts land inside the chunks too
			sw.add(id)
			vals = append(vals, fmt.Sprintf("(%d, 'init%d')", id, id))
			if len(vals) == 1000 || i == lfShardRows-1 {
				c.up(s.up, "INSERT INTO "+s.table+" VALUES "+strings.Join(vals, ", "))
				vals = vals[:0]
			}
		}
		w.shards = append(w.shards, sw)
	}
	return w
}

func (s *lfShardWriter) add(id int) { s.pos[id] = len(s.ids); s.ids = append(s.ids, id) }

func (s *lfShardWriter) remove(id int) {
	i := s.pos[id]
	last := s.ids[len(s.ids)-1]
	s.ids[i], s.pos[last] = last, i
	s.ids = s.ids[:len(s.ids)-1]
	delete(s.pos, id)
}

// freeID is a key of the span that no row has: mostly within the initial rows' range, sometimes past it.
func (s *lfShardWriter) freeID() int {
	for {
		id := s.base + s.rnd.Intn(4*lfShardRows)
		if _, ok := s.pos[id]; !ok {
			return id
		}
	}
}

// op returns one statement and applies it to the writer's model.
func (s *lfShardWriter) op() string {
	s.n++
	switch p := s.rnd.Intn(100); {
	case p < 30 || len(s.ids) < 100:
		id := s.freeID()
		s.add(id)
		s.ins++
		return fmt.Sprintf("INSERT INTO %s VALUES (%d, 'ins%d')", s.table, id, s.n)
	case p < 60:
		s.upd++
		return fmt.Sprintf("UPDATE %s SET v = 'upd%d' WHERE id = %d", s.table, s.n, s.ids[s.rnd.Intn(len(s.ids))])
	case p < 80:
		from, to := s.ids[s.rnd.Intn(len(s.ids))], s.freeID()
		s.remove(from)
		s.add(to)
		s.moves++
		return fmt.Sprintf("UPDATE %s SET id = %d, v = 'mov%d' WHERE id = %d", s.table, to, s.n, from)
	default:
		id := s.ids[s.rnd.Intn(len(s.ids))]
		s.remove(id)
		s.dels++
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", s.table, id)
	}
}

func (w *lfWriters) start() {
	for _, s := range w.shards {
		w.wg.Add(1)
		go func(s *lfShardWriter) {
			defer w.wg.Done()
			db := w.c.UpDBs[s.up]
			ctx := context.Background()
			for {
				select {
				case <-w.quit:
					return
				default:
				}
				var err error
				if s.rnd.Intn(10) == 0 {
					s.txs++
					err = lfTx(ctx, db, s.op(), s.op(), s.op())
				} else {
					_, err = db.ExecContext(ctx, s.op())
				}
				if err != nil {
					w.errs <- fmt.Errorf("writer of %s: %w", s.table, err)
					return
				}
				w.ops.Add(1)
				time.Sleep(2 * time.Millisecond) // pace, so that the sync unit catches up in seconds
			}
		}(s)
	}
}

func lfTx(ctx context.Context, db *sql.DB, stmts ...string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			tx.Rollback()
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return tx.Commit()
}

// waitProgress waits until the writers have run some more operations (or one failed).
func (w *lfWriters) waitProgress() {
	w.c.t.Helper()
	from := w.ops.Load()
	wait.Eventually(w.c.t, 30*time.Second, func() bool {
		select {
		case err := <-w.errs:
			w.c.t.Fatal(err)
		default:
		}
		return w.ops.Load() >= from+200
	}, func() string { return fmt.Sprintf("the writers ran %d operations in 30s", w.ops.Load()-from) })
}

func (w *lfWriters) stop() error {
	w.once.Do(func() {
		close(w.quit)
		w.wg.Wait()
		select {
		case w.err = <-w.errs:
		default:
		}
	})
	return w.err
}

func (w *lfWriters) rows() int {
	n := 0
	for _, s := range w.shards {
		n += len(s.ids)
	}
	return n
}

func (w *lfWriters) summary() string {
	var parts []string
	for _, s := range w.shards {
		parts = append(parts, fmt.Sprintf("%s %d ins %d upd %d key-upd %d del (%d txs)", s.table, s.ins, s.upd, s.moves, s.dels, s.txs))
	}
	return strings.Join(parts, "; ")
}

// Two sources planning their first load at the same time. Each source reads the task's load headers
// (the tables other sources load into: loader.hiddenInUse, loader.go plan), then looks, target by
// target in sorted order, whether the target or its hidden table exists downstream (loader.placement),
// then commits its own header, then creates its hidden tables. A hidden table that exists with no
// header naming it is refused as "left from an earlier load ... Drop it". The header read and the looks
// are not atomic: when source 2 has read the headers before source 1 committed its header, and looks
// for db.t's hidden table after source 1 created it, it refuses the table source 1 is loading, and
// tells the user to drop it. Under the writers of TestLoadFaults this happened about once in 40 cells.
//
// Here the interleaving is forced with locks: source 2 also loads db_2.a_0 into a target that exists
// downstream, empty (aa.a_0, routed there by one more route; sorted before db.t; loaded in place), and
// the test holds LOCK TABLES aa.a_0 WRITE downstream, so source 2 waits there, after reading the
// headers and before looking for db.t's hidden table. Source 1's snapshot is held (LOCK TABLES on its upstream blocks its FLUSH TABLES
// WITH READ LOCK) until source 2 waits; it then plans, commits its header and creates the hidden table;
// then source 2 is let go.
func TestLoadFaultsFirstPlans(t *testing.T) {
	c := startWith(t, lfOptions(e2e.Options{}), false)
	for i, tables := range [][]string{{"db_1.t_1", "db_1.t_2"}, {"db_2.t_1", "db_2.t_2"}} {
		for k, tbl := range tables {
			base := (2*i + k) * lfIDSpan
			c.up(i, insertRows(tbl, base, base+1000, ""))
		}
	}
	const inPlace = "CREATE TABLE %s.a_0 (id INT PRIMARY KEY, v VARCHAR(32))"
	c.up(1, fmt.Sprintf(inPlace, "db_2"), insertRows("db_2.a_0", 0, 10, ""))
	for _, q := range []string{"CREATE DATABASE aa", fmt.Sprintf(inPlace, "aa")} {
		if _, err := c.DownDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	conn := func(db *sql.DB, lock string) *sql.Conn {
		t.Helper()
		cn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.Close() })
		if _, err := cn.ExecContext(ctx, lock); err != nil {
			t.Fatal(err)
		}
		return cn
	}
	unlock := func(cn *sql.Conn) {
		t.Helper()
		if _, err := cn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
	}
	waitQuery := func(what string, db *sql.DB, q string, args ...any) {
		t.Helper()
		c.until(what, func(e2e.Result) bool {
			var n int
			return db.QueryRow(q, args...).Scan(&n) == nil && n > 0
		}, "list-member", "--leader")
	}
	gate1 := conn(c.UpDBs[0], "LOCK TABLES db_1.t_1 WRITE")
	gate2 := conn(c.UpDBs[1], "LOCK TABLES db_2.t_1 WRITE")
	task, err := os.ReadFile(c.lfTaskFile())
	if err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(string(task), "route-rules: [route-table, route-schema]", "route-rules: [route-a, route-table, route-schema]")
	body = strings.Replace(body, "routes:\n", "routes:\n  route-a:\n    schema-pattern: db_2\n    table-pattern: a_0\n    target-schema: aa\n    target-table: a_0\n", 1)
	r := c.ok("start-task", c.writeFile("first-plans.yaml", body))
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	for i, db := range c.UpDBs {
		waitQuery(fmt.Sprintf("the snapshot of source %d waits for the read lock", i+1), db,
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'FLUSH TABLES WITH READ LOCK%'")
	}
	if _, err := c.DownDB.Exec("TRUNCATE mysql.general_log"); err != nil {
		t.Fatal(err)
	}
	held := conn(c.DownDB, "LOCK TABLES aa.a_0 WRITE")
	unlock(gate2)
	waitQuery("source 2 waits for aa.a_0 in its plan", c.DownDB,
		"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%`aa`.`a_0`%' AND STATE LIKE 'Waiting for table metadata lock%'")
	unlock(gate1)
	hidden := loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})
	waitQuery("source 1 created "+hidden, c.DownDB, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME = ? AND TABLE_SCHEMA = 'db'", hidden)
	unlock(held)

	c.until("cut-over done and both sources syncing", func(r e2e.Result) bool {
		subs := subtasks(r)
		if len(subs) != len(c.Ups) {
			return false
		}
		for _, s := range subs {
			if s.Str("stage") != "Running" || s.Str("unit") != "Sync" {
				return false
			}
		}
		return true
	}, "query-status", c.task)
	const refused = "is left from an earlier load"
	for _, w := range c.Workers {
		data, _ := os.ReadFile(w.LogFile)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, refused) {
				t.Fatalf("%s refused the hidden table the other source of the task had just created (loader.placement) because it read the load headers before that source's header was committed (loader.hiddenInUse); the subtask stopped on the error (and resumed by itself):\n%s\ndownstream statements (time, connection, what):\n%s", w.Name, l, lfPlanTimeline(t, c.DownDB))
			}
		}
	}
	c.converge("id, v")
	c.waitSynced()
	if rows, err := e2e.Rows(c.DownDB, "SELECT id, v FROM aa.a_0"); err != nil || len(rows) != 10 {
		t.Fatalf("aa.a_0 downstream: %d rows (%v), want 10", len(rows), err)
	}
}

// lfPlanTimeline lists, from the downstream's general log, the statements of the loads' first plans:
// header reads, looks for db.t's hidden table, header writes, its creation.
func lfPlanTimeline(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := e2e.Rows(db, `SELECT CONCAT(DATE_FORMAT(event_time, '%H:%i:%s.%f'), ' ', thread_id, ' ', CASE
		WHEN argument LIKE 'SELECT source, id, % id_hash = %' THEN 'read the load headers'
		WHEN argument LIKE 'SELECT % FROM information\_schema.TABLES % TABLE\_NAME = \'\_tributary\_load\_%\_t\'' THEN 'look for db.t''s hidden table'
		WHEN argument LIKE 'INSERT INTO %shard\_checkpoint% \'load:\'%' THEN 'write its header'
		WHEN argument LIKE 'COMMIT%' THEN 'COMMIT'
		ELSE 'create db.t''s hidden table' END)
		FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND (argument LIKE 'SELECT source, id, % id_hash = %'
		OR argument LIKE 'SELECT % FROM information\_schema.TABLES % TABLE\_NAME = \'\_tributary\_load\_%\_t\''
		OR argument LIKE 'INSERT INTO %shard\_checkpoint% \'load:\'%'
		OR argument LIKE 'CREATE TABLE IF NOT EXISTS %.%\_tributary\_load\_%\_t% (%')`)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(rows, "\n")
}
