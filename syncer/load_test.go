package syncer

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

// loadCluster is a cluster whose shard tables hold rows before the task starts, with a wider table
// beside them: t_* (integer key: copied in chunks over several lanes) and u_1 (no key, the types that
// need care: copied whole).
func loadCluster(t *testing.T, rows int) *cluster {
	c := newCluster(t)
	for i := range c.ups {
		for _, table := range c.shards[i] {
			for from := 0; from < rows; from += 1000 {
				c.up(i, insert(table, i*1_000_000+from+shardBase(table), i*1_000_000+min(from+1000, rows)+shardBase(table)))
			}
		}
		schema := fmt.Sprintf("db_%d", i+1)
		c.up(i, "CREATE TABLE "+schema+".u_1 (f FLOAT, d DOUBLE, b BIT(12), j JSON, y YEAR, tm TIME(3), dt DATETIME(6), bin BINARY(4), "+
			"txt TEXT, big BIGINT UNSIGNED, dec1 DECIMAL(65,30), e ENUM('a','b'), g INT AS (y + 1) VIRTUAL)",
			"INSERT INTO "+schema+".u_1 (f, d, b, j, y, tm, dt, bin, txt, big, dec1, e) VALUES "+
				"(1.2345678, 1.7976931348623157e308, b'101010101010', '{\"k\": [1, \"😀\"]}', 1901, '-838:59:59.000', '2024-05-00 01:02:03.000006', 'a\\0', 'zero \\0 byte 😀', 18446744073709551615, '-12345678901234567890.123456789012345678901234567890', 'b'),"+
				"(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"+
				"(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
	}
	return c
}

// shardBase keeps the two shard tables of a source apart: t_2's ids start at 500 000.
func shardBase(table string) int {
	if table[len(table)-1] == '2' {
		return 500_000
	}
	return 0
}

func (c *cluster) loadParams(i int) LoadParams {
	src := fmt.Sprintf("s%d", i+1)
	return LoadParams{Task: c.task, Source: src, MetaSchema: "dm_meta",
		Upstream: config.Database{Host: "127.0.0.1", Port: c.ups[i].Port, User: "root"},
		Down:     c.syncDB, Router: c.router, Epoch: c.nextEpoch(),
		Agent: pessimist.NewAgent(c.cli, c.layout, c.task, src, nil), EnableGTID: c.gtid,
		Dump: config.DumpConfig{Threads: 3, Rows: 300}, Load: config.LoadConfig{PoolSize: 3, OnDuplicate: "error"},
		Log: c.logger()}
}

// writer changes the shards until stopped: inserts, updates of values and of keys, deletes, in every
// lane's range, and on the keyless table.
func (c *cluster) writer(seed int64, rows int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range c.ups {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed + int64(i)))
			next := 2_000_000 + i*1_000_000
			for n := 0; ctx.Err() == nil; n++ {
				table := c.shards[i][rnd.Intn(len(c.shards[i]))]
				id := i*1_000_000 + shardBase(table) + rnd.Intn(rows)
				var q string
				switch rnd.Intn(5) {
				case 0:
					q = fmt.Sprintf("INSERT INTO %s VALUES (%d, 'new')", table, next)
					next++
				case 1:
					q = fmt.Sprintf("UPDATE %s SET v = 'upd%d' WHERE id = %d", table, n, id)
				case 2:
					q = fmt.Sprintf("UPDATE %s SET id = %d WHERE id = %d", table, next, id) // key moves to the last lane
					next++
				case 3:
					q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, id)
				case 4:
					q = fmt.Sprintf("UPDATE db_%d.u_1 SET y = 1901 + %d WHERE y IS NULL OR y < 2100 LIMIT 1", i+1, n%100)
				}
				// without ctx: a statement cancelled in flight may still commit upstream after the
				// writer has stopped
				if _, err := c.upDBs[i].Exec(q); err != nil {
					c.t.Errorf("writer: %s: %v", q, err)
					return
				}
			}
		}(i)
	}
	return func() { cancel(); wg.Wait() }
}

const uCols = "CAST(f AS DOUBLE), d, HEX(b), j, y, tm, dt, HEX(bin), HEX(txt), big, dec1, e, g"

func (c *cluster) convergeTable(downTable, upTable, cols string) {
	c.t.Helper()
	var want []string
	for _, db := range c.upDBs {
		for _, schema := range []string{"db_1", "db_2"} {
			for _, table := range strings.Split(upTable, ",") {
				r, err := e2e.Rows(db, fmt.Sprintf("SELECT %s FROM %s.%s", cols, schema, table))
				if err == nil {
					want = append(want, r...)
				}
			}
		}
	}
	slices.Sort(want)
	var got []string
	wait.Eventually(c.t, 60*time.Second, func() bool {
		r, err := e2e.Rows(c.downDB, "SELECT "+cols+" FROM "+downTable)
		if err == nil {
			got = r
		}
		return err == nil && slices.Equal(got, want)
	}, func() string {
		return fmt.Sprintf("%s did not converge: %d rows, want %d\n%s", downTable, len(got), len(want), symDiff(got, want))
	})
}

// symDiff lists (up to 20) rows only downstream and only upstream.
func symDiff(down, up []string) string {
	count := map[string]int{}
	for _, r := range down {
		count[r]++
	}
	for _, r := range up {
		count[r]--
	}
	var out []string
	for r, n := range count {
		switch {
		case n > 0:
			out = append(out, fmt.Sprintf("downstream only (x%d): %s", n, r))
		case n < 0:
			out = append(out, fmt.Sprintf("upstream only (x%d): %s", -n, r))
		}
	}
	slices.Sort(out)
	if len(out) > 20 {
		out = out[:20]
	}
	return strings.Join(out, "\n")
}

func (c *cluster) tableExists(t vocab.TableName) bool {
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n > 0
}

// TestFullLoadThenSync: two sources load their shards while writers change them, the merged target
// stays hidden until both have loaded, and the sync units started at the snapshots converge the
// downstream to the merged upstream: nothing lost, nothing twice, values exact.
func TestFullLoadThenSync(t *testing.T) { fullLoadThenSync(t, true) }

// TestFullLoadWithoutLocalInfile: the same with a downstream that refuses LOAD DATA LOCAL INFILE
// (MySQL 8's default): the load writes multi-row INSERTs instead.
func TestFullLoadWithoutLocalInfile(t *testing.T) { fullLoadThenSync(t, false) }

func fullLoadThenSync(t *testing.T, localInfile bool) {
	const rows = 3000
	c := loadCluster(t, rows)
	if !localInfile {
		c.down.Exec(t, c.downDB, "SET GLOBAL local_infile = 0")
	}
	stopWriter := c.writer(1, rows)
	defer stopWriter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var units [2]atomic.Pointer[loader.Unit]
	errs := make(chan error, 2)
	start := func(i int) {
		p := c.loadParams(i)
		p.OnUnit = func(u *loader.Unit) { units[i].Store(u) }
		go func() { errs <- RunLoad(ctx, p) }()
	}
	start(0)
	wait.Eventually(t, 60*time.Second, func() bool {
		u := units[0].Load()
		return u != nil && u.Progress().State == "loaded"
	}, func() string { return "source 1 did not finish loading" })
	// Source 1 waits at the cut-over: the merged target is not visible yet, its rows are hidden.
	if c.tableExists(vocab.TableName{Schema: "db", Name: "t"}) {
		t.Fatal("db.t is visible before every source has loaded")
	}
	if !c.tableExists(vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})}) {
		t.Fatal("the hidden table of db.t does not exist while source 1 waits")
	}
	start(1)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !c.tableExists(vocab.TableName{Schema: "db", Name: "t"}) || c.tableExists(vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})}) {
		t.Fatal("after the cut-over db.t must exist and its hidden table must not")
	}
	if p := units[0].Load().Progress(); p.FinishedRows < rows { // 2*rows less what the writer deleted
		t.Fatalf("source 1 reports %d rows loaded, want at least %d", p.FinishedRows, rows)
	}
	c.startSyncer(0)
	c.startSyncer(1)
	stopWriter()
	c.converge("id, v")
	c.convergeTable("db.u", "u_1", uCols)
}

// TestFullLoadResumesAfterCrash: the load of source 1 stops after a few chunks (as a kill would: the
// committed chunks stay), the writers go on, and a new run resumes from a later snapshot. The sync unit
// then starts at the first snapshot and applies the events between the snapshots only to the rows
// whose copy predates them: the downstream converges without duplicates or gaps.
func TestFullLoadResumesAfterCrash(t *testing.T) { fullLoadResumes(t, false) }

// TestFullLoadResumesAfterCrashGTID: the same with GTID sources (the sync unit starts from the first
// snapshot's GTID set).
func TestFullLoadResumesAfterCrashGTID(t *testing.T) { fullLoadResumes(t, true) }

func fullLoadResumes(t *testing.T, gtid bool) {
	const rows = 3000
	c := loadCluster(t, rows)
	c.gtid = gtid
	stopWriter := c.writer(7, rows)
	defer stopWriter()
	ctx := context.Background()

	crash := errors.New("simulated crash")
	var chunks atomic.Int64
	p := c.loadParams(0)
	p.AfterChunk = func(vocab.TableName) error {
		if chunks.Add(1) == 5 {
			return crash
		}
		return nil
	}
	if err := RunLoad(ctx, p); !errors.Is(err, crash) {
		t.Fatalf("first run: %v, want the simulated crash", err)
	}
	// Let the writers change rows between the two snapshots: the window is what the test is about (the
	// longer, the more rows change under the resumed load), no event to wait for.
	time.Sleep(300 * time.Millisecond)
	errs := make(chan error, 2)
	go func() { errs <- RunLoad(ctx, c.loadParams(0)) }()
	go func() { errs <- RunLoad(ctx, c.loadParams(1)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.startSyncer(0)
	c.startSyncer(1)
	stopWriter()
	c.convergeTable("db.t", "t_1,t_2", "id, v")
	c.convergeTable("db.u", "u_1", uCols)
}

// TestDuplicateKeyBetweenShardsStopsTheLoad: two shards holding the same key cannot merge; with
// on-duplicate error (the default) the load stops with the server's duplicate-key message instead of
// keeping one of the rows silently (LOAD DATA LOCAL turns errors into warnings: they are checked), and
// with ignore it keeps the first.
func TestDuplicateKeyBetweenShardsStopsTheLoad(t *testing.T) {
	for _, localInfile := range []bool{true, false} {
		t.Run(fmt.Sprintf("local_infile=%t", localInfile), func(t *testing.T) {
			c := newCluster(t)
			if !localInfile {
				c.down.Exec(t, c.downDB, "SET GLOBAL local_infile = 0")
			}
			c.up(0, "INSERT INTO db_1.t_1 VALUES (1, 'first'), (2, 'two')")
			c.up(1, "INSERT INTO db_2.t_1 VALUES (1, 'second')")
			errs := make(chan error, 2)
			for i := range c.ups {
				p := c.loadParams(i)
				go func() { errs <- RunLoad(t.Context(), p) }()
			}
			err := <-errs
			if err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
				t.Fatalf("load: %v, want a duplicate key error", err)
			}
		})
	}
}

// TestFullLoadIntoExistingEmptyTarget: a target the user created (empty) is loaded in place by every
// source, one after the other: the second does not take the first one's rows for the user's.
func TestFullLoadIntoExistingEmptyTarget(t *testing.T) {
	const rows = 1000
	c := loadCluster(t, rows)
	c.down.Exec(t, c.downDB, "CREATE DATABASE db", "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(32))")
	errs := make(chan error, 2)
	var units [2]atomic.Pointer[loader.Unit]
	for i := range c.ups {
		p := c.loadParams(i)
		p.OnUnit = func(u *loader.Unit) { units[i].Store(u) }
		go func() { errs <- RunLoad(t.Context(), p) }()
		// the second source plans only once the first has loaded its rows in place
		wait.Eventually(t, 60*time.Second, func() bool {
			u := units[i].Load()
			return i == 1 || (u != nil && u.Progress().State == "loaded")
		}, func() string { return "source 1 did not finish loading" })
	}
	for range c.ups {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if c.tableExists(vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})}) {
		t.Fatal("a target that existed is loaded in place, without a hidden table")
	}
	c.startSyncer(0)
	c.startSyncer(1)
	c.converge("id, v")
}

// TestCutOverRefusesATargetCreatedMeanwhile: a table the user creates under the target's name while the
// sources load is theirs: the cut-over renames nothing onto it, says what happened, and leaves both it
// and the loaded rows (in the hidden table) as they are.
func TestCutOverRefusesATargetCreatedMeanwhile(t *testing.T) {
	c := loadCluster(t, 200)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var first atomic.Pointer[loader.Unit]
	errs := make(chan error, 2)
	p := c.loadParams(0)
	p.OnUnit = func(u *loader.Unit) { first.Store(u) }
	go func() { errs <- RunLoad(ctx, p) }()
	wait.Eventually(t, 60*time.Second, func() bool {
		u := first.Load()
		return u != nil && u.Progress().State == "loaded"
	}, func() string { return "source 1 did not finish loading" })
	// the user creates db.t once source 2 has planned its load (its first chunk)
	var once sync.Once
	p2 := c.loadParams(1)
	p2.AfterChunk = func(vocab.TableName) error {
		once.Do(func() {
			c.down.Exec(t, c.downDB, "CREATE TABLE db.t (id INT PRIMARY KEY, v VARCHAR(32))", "INSERT INTO db.t VALUES (-1, 'users')")
		})
		return nil
	}
	go func() { errs <- RunLoad(ctx, p2) }()
	err := <-errs // the owner's
	if err == nil || !strings.Contains(err.Error(), "`db`.`t` was created while the task loaded it") {
		t.Fatalf("cut-over: %v, want the refusal naming db.t", err)
	}
	if r, _ := e2e.Rows(c.downDB, "SELECT id, v FROM db.t"); strings.Join(r, ",") != "-1|users" {
		t.Fatalf("the user's db.t changed: %v", r)
	}
	var n int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db." + loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})).Scan(&n); err != nil || n != 800 {
		t.Fatalf("hidden table: %d rows (%v), want the 800 loaded", n, err)
	}
}

// TestFullLoadWithUpstreamALTERDuringCopy: an upstream ALTER of a table while the load copies it waits
// for the snapshot's metadata lock (as it would behind mysqldump). Every reader opened the table under
// the read lock, so none queues behind the waiting ALTER: the load ends, and the ALTER runs after it.
// (Readers that opened their tables only when they came to them waited forever behind the ALTER,
// which waited for the snapshot.)
func TestFullLoadWithUpstreamALTERDuringCopy(t *testing.T) {
	c := loadCluster(t, 3000)
	p := c.loadParams(0)
	var once sync.Once
	altered := make(chan error, 1)
	p.AfterChunk = func(vocab.TableName) error {
		once.Do(func() {
			go func() {
				_, err := c.upDBs[0].Exec("ALTER TABLE db_1.t_2 ADD COLUMN c INT")
				altered <- err
			}()
			wait.Eventually(t, 30*time.Second, func() bool {
				var n int
				c.upDBs[0].QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock' AND INFO LIKE 'ALTER TABLE db_1.t_2%'").Scan(&n)
				return n == 1
			}, func() string { return "the ALTER never waited for the snapshot's metadata lock" })
		})
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- RunLoad(ctx, p) }()
	go func() { errs <- RunLoad(ctx, c.loadParams(1)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("load with an upstream ALTER waiting: %v", err)
		}
	}
	select {
	case err := <-altered:
		if err != nil {
			t.Fatalf("the ALTER after the load: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream ALTER did not run after the load ended")
	}
}

// TestFullLoadRefusesHalfAlteredShards: a shard DDL that ran on one shard of a source but not yet on the
// other when the load's snapshot was taken would leave that shard group waiting forever after the load.
// The load stops before copying anything, naming both tables, and succeeds once the other shard has the
// DDL too.
func TestFullLoadRefusesHalfAlteredShards(t *testing.T) {
	c := loadCluster(t, 100)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a load that went on would wait for source 2
	defer cancel()
	err := RunLoad(ctx, c.loadParams(0))
	if err == nil || !strings.Contains(err.Error(), "`db_1`.`t_1` and `db_1`.`t_2`") || !strings.Contains(err.Error(), "different columns") {
		t.Fatalf("load of half-altered shards: %v", err)
	}
	if c.tableExists(vocab.TableName{Schema: "db", Name: loader.HiddenName(c.task, vocab.TableName{Schema: "db", Name: "t"})}) {
		t.Fatal("the refused load created its hidden table")
	}
	c.up(0, "ALTER TABLE db_1.t_2 ADD COLUMN c INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN c INT", "ALTER TABLE db_2.t_2 ADD COLUMN c INT")
	errs := make(chan error, 2)
	go func() { errs <- RunLoad(t.Context(), c.loadParams(0)) }()
	go func() { errs <- RunLoad(t.Context(), c.loadParams(1)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.convergeTable("db.t", "t_1,t_2", "id, v, c")
}

// TestLoadProgressMovesWithinATransaction: a table without a key is copied in one transaction; the
// load's progress (query-status' finishedRows, finishedBytes, progress) still rises while it is sent,
// not only when it commits.
func TestLoadProgressMovesWithinATransaction(t *testing.T) {
	const rows = 200_000
	c := loadCluster(t, 0)
	c.up(0, fmt.Sprintf("INSERT INTO db_1.u_1 (f, txt, j) SELECT seq, REPEAT('é', 20), JSON_OBJECT('k', seq) FROM db_1.seq_1_to_%d", rows))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var unit atomic.Pointer[loader.Unit]
	p := c.loadParams(0)
	p.OnUnit = func(u *loader.Unit) { unit.Store(u) }
	errs := make(chan error, 1)
	go func() { errs <- RunLoad(ctx, p) }()
	seen := map[int64]bool{}
	var bytes int64
	wait.Eventually(t, 120*time.Second, func() bool {
		u := unit.Load()
		if u == nil {
			return false
		}
		pr := u.Progress()
		if pr.State == "loading" && pr.FinishedRows > 0 && pr.FinishedRows < rows {
			seen[pr.FinishedRows] = true
			bytes = max(bytes, pr.FinishedBytes)
		}
		return pr.State == "loaded"
	}, func() string { return "source 1 did not finish loading" })
	if len(seen) < 2 || bytes == 0 {
		t.Fatalf("while the table was sent, query-status showed %d distinct row counts between 0 and %d (bytes %d): the progress did not move", len(seen), rows, bytes)
	}
	if p := unit.Load().Progress(); p.FinishedRows != rows+3 || p.Done() != 1 {
		t.Fatalf("after the load: %+v", p)
	}
	cancel()
	<-errs
}
