package syncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

// TestOperatorsLifecycle: the decisions of a subtask are kept in etcd. The sync unit finds them in the
// worker's copy; another worker of the source (after a failover) loads the same ones; the checkpoint
// past an event removes its decision from etcd, and one left there by a worker that died before
// removing it is removed by the next worker's first prune, not found again.
func TestOperatorsLifecycle(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	task, src := "ops-lifecycle", "ops-lifecycle-src"
	bind := func(worker string) int64 {
		resp, err := cli.Put(ctx, ha.BoundKey(src), ha.Encode(ha.Binding{Source: src, Worker: worker}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	stored := func() int {
		ops, _, err := ha.LoadOperators(ctx, cli, task, src)
		if err != nil {
			t.Fatal(err)
		}
		return len(ops)
	}
	if _, err := cli.Put(ctx, ha.TaskKey(task), ha.Encode(ha.Task{Name: task})); err != nil {
		t.Fatal(err)
	}
	p := func(n uint32) vocab.Position { return vocab.Position{File: "mysql-bin.000002", Pos: n} }
	o := NewOperators(cli, task, src, bind("w1"))
	for _, op := range []Operator{{Op: "skip", Pos: p(100)}, {Op: "replace", Pos: p(100), SQLs: []string{"SELECT 1"}}, {Op: "skip", Pos: p(300), Lock: true}, {Op: "skip", Pos: p(500)}} {
		if err := o.Add(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if op, ok := o.find(false, p(50), p(100)); !ok || op.Op != "replace" {
		t.Fatalf("find at 100: %+v %v (the replace given last replaces the skip)", op, ok)
	}
	if _, ok := o.find(false, p(300)); ok {
		t.Fatal("a lock's operator is not an event's")
	}
	if _, ok := o.find(true, p(300)); !ok {
		t.Fatal("lock operator not found")
	}
	if n := stored(); n != 3 {
		t.Fatalf("%d decisions in etcd, want 3", n)
	}

	// The worker dies; the source's next worker loads the same decisions.
	o2 := NewOperators(cli, task, src, bind("w2"))
	if err := o2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if op, ok := o2.find(false, p(100)); !ok || op.Op != "replace" || op.SQLs[0] != "SELECT 1" || len(o2.List()) != 3 {
		t.Fatalf("the next worker has %+v", o2.List())
	}
	if err := o.Add(ctx, Operator{Op: "skip", Pos: p(700)}); err == nil || !strings.Contains(err.Error(), src) {
		t.Fatalf("the old worker added a decision: %v", err)
	}

	// The checkpoint passes 100: used, removed from etcd. The old worker cannot remove its copy's;
	// the new worker's prune does, and a later load does not bring it back.
	if err := o.prune(ctx, p(200)); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 3 {
		t.Fatalf("the old worker's prune changed etcd: %d decisions", n)
	}
	if err := o2.prune(ctx, p(200)); err != nil {
		t.Fatal(err)
	}
	if _, ok := o2.find(false, p(100)); ok || stored() != 2 {
		t.Fatalf("prune left %+v (%d in etcd)", o2.List(), stored())
	}
	if err := o2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := o2.find(false, p(100)); ok || len(o2.List()) != 2 {
		t.Fatalf("a used decision came back: %+v", o2.List())
	}
	if ok, err := o2.Revert(ctx, p(300)); !ok || err != nil {
		t.Fatalf("revert: %v %v", ok, err)
	}
	if ok, err := o2.Revert(ctx, p(300)); ok || err != nil || len(o2.List()) != 1 || stored() != 1 {
		t.Fatalf("second revert %v %v left %+v", ok, err, o2.List())
	}

	var none *Operators
	if _, ok := none.find(false, p(1)); ok || none.List() != nil || none.prune(ctx, p(1)) != nil {
		t.Fatal("nil operators hold nothing")
	}
}

// TestDuplicateKeyPausesThenSkip: two shards write the same key. The second source's transaction is
// refused (1062): the syncer stops on a StatementError naming the row, its table and its binlog
// event, and does not retry it; binlog skip of that event lets it go on, with everything after it.
func TestDuplicateKeyPausesThenSkip(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 6))
	c.waitRow(5)
	c.up(1, "INSERT INTO db_2.t_1 VALUES (3, 'collides')")
	c.up(1, insert("db_2.t_1", 2001, 2006))
	err := c.failure(1)
	var se *StatementError
	if !errors.As(err, &se) || !sink.IsPermanent(err) {
		t.Fatalf("stopped on %v, want a StatementError", err)
	}
	var me *mysql.MySQLError
	if se.Table.String() != "`db_2`.`t_1`" || !strings.Contains(se.Stmt, `"collides"`) || se.Pos.IsZero() ||
		!errors.As(se.Cause, &me) || me.Number != 1062 {
		t.Fatalf("statement error %+v (cause %v)", se, se.Cause)
	}
	if c.hasRow(2001) {
		t.Fatal("rows after the refused one were written")
	}
	var events int
	rows, qerr := c.upDBs[1].Query(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", se.Pos.File, se.Pos.Pos))
	if qerr != nil {
		t.Fatalf("the error's position %s is not an event's: %v", se.Pos, qerr)
	}
	for rows.Next() {
		events++
	}
	rows.Close()
	if events != 1 {
		t.Fatalf("no binlog event at %s", se.Pos)
	}
	c.operators(1).Add(context.Background(), Operator{Op: "skip", Pos: se.Pos})
	c.startSyncer(1)
	c.waitRow(2005)
	var v string
	if err := c.downDB.QueryRow("SELECT v FROM db.t WHERE id = 3").Scan(&v); err != nil || v != "v3" {
		t.Fatalf("row 3 downstream: %q %v, want source 1's", v, err)
	}
	var n int
	c.downDB.QueryRow("SELECT COUNT(*) FROM db.t").Scan(&n)
	if n != 10 {
		t.Fatalf("%d rows downstream, want 10", n)
	}
}

// TestLockDDLRefusedThenReplaced: every shard adds a unique key that holds in each shard but not in the
// merged table. The owner's ALTER is refused downstream (1062): it stops on a StatementError for the
// lock, the lock waits, and binlog replace with a plain index runs that instead; the lock resolves
// and every source goes on.
func TestLockDDLRefusedThenReplaced(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, "INSERT INTO db_1.t_1 VALUES (1, 'same')")
	c.up(1, "INSERT INTO db_2.t_1 VALUES (2, 'same')")
	c.converge("id, v")
	for i, tables := range c.shards {
		for _, table := range tables {
			c.up(i, "ALTER TABLE "+table+" ADD UNIQUE KEY uv (v)")
		}
	}
	var se *StatementError
	var owner int
	select {
	case err := <-c.failures(0):
		errors.As(err, &se)
	case err := <-c.failures(1):
		errors.As(err, &se)
		owner = 1
	case <-time.After(60 * time.Second):
		t.Fatal("no syncer stopped on the refused ALTER")
	}
	if se == nil || se.Lock != "test-`db`.`t`" || !strings.Contains(se.Stmt, "UNIQUE") {
		t.Fatalf("owner stopped on %+v", se)
	}
	c.up(0, "INSERT INTO db_1.t_2 VALUES (1001, 'after')")
	c.up(1, "INSERT INTO db_2.t_2 VALUES (3001, 'after')")
	if c.hasRow(1001) || c.hasRow(3001) {
		t.Fatal("rows after the DDL were written while its lock waits")
	}
	c.operators(owner).Add(context.Background(), Operator{Op: "replace", Pos: se.Pos, Lock: true, SQLs: []string{"ALTER TABLE `db`.`t` ADD KEY uv (v)"}})
	c.startSyncer(owner)
	c.converge("id, v")
	var nonUnique int
	if err := c.downDB.QueryRow("SELECT NON_UNIQUE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND INDEX_NAME = 'uv'").Scan(&nonUnique); err != nil || nonUnique != 1 {
		t.Fatalf("index uv downstream: non-unique %d, %v; want the replacement's plain index", nonUnique, err)
	}
	if got := c.downScalar("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'db' AND TABLE_NAME = 't' AND INDEX_NAME = 'uv'"); got != "1" {
		t.Fatalf("index uv has %s columns", got)
	}
}

// TestSafeModeReplacesCollisions: with syncers' safe-mode, a key written by two shards holds the later
// row and an update of it moves it; nothing stops.
func TestSafeModeReplacesCollisions(t *testing.T) {
	c := newCluster(t)
	c.safe = true
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, "INSERT INTO db_1.t_1 VALUES (7, 'first')")
	c.waitRow(7)
	c.up(1, "INSERT INTO db_2.t_1 VALUES (7, 'second')", "INSERT INTO db_2.t_1 VALUES (8, 'marker')")
	// Rows of different keys commit on different connections: a later marker row may show first.
	c.waitRow(8)
	var got string
	wait.Eventually(t, 30*time.Second, func() bool { got = c.downScalar("SELECT v FROM db.t WHERE id = 7"); return got == "second" },
		func() string { return fmt.Sprintf("row 7 is %q, want the later row", got) })
	c.up(1, "UPDATE db_2.t_1 SET id = 9, v = 'moved' WHERE id = 7", "INSERT INTO db_2.t_1 VALUES (10, 'marker')")
	c.waitRow(10)
	wait.Eventually(t, 30*time.Second, func() bool {
		got = c.downScalar("SELECT CONCAT(COUNT(*), ':', MAX(v)) FROM db.t WHERE id IN (7, 9)")
		return got == "1:moved"
	}, func() string { return fmt.Sprintf("rows 7 and 9: %q, want only 9 'moved'", got) })
	select {
	case err := <-c.failures(1):
		t.Fatalf("syncer stopped in safe mode: %v", err)
	default:
	}
}

// Two shards of one source at different DDLs of the same step: the group is rebuilt the same way from
// the same binlog on every retry, so the subtask pauses naming both tables (DM: "task can't auto
// resume"), and binlog skip of the statement lets it go on; the step then resolves as usual.
func TestInconsistentSequencePausesThenSkip(t *testing.T) {
	c := newCluster(t)
	c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN a INT", "ALTER TABLE db_1.t_2 ADD COLUMN b INT")
	err := c.failure(0)
	var qe *sequenceError
	if !errors.As(err, &qe) || !sink.IsPermanent(err) {
		t.Fatalf("stopped on %v, want a permanent sequenceError", err)
	}
	for _, want := range []string{"detect inconsistent DDL sequence", "`db_1`.`t_1`", "`db_1`.`t_2`", "ADD COLUMN `b`",
		"binlog skip test -b " + qe.Start.BinlogPos() + " -s s1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if at, scope, lock, ok := StoppedAt(err); !ok || lock || at != qe.Start || scope != "internal" || !sink.IsPermanent(err) {
		t.Fatalf("StoppedAt = %v %q %v %v, want the statement's start %v in scope internal, permanent", at, scope, lock, ok, qe.Start)
	}
	var info string
	if err := c.upDBs[0].QueryRow(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", qe.Start.File, qe.Start.Pos)).
		Scan(new(string), new(int), new(string), new(int), new(int), &info); err != nil || !strings.Contains(info, "ADD COLUMN b") {
		t.Fatalf("the error's position %s is not the ALTER of t_2: %q %v", qe.Start, info, err)
	}

	c.operators(0).Add(context.Background(), Operator{Op: "skip", Pos: qe.Start})
	c.startSyncer(0)
	c.up(0, "ALTER TABLE db_1.t_2 ADD COLUMN a INT")
	c.up(1, "ALTER TABLE db_2.t_1 ADD COLUMN a INT", "ALTER TABLE db_2.t_2 ADD COLUMN a INT")
	c.up(0, "INSERT INTO db_1.t_1 (id, v, a) VALUES (1, 'x', 7)")
	c.waitRow(1)
	var a int
	if err := c.downDB.QueryRow("SELECT a FROM db.t WHERE id = 1").Scan(&a); err != nil || a != 7 {
		t.Fatalf("row 1 downstream: a = %d %v, want 7", a, err)
	}
	select {
	case err := <-c.failures(0):
		t.Fatalf("syncer s1 stopped again: %v", err)
	default:
	}
}
