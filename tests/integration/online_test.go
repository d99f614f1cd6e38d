package integration

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/onlinetest"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// Online DDL through the real binaries (task online-ddl: true): shards altered by a real
// pt-online-schema-change (Debian's percona-toolkit) while writers change them, and by gh-ost, whose
// statements are replayed: gh-ost is not served by the Go module proxy (nor packaged here), so no real
// gh-ost runs; the tests replay the statement sequence of internal/testkit/onlinetest.Ghost,
// reconstructed from the statements gh-ost documents (its ghost, changelog and cut-over sentry
// tables, the atomic cut-over RENAME). Ghost
// and trash tables must never reach the downstream (no table, no row, no trigger); the cut-over must
// become the shard's ALTER at that position and join the shard DDL lock like a plain ALTER, which runs
// once downstream.

const (
	olAlter = "ADD COLUMN c INT NOT NULL DEFAULT 0"
	// olLockDDL is olAlter as the lock and the downstream show it.
	olLockDDL = "ADD COLUMN `c` INT NOT NULL DEFAULT 0"
	olTask    = "online-ddl: true\n"
)

// olToolTable matches the ghost and trash tables of gh-ost (_t_gho, _t_ghc, _t_del) and pt-osc
// (_t_new, _t_old) of the shard tables t_N, named as an identifier (quoted, or after a schema's dot).
var olToolTable = regexp.MustCompile("(?i)(`|\\.)_t_[0-9]+_(new|gho|ghc|del|old)\\b")

// olMetaWrite is a write to the task's meta tables (checkpoint, markers): the online DDL runs kept in
// the checkpoint name the ghost table in JSON, which is no trace of it downstream.
var olMetaWrite = regexp.MustCompile("(?is)^\\s*(INSERT|REPLACE|UPDATE|DELETE)\\s+(IGNORE\\s+)?(INTO\\s+|FROM\\s+)?`?dm_meta`?\\.")

// needPtOSC returns pt-online-schema-change's path, or skips the test.
func needPtOSC(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs pt-online-schema-change on a mariadbd: skipped under -short (make unit); make test runs it")
	}
	p, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		t.Skip("pt-online-schema-change not found: install percona-toolkit (apt-get install -y percona-toolkit; .ci/run does) to run this test")
	}
	return p
}

// startOnline starts the e2e cluster with the task's online-ddl: true.
func startOnline(t *testing.T) *e2eCluster {
	t.Helper()
	return startWith(t, e2e.Options{Workers: 2, TaskExtra: olTask}, true)
}

// olGhost is gh-ost's statement sequence (a replay: internal/testkit/onlinetest).
var olGhost = onlinetest.Ghost

// olGhostApply writes rows [from, to) to schema.table while gh-ost runs, and what gh-ost's binlog
// applier writes for them to the ghost table (which keeps it in step between row copy and cut-over).
func olGhostApply(schema, table string, from, to int) []string {
	var out []string
	for id := from; id < to; id++ {
		out = append(out,
			fmt.Sprintf("INSERT INTO `%s`.`%s` (id, v) VALUES (%d, 'live%d')", schema, table, id, id),
			fmt.Sprintf("replace /* gh-ost `%s`.`_%s_gho` */ into `%s`.`_%s_gho` (`id`, `v`) values (%d, 'live%d')", schema, table, schema, table, id, id))
	}
	return out
}

// olPtOSC is one pt-online-schema-change process.
type olPtOSC struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	held chan struct{} // closed when the hold plugin holds it before its swap (see olHoldPlugin)
	done chan struct{}
	err  error
}

// startPtOSC starts pt-online-schema-change on upstream up's schema.table. Small fixed chunks with a
// pause between them make the copy span many writer statements.
func (c *e2eCluster) startPtOSC(bin string, up int, schema, table, alter string, extra ...string) *olPtOSC {
	c.t.Helper()
	args := append([]string{"--alter", alter, fmt.Sprintf("h=127.0.0.1,P=%d,u=root,D=%s,t=%s", c.Ups[up].Port, schema, table),
		"--execute",
		"--recursion-method=none", // a test server has no replicas to find or wait for
		"--no-version-check",      // no call to Percona's version server
		"--chunk-size=100", "--chunk-time=0", "--sleep=0.02"}, extra...)
	p := &olPtOSC{cmd: exec.Command(bin, args...), held: make(chan struct{}), done: make(chan struct{})}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start pt-online-schema-change: %v", err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		var once sync.Once
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if line == olHeldLine {
				once.Do(func() { close(p.held) })
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		<-scanned
		p.err = err
		close(p.done)
	}()
	c.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill() // only this test's own pt-online-schema-change
			<-p.done
		}
	})
	return p
}

func (p *olPtOSC) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for pt-online-schema-change to exit and fails the test unless it succeeded.
func (p *olPtOSC) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("pt-online-schema-change still running after 3m:\n%s", p.output())
	}
	if p.err != nil || !strings.Contains(p.output(), "Successfully altered") {
		t.Fatalf("pt-online-schema-change: %v\n%s", p.err, p.output())
	}
}

// olHoldPlugin is a pt-online-schema-change --plugin that holds the tool before its cut-over (the
// RENAME that swaps the tables) until the release file (RELEASE_FILE in the text) exists. (Its
// --pause-file is no use here: it is checked before the row copy only, and pt-osc 3.2.1 looks again
// only after 60 seconds.)
const olHoldPlugin = `package pt_online_schema_change_plugin;
use strict;
sub new { my ($class, %args) = @_; return bless {}, $class; }
sub before_swap_tables {
   local $| = 1;
   print "` + olHeldLine + `\n";
   select(undef, undef, undef, 0.02) until -e 'RELEASE_FILE';
}
1;
`

const olHeldLine = "tributary test: held before the swap"

// startHeldPtOSC starts pt-online-schema-change with olHoldPlugin; the file release lets it go on.
func (c *e2eCluster) startHeldPtOSC(bin string, up int, schema, table, alter, release string) *olPtOSC {
	c.t.Helper()
	plugin := filepath.Join(c.Dir, "hold-plugin.pl")
	if err := os.WriteFile(plugin, []byte(strings.ReplaceAll(olHoldPlugin, "RELEASE_FILE", release)), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return c.startPtOSC(bin, up, schema, table, alter, "--plugin="+plugin)
}

// waitHeld waits until olHoldPlugin holds pt-online-schema-change: the new table is created and
// altered, its triggers are there and the rows are copied; the cut-over is not done.
func (p *olPtOSC) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-p.held:
	case <-p.done:
		t.Fatalf("pt-online-schema-change exited before its cut-over was held: %v\n%s", p.err, p.output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("pt-online-schema-change was not held before its cut-over in 2m:\n%s", p.output())
	}
}

// olWriters change shard tables of one upstream until stopped: inserts, value updates, key updates and
// deletes, one autocommit statement at a time, naming only the columns id and v (valid before and
// after the ALTER). A statement the server refuses with a deadlock or a lock wait timeout (pt-osc's
// triggers and row copy take locks) was rolled back and is not retried; any other error fails the
// test. ok counts the committed statements.
type olWriters struct {
	t          *testing.T
	ws         []*olWriter
	quit       chan struct{}
	wg         sync.WaitGroup
	ok         atomic.Int64
	rolledBack atomic.Int64
	errs       chan error
	once       sync.Once
	err        error
}

type olWriter struct {
	db    *sql.DB
	table string
	next  int // next new id
	ids   []int
	rnd   *rand.Rand
	n     int
}

// startWriters starts an autocommit writer on each of tables of upstream up; table k writes new ids
// from bases[k], its existing rows are existing[k].
func (c *e2eCluster) startWriters(up int, seed int64, tables []string, bases []int, existing [][]int) *olWriters {
	w := &olWriters{t: c.t, quit: make(chan struct{}), errs: make(chan error, len(tables))}
	for k, table := range tables {
		ow := &olWriter{db: c.UpDBs[up], table: table, next: bases[k], ids: append([]int(nil), existing[k]...), rnd: rand.New(rand.NewSource(seed + int64(k)))}
		w.ws = append(w.ws, ow)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-w.quit:
					return
				default:
				}
				q, apply := ow.op()
				_, err := ow.db.Exec(q)
				var me *mysql.MySQLError
				switch {
				case err == nil:
					apply()
					w.ok.Add(1)
				case errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
					w.rolledBack.Add(1)
				default:
					w.errs <- fmt.Errorf("writer of %s: %s: %w", ow.table, q, err)
					return
				}
				time.Sleep(2 * time.Millisecond) // pace the writers, so the sync keeps up
			}
		}()
	}
	c.t.Cleanup(func() { w.stop() })
	return w
}

func (o *olWriter) op() (string, func()) {
	o.n++
	switch p := o.rnd.Intn(100); {
	case p < 40 || len(o.ids) < 20:
		id := o.next
		o.next++
		return fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'ins%d')", o.table, id, o.n), func() { o.ids = append(o.ids, id) }
	case p < 70:
		return fmt.Sprintf("UPDATE %s SET v = 'upd%d' WHERE id = %d", o.table, o.n, o.ids[o.rnd.Intn(len(o.ids))]), func() {}
	case p < 85:
		i := o.rnd.Intn(len(o.ids))
		to := o.next
		o.next++
		return fmt.Sprintf("UPDATE %s SET id = %d, v = 'mov%d' WHERE id = %d", o.table, to, o.n, o.ids[i]), func() { o.ids[i] = to }
	default:
		i := o.rnd.Intn(len(o.ids))
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", o.table, o.ids[i]), func() {
			o.ids[i] = o.ids[len(o.ids)-1]
			o.ids = o.ids[:len(o.ids)-1]
		}
	}
}

// progress waits until the writers have committed n more statements (or one failed).
func (w *olWriters) progress(n int64) {
	w.t.Helper()
	from := w.ok.Load()
	wait.Eventually(w.t, 60*time.Second, func() bool {
		select {
		case err := <-w.errs:
			w.t.Fatal(err)
		default:
		}
		return w.ok.Load() >= from+n
	}, func() string {
		return fmt.Sprintf("the writers committed %d statements in 60s, want %d", w.ok.Load()-from, n)
	})
}

// stop stops the writers after their statement in flight and fails the test if one failed.
func (w *olWriters) stop() {
	w.t.Helper()
	w.once.Do(func() {
		close(w.quit)
		w.wg.Wait()
		select {
		case w.err = <-w.errs:
		default:
		}
		w.t.Logf("writers: %d statements committed, %d rolled back by a deadlock or lock wait timeout", w.ok.Load(), w.rolledBack.Load())
	})
	if w.err != nil {
		w.t.Fatal(w.err)
	}
}

// runPtOSC runs pt-online-schema-change to its end while the writers write, and checks that they
// committed statements during its run.
func (c *e2eCluster) runPtOSC(bin string, w *olWriters, up int, schema, table, alter string, extra ...string) string {
	c.t.Helper()
	before := w.ok.Load()
	start := time.Now()
	p := c.startPtOSC(bin, up, schema, table, alter, extra...)
	p.wait(c.t)
	during := w.ok.Load() - before
	c.t.Logf("pt-online-schema-change on %s.%s: %s, %d writer statements committed meanwhile", schema, table, time.Since(start).Round(time.Millisecond), during)
	if during == 0 {
		c.t.Fatalf("the writers committed nothing while pt-online-schema-change ran on %s.%s:\n%s", schema, table, p.output())
	}
	return p.output()
}

// seq returns the ids [from, from+n).
func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// olUntil polls cond until it holds; what describes the wait, cond's string the last state.
func (c *e2eCluster) olUntil(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	var last string
	wait.Eventually(c.t, timeout, func() bool { var ok bool; ok, last = cond(); return ok },
		func() string { return fmt.Sprintf("%s; last: %s", what, last) })
}

// noLock checks that shard-ddl-lock shows no lock.
func (c *e2eCluster) noLock(when string) {
	c.t.Helper()
	if r := c.ok("shard-ddl-lock", c.task); len(r.List("locks")) != 0 {
		c.t.Fatalf("%s: a shard DDL lock is there: %v", when, r)
	}
}

// lockDDL checks that a lock's DDLs are the one ALTER of olAlter on db.t.
func lockDDL(t *testing.T, lock e2e.Result) {
	t.Helper()
	ddls := lock.Strings("DDLs")
	if len(ddls) != 1 || !strings.HasPrefix(ddls[0], "ALTER TABLE `db`.`t` ") || !strings.Contains(ddls[0], olLockDDL) || strings.Contains(ddls[0], "`d`") {
		t.Fatalf("lock DDLs %q, want the one ALTER TABLE `db`.`t` %s", ddls, olLockDDL)
	}
}

// downAlters returns the ALTER statements the downstream received (its general log), but the meta
// tables'.
func (c *e2eCluster) downAlters() []string {
	c.t.Helper()
	stmts, err := c.DownstreamLog()
	if err != nil {
		c.t.Fatal(err)
	}
	var rows []string
	for _, q := range stmts {
		if strings.HasPrefix(strings.ToUpper(q), "ALTER") && !strings.Contains(q, "dm_meta") {
			rows = append(rows, q)
		}
	}
	return rows
}

// oneAlter checks that exactly one ALTER ran downstream, olAlter on db.t.
func (c *e2eCluster) oneAlter() {
	c.t.Helper()
	alters := c.downAlters()
	if len(alters) != 1 || !strings.HasPrefix(alters[0], "ALTER TABLE `db`.`t` ") || !strings.Contains(alters[0], olLockDDL) || strings.Contains(alters[0], "`d`") {
		c.t.Fatalf("ALTER statements downstream: %q, want exactly one: ALTER TABLE `db`.`t` %s", alters, olLockDDL)
	}
	var nullable, def string
	if err := c.DownDB.QueryRow("SELECT IS_NULLABLE, COALESCE(COLUMN_DEFAULT, 'NULL') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'").Scan(&nullable, &def); err != nil {
		c.t.Fatalf("column db.t.c: %v", err)
	}
	if nullable != "NO" || def != "0" {
		c.t.Fatalf("column db.t.c: nullable %s, default %s; want NOT NULL DEFAULT 0", nullable, def)
	}
	if n := downColumns(c.t, c); n != 3 {
		c.t.Fatalf("downstream db.t has %d columns, want 3 (id, v, c)", n)
	}
}

// noToolTrace checks that no ghost or trash table, trigger or row ever reached the downstream: no
// statement of its general log names one (but the checkpoint's writes, whose JSON names the ghost
// table of a run), none is there, and no trigger.
func (c *e2eCluster) noToolTrace() {
	c.t.Helper()
	rows, err := e2e.Rows(c.DownDB, "SELECT argument FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND argument REGEXP '_t_[0-9]+_(new|gho|ghc|del|old)'")
	if err != nil {
		c.t.Fatal(err)
	}
	var bad []string
	for _, q := range rows {
		if olToolTable.MatchString(q) && !olMetaWrite.MatchString(q) {
			if len(q) > 300 {
				q = q[:300] + "..."
			}
			bad = append(bad, q)
		}
	}
	if len(bad) > 0 {
		c.t.Fatalf("%d statements naming a ghost or trash table reached the downstream:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	var triggers, created int
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS").Scan(&triggers); err != nil || triggers != 0 {
		c.t.Fatalf("%d triggers downstream (%v)", triggers, err)
	}
	if err := c.DownDB.QueryRow("SELECT COUNT(*) FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND argument REGEXP '^[[:space:]]*CREATE.*TRIGGER'").Scan(&created); err != nil || created != 0 {
		c.t.Fatalf("%d CREATE TRIGGER statements downstream (%v)", created, err)
	}
	tables, err := e2e.Rows(c.DownDB, "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', 'dm_meta')")
	if err != nil {
		c.t.Fatal(err)
	}
	if strings.Join(tables, ",") != "db.t" {
		c.t.Fatalf("downstream tables %v, want only db.t", tables)
	}
}

// olPos is a binlog position.
type olPos struct {
	file string
	pos  int64
}

func (p olPos) before(q olPos) bool { return p.file < q.file || p.file == q.file && p.pos < q.pos }

// binlogEnd is upstream i's binlog position now (the end of its last event).
func (c *e2eCluster) binlogEnd(i int) olPos {
	c.t.Helper()
	var p olPos
	var doDB, ignoreDB sql.NullString
	if err := c.UpDBs[i].QueryRow("SHOW MASTER STATUS").Scan(&p.file, &p.pos, &doDB, &ignoreDB); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// waitRunCheckpointed waits until source i's checkpoint resumes at or after pos and keeps the online
// DDL run of schema.table with olAlter: a worker restarted then reads neither the ghost table's
// CREATE nor its ALTER again, only the checkpoint tells it what the cut-over means.
func (c *e2eCluster) waitRunCheckpointed(i int, schema, table string, pos olPos) {
	c.t.Helper()
	id := fmt.Sprintf(`online:{"schema":%q,"name":%q}`, schema, table)
	c.olUntil(fmt.Sprintf("%s's checkpoint past %v with the run of %s.%s", e2e.SourceID(i), pos, schema, table), 90*time.Second, func() (bool, string) {
		var g olPos
		var run sql.NullString
		err := c.DownDB.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta.shard_checkpoint WHERE source = ? AND id = ''", e2e.SourceID(i)).Scan(&g.file, &g.pos)
		if err == nil {
			err = c.DownDB.QueryRow("SELECT ddls FROM dm_meta.shard_checkpoint WHERE source = ? AND id = ?", e2e.SourceID(i), id).Scan(&run)
		}
		state := fmt.Sprintf("global %v, run %q, %v", g, run.String, err)
		return err == nil && !g.before(pos) && strings.Contains(run.String, olLockDDL), state
	})
}

// TestOnlineDDLPtOscAndGhost: source 1's two shards are altered by a real pt-online-schema-change
// each, while writers change both; source 2's by a replayed gh-ost run (with its binlog applier's
// writes) and a plain ALTER. One lock forms from the cut-overs and the ALTER, holds until source 2's
// shards are there, and its DDL runs once; no ghost or trash table reaches the downstream, which ends
// equal to the merged upstream with the new column.
func TestOnlineDDLPtOscAndGhost(t *testing.T) {
	pt := needPtOSC(t)
	c := startOnline(t)
	c.up(0, insertRows("db_1.t_1", 100000, 103000, ""), insertRows("db_1.t_2", 200000, 203000, ""))
	c.up(1, insertRows("db_2.t_1", 300000, 300050, ""), insertRows("db_2.t_2", 400000, 400050, ""))
	c.converge("id, v")

	w := c.startWriters(0, 1, []string{"db_1.t_1", "db_1.t_2"}, []int{110000, 210000}, [][]int{seq(100000, 3000), seq(200000, 3000)})
	w.progress(100)
	out := c.runPtOSC(pt, w, 0, "db_1", "t_1", olAlter)
	for _, step := range []string{"Created new table db_1._t_1_new OK", "Created triggers OK", "Swapped original and new tables OK"} {
		if !strings.Contains(out, step) {
			t.Fatalf("pt-online-schema-change did not report %q:\n%s", step, out)
		}
	}
	w.progress(50)
	c.runPtOSC(pt, w, 0, "db_1", "t_2", olAlter)
	w.progress(50)

	// Both cut-overs reached the lock as source 1's ALTER; nothing ran downstream yet.
	lockDDL(t, c.waitLock([]string{s1}, []string{s2}))
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("downstream db.t has %d columns before source 2 reached the DDL, want 2", n)
	}

	gh := olGhost("db_2", "t_1", olAlter)
	c.up(1, gh[:6]...) // ghost created, altered, rows copied
	c.up(1, olGhostApply("db_2", "t_1", 300100, 300110)...)
	c.up(1, gh[6:]...) // cut-over
	c.up(1, "INSERT INTO db_2.t_1 (id, v, c) VALUES (300200, 'after the gh-ost cut-over', 7)")
	c.up(1, insertRows("db_2.t_2", 400100, 400110, ""), "ALTER TABLE db_2.t_2 "+olAlter, insertRows("db_2.t_2", 400110, 400120, ", 8"))

	w.progress(50) // source 1's writes after the lock resolves too
	w.stop()
	c.converge("id, v, c")
	c.waitSynced()
	c.oneAlter()
	c.noToolTrace()
}

// TestOnlineDDLAbortedRuns: tools that give up before their cut-over leave nothing: a real
// pt-online-schema-change with --no-swap-tables (new table created, altered, triggers, row copy, then
// triggers and new table dropped) while writers change the shard, and a replayed gh-ost run whose
// ghost table is altered, filled and dropped. No lock forms, no DDL runs downstream, no ghost table
// reaches it, and the checkpoint keeps no run of either (the aborted ALTER, ADD COLUMN d, is
// forgotten). Later runs on the same tables then work as usual: their cut-overs are their own ALTER
// only, one lock with the plain ALTERs of the other shards.
func TestOnlineDDLAbortedRuns(t *testing.T) {
	pt := needPtOSC(t)
	c := startOnline(t)
	c.up(0, insertRows("db_1.t_1", 100000, 102000, ""), insertRows("db_1.t_2", 200000, 200050, ""))
	c.up(1, insertRows("db_2.t_1", 300000, 300050, ""), insertRows("db_2.t_2", 400000, 400050, ""))
	c.converge("id, v")

	w := c.startWriters(0, 2, []string{"db_1.t_1"}, []int{110000}, [][]int{seq(100000, 2000)})
	w.progress(100)
	out := c.runPtOSC(pt, w, 0, "db_1", "t_1", "ADD COLUMN d INT", "--no-swap-tables")
	for _, step := range []string{"Altered `db_1`.`_t_1_new` OK", "Created triggers OK", "Copied rows OK", "Dropped new table OK"} {
		if !strings.Contains(out, step) {
			t.Fatalf("pt-online-schema-change did not report %q:\n%s", step, out)
		}
	}
	if n, err := e2e.Rows(c.UpDBs[0], "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'db_1' AND TABLE_NAME = 't_1' AND COLUMN_NAME = 'd'"); err != nil || len(n) != 0 {
		t.Fatalf("pt-online-schema-change --no-swap-tables changed db_1.t_1 upstream: %v %v", n, err)
	}

	gh := olGhost("db_2", "t_2", "ADD COLUMN d INT")
	c.up(1, gh[:6]...) // ghost created, altered, rows copied
	c.up(1, olGhostApply("db_2", "t_2", 400100, 400110)...)
	c.up(1, "INSERT INTO db_2.t_1 (id, v) VALUES (300100, 'ghost altered')")
	c.waitRow(300100)
	c.noLock("a ghost table altered, no cut-over")
	c.up(1, "drop /* gh-ost */ table if exists `db_2`.`_t_2_gho`", "drop /* gh-ost */ table if exists `db_2`.`_t_2_ghc`")
	c.up(1, "INSERT INTO db_2.t_2 (id, v) VALUES (400200, 'gh-ost gave up')")
	c.up(0, "INSERT INTO db_1.t_2 (id, v) VALUES (200200, 'pt-osc gave up')")
	c.waitRow(400200)
	c.waitRow(200200)
	c.noLock("both tools gave up")
	if alters := c.downAlters(); len(alters) != 0 {
		t.Fatalf("ALTER statements downstream after the tools gave up: %q", alters)
	}
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("downstream db.t has %d columns after the tools gave up, want 2", n)
	}
	c.noToolTrace()
	// The checkpoint forgets the runs (its row of each is written with the flush after the drop).
	c.olUntil("no online DDL run in the checkpoint after the tools gave up", 30*time.Second, func() (bool, string) {
		runs, err := e2e.Rows(c.DownDB, "SELECT CONCAT(source, ' ', id, ' ', ddls) FROM dm_meta.shard_checkpoint WHERE id LIKE 'online:%' AND ddls <> ''")
		return err == nil && len(runs) == 0, fmt.Sprintf("%q %v", runs, err)
	})

	// Later runs on the same tables: their cut-over is their own ALTER only.
	c.runPtOSC(pt, w, 0, "db_1", "t_1", olAlter)
	c.up(0, "ALTER TABLE db_1.t_2 "+olAlter)
	lockDDL(t, c.waitLock([]string{s1}, []string{s2}))
	c.up(1, olGhost("db_2", "t_2", olAlter)...)
	c.up(1, "ALTER TABLE db_2.t_1 "+olAlter, "INSERT INTO db_2.t_1 (id, v, c) VALUES (300300, 'after', 3)")
	w.stop()
	c.converge("id, v, c")
	c.waitSynced()
	c.oneAlter()
	c.noToolTrace()
}

// TestOnlineDDLWorkerKilledBeforeCutOver: both workers are killed with -9 while a tool has altered
// its ghost table and not cut over (on source 1 a real pt-online-schema-change, rows copied, held
// before its swap by olHoldPlugin while writers change the shard and its triggers the new table; on
// source 2 a replayed gh-ost run split in two), once their checkpoints are past the ghost ALTERs: the
// restarted workers never read those again, only the checkpoint can tell them. Writes go on while they
// are down. After the restart each cut-over is still the shard's ALTER: the lock forms with source 2's
// (gh-ost cut-over and plain ALTER) and completes with source 1's (pt-osc cut-over and plain ALTER),
// and runs once.
func TestOnlineDDLWorkerKilledBeforeCutOver(t *testing.T) {
	pt := needPtOSC(t)
	c := startOnline(t)
	c.up(0, insertRows("db_1.t_1", 100000, 102000, ""), insertRows("db_1.t_2", 200000, 200050, ""))
	c.up(1, insertRows("db_2.t_1", 300000, 300050, ""), insertRows("db_2.t_2", 400000, 400050, ""))
	c.converge("id, v")
	// One written table per source, so each flush of its syncer commits one partition: the checkpoint
	// wait below is about the online DDL run, not about how the resume position moves while every
	// flush spans several partitions (a separate matter of syncer/syncer.go's flush).
	w1 := c.startWriters(0, 3, []string{"db_1.t_1"}, []int{110000}, [][]int{seq(100000, 2000)})
	w2 := c.startWriters(1, 4, []string{"db_2.t_2"}, []int{410000}, [][]int{seq(400000, 50)})
	w1.progress(100)

	// Source 2: gh-ost has created, altered and filled its ghost table.
	gh := olGhost("db_2", "t_1", olAlter)
	c.up(1, gh[:6]...)
	c.up(1, olGhostApply("db_2", "t_1", 300100, 300110)...)
	pos2 := c.binlogEnd(1)
	// Source 1: pt-osc has created and altered its new table, made its triggers and copied the rows;
	// it is held before its cut-over while the writers go on (through its triggers).
	release := filepath.Join(c.Dir, "pt-osc.release")
	p := c.startHeldPtOSC(pt, 0, "db_1", "t_1", olAlter, release)
	p.waitHeld(t)
	pos1 := c.binlogEnd(0)
	w1.progress(50)

	c.waitRunCheckpointed(0, "db_1", "t_1", pos1)
	c.waitRunCheckpointed(1, "db_2", "t_1", pos2)
	c.noLock("ghost tables altered, no cut-over")
	for _, wk := range c.Workers {
		wk.Kill9()
	}
	w1.progress(50) // writes while the workers are down
	c.up(1, olGhostApply("db_2", "t_1", 300110, 300120)...)
	for _, wk := range c.Workers {
		if err := wk.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitStage("Running")

	// Source 2 cuts over first: the lock forms with its ALTER, source 1 not there yet.
	c.up(1, gh[6:]...)
	c.up(1, "ALTER TABLE db_2.t_2 "+olAlter, "INSERT INTO db_2.t_1 (id, v, c) VALUES (300200, 'after the gh-ost cut-over', 7)")
	lockDDL(t, c.waitLock([]string{s2}, []string{s1}))
	if n := downColumns(t, c); n != 2 {
		t.Fatalf("downstream db.t has %d columns before source 1 reached the DDL, want 2", n)
	}
	// Source 1: pt-osc cuts over.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	c.up(0, "ALTER TABLE db_1.t_2 "+olAlter)
	w1.progress(50)
	w1.stop()
	w2.stop()
	c.converge("id, v, c")
	c.waitSynced()
	c.oneAlter()
	c.noToolTrace()
}
