package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
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

// The full load (task-mode all and full) through the real binaries: rows already in the shards when
// the task starts are copied in chunks, a merged target stays hidden until every source has loaded,
// then each source syncs its binlog from its snapshot.

// shardTables are the four shard tables of a cluster: upstream index and name.
var shardTables = []struct {
	up    int
	table string
}{{0, "db_1.t_1"}, {0, "db_1.t_2"}, {1, "db_2.t_1"}, {1, "db_2.t_2"}}

// shardBase is the first id of shard k's rows (shards of one merged target must not share a key).
func shardBase(k int) int { return (k + 1) * 1000000 }

// loadExtra is the task's mydumpers and loaders sections: chunks of 500 rows over 4 readers.
const loadExtra = `mydumpers:
  global:
    threads: 4
    rows: 500
loaders:
  global:
    pool-size: 4
`

const chunkCommitted = "load-chunk-committed"

// c.hiddenT() is the name db.t is loaded under by the cluster's task until the cut-over.
func (c *e2eCluster) hiddenT() string {
	return loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})
}

// startLoad starts a cluster in o.TaskMode with the loadExtra sections and n rows in each of the four
// shard tables; the task is not started.
func startLoad(t *testing.T, o e2e.Options, n int) *e2eCluster {
	t.Helper()
	if o.TaskExtra == "" {
		o.TaskExtra = loadExtra
		o.InstanceExtra = "    mydumper-config-name: global\n    loader-config-name: global\n"
	}
	c := startWith(t, o, false)
	for k, s := range shardTables {
		for from := 0; from < n; from += 1000 {
			c.up(s.up, insertRows(s.table, shardBase(k)+from, shardBase(k)+min(from+1000, n), ""))
		}
	}
	return c
}

// loadTask writes the task file (every instance names the mydumpers and loaders entries: startLoad).
func (c *e2eCluster) loadTask() string {
	c.t.Helper()
	f, err := c.TaskFile(c.task)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// startTask runs start-task and fails unless the subtask started on every source.
func (c *e2eCluster) startTask(f string) {
	c.t.Helper()
	r := c.ok("start-task", f)
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			c.t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
}

// cutoverLockID is the ID of the task's load cut-over lock.
func (c *e2eCluster) cutoverLockID() string { return c.task + "-`dm_meta`.`load_cutover`" }

// heldSource waits until one source has loaded and waits at the cut-over for the other, held at
// the load-chunk-committed failpoint, and returns both upstreams' indexes and the lock.
func (c *e2eCluster) heldSource() (held, loaded int, lock e2e.Result) {
	c.t.Helper()
	r := c.until("the cut-over lock waiting for one source", func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && locks[0].Str("ID") == c.cutoverLockID() &&
			len(locks[0].Strings("synced")) == 1 && len(locks[0].Strings("unsynced")) == 1
	}, "shard-ddl-lock", c.task)
	lock = r.List("locks")[0]
	held, loaded = 1, 0
	if lock.Strings("unsynced")[0] == s1 {
		held, loaded = 0, 1
	}
	if lock.Strings("synced")[0] != e2e.SourceID(loaded) {
		c.t.Fatalf("cut-over lock: %v", lock)
	}
	return held, loaded, lock
}

// subtaskOf returns the subtask status of source in query-status output.
func subtaskOf(r e2e.Result, source string) e2e.Result {
	for _, s := range r.List("sources") {
		if s.Get("sourceStatus").Str("source") == source {
			if subs := s.List("subTaskStatus"); len(subs) == 1 {
				return subs[0]
			}
		}
	}
	return nil
}

// waitUnits waits until every source's subtask is in stage and unit.
func (c *e2eCluster) waitUnits(stage, unit string) e2e.Result {
	c.t.Helper()
	return c.until("every subtask "+stage+" in unit "+unit, func(r e2e.Result) bool {
		subs := subtasks(r)
		if len(subs) != len(c.Ups) {
			return false
		}
		for _, s := range subs {
			if s.Str("stage") != stage || s.Str("unit") != unit {
				return false
			}
		}
		return true
	}, "query-status", c.task)
}

// downTables lists the tables of the downstream schema db.
func (c *e2eCluster) downTables() []string {
	c.t.Helper()
	tables, err := e2e.Rows(c.DownDB, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db'")
	if err != nil {
		c.t.Fatal(err)
	}
	return tables
}

// idsOf is the condition on id of the rows of upstream i's shards whose offset in their shard is in
// [from, to).
func idsOf(i, from, to int) string {
	var ranges []string
	for k, s := range shardTables {
		if s.up == i {
			ranges = append(ranges, fmt.Sprintf("id BETWEEN %d AND %d", shardBase(k)+from, shardBase(k)+to-1))
		}
	}
	return "(" + strings.Join(ranges, " OR ") + ")"
}

// everyID is the whole key range of a shard (see shardBase).
const everyID = 1000000

// sourceRows returns the rows (columns cols) of upstream i's shard tables where where holds, sorted.
func (c *e2eCluster) sourceRows(i int, cols, where string) []string {
	c.t.Helper()
	var all []string
	for _, s := range shardTables {
		if s.up != i {
			continue
		}
		rows, err := e2e.Rows(c.UpDBs[i], "SELECT "+cols+" FROM "+s.table+" WHERE "+where)
		if err != nil {
			c.t.Fatal(err)
		}
		all = append(all, rows...)
	}
	sort.Strings(all)
	return all
}

// downRows returns the rows of a downstream table where where holds, sorted.
func (c *e2eCluster) downRows(table, cols, where string) []string {
	c.t.Helper()
	rows, err := e2e.Rows(c.DownDB, "SELECT "+cols+" FROM "+table+" WHERE "+where)
	if err != nil {
		c.t.Fatal(err)
	}
	return rows
}

// renames counts the RENAME TABLE statements of the load cut-over in the downstream's
// general log, and the other RENAME statements.
func (c *e2eCluster) renames() (cutover, other int) {
	c.t.Helper()
	rows, err := c.DownstreamLog()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, q := range rows {
		if !strings.HasPrefix(q, "RENAME") {
			continue
		}
		if strings.Contains(q, loader.HiddenPrefix) {
			cutover++
		} else {
			other++
		}
	}
	return cutover, other
}

// checkCutover checks that the load's cut-over renamed the hidden table into place once, and that
// no hidden table is left.
func (c *e2eCluster) checkCutover() {
	c.t.Helper()
	if cut, other := c.renames(); cut != 1 || other != 0 {
		c.t.Fatalf("%d cut-over RENAME statements ran downstream (want 1) and %d others (want 0)", cut, other)
	}
	if tables := c.downTables(); !slices.Equal(tables, []string{"t"}) {
		c.t.Fatalf("downstream schema db holds %v after the cut-over, want only t", tables)
	}
}

// exactly checks that db.t holds n rows and no key twice.
func (c *e2eCluster) exactly(n int) {
	c.t.Helper()
	var rows, ids int
	if err := c.DownDB.QueryRow("SELECT COUNT(*), COUNT(DISTINCT id) FROM db.t").Scan(&rows, &ids); err != nil {
		c.t.Fatal(err)
	}
	if rows != n || ids != n {
		c.t.Fatalf("db.t holds %d rows with %d distinct ids, want %d", rows, ids, n)
	}
}

// writer changes the four shards until stopped: each round inserts a row into every shard, updates
// a row that was there before the task and one the writer inserted, and every third round deletes one
// of each.
type writer struct {
	c      *e2eCluster
	n      int // rows each shard held before
	quit   chan struct{}
	done   chan error
	rounds atomic.Int64
}

func (c *e2eCluster) startWriter(n int) *writer {
	w := &writer{c: c, n: n, quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for r := 1; ; r++ {
			select {
			case <-w.quit:
				w.done <- nil
				return
			default:
			}
			if err := w.round(r); err != nil {
				w.done <- err
				return
			}
			w.rounds.Store(int64(r))
			time.Sleep(2 * time.Millisecond) // pace: leave the 2 cores to the load
		}
	}()
	return w
}

func (w *writer) round(r int) error {
	for k, s := range shardTables {
		base, mine := shardBase(k), shardBase(k)+w.n
		stmts := []string{
			fmt.Sprintf("INSERT INTO %s VALUES (%d, 'w%d')", s.table, mine+r, r),
			fmt.Sprintf("UPDATE %s SET v = 'u%d' WHERE id = %d", s.table, r, base+(r*7)%w.n),
			fmt.Sprintf("UPDATE %s SET v = 'x%d' WHERE id = %d", s.table, r, mine+r/2),
		}
		if r%3 == 0 {
			stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id IN (%d, %d)", s.table, base+(r*13+5)%w.n, mine+r/3))
		}
		if err := w.c.Exec(s.up, stmts...); err != nil {
			return err
		}
	}
	return nil
}

// waitRounds waits until the writer has done n more rounds.
func (w *writer) waitRounds(n int64) {
	w.c.t.Helper()
	want := w.rounds.Load() + n
	wait.Eventually(w.c.t, 60*time.Second, func() bool {
		select {
		case err := <-w.done:
			w.c.t.Fatalf("the writer stopped: %v", err)
		default:
		}
		return w.rounds.Load() >= want
	}, func() string { return fmt.Sprintf("the writer did %d rounds in 60s, want %d", w.rounds.Load(), want) })
}

// stop stops the writer and fails the test if a write failed.
func (w *writer) stop() {
	w.c.t.Helper()
	select {
	case <-w.quit:
		return
	default:
	}
	close(w.quit)
	if err := <-w.done; err != nil {
		w.c.t.Fatalf("writer: %v", err)
	}
}

// Task-mode all with 3000 rows in each shard before start-task and chunks of 500 rows, while writers
// insert, update and delete on every shard before, during and after the load (one source is held
// after a committed chunk, so the writes certainly overlap a load in progress): the downstream
// converges to the merged upstream, value by value, with no row twice.
func TestLoadAllWithWritersDuringLoad(t *testing.T) {
	const n = 3000
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all", Failpoints: []string{chunkCommitted}}, n)
	w := c.startWriter(n)
	t.Cleanup(func() {
		select {
		case <-w.quit:
		default:
			close(w.quit)
		}
	})
	w.waitRounds(5)
	c.startTask(c.loadTask())
	if err := c.Reached(chunkCommitted, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	held, loaded, _ := c.heldSource()
	w.waitRounds(20) // writes while one source is in the middle of its load
	// The held source is between two chunks of one lane: some of its rows are not copied yet, so the
	// rows setting split its tables into several chunks.
	pre := idsOf(held, 0, n) // the rows there before the writers (a lane's first chunk holds some)
	if got, all := len(c.downRows("db."+c.hiddenT(), "id", pre)), len(c.sourceRows(held, "id", pre)); got == 0 || got >= all {
		t.Fatalf("the held source copied %d of its %d rows that were there before the task: want some, not all", got, all)
	}
	r := c.ok("query-status", c.task)
	if st := subtaskOf(r, e2e.SourceID(held)); st.Str("unit") != "Load" || st.Get("load").Str("state") != "loading" {
		t.Fatalf("held source %s: %v", e2e.SourceID(held), st)
	}
	if st := subtaskOf(r, e2e.SourceID(loaded)); st.Str("unit") != "Load" || st.Get("load").Str("state") != "loaded" {
		t.Fatalf("loaded source %s: %v", e2e.SourceID(loaded), st)
	}
	if err := c.Release(chunkCommitted); err != nil {
		t.Fatal(err)
	}
	c.waitUnits("Running", "Sync")
	w.waitRounds(20) // and after the hand-over to the binlog
	w.stop()
	rows := c.converge("id, v")
	c.waitSynced()
	c.exactly(rows)
	if rows < 4*n {
		t.Fatalf("%d rows: the writers deleted more than they inserted?", rows)
	}
	c.checkCutover()
	t.Logf("%d rows after %d writer rounds", rows, w.rounds.Load())
}

// One source held after a committed chunk of its load, the other loaded: db.t does not exist
// downstream (its rows are in the hidden table), shard-ddl-lock shows the cut-over waiting for the
// held source, and query-status shows its load in progress. Released, the hidden table is renamed
// into place once and the binlog of both sources follows.
func TestLoadHiddenTargetUntilCutover(t *testing.T) {
	const n = 3000
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all", Failpoints: []string{chunkCommitted}}, n)
	c.startTask(c.loadTask())
	if err := c.Reached(chunkCommitted, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	held, loaded, lock := c.heldSource()
	heldID, loadedID := e2e.SourceID(held), e2e.SourceID(loaded)
	// The held source's arrival completes the lock: it is the owner that runs the cut-over.
	if lock.Str("owner") != heldID || lock.Str("task") != c.task || len(lock.Strings("DDLs")) != 1 {
		t.Fatalf("cut-over lock: %v", lock)
	}

	// Downstream: only the hidden table, holding every row of the loaded source and part of the held one.
	if tables := c.downTables(); !slices.Equal(tables, []string{c.hiddenT()}) {
		t.Fatalf("downstream schema db holds %v while a source loads, want only %s", tables, c.hiddenT())
	}
	if got, want := c.downRows("db."+c.hiddenT(), "id, v", idsOf(loaded, 0, everyID)), c.sourceRows(loaded, "id, v", "TRUE"); !slices.Equal(got, want) {
		t.Fatalf("the loaded source's rows in %s: %d, upstream %d: %s", c.hiddenT(), len(got), len(want), e2e.FirstDiff(got, want))
	}
	if got := len(c.downRows("db."+c.hiddenT(), "id", idsOf(held, 0, everyID))); got == 0 || got >= 2*n {
		t.Fatalf("the held source copied %d rows of %d: want some, not all", got, 2*n)
	}

	// query-status: both in unit Load, the held one loading with its progress, the other loaded.
	r := c.until("query-status of the load in progress", func(r e2e.Result) bool {
		h, l := subtaskOf(r, heldID), subtaskOf(r, loadedID)
		return h.Str("stage") == "Running" && h.Str("unit") == "Load" && h.Get("load").Str("state") == "loading" &&
			l.Str("stage") == "Running" && l.Str("unit") == "Load" && l.Get("load").Str("state") == "loaded"
	}, "query-status", c.task)
	_, out, err := c.Dmctl("query-status", c.task)
	if err != nil {
		t.Fatal(err)
	}
	ld := subtaskOf(r, heldID).Get("load")
	for _, k := range []string{"finishedBytes", "totalBytes", "progress", "metaBinlog", "bps", "finishedRows", "totalRows", "rps"} {
		if ld.Str(k) == "" {
			t.Fatalf("query-status of %s: load.%s is empty: %v", heldID, k, ld)
		}
	}
	var fin, total int
	fmt.Sscan(ld.Str("finishedRows"), &fin)
	fmt.Sscan(ld.Str("totalRows"), &total)
	if fin <= 0 || fin > total || !strings.HasPrefix(ld.Str("metaBinlog"), "(mysql-bin.") {
		t.Fatalf("query-status of %s: load %v", heldID, ld)
	}
	checkSample(t, out)

	// Rows written meanwhile on both sources are in their binlogs after the snapshots.
	c.up(0, insertRows("db_1.t_1", 900000, 900010, ""))
	c.up(1, insertRows("db_2.t_2", 900010, 900020, ""), "UPDATE db_2.t_1 SET v = 'changed' WHERE id = "+fmt.Sprint(shardBase(2)+7))
	if err := c.Release(chunkCommitted); err != nil {
		t.Fatal(err)
	}
	rows := c.converge("id, v")
	c.waitSynced()
	if rows != 4*n+20 {
		t.Fatalf("%d rows, want %d", rows, 4*n+20)
	}
	c.exactly(rows)
	c.checkCutover()
}

// sampleFile is a query-status of a load in progress, quoted by docs/operating.md; TRIBUTARY_UPDATE_TESTDATA=1
// rewrites it from TestLoadHiddenTargetUntilCutover.
var sampleFile = filepath.Join("testdata", "query-status-load.json")

// checkSample saves out as the sample when asked to, and otherwise checks that the saved sample has
// the shape of out (the same fields), so that what docs/operating.md quotes stays true.
func checkSample(t *testing.T, out string) {
	t.Helper()
	if os.Getenv("TRIBUTARY_UPDATE_TESTDATA") != "" {
		if err := os.MkdirAll(filepath.Dir(sampleFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sampleFile, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	saved, err := os.ReadFile(sampleFile)
	if err != nil {
		t.Fatalf("%v (TRIBUTARY_UPDATE_TESTDATA=1 writes it)", err)
	}
	want, got := jsonShape(t, saved), jsonShape(t, []byte(out))
	if !slices.Equal(want, got) {
		t.Fatalf("query-status of a load has other fields than %s (TRIBUTARY_UPDATE_TESTDATA=1 rewrites it):\nsaved: %v\nnow:   %v", sampleFile, want, got)
	}
}

// jsonShape lists the paths of a JSON document's fields with their types, lists merged.
func jsonShape(t *testing.T, data []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v:\n%s", err, data)
	}
	set := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		default:
			set[fmt.Sprintf("%s %T", path, x)] = true
		}
	}
	walk("", v)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A shard DDL on the loaded source's shards while the other source is still loading: the loaded
// source meets it in its binlog after the cut-over, the lock forms, waits for the other source's DDL
// (after its load) and resolves by itself; the ALTER runs downstream once.
func TestLoadShardDDLWhileOtherSourceLoads(t *testing.T) {
	const n = 2000
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all", Failpoints: []string{chunkCommitted}}, n)
	c.startTask(c.loadTask())
	if err := c.Reached(chunkCommitted, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	held, loaded, _ := c.heldSource()
	// The loaded source's snapshot is closed (its tables are free for DDL); the held one's is not.
	db := fmt.Sprintf("db_%d", loaded+1)
	c.up(loaded, insertRows(db+".t_1", 900000+loaded*1000, 900010+loaded*1000, ""),
		"ALTER TABLE "+db+".t_1 ADD COLUMN c INT", insertRows(db+".t_1", 900010+loaded*1000, 900020+loaded*1000, ", 1"),
		insertRows(db+".t_2", 900020+loaded*1000, 900030+loaded*1000, ""),
		"ALTER TABLE "+db+".t_2 ADD COLUMN c INT", insertRows(db+".t_2", 900030+loaded*1000, 900040+loaded*1000, ", 2"))
	if tables := c.downTables(); !slices.Equal(tables, []string{c.hiddenT()}) {
		t.Fatalf("downstream schema db holds %v while a source loads, want only %s", tables, c.hiddenT())
	}
	if err := c.Release(chunkCommitted); err != nil {
		t.Fatal(err)
	}
	// After the cut-over the loaded source syncs and meets its DDL: the shard lock waits for the other.
	r := c.until("the shard lock of db.t waiting for the held source", func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && locks[0].Str("ID") == c.task+"-`db`.`t`" &&
			slices.Equal(locks[0].Strings("synced"), []string{e2e.SourceID(loaded)}) && slices.Equal(locks[0].Strings("unsynced"), []string{e2e.SourceID(held)})
	}, "shard-ddl-lock", c.task)
	if ddls := r.List("locks")[0].Strings("DDLs"); len(ddls) != 1 || !strings.Contains(ddls[0], "ADD COLUMN `c` INT") {
		t.Fatalf("shard lock DDLs: %q", ddls)
	}
	c.checkCutover()
	if cols := downColumns(t, c); cols != 2 {
		t.Fatalf("db.t has %d columns before the held source's DDL, want 2", cols)
	}
	db = fmt.Sprintf("db_%d", held+1)
	c.up(held, insertRows(db+".t_1", 900000+held*1000, 900010+held*1000, ""),
		"ALTER TABLE "+db+".t_1 ADD COLUMN c INT", insertRows(db+".t_1", 900010+held*1000, 900020+held*1000, ", 3"),
		"ALTER TABLE "+db+".t_2 ADD COLUMN c INT", insertRows(db+".t_2", 900030+held*1000, 900040+held*1000, ", 4"))
	rows := c.converge("id, v, c")
	c.waitSynced()
	if rows != 4*n+70 {
		t.Fatalf("%d rows, want %d", rows, 4*n+70)
	}
	c.exactly(rows)
	if cols := downColumns(t, c); cols != 3 {
		t.Fatalf("db.t has %d columns, want 3", cols)
	}
	c.ddlsRun(1)
	c.checkCutover()
}

// Task-mode full: the subtasks load what the shards hold when the task starts and end Finished in
// unit Load; nothing written afterwards reaches the downstream (no binlog is read).
func TestLoadFullModeFinishes(t *testing.T) {
	const n = 2000
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "full"}, n)
	w := c.startWriter(n)
	w.waitRounds(10)
	w.stop()
	want, err := c.Merged("id, v")
	if err != nil {
		t.Fatal(err)
	}
	c.startTask(c.loadTask())
	r := c.waitUnits("Finished", "Load")
	for i := range c.Ups {
		var fin int
		fmt.Sscan(subtaskOf(r, e2e.SourceID(i)).Get("load").Str("finishedRows"), &fin)
		if up := len(c.sourceRows(i, "id", "TRUE")); fin != up {
			t.Fatalf("query-status of %s says %d rows loaded, the source holds %d: %v", e2e.SourceID(i), fin, up, r)
		}
	}
	got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.t")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("db.t after the full load: %d rows, upstream at start-task %d: %s", len(got), len(want), e2e.FirstDiff(got, want))
	}
	c.exactly(len(want))
	c.checkCutover()
	if r := c.ok("shard-ddl-lock", c.task); len(r.List("locks")) != 0 {
		t.Fatalf("a lock is left after the full load: %v", r)
	}

	// Writes after the load: no worker reads a binlog, and the downstream stays as loaded.
	c.up(0, insertRows("db_1.t_1", 900000, 900010, ""), fmt.Sprintf("UPDATE db_1.t_2 SET v = 'after' WHERE id = %d", shardBase(1)+1))
	c.up(1, fmt.Sprintf("DELETE FROM db_2.t_1 WHERE id = %d", shardBase(2)+2), "ALTER TABLE db_2.t_2 ADD COLUMN c INT")
	for i, db := range c.UpDBs {
		var dumps int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'").Scan(&dumps); err != nil {
			t.Fatal(err)
		}
		if dumps != 0 {
			t.Fatalf("upstream %d serves %d binlog readers after a full load", i+1, dumps)
		}
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		got, err := e2e.Rows(c.DownDB, "SELECT id, v FROM db.t")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("db.t changed after the full load: %s", e2e.FirstDiff(got, want))
		}
		for _, s := range subtasks(c.ok("query-status", c.task)) {
			if s.Str("stage") != "Finished" || s.Str("unit") != "Load" {
				t.Fatalf("a subtask left Finished/Load: %v", s)
			}
		}
	}
	if cols := downColumns(t, c); cols != 2 {
		t.Fatalf("db.t has %d columns: a DDL after the full load reached it", cols)
	}
}

// A downstream db.t that holds a row before start-task in task-mode all: start-task's precheck
// refuses it naming the table, and nothing starts; with the precheck ignored the load itself refuses
// it (start-task and query-status name the table), through retries. The user's table and row stay as
// they were. Once the user drops the table, the load creates it and converges.
func TestLoadRefusesNonEmptyTarget(t *testing.T) {
	const n = 300
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all"}, n)
	for _, q := range []string{"CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(32))", "INSERT INTO db.t VALUES (42, 'mine')"} {
		if _, err := c.DownDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var name, def string
	if err := c.DownDB.QueryRow("SHOW CREATE TABLE db.t").Scan(&name, &def); err != nil {
		t.Fatal(err)
	}
	untouched := func() {
		t.Helper()
		if got, err := e2e.Rows(c.DownDB, "SELECT * FROM db.t"); err != nil || !slices.Equal(got, []string{"42|mine"}) {
			t.Fatalf("db.t holds %v (%v), want only the user's row", got, err)
		}
		var now string
		if err := c.DownDB.QueryRow("SHOW CREATE TABLE db.t").Scan(&name, &now); err != nil || now != def {
			t.Fatalf("db.t changed: %s (%v), was %s", now, err, def)
		}
		if tables := c.downTables(); !slices.Equal(tables, []string{"t"}) {
			t.Fatalf("downstream schema db holds %v, want only t", tables)
		}
	}
	f := c.loadTask()
	contains(t, c.fails("start-task", f), "precheck failed; nothing started", "[table_empty]", "`db`.`t`", "holds rows", "on-duplicate")
	c.noTask()
	untouched()

	// The precheck ignored: the load of each source refuses the table.
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	f = c.writeFile("ignore-table-empty.yaml", string(data)+"ignore-checking-items: [\"table_empty\"]\n")
	const refusal = "downstream table `db`.`t` exists and holds rows"
	r, out, err := c.Dmctl("start-task", f)
	if err != nil {
		t.Fatal(err)
	}
	// The subtasks run, then their loads stop on the table: start-task may answer before or after.
	for _, s := range r.List("sources") {
		if !s.Bool("result") && !strings.Contains(s.Str("msg"), refusal) {
			t.Fatalf("start-task: source %s does not name the refusal: %s", s.Str("source"), out)
		}
	}
	c.until("the refusal in query-status", func(r e2e.Result) bool {
		subs := subtasks(r)
		for _, s := range subs {
			errs := s.Get("result").List("errors")
			if s.Str("unit") != "Load" || len(errs) == 0 || !strings.Contains(errs[0].Str("RawCause"), refusal) {
				return false
			}
		}
		return len(subs) == 2
	}, "query-status", c.task)
	before := c.logCount(refusal)
	c.ok("resume-task", c.task) // retries at once, and is refused again
	c.until("refused again", func(e2e.Result) bool { return c.logCount(refusal) >= before+2 }, "query-status", c.task)
	untouched()

	// The user drops the table: the load goes on, under the hidden name, then renamed into place.
	if _, err := c.DownDB.Exec("DROP TABLE db.t"); err != nil {
		t.Fatal(err)
	}
	c.ok("resume-task", c.task)
	c.up(0, insertRows("db_1.t_1", 900000, 900010, ""))
	if rows := c.converge("id, v"); rows != 4*n+10 {
		t.Fatalf("%d rows, want %d", rows, 4*n+10)
	}
	c.waitSynced()
	c.checkCutover()
}

// logCount counts the occurrences of s in the workers' logs.
func (c *e2eCluster) logCount(s string) int {
	n := 0
	for _, w := range c.Workers {
		data, _ := os.ReadFile(w.LogFile)
		n += strings.Count(string(data), s)
	}
	return n
}

// delaySnapshot makes the load of upstream i wait at its snapshot: a session of the test holds
// LOCK TABLES ... WRITE on one of its shards, which FLUSH TABLES WITH READ LOCK waits for (up to the
// loader's 10 s, then it retries). The returned function unlocks.
func (c *e2eCluster) delaySnapshot(i int) func() {
	c.t.Helper()
	ctx := context.Background()
	conn, err := c.UpDBs[i].Conn(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("LOCK TABLES db_%d.t_1 WRITE", i+1)); err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	unlock := func() {
		once.Do(func() {
			conn.ExecContext(ctx, "UNLOCK TABLES")
			conn.Close()
		})
	}
	c.t.Cleanup(unlock)
	return unlock
}

// waitFTWRL waits until upstream i's load waits for its read lock.
func (c *e2eCluster) waitFTWRL(i int) {
	c.t.Helper()
	c.until(fmt.Sprintf("upstream %d's load waiting for FLUSH TABLES WITH READ LOCK", i+1), func(e2e.Result) bool {
		var n int
		c.UpDBs[i].QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'FLUSH TABLES WITH READ LOCK%'").Scan(&n)
		return n == 1
	}, "query-status", c.task)
}

// A downstream db.t that exists and is empty is loaded in place. A source whose load reaches its
// snapshot after another source of the same task has loaded rows into it (here source 2's snapshot
// waits for a table lock; equally after a retry, a restart, or a worker that joins later) must load
// beside them: those rows are the task's own.
func TestLoadEmptyTargetSourceStartingLate(t *testing.T) {
	const n = 300
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all"}, n)
	for _, q := range []string{"CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(32))"} {
		if _, err := c.DownDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	unlock := c.delaySnapshot(1)
	c.startTask(c.loadTask())
	c.waitFTWRL(1)
	c.until(s1+" loaded, waiting at the cut-over", func(r e2e.Result) bool {
		locks := r.List("locks")
		return len(locks) == 1 && slices.Equal(locks[0].Strings("synced"), []string{s1})
	}, "shard-ddl-lock", c.task)
	if got := len(c.downRows("db.t", "id", idsOf(0, 0, everyID))); got != 2*n {
		t.Fatalf("%s loaded %d rows into db.t, want %d", s1, got, 2*n)
	}
	unlock()
	c.convergeOrRefused()
	c.waitSynced()
}

// convergeOrRefused waits until db.t equals the merged shards, and fails at once when a subtask
// reports an error instead.
func (c *e2eCluster) convergeOrRefused() {
	c.t.Helper()
	c.until("db.t equal to the merged shards", func(r e2e.Result) bool {
		for _, s := range subtasks(r) {
			if errs := s.Get("result").List("errors"); len(errs) > 0 {
				c.t.Fatalf("a subtask stopped on an error: %s", errs[0].Str("RawCause"))
			}
		}
		_, err := c.Converge("id, v", 0)
		return err == nil
	}, "query-status", c.task)
}

// query-status's progress of a load: a source whose load is complete (every row copied, state loaded)
// shows 100 %.
func TestLoadProgressOfCompleteLoad(t *testing.T) {
	c := startLoad(t, e2e.Options{Workers: 2, TaskMode: "all"}, 300)
	c.delaySnapshot(1) // source 1 then waits at the cut-over for source 2
	c.startTask(c.loadTask())
	r := c.until(s1+" loaded", func(r e2e.Result) bool {
		return subtaskOf(r, s1).Get("load").Str("state") == "loaded"
	}, "query-status", c.task)
	ld := subtaskOf(r, s1).Get("load")
	if ld.Str("finishedRows") != "600" || ld.Str("progress") != "100.00 %" {
		t.Fatalf("%s has loaded its 600 rows; query-status says finishedRows %s, finishedBytes %s of totalBytes %s, progress %q",
			s1, ld.Str("finishedRows"), ld.Str("finishedBytes"), ld.Str("totalBytes"), ld.Str("progress"))
	}
}
