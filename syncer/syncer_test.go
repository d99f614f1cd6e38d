package syncer

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/leak"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/tests/framework/netutil"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

func testLogger() *zap.Logger {
	if os.Getenv("TRIBUTARY_TEST_LOG") == "" {
		return zap.NewNop()
	}
	l, _ := zap.NewDevelopment()
	return l
}

// TestMain stops the tests' embedded etcd and removes the MariaDB template datadir, then fails a run
// that leaves a goroutine.
func TestMain(m *testing.M) {
	leak.VerifyTestMain(m, func() { etcdtest.Stop(); mariadbtest.RemoveTemplate() })
}

// cluster is two upstream sources with two shard tables each, one downstream, an etcd with a
// coordinator, and the routes of db_*.t_* to db.t.
type cluster struct {
	t      testing.TB
	ups    []*mariadbtest.Server
	upDBs  []*sql.DB
	down   *mariadbtest.Server
	downDB *sql.DB // the test's own reads and writes
	syncDB *sql.DB // the syncers' downstream, with the session a dm-worker's has
	ddlDB  *sql.DB // and its pool for a lock's DDL with its marker (multi-statement queries)
	cli    *clientv3.Client
	layout pessimist.Layout
	router *router.Router
	task   string
	starts map[int]vocab.Position
	shards [][]string // per source, the shard tables routed to db.t
	coord  *pessimist.Coordinator
	log    *zap.Logger
	gtid   bool // GTID mode: start from a GTID set and resume by GTID
	gtids  map[int]string
	epoch  int64 // binding epoch of the last syncer started (each start is a new binding)
	online *onlineddl.Rules
	ops    map[int]*Operators // binlog skip|replace decisions per source, kept across restarts
	safe   bool               // syncers safe-mode
	failed map[int]chan error // per source, the error a syncer stopped on by itself
	// batch and workers are the syncers' batch and worker-count (0: the tests' 64 rows and the syncer's
	// default connections); spread is syncers.spread-hot-tables.
	batch, workers int
	spread         bool
	laneChunk      int // SyncerConfig.laneChunk
}

func newCluster(t *testing.T) *cluster { return newClusterTB(t) }

func newClusterTB(t testing.TB, upstreamArgs ...string) *cluster {
	c := &cluster{t: t, task: "test"}
	for i := 0; i < 2; i++ {
		s := mariadbtest.Start(t, upstreamArgs...)
		db := s.DB(t)
		schema := fmt.Sprintf("db_%d", i+1)
		s.Exec(t, db, "CREATE DATABASE "+schema)
		c.shards = append(c.shards, nil)
		for j := 1; j <= 2; j++ {
			table := fmt.Sprintf("%s.t_%d", schema, j)
			s.Exec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, v VARCHAR(32))")
			c.shards[i] = append(c.shards[i], table)
		}
		c.ups, c.upDBs = append(c.ups, s), append(c.upDBs, db)
	}
	c.down = mariadbtest.Start(t, upstreamArgs...) // same server settings downstream (charset variants)
	c.downDB = c.down.DB(t)
	c.syncDB = workerDB(t, c.down.Port, nil, dbutil.MultiStatements) // as a dm-worker's (GroupStatements)
	c.ddlDB = workerDB(t, c.down.Port, nil, dbutil.MultiStatements)
	c.cli = etcdtest.Client(t)
	c.layout = pessimist.NewLayout(fmt.Sprintf("/test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
	var err error
	c.router, err = router.NewRouter(&config.BAList{DoDBs: []string{"db_*"}}, []config.RouteRule{
		{SchemaPattern: "db_*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t"},
		{SchemaPattern: "db_*", TablePattern: "u_*", TargetSchema: "db", TargetTable: "u"},
		{SchemaPattern: "db_*", TargetSchema: "db"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := pessimist.PutTaskSources(ctx, c.cli, c.layout, c.task, []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	c.coord = pessimist.NewCoordinator(c.cli, c.layout)
	go func() { defer close(done); c.coord.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// remoteDownstream sends the syncers' downstream pools through a proxy that holds every chunk of bytes
// for half of rtt each way, as to a downstream in another zone, and returns a pool of the test's
// through it too (the limit over the same link).
func (c *cluster) remoteDownstream(rtt time.Duration) *sql.DB {
	p, err := netutil.NewDelayProxy(fmt.Sprintf("127.0.0.1:%d", c.down.Port), rtt/2)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { p.Close() })
	c.syncDB = workerDB(c.t, p.Port(), nil, dbutil.MultiStatements)
	c.ddlDB = workerDB(c.t, p.Port(), nil, dbutil.MultiStatements)
	return workerDB(c.t, p.Port(), nil)
}

// workerDB opens root's pool to the downstream on port with the session a dm-worker's syncers have
// (session: the task's target-database.session), closed when the test ends.
func workerDB(t testing.TB, port int, session map[string]any, opts ...func(*mysql.Config)) *sql.DB {
	t.Helper()
	db, err := dbutil.OpenDB(config.Database{Host: "127.0.0.1", Port: port, User: "root", Session: sink.DownstreamSession(session)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (c *cluster) logger() *zap.Logger {
	if c.log != nil {
		return c.log
	}
	return testLogger()
}

// startPosition is like a task's meta: the position to start from when there is no checkpoint yet,
// fixed at the first call.
func (c *cluster) startPosition(i int) vocab.Position {
	if c.starts == nil {
		c.starts = map[int]vocab.Position{}
	}
	start, ok := c.starts[i]
	if !ok {
		start = c.binlogEnd(i)
		c.starts[i] = start
		if c.gtids == nil {
			c.gtids = map[int]string{}
		}
		var gtid string
		if err := c.upDBs[i].QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
			c.t.Fatal(err)
		}
		c.gtids[i] = gtid
	}
	return start
}

// binlogEnd is source i's current binlog position (SHOW MASTER STATUS).
func (c *cluster) binlogEnd(i int) vocab.Position {
	c.t.Helper()
	var p vocab.Position
	var doDB, ignoreDB any
	if err := c.upDBs[i].QueryRow("SHOW MASTER STATUS").Scan(&p.File, &p.Pos, &doDB, &ignoreDB); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// waitResumePosition waits until the committed resume position of source i's syncer reaches end.
func (c *cluster) waitResumePosition(i int, end vocab.Position) {
	c.t.Helper()
	var p vocab.Position
	var err error
	wait.Eventually(c.t, 60*time.Second, func() bool {
		err = c.downDB.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta.test_checkpoint WHERE source = ? AND id = ''", fmt.Sprintf("s%d", i+1)).Scan(&p.File, &p.Pos)
		return err == nil && p.Compare(end) >= 0
	}, func() string { return fmt.Sprintf("s%d's resume position is %s (%v), want %s", i+1, p, err, end) })
}

// startSyncer runs the syncer of source i until the returned stop is called.
func (c *cluster) startSyncer(i int) (stop func() error) {
	stop, _ = c.startSyncerGet(i)
	return stop
}

func (c *cluster) startSyncerGet(i int) (stop func() error, syncer *Syncer) {
	src := fmt.Sprintf("s%d", i+1)
	_, started := c.starts[i]
	start := c.startPosition(i)
	var startGTID string
	if c.gtid {
		startGTID, start = c.gtids[i], vocab.Position{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSyncer(SyncerConfig{Start: start, EnableGTID: c.gtid, StartGTID: startGTID,
		Task: c.task, Source: src, Host: "127.0.0.1", Port: uint16(c.ups[i].Port), User: "root",
		ServerID: 9000 + uint32(i), Router: c.router, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true, MetaSchema: "dm_meta",
		Agent: pessimist.NewAgent(c.cli, c.layout, c.task, src, nil), BatchRows: cmp.Or(c.batch, 64), TxnRows: c.txnRows(), WorkerCount: c.workers, Log: c.logger(),
		Epoch: c.nextEpoch(), Online: c.online, Operators: c.operators(i), SafeMode: c.safe, SpreadHotTables: c.spread,
		laneChunk: c.laneChunk,
	})
	errc, failed := make(chan error, 1), c.failures(i)
	go func() {
		err := s.Run(ctx)
		if err != nil && ctx.Err() == nil {
			c.t.Logf("syncer %s stopped: %v", src, err) // the test fails on what follows; this says why
			select {
			case failed <- err:
			default:
			}
		}
		errc <- err
	}()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		if err := <-errc; err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	c.t.Cleanup(func() { stop() })
	syncer = s
	if !started {
		// First start: wait until the syncer has read the upstream tables and saved its start.
		var n int
		var err error
		wait.Eventually(c.t, 30*time.Second, func() bool {
			err = c.downDB.QueryRow("SELECT COUNT(*) FROM dm_meta.test_checkpoint WHERE source = ? AND id = ''", src).Scan(&n)
			return err == nil && n == 1
		}, func() string { return fmt.Sprintf("syncer %s did not start: %v", src, err) })
	}
	return stop, syncer
}

func (c *cluster) operators(i int) *Operators {
	if c.ops == nil {
		c.ops = map[int]*Operators{}
	}
	if c.ops[i] == nil {
		c.ops[i] = &Operators{}
	}
	return c.ops[i]
}

func (c *cluster) failures(i int) chan error {
	if c.failed == nil {
		c.failed = map[int]chan error{}
	}
	if c.failed[i] == nil {
		c.failed[i] = make(chan error, 1)
	}
	return c.failed[i]
}

// failure waits for the error the syncer of source i stops on by itself.
func (c *cluster) failure(i int) error {
	c.t.Helper()
	select {
	case err := <-c.failures(i):
		return err
	case <-time.After(60 * time.Second):
		c.t.Fatalf("syncer s%d did not stop on an error", i+1)
		return nil
	}
}

// txnRows: the tests flush every 64 rows (restarts then fall between many transactions); a
// benchmark with its own batch gets the syncer's default.
func (c *cluster) txnRows() int {
	if c.batch == 0 {
		return 64
	}
	return 0
}

// nextEpoch is the epoch of a new binding. TRIBUTARY_NO_FENCE=1 turns fencing off, to measure its cost
// with BenchmarkCatchUp.
func (c *cluster) nextEpoch() int64 {
	c.epoch++
	if os.Getenv("TRIBUTARY_NO_FENCE") != "" {
		return 0
	}
	return c.epoch
}

func (c *cluster) up(i int, stmts ...string) { c.ups[i].Exec(c.t, c.upDBs[i], stmts...) }

// rows returns the sorted rows of a query as one string each.
// merged is the union of every upstream shard's rows, with the given columns.
func (c *cluster) merged(cols string) []string {
	var all []string
	for i, db := range c.upDBs {
		for _, table := range c.shards[i] {
			r, err := e2e.Rows(db, fmt.Sprintf("SELECT %s FROM %s", cols, table))
			if err != nil {
				c.t.Fatal(err)
			}
			all = append(all, r...)
		}
	}
	slices.Sort(all)
	return all
}

// converge waits until the downstream equals the merged upstream.
func (c *cluster) converge(cols string) {
	c.t.Helper()
	want := c.merged(cols)
	var got []string
	wait.Eventually(c.t, 60*time.Second, func() bool {
		r, err := e2e.Rows(c.downDB, "SELECT "+cols+" FROM db.t")
		if err == nil {
			got = r
		}
		return err == nil && slices.Equal(got, want)
	}, func() string {
		return fmt.Sprintf("downstream did not converge: %d rows, want %d\nfirst difference: %s", len(got), len(want), e2e.FirstDiff(got, want))
	})
}

func (c *cluster) hasRow(id int) bool {
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t WHERE id = ?", id).Scan(&n); err != nil {
		return false
	}
	return n == 1
}

func (c *cluster) waitRow(id int) {
	c.t.Helper()
	wait.Eventually(c.t, 30*time.Second, func() bool { return c.hasRow(id) },
		func() string { return fmt.Sprintf("row %d never arrived downstream", id) })
}

func insert(table string, from, to int) string {
	var vals []string
	for i := from; i < to; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 'v%d')", i, i))
	}
	return "INSERT INTO " + table + " (id, v) VALUES " + strings.Join(vals, ",")
}

// TestShardMergeAddColumn: ADD COLUMN on all four shards over two sources with DML between. Rows a
// shard writes after its DDL reach the downstream only after the DDL ran there; in the end the
// downstream equals the merged upstream and the DDL ran once.
func TestShardMergeAddColumn(t *testing.T) {
	c := newCluster(t)
	_, s1 := c.startSyncerGet(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 51), insert("db_1.t_2", 1001, 1051))
	c.up(1, insert("db_2.t_1", 2001, 2051), insert("db_2.t_2", 3001, 3051))
	c.up(0, insert("db_1.t_1", 51, 60))
	c.waitRow(59)
	c.converge("id, v")

	// db_1.t_1 passes the DDL and writes a row with the new column.
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "INSERT INTO db_1.t_1 (id, v, c) VALUES (100, 'after', 7)")
	// A later row of a table that has not passed the DDL flows on...
	c.up(0, insert("db_1.t_2", 1100, 1101))
	c.waitRow(1100)
	// ...while the row written after the DDL is held back.
	if c.hasRow(100) {
		t.Fatal("a row written after the shard's DDL reached the downstream before the DDL")
	}
	// Held-back rows are not kept in memory while the lock waits: 3000 of them, then a sync point.
	for from := 1000000; from < 1003000; from += 500 {
		c.up(0, fmt.Sprintf("INSERT INTO db_1.t_1 (id, v, c) SELECT seq, 'held', 0 FROM db_1.seq_%d_to_%d", from, from+499))
	}
	c.up(0, insert("db_1.t_2", 1101, 1102))
	c.waitRow(1101)
	if peak := s1.PeakBatchedRows(); peak > 64 {
		t.Fatalf("the syncer held %d rows in memory at once; the batch is 64", peak)
	}
	c.up(1, "UPDATE db_2.t_1 SET v = 'changed' WHERE id = 2001", "DELETE FROM db_2.t_2 WHERE id = 3001")
	c.up(0, "ALTER TABLE db_1.t_2 ADD COLUMN c INT", "UPDATE db_1.t_2 SET c = 1 WHERE id = 1001")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", insert("db_2.t_1", 2100, 2110))
	c.up(1, insert("db_2.t_2", 3100, 3110), "ALTER TABLE db_2.t_2 ADD COLUMN c INT", "INSERT INTO db_2.t_2 VALUES (3200, 'x', 3)")
	c.converge("id, v, c")
	var cols int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='db' AND TABLE_NAME='t' AND COLUMN_NAME='c'").Scan(&cols); err != nil || cols != 1 {
		t.Fatalf("downstream column c: %d %v", cols, err)
	}
}

// TestReadAgainOnlyWhatWasHeldBack: a lock whose shards wrote no DML past their DDL before the last
// shard reached it resolves without reading the binlog again (a reader restart per source and lock);
// one whose shard did re-reads from the DDL on that source only, and the held-back row arrives.
func TestReadAgainOnlyWhatWasHeldBack(t *testing.T) {
	c := newCluster(t)
	core, logs := observer.New(zap.InfoLevel)
	c.log = zap.New(core)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11))
	c.waitRow(10)
	resolved := func(n int) {
		t.Helper()
		wait.Eventually(t, 30*time.Second, func() bool { return logs.FilterMessage("sharding DDL resolved").Len() == n },
			func() string {
				return fmt.Sprintf("%d lock resolutions, want %d", logs.FilterMessage("sharding DDL resolved").Len(), n)
			})
	}
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT")
	resolved(2)
	c.up(0, "INSERT INTO db_1.t_1 (id, v, c) VALUES (100, 'after', 1)")
	c.up(1, "INSERT INTO db_2.t_1 (id, v, c) VALUES (200, 'after', 2)")
	c.waitRow(100)
	c.waitRow(200)
	if n := logs.FilterMessage("re-sync held-back DML").Len(); n != 0 {
		t.Fatalf("%d re-syncs after a lock that held nothing back, want 0", n)
	}

	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN d INT", "INSERT INTO db_1.t_1 (id, v, c, d) VALUES (101, 'held', 1, 1)", "ALTER TABLE db_1.t_2 ADD COLUMN d INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN d INT", "ALTER TABLE db_2.t_2 ADD COLUMN d INT")
	resolved(4)
	c.waitRow(101)
	c.converge("id, v, c, d")
	if r := logs.FilterMessage("re-sync held-back DML").All(); len(r) != 1 || r[0].ContextMap()["source"] != "s1" {
		t.Fatalf("re-syncs %v, want one, of s1", r)
	}
}

// TestRestartAtRandomPoints runs seeded random workloads (inserts, updates, deletes and two successive
// ADD COLUMNs reaching the four shards in random orders) while the syncers are stopped and restarted
// from their checkpoints at random moments. The downstream must always converge to the merged
// upstream. TRIBUTARY_RESTART_RUNS sets the number of seeds (default 20).
func TestRestartAtRandomPoints(t *testing.T) {
	runs := 20
	if v := os.Getenv("TRIBUTARY_RESTART_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	first := int64(1)
	if v := os.Getenv("TRIBUTARY_RESTART_SEED"); v != "" {
		fmt.Sscan(v, &first)
	}
	for seed := first; seed < first+int64(runs); seed++ {
		// Odd seeds start from a GTID set and resume by GTID; even seeds use binlog positions.
		gtid := seed%2 == 1
		t.Run(fmt.Sprintf("seed=%d/gtid=%v", seed, gtid), func(t *testing.T) { restartRun(t, seed, gtid) })
	}
}

// TestRestartWithoutRowMetadata: the same workloads on upstreams with binlog_row_metadata=MINIMAL
// (no column names in the binlog): the syncers use the columns they track from the DDL, saved with
// their checkpoints across restarts.
func TestRestartWithoutRowMetadata(t *testing.T) {
	for seed := int64(101); seed <= 106; seed++ {
		gtid := seed%2 == 1
		t.Run(fmt.Sprintf("seed=%d/gtid=%v", seed, gtid), func(t *testing.T) {
			restartRun(t, seed, gtid, "--binlog-row-metadata=MINIMAL")
		})
	}
}

func restartRun(t *testing.T, seed int64, gtid bool, upstreamArgs ...string) {
	rng := rand.New(rand.NewSource(seed))
	c := newClusterTB(t, upstreamArgs...)
	c.gtid = gtid
	stops := []func() error{c.startSyncer(0), c.startSyncer(1)}
	shards := []struct {
		src   int
		table string
	}{{0, "db_1.t_1"}, {0, "db_1.t_2"}, {1, "db_2.t_1"}, {1, "db_2.t_2"}}
	ddls := []string{"ADD COLUMN c1 INT", "ADD COLUMN c2 VARCHAR(10)"}
	next := make([]int, len(shards)) // next DDL of each shard
	ids := make([][]int, len(shards))
	nextID := 1
	restarts := 0
	for step := 0; step < 120; step++ {
		i := rng.Intn(len(shards))
		sh := shards[i]
		switch r := rng.Intn(20); {
		case r < 2 && next[i] < len(ddls):
			c.up(sh.src, "ALTER TABLE "+sh.table+" "+ddls[next[i]])
			next[i]++
		case r < 4 && len(ids[i]) > 0:
			c.up(sh.src, fmt.Sprintf("UPDATE %s SET v = 'u%d' WHERE id = %d", sh.table, step, ids[i][rng.Intn(len(ids[i]))]))
		case r < 5 && len(ids[i]) > 0:
			k := rng.Intn(len(ids[i]))
			c.up(sh.src, fmt.Sprintf("DELETE FROM %s WHERE id = %d", sh.table, ids[i][k]))
			ids[i] = append(ids[i][:k], ids[i][k+1:]...)
		default:
			n := 1 + rng.Intn(5)
			c.up(sh.src, insert(sh.table, nextID, nextID+n))
			for id := nextID; id < nextID+n; id++ {
				ids[i] = append(ids[i], id)
			}
			nextID += n
		}
		if rng.Intn(15) == 0 {
			s := rng.Intn(2)
			if err := stops[s](); err != nil {
				t.Fatalf("syncer s%d failed before its restart: %v", s+1, err)
			}
			time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond) // let the other source move on
			if testing.Verbose() {
				t.Logf("step %d: restart s%d", step, s+1)
			}
			stops[s] = c.startSyncer(s)
			restarts++
		}
	}
	// Every shard finishes both DDLs, then a last write per shard.
	for i, sh := range shards {
		for ; next[i] < len(ddls); next[i]++ {
			c.up(sh.src, "ALTER TABLE "+sh.table+" "+ddls[next[i]])
		}
		c.up(sh.src, fmt.Sprintf("INSERT INTO %s (id, v, c1, c2) VALUES (%d, 'last', %d, 'x')", sh.table, nextID, i))
		nextID++
	}
	c.converge("id, v, c1, c2")
	t.Logf("seed %d: %d rows, %d restarts", seed, nextID-1, restarts)
}

// TestNewShardTableMidStream: a shard table created while the task runs joins its group; the next DDL
// waits for it too, and its rows are merged.
func TestNewShardTableMidStream(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11), insert("db_1.t_2", 101, 111))
	c.up(1, insert("db_2.t_1", 201, 211), insert("db_2.t_2", 301, 311))
	c.up(0, "CREATE TABLE db_1.t_3 (id INT PRIMARY KEY, v VARCHAR(32))", insert("db_1.t_3", 401, 411))
	c.shards[0] = append(c.shards[0], "db_1.t_3")
	c.converge("id, v")
	for i, tables := range c.shards {
		for _, table := range tables {
			if table == "db_1.t_3" {
				continue
			}
			c.up(i, "ALTER TABLE "+table+" ADD COLUMN c INT")
		}
	}
	c.up(0, "INSERT INTO db_1.t_1 (id, v, c) VALUES (20, 'held', 1)")
	// t_3 has not reached the DDL: its rows flow, and the lock waits for it.
	c.up(0, insert("db_1.t_3", 420, 421))
	c.waitRow(420)
	if c.hasRow(20) || c.downColumns() != 2 {
		t.Fatal("the DDL was resolved without the new shard table")
	}
	c.up(0, "ALTER TABLE db_1.t_3 ADD COLUMN c INT")
	c.converge("id, v, c")
}

// TestRestartRebuildsGroupsAtResume: a syncer restarted after its shards changed upstream while it was
// stopped (a new one was created; one reached the DDL, lost its rows and was dropped) rebuilds its
// group as it was at the resume position, not from the tables the upstream has now: the dropped
// table's DDL is still its group's, and the new table joins when its CREATE is read again.
func TestRestartRebuildsGroupsAtResume(t *testing.T) {
	c := newCluster(t)
	stop0 := c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11), insert("db_1.t_2", 101, 111))
	c.up(1, insert("db_2.t_1", 201, 211), insert("db_2.t_2", 301, 311))
	c.converge("id, v")
	if err := stop0(); err != nil {
		t.Fatal(err)
	}
	c.up(0, "CREATE TABLE db_1.t_3 (id INT PRIMARY KEY, v VARCHAR(32))", insert("db_1.t_3", 401, 411),
		"ALTER TABLE db_1.t_2 ADD COLUMN c INT", "INSERT INTO db_1.t_2 VALUES (120, 'gone', 5)",
		"DELETE FROM db_1.t_2", "DROP TABLE db_1.t_2")
	c.shards[0] = []string{"db_1.t_1", "db_1.t_3"}
	c.startSyncer(0)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "INSERT INTO db_1.t_1 VALUES (20, 'held', 1)")
	// t_3 has not reached the DDL: its rows flow, the lock waits for it.
	c.up(0, insert("db_1.t_3", 420, 421))
	c.waitRow(420)
	if c.hasRow(20) {
		t.Fatal("a row written after the DDL reached the downstream before t_3 reached it")
	}
	c.up(0, "ALTER TABLE db_1.t_3 ADD COLUMN c INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", "INSERT INTO db_2.t_2 VALUES (320, 'after', 2)")
	c.converge("id, v, c")
}

func (c *cluster) downColumns() int {
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't'").Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// TestConflictBlocksOnlyItsLock: INT on one source and FLOAT on the other for the same column of db.u
// is a conflict: shown with both DDLs and sources, nothing executed, while db.t keeps flowing.
func TestConflictBlocksOnlyItsLock(t *testing.T) {
	c := newCluster(t)
	c.up(0, "CREATE TABLE db_1.u_1 (id INT PRIMARY KEY, v VARCHAR(32))")
	c.up(1, "CREATE TABLE db_2.u_1 (id INT PRIMARY KEY, v VARCHAR(32))")
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, "ALTER TABLE db_1.u_1 ADD COLUMN c INT", "INSERT INTO db_1.u_1 VALUES (1, 'a', 1)")
	c.up(1, "ALTER TABLE db_2.u_1 ADD COLUMN c FLOAT", "INSERT INTO db_2.u_1 VALUES (2, 'b', 2.5)")
	var lock pessimist.Lock
	var locks []pessimist.Lock
	wait.Eventually(t, 30*time.Second, func() bool {
		locks, _ = c.coord.Locks()
		if len(locks) == 1 && locks[0].Stage == "conflict" {
			lock = locks[0]
			return true
		}
		return false
	}, func() string { return fmt.Sprintf("no conflicting lock shown: %+v", locks) })
	if lock.ID != "test-`db`.`u`" || len(lock.Conflict) != 2 || lock.Conflict[0].Source != "s1" ||
		!strings.Contains(lock.Conflict[0].DDLs[0], "INT") || !strings.Contains(lock.Conflict[1].DDLs[0], "FLOAT") {
		t.Fatalf("conflict shown as %+v", lock)
	}
	// The other target flows on both sources.
	c.up(0, insert("db_1.t_1", 10, 20))
	c.up(1, insert("db_2.t_2", 30, 40))
	c.converge("id, v")
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 'u' AND COLUMN_NAME = 'c'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("a conflicting DDL was executed downstream (%d, %v)", n, err)
	}
}

// TestExistingIncompatibleTargetIsReported: a downstream table that exists with another schema stops
// the syncer with both definitions in the error and is left as it was.
func TestExistingIncompatibleTargetIsReported(t *testing.T) {
	c := newCluster(t)
	c.down.Exec(t, c.downDB, "CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v INT, extra TEXT)", "INSERT INTO db.t VALUES (1, 1, 'keep')")
	start := c.startPosition(0)
	s := NewSyncer(SyncerConfig{Start: start,
		Task: c.task, Source: "s1", Host: "127.0.0.1", Port: uint16(c.ups[0].Port), User: "root",
		ServerID: 9100, Router: c.router, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true, MetaSchema: "dm_meta",
		Agent: pessimist.NewAgent(c.cli, c.layout, c.task, "s1", nil),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not match upstream `db_1`.`t_1`") ||
		!strings.Contains(err.Error(), "`extra` text") || !strings.Contains(err.Error(), "left untouched") {
		t.Fatalf("Run: %v", err)
	}
	got, err := e2e.Rows(c.downDB, "SELECT * FROM db.t")
	if err != nil || len(got) != 1 || got[0] != "1|1|keep" {
		t.Fatalf("the existing table changed: %v %v", got, err)
	}
}

// TestUnshardedTableGoesStraightThrough: a table routed by the schema rule alone is not sharded: its
// CREATE and ALTER run downstream at once, without a lock.
func TestUnshardedTableGoesStraightThrough(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	// MariaDB-only syntax the TiDB parser cannot read, in a database the task filters out: skipped.
	c.up(0, "CREATE DATABASE other", "USE other; CREATE OR REPLACE TABLE x (a INT); USE mysql")
	c.up(0, "CREATE TABLE db_1.plain (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO db_1.plain VALUES (1, 'a')",
		"ALTER TABLE db_1.plain ADD COLUMN w INT", "INSERT INTO db_1.plain VALUES (2, 'b', 3)")
	var got []string
	var err error
	wait.Eventually(t, 30*time.Second, func() bool {
		got, err = e2e.Rows(c.downDB, "SELECT id, v, w FROM db.plain ORDER BY id")
		return err == nil && strings.Join(got, ",") == "1|a|NULL,2|b|3"
	}, func() string { return fmt.Sprintf("db.plain downstream: %v %v", got, err) })
	if locks, _ := c.coord.Locks(); len(locks) != 0 {
		t.Fatalf("an unsharded DDL took a lock: %+v", locks)
	}
}

// TestSourceRestartIsSurvived: the upstream server goes away and comes back; the syncer reconnects
// (with backoff) from its last complete event group and the data converges.
func TestSourceRestartIsSurvived(t *testing.T) {
	c := newCluster(t)
	core, logs := observer.New(zap.WarnLevel)
	c.log = zap.New(core)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11))
	c.waitRow(10)
	c.ups[0].Restart(t, 4*time.Second) // longer than go-mysql's own retries
	wait.Eventually(t, 30*time.Second, func() bool { return logs.FilterMessage("binlog read failed, reconnecting").Len() > 0 },
		func() string { return "the syncer did not go through its reconnect loop" })
	c.up(0, insert("db_1.t_1", 11, 21), "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT", insert("db_2.t_2", 30, 40))
	c.converge("id, v, c")
}

// runOwnSyncer starts a syncer of source 1 (a new binding) whose Run error the test reads; it is
// stopped when the test ends.
func (c *cluster) runOwnSyncer(serverID uint32) (*Syncer, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSyncer(SyncerConfig{Start: c.startPosition(0), Task: c.task, Source: "s1", Host: "127.0.0.1", Port: uint16(c.ups[0].Port),
		User: "root", ServerID: serverID, Router: c.router, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true, MetaSchema: "dm_meta",
		Agent: pessimist.NewAgent(c.cli, c.layout, c.task, "s1", nil), Epoch: c.nextEpoch(), Log: c.logger()})
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	c.t.Cleanup(cancel)
	select {
	case <-s.Started():
	case err := <-errc:
		c.t.Fatalf("syncer did not start: %v", err)
	}
	return s, errc
}

// TestStaleBindingIsFenced: once a syncer of a newer binding (higher epoch) has claimed the source's
// checkpoint, the older one, still running, cannot commit anything and stops with ErrFenced; the newer
// one carries on and nothing is lost.
func TestStaleBindingIsFenced(t *testing.T) {
	c := newCluster(t)
	_, oldErr := c.runOwnSyncer(9200)
	c.up(0, insert("db_1.t_1", 0, 10))
	c.converge("id, v")
	// The binding moves: a new syncer claims the checkpoint while the old one still runs.
	stopNew := c.startSyncer(0)
	defer stopNew()
	c.up(0, insert("db_1.t_1", 10, 20))
	select {
	case err := <-oldErr:
		if !errors.Is(err, meta.ErrFenced) {
			t.Fatalf("old syncer stopped with %v, want ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the old syncer kept running after a newer binding claimed the checkpoint")
	}
	c.converge("id, v")
	var owner int64
	if err := c.downDB.QueryRow("SELECT binlog_pos FROM dm_meta.test_checkpoint WHERE source = 's1' AND id = 'epoch'").Scan(&owner); err != nil || owner != c.epoch {
		t.Fatalf("checkpoint owner %d (%v), want %d", owner, err, c.epoch)
	}
	// A sink of an old epoch can neither claim nor commit.
	sk := sink.NewSink(c.downDB, "dm_meta", c.task, "s1")
	sk.SetEpoch(c.epoch - 1)
	if err := sk.Init(context.Background()); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("claim of a stale epoch: %v", err)
	}
	if err := sk.Flush(context.Background(), nil, meta.CheckpointUpdate{Global: vocab.Position{File: "mysql-bin.000001", Pos: 4}}); !errors.Is(err, meta.ErrFenced) {
		t.Fatalf("flush of a stale epoch: %v", err)
	}
}

// TestLockRemovedWithItsTaskStopsTheSyncer: keys removed by stop-task (the task's key goes with them)
// stop a syncer still waiting on the lock instead of being taken for a force-removed lock, whose
// DDLs a source skips: nothing is recorded as resolved.
func TestLockRemovedWithItsTaskStopsTheSyncer(t *testing.T) {
	c := newCluster(t)
	s, errc := c.runOwnSyncer(9300)
	for _, table := range c.shards[0] {
		c.up(0, "ALTER TABLE "+table+" ADD COLUMN c INT")
	}
	wait.Eventually(t, 30*time.Second, func() bool { return len(s.Status().LockIDs) == 1 }, func() string { return "no info posted" })
	if err := pessimist.DeleteTask(context.Background(), c.cli, c.layout, c.task); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, pessimist.ErrLockRemoved) || !strings.Contains(err.Error(), "stop-task") {
			t.Fatalf("syncer stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the syncer did not stop")
	}
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM dm_meta.test_checkpoint WHERE id LIKE 'resolved:%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("DDLs recorded as resolved after stop-task: %d %v", n, err)
	}
	if c.downColumns() != 2 {
		t.Fatal("the DDL ran downstream")
	}
}

// TestResumePositionMovesUnderMultiTableTransactions: a backlog of transactions that each write two
// tables of different partitions makes every flush of the catch-up commit several partitions; the
// resume position must move during the catch-up (it stayed where it was until the syncer was idle: a
// restart re-read everything since, and a purged binlog made the source unrecoverable).
func TestResumePositionMovesUnderMultiTableTransactions(t *testing.T) {
	c := newCluster(t)
	start := c.startPosition(0)
	const txns = 30000
	c.up(0, `CREATE PROCEDURE db_1.fill(n INT) BEGIN
		DECLARE i INT DEFAULT 0;
		WHILE i < n DO
			START TRANSACTION;
			INSERT INTO db_1.t_1 VALUES (i, 'a');
			INSERT INTO db_1.t_2 VALUES (1000000 + i, 'b');
			COMMIT;
			SET i = i + 1;
		END WHILE;
	END`, fmt.Sprintf("CALL db_1.fill(%d)", txns))
	_, s := c.startSyncerGet(0)
	if s.apply.partitionOf(vocab.TableName{Schema: "db_1", Name: "t_1"}) == s.apply.partitionOf(vocab.TableName{Schema: "db_1", Name: "t_2"}) {
		t.Fatal("db_1.t_1 and db_1.t_2 share a partition: pick tables of different partitions")
	}
	movedEarly := false
	wait.Until(60*time.Second, func() bool {
		var p vocab.Position
		var n int
		if err := c.downDB.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta.test_checkpoint WHERE source = 's1' AND id = ''").Scan(&p.File, &p.Pos); err != nil {
			return false // not created yet
		}
		if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&n); err != nil {
			return false
		}
		movedEarly = n < 2*txns && p.Compare(start) > 0
		return n == 2*txns || movedEarly
	})
	if !movedEarly {
		t.Fatalf("the resume position stayed at %s while a backlog of %d two-table transactions was applied", start, txns)
	}
	c.converge("id, v")
}

// TestNextLockWaitsForTheReRead: a source reaches two locks' DDLs before the first resolves, with
// many rows between them on one shard (held back behind the first). When the first resolves, the rows
// are read again; the info of the second must not go before they are downstream, or its owner runs
// the second DDL (here a DROP of the column the rows fill) first and the rows are refused or lost.
func TestNextLockWaitsForTheReRead(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	var vals []string
	for i := range 20000 {
		vals = append(vals, fmt.Sprintf("(%d, 'v', %d)", 10000+i, i))
	}
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "INSERT INTO db_2.t_1 VALUES "+strings.Join(vals, ","), "ALTER TABLE db_2.t_1 DROP COLUMN c",
		"ALTER TABLE db_2.t_2 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 DROP COLUMN c")
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT",
		"ALTER TABLE db_1.t_1 DROP COLUMN c", "ALTER TABLE db_1.t_2 DROP COLUMN c")
	want := c.merged("id, v")
	var got []string
	var n int
	var failed error
	wait.Eventually(t, 60*time.Second, func() bool {
		select {
		case failed = <-c.failures(1):
			return true
		default:
		}
		// The rows can all be there while the last lock (DROP COLUMN c,
		// completed by the last shard's DROP) has yet to run downstream:
		// converged means both.
		got, _ = e2e.Rows(c.downDB, "SELECT id, v FROM db.t")
		n = c.downColumns()
		return slices.Equal(got, want) && n == 2
	}, func() string {
		return fmt.Sprintf("downstream did not converge (db.t has %d columns, want 2 (id, v)): %s", n, e2e.FirstDiff(got, want))
	})
	if failed != nil {
		t.Fatalf("source 2 stopped: %v", failed)
	}
}
