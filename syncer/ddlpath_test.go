package syncer

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/vocab"
)

// newTestDDLPath is a DDL path over db_*.t_* -> db.t (shards db_1.t_1 and db_1.t_2 in its group) and
// the unsharded schema solo, with an empty checkpoint: no reader, applier, downstream or etcd.
func newTestDDLPath(t *testing.T) *ddlPath {
	t.Helper()
	r, err := router.NewRouter(&config.BAList{DoDBs: []string{"db_*", "solo"}}, []config.RouteRule{
		{SchemaPattern: "db_*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &ddlPath{task: "task", source: "s1", router: r, log: zap.NewNop(), shard: newShardState(),
		onlineDirty: map[vocab.TableName]bool{}, schemas: newSchemaTracker(),
		applied: appliedView{&meta.Checkpoint{Tables: map[vocab.TableName]vocab.Position{}, Resolved: map[vocab.TableName]vocab.Position{}}}}
	for _, tb := range []string{"t_1", "t_2"} {
		if err := d.shard.group(vocab.TableName{Schema: "db", Name: "t"}).AddTable(vocab.TableName{Schema: "db_1", Name: tb}, vocab.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func evAt(p uint32) ddlEventAt {
	return ddlEventAt{start: vocab.Position{File: "bin.000001", Pos: p - 50}, groupStart: vocab.Position{File: "bin.000001", Pos: p - 80}, end: vocab.Position{File: "bin.000001", Pos: p}}
}

// TestDDLPathDecides: the DDL stage alone. It decides and changes its own state (groups, steps, where
// each DDL's event starts); what it hands back says what runs downstream, in order and with the
// checkpoints it moves, and which infos to post; nothing runs. A statement read again after a restart
// runs nothing again; a refused one changes nothing downstream and names its table; a rename within
// the group runs nothing and leaves the cached row shapes of both names stale.
func TestDDLPathDecides(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	d := newTestDDLPath(t)

	// A shard DDL: the group waits for t_2; when it arrives, the info is to be posted, once.
	ready, err := d.decide("ALTER TABLE db_1.t_1 ADD COLUMN c INT", "", evAt(1000))
	if err != nil || len(ready.runs) != 0 || len(ready.post) != 0 {
		t.Fatalf("first shard's DDL: %+v %v, want nothing to run or post", ready, err)
	}
	in := session.Settings{{Name: "time_zone", Value: "+08:00"}}
	at := evAt(2000)
	at.in = in
	ready, err = d.decide("ALTER TABLE db_1.t_2 ADD COLUMN c INT", "", at)
	if err != nil || !slices.Equal(ready.post, []vocab.TableName{target}) || len(ready.runs) != 0 {
		t.Fatalf("last shard's DDL: %+v %v, want the info of db.t posted", ready, err)
	}
	if ev := d.shard.ddlStart[target][at.end]; ev.start != at.groupStart {
		t.Fatalf("the DDL's event recorded at %v, want its group's start %v", ev.start, at.groupStart)
	}
	ddls, _ := d.infoOf(target)
	if len(ddls) != 1 || !strings.Contains(ddls[0], "ADD COLUMN") || !strings.Contains(ddls[0], "`db`.`t`") {
		t.Fatalf("info DDLs %q, want the ALTER on the target", ddls)
	}

	// The operation: the step resolves; the DDLs run in the first DDL's session, which is t_1's (no
	// settings); nothing was held back, so there is nothing to read again and nothing next to post.
	d.shard.pending[target] = true
	res := opResult{target: target, info: pessimist.Info{Task: "task", Source: "s1", Target: target.String(), DDLs: ddls}, op: pessimist.Operation{DDLs: ddls, Exec: true}}
	bad := res
	bad.op.DDLs = []string{"ALTER TABLE `db`.`t` DROP COLUMN x"}
	if _, err := d.resolve(bad, lockView{lastPos: at.end}); err == nil || !strings.Contains(err.Error(), "answered DDLs") {
		t.Fatalf("an operation for other DDLs: %v, want refused", err)
	}
	lr, err := d.resolve(res, lockView{lastPos: at.end})
	if err != nil {
		t.Fatal(err)
	}
	if lr.reread || lr.post || len(lr.starts) != 2 || lr.starts[0] != evAt(1000).groupStart || lr.first.Name != "t_1" || lr.in.String() != "" {
		t.Fatalf("resolved: %+v", lr)
	}
	if _, kept := d.shard.ddlStart[target][evAt(1000).end]; d.shard.pending[target] || kept {
		t.Fatalf("after resolve: pending %v, DDL starts %v", d.shard.pending, d.shard.ddlStart[target])
	}

	// The next step with DML held back: resolving it reads again from where the reader is, when that
	// is before the step (an earlier re-read has not got that far), and the step after it, synced
	// already, waits until the re-read has passed it.
	for i, q := range []string{"ALTER TABLE db_1.t_1 ADD COLUMN e INT", "ALTER TABLE db_1.t_1 ADD COLUMN f INT", "ALTER TABLE db_1.t_2 ADD COLUMN e INT", "ALTER TABLE db_1.t_2 ADD COLUMN f INT"} {
		if _, err := d.decide(q, "", evAt(uint32(3000+1000*i))); err != nil {
			t.Fatal(err)
		}
	}
	d.shard.heldBack[target] = true
	ddls, _ = d.infoOf(target)
	res.op.DDLs, res.info.DDLs = ddls, ddls
	lr, err = d.resolve(res, lockView{lastPos: evAt(2500).end})
	if err != nil {
		t.Fatal(err)
	}
	if !lr.reread || lr.rereadFrom != evAt(2500).end || lr.post {
		t.Fatalf("resolved with DML held back: %+v, want a re-read from the reader's position and no info yet", lr)
	}
	if got := d.deferredDue(evAt(5000).end); len(got) != 0 {
		t.Fatalf("deferred info due before the re-read passed the step: %v", got)
	}
	if got := d.deferredDue(evAt(6000).end); !slices.Equal(got, []vocab.TableName{target}) {
		t.Fatalf("deferred info after the re-read passed the step: %v", got)
	}
	if got := d.deferredDue(evAt(7000).end); len(got) != 0 {
		t.Fatalf("a deferred info due twice: %v", got)
	}

	// Statements of an unsharded table run downstream, each part on its own with its own table
	// checkpoint, under a marker naming the event's position; read again after a restart, none runs.
	drop := evAt(9000)
	ready, err = d.decide("DROP TABLE solo.a, solo.b", "", drop)
	if err != nil || len(ready.runs) != 2 || !ready.forgetKeys {
		t.Fatalf("DROP TABLE of two unsharded tables: %+v %v", ready, err)
	}
	for i, name := range []string{"a", "b"} {
		r := ready.runs[i]
		tb := vocab.TableName{Schema: "solo", Name: name}
		if r.part.Source != tb || r.tables[tb] != drop.end || len(r.tables) != 1 || r.marker != "source:s1@"+drop.end.String() {
			t.Fatalf("run %d: %+v", i, r)
		}
	}
	d.applied.c.Tables[vocab.TableName{Schema: "solo", Name: "a"}] = drop.end
	d.applied.c.Tables[vocab.TableName{Schema: "solo", Name: "b"}] = drop.end
	if ready, err = d.decide("DROP TABLE solo.a, solo.b", "", drop); err != nil || len(ready.runs) != 0 {
		t.Fatalf("read again after a restart: %+v %v, want nothing to run", ready, err)
	}

	// A rename within the group runs nothing; one out of it is refused, naming its table, and nothing
	// of its statement runs (its first part would have been allowed).
	ready, err = d.decide("RENAME TABLE db_1.t_2 TO db_1.t_9", "", evAt(10000))
	if err != nil || len(ready.runs) != 0 || !slices.Contains(ready.forgetShapes, vocab.TableName{Schema: "db_1", Name: "t_2"}) || !slices.Contains(ready.forgetShapes, vocab.TableName{Schema: "db_1", Name: "t_9"}) {
		t.Fatalf("rename within the group: %+v %v", ready, err)
	}
	if g := d.shard.groups[target]; !g.Member(vocab.TableName{Schema: "db_1", Name: "t_9"}) || g.Member(vocab.TableName{Schema: "db_1", Name: "t_2"}) {
		t.Fatalf("the group after the rename: %v", g.Tables())
	}
	ready, err = d.decide("RENAME TABLE solo.c TO solo.d, db_1.t_1 TO solo.t_1", "", evAt(11000))
	var refused *RefusedDDLError
	if !errors.As(err, &refused) || refused.Table != (vocab.TableName{Schema: "db_1", Name: "t_1"}) || len(ready.runs) != 0 || refused.Start != evAt(11000).start {
		t.Fatalf("a rename out of the group: %+v %v, want it refused before anything runs", ready, err)
	}
}

// TestOnlineRunStaysUnderTheOldName: a pt-osc run on a shard, then a rename of the shard within its
// group. The run goes with the shard to its new name and stays under the old one, as its tracked
// schema does: a restart from before the rename reads the tool's cut-over again under the old name and
// must find the ALTER it swaps in, so that the shard reaches the step (the chaos soak, seed 5, lost
// it: the rows with the new column reached the downstream before the column).
func TestOnlineRunStaysUnderTheOldName(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	old, renamed := vocab.TableName{Schema: "db_1", Name: "t_1"}, vocab.TableName{Schema: "db_1", Name: "t_9"}
	withOnline := func() *ddlPath {
		d := newTestDDLPath(t)
		rules, err := onlineddl.NewRules([]string{`^_(.+)_new$`}, []string{`^_(.+)_old$`})
		if err != nil {
			t.Fatal(err)
		}
		d.online, d.runs = rules, onlineddl.Runs{}
		return d
	}
	cutOver := "RENAME TABLE db_1.t_1 TO db_1._t_1_old, db_1._t_1_new TO db_1.t_1"
	d := withOnline()
	for i, q := range []string{"CREATE TABLE db_1._t_1_new (id INT PRIMARY KEY)", "ALTER TABLE db_1._t_1_new ADD COLUMN c INT", cutOver, "RENAME TABLE db_1.t_1 TO db_1.t_9"} {
		if ready, err := d.decide(q, "", evAt(uint32(1000+100*i))); err != nil || len(ready.post) != 0 || len(ready.runs) != 0 {
			t.Fatalf("%s: %+v %v, want nothing to run or post (the group waits for t_2)", q, ready, err)
		}
	}
	if run := d.runs[renamed]; run == nil || len(run.DDLs) != 1 || !strings.Contains(run.DDLs[0].SQL, "ADD COLUMN") {
		t.Fatalf("the run under the new name: %+v, want the ALTER", run)
	}
	// What the checkpoint holds after the flush: the runs changed, encoded.
	ckpt := map[vocab.TableName]string{}
	for tb := range d.onlineDirty {
		ckpt[tb] = onlineddl.Encode(d.runs[tb])
	}
	// The restart, from before the cut-over: the runs come from the checkpoint.
	d2 := withOnline()
	for tb, js := range ckpt {
		run, err := onlineddl.Decode(js)
		if err != nil {
			t.Fatal(err)
		}
		if run != nil {
			d2.runs[tb] = run
		}
	}
	if ready, err := d2.decide(cutOver, "", evAt(1200)); err != nil || len(ready.post) != 0 {
		t.Fatalf("the cut-over read again: %+v %v", ready, err)
	}
	ready, err := d2.decide("ALTER TABLE db_1.t_2 ADD COLUMN c INT", "", evAt(1500))
	if err != nil || !slices.Equal(ready.post, []vocab.TableName{target}) {
		t.Fatalf("t_2's ADD COLUMN after the restart: %+v %v, want the group complete (t_1 reached the step at its cut-over under %s)", ready, err, old)
	}
}

// TestOnlineRunsReadAgainFromBeforeTheFirst: two pt-osc runs on one shard (ADD COLUMN c, then d), then a
// restart from before the first, with the runs as the checkpoint holds them after the second. The
// first run's cut-over, read again, must swap in c, so that the shard reaches c where its group expects
// it (the chaos soak, seed 18: it swapped in nothing, the shard's next step was d where the other
// shards had c, and the subtask paused on "detect inconsistent DDL sequence" with every lock of the
// source stuck behind it).
func TestOnlineRunsReadAgainFromBeforeTheFirst(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	withOnline := func() *ddlPath {
		d := newTestDDLPath(t)
		rules, err := onlineddl.NewRules([]string{`^_(.+)_new$`}, []string{`^_(.+)_old$`})
		if err != nil {
			t.Fatal(err)
		}
		d.online, d.runs = rules, onlineddl.Runs{}
		return d
	}
	run := func(col string) []string {
		return []string{"CREATE TABLE db_1._t_1_new (id INT PRIMARY KEY)", "ALTER TABLE db_1._t_1_new ADD COLUMN " + col + " INT",
			"RENAME TABLE db_1.t_1 TO db_1._t_1_old, db_1._t_1_new TO db_1.t_1", "DROP TABLE IF EXISTS db_1._t_1_old"}
	}
	first, second := run("c"), run("d")
	d := withOnline()
	for i, q := range append(slices.Clone(first), second...) {
		if _, err := d.decide(q, "", evAt(uint32(1000+100*i))); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ckpt := map[vocab.TableName]string{}
	for tb := range d.onlineDirty {
		ckpt[tb] = onlineddl.Encode(d.runs[tb])
	}
	// The restart from before the first run: the group as it was there, the runs from the checkpoint.
	d2 := withOnline()
	for tb, js := range ckpt {
		r, err := onlineddl.Decode(js)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil {
			d2.runs[tb] = r
		}
	}
	for i, q := range first {
		if _, err := d2.decide(q, "", evAt(uint32(1000+100*i))); err != nil {
			t.Fatalf("%s read again: %v", q, err)
		}
	}
	ready, err := d2.decide("ALTER TABLE db_1.t_2 ADD COLUMN c INT", "", evAt(5000))
	if err != nil || !slices.Equal(ready.post, []vocab.TableName{target}) {
		t.Fatalf("t_2's ADD COLUMN c after the restart: %+v %v, want the group complete (t_1 reached c at its first cut-over read again)", ready, err)
	}
}

// TestNextStepWaitsForTheReaderWithNothingHeldBack: a step resolves while the reader is behind the
// group's next step, which every table reached before (an earlier re-read, still under way, went back
// past it), and no DML of this step was held back. The next step's info must still wait until the
// reader has passed every table's DDL of that step: DML of a table read before its DDL goes
// downstream before the DDL, and the lock's owner runs the DDL as soon as this info is in. (The chaos
// soak, seed 16: the info was posted at once, the owner ran CHANGE COLUMN c100 c102, and this
// source's DELETE of a shard read afterwards, still before that shard's DDL, was refused downstream:
// "Unknown column 'c100'".)
func TestNextStepWaitsForTheReaderWithNothingHeldBack(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	// twoSteps is a DDL path whose tables both reached two steps (t_1 at 1000 and 2000, t_2 at 3000 and
	// 4000), the first one's info posted.
	twoSteps := func() *ddlPath {
		d := newTestDDLPath(t)
		for i, q := range []string{"ALTER TABLE db_1.t_1 ADD COLUMN e INT", "ALTER TABLE db_1.t_1 ADD COLUMN f INT",
			"ALTER TABLE db_1.t_2 ADD COLUMN e INT", "ALTER TABLE db_1.t_2 ADD COLUMN f INT"} {
			if _, err := d.decide(q, "", evAt(uint32(1000+1000*i))); err != nil {
				t.Fatal(err)
			}
		}
		d.shard.pending[target] = true
		return d
	}
	d := twoSteps()
	ddls, _ := d.infoOf(target)
	res := opResult{target: target, info: pessimist.Info{Task: "task", Source: "s1", Target: target.String(), DDLs: ddls},
		op: pessimist.Operation{DDLs: ddls}}
	// The reader is at 1500 (re-reading): past t_1's first DDL, before t_2's DDLs of both steps.
	lr, err := d.resolve(res, lockView{lastPos: evAt(1500).end})
	if err != nil {
		t.Fatal(err)
	}
	if lr.reread || lr.post {
		t.Fatalf("resolved with the reader before the next step: %+v, want no re-read and the info not posted yet", lr)
	}
	if got := d.deferredDue(evAt(3500).end); len(got) != 0 {
		t.Fatalf("the next step's info due at 3500, before t_2's DDL of it at 4000: %v", got)
	}
	if got := d.deferredDue(evAt(4000).end); !slices.Equal(got, []vocab.TableName{target}) {
		t.Fatalf("the next step's info once the reader passed it: %v", got)
	}

	// With the reader past the next step already, its info goes at once, as before.
	d = twoSteps()
	if lr, err = d.resolve(res, lockView{lastPos: evAt(4000).end}); err != nil || !lr.post || lr.reread {
		t.Fatalf("resolved with the reader past the next step: %+v %v, want its info posted now", lr, err)
	}
}
