// The lock round trip of a shard group: the info posted, the operation awaited, and the resolved DDLs
// executed or skipped, with the re-read of the DML held back behind them.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

type opResult struct {
	target vocab.TableName
	info   pessimist.Info
	op     pessimist.Operation
	err    error
	at     time.Time // when the operation arrived (for the trace)
	// wroteExec: the put of info completed the lock and wrote this source's exec (Info.WroteExec).
	wroteExec bool
	// removed: the lock was force-removed from a task that still runs (checkRemoved); op is empty.
	removed bool
}

// postInfo tells the master the group of target is synced and waits for the operation in the
// background, so other targets keep flowing.
func (s *Syncer) postInfo(ctx context.Context, target vocab.TableName) error {
	ddls, in := s.ddl.infoOf(target)
	lock := pessimist.LockID(s.cfg.Task, target.String())
	s.trace(lock, "ddl read", s.ddl.shard.ddlReadAt)
	s.trace(lock, "info putting", time.Now())
	info, err := s.cfg.Agent.PutInfoIn(ctx, target.String(), ddls, in.String())
	if err != nil {
		return err
	}
	s.trace(lock, "info put", time.Now())
	s.ddl.shard.pending[target] = true
	go func() {
		op, err := s.cfg.Agent.WaitOperation(ctx, info)
		select {
		case s.ddl.shard.opCh <- opResult{target: target, info: info, wroteExec: info.WroteExec(), op: op, err: err, at: time.Now()}:
		case <-ctx.Done():
		}
	}()
	return nil
}

// postDeferred posts the infos applyOperation deferred whose steps the re-read has passed: the DML
// read before them goes downstream first.
func (s *Syncer) postDeferred(ctx context.Context) error {
	due := s.ddl.deferredDue(s.cur.lastPos)
	if len(due) == 0 {
		return nil
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	for _, target := range due {
		if err := s.postInfo(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

// infoOf is what the info of target's group says: the DDLs of its active step, and the session
// settings of the event of the first of them.
func (d *ddlPath) infoOf(target vocab.TableName) ([]string, session.Settings) {
	g := d.shard.groups[target]
	var in session.Settings
	if u, ok := g.Unresolved(); ok {
		in = d.shard.ddlStart[target][u.FirstPosition].in
	}
	return g.Status().ActiveDDLs, in
}

// deferredDue takes the deferred infos whose steps the reader, at lastPos, has passed, in target order:
// those still to post (a group posted meanwhile, its step's DDL read again, or no longer synced is
// dropped).
func (d *ddlPath) deferredDue(lastPos vocab.Position) []vocab.TableName {
	var due []vocab.TableName
	for _, target := range slices.SortedFunc(maps.Keys(d.shard.infoAt), func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) }) {
		if lastPos.Compare(d.shard.infoAt[target]) < 0 {
			continue
		}
		delete(d.shard.infoAt, target)
		g := d.shard.groups[target]
		if g == nil || d.shard.pending[target] || !g.Status().Synced {
			continue
		}
		due = append(due, target)
	}
	return due
}

// applyOperation carries out the operation of a lock of this source: the rows read before the DDLs
// go downstream first, the DDL path decides the rest (resolve: a lockReady), and this runs it: the
// re-read, the DDLs or the skip with the checkpoint past them, done in etcd, the next info.
func (s *Syncer) applyOperation(ctx context.Context, res opResult) error {
	lock := res.info.LockID()
	s.trace(lock, "op received", res.at)
	s.trace(lock, "op applying", time.Now())
	ctx = sink.WithTrace(ctx, func(step string) { s.trace(lock, step, time.Now()) })
	if err := s.checkRemoved(ctx, &res); err != nil {
		return err
	}
	// The DML read before the DDLs goes downstream first; a checkpoint alone (a position, tracked
	// schemas) need not: the checkpoint past the lock then keeps the resume position where it was
	// persisted (resolve). The owner whose info completed the lock has just read its own DDL, so it
	// always has such a checkpoint to write, a commit downstream (2 ms on a VM) before the DDL.
	rows, err := s.flushRows(ctx)
	if err != nil {
		return err
	}
	s.trace(lock, "flushed", time.Now())
	lr, err := s.ddl.resolve(res, s.lockView(rows))
	if err != nil {
		return err
	}
	var from resumePoint
	if lr.reread {
		if from, err = s.cur.rewind(lr.rereadFrom); err != nil {
			return err
		}
		s.apply.rewound()
	}
	if err := s.runLockDDLs(ctx, res, lr); err != nil {
		return err
	}
	s.trace(lock, "checkpoint", time.Now())
	if lr.mode != lockSkip {
		failpoint.Inject("worker-before-done") // DDL and checkpoint committed downstream, done not yet in etcd
	}
	maps.Copy(s.ckpt.Resolved, lr.up.Resolved)
	s.apply.persistedAt(lr.up.Global, lr.up.GlobalGTID)
	if lr.done {
		if err := s.cfg.Agent.DoneOperationDeleteInfo(ctx, lr.op, res.info); err != nil {
			return err
		}
		s.trace(lock, "done", time.Now())
	}
	s.forgetKeys()
	s.log.Info("sharding DDL resolved", zap.String("lock", lock), zap.Bool("exec", lr.op.Exec))
	if lr.resync {
		s.ddl.shard.resync, s.ddl.shard.resyncLock = &from, lock
	}
	if lr.post {
		return s.postInfo(ctx, res.target)
	}
	return nil
}

// checkRemoved tells a lock force-removed from a task that still runs (shard-ddl-lock unlock
// --force-remove: its DDLs are skipped here) from one removed with its task by stop-task (this syncer
// stops), and stops on any other error of the wait.
func (s *Syncer) checkRemoved(ctx context.Context, res *opResult) error {
	if !errors.Is(res.err, pessimist.ErrLockRemoved) {
		if res.err != nil {
			return fmt.Errorf("source %s waiting for lock %s: %w", s.cfg.Source, res.info.LockID(), res.err)
		}
		return nil
	}
	started, err := s.cfg.Agent.TaskStarted(ctx)
	if err != nil {
		return fmt.Errorf("source %s: lock %s removed; read its task: %w", s.cfg.Source, res.info.LockID(), err)
	}
	if !started {
		return fmt.Errorf("source %s: lock %s removed with its task (stop-task): %w", s.cfg.Source, res.info.LockID(), res.err)
	}
	// The user takes the DDLs over. They are skipped here (recorded as resolved, so a restart does not
	// post them again) and the held-back DML follows; the downstream schema is the user's to fix.
	s.log.Warn("lock was force-removed: its DDLs are skipped on this source; apply the right schema downstream by hand",
		zap.String("lock", res.info.LockID()), zap.Strings("ddls", res.info.DDLs))
	res.removed, res.err = true, nil
	return nil
}

// lockView is what the DDL path reads of the other stages to decide a lock's operation.
func (s *Syncer) lockView(flushedRows bool) lockView {
	v := lockView{lastPos: s.cur.lastPos, persisted: s.apply.persisted, persistedGTID: s.apply.persistedGTID,
		flushedRows: flushedRows, gtidFor: s.cur.gtidFor, operator: s.cfg.Operators.find}
	v.oldestXA, _ = s.xa.oldestPrepared()
	return v
}

// runLockDDLs runs what lr decided downstream: the DDLs (exactly once, with the checkpoint past them)
// on the owner, the checkpoint alone elsewhere.
func (s *Syncer) runLockDDLs(ctx context.Context, res opResult, lr lockReady) error {
	if lr.operator != nil {
		s.log.Warn("lock DDLs handled by an operator (binlog "+lr.operator.Op+")", zap.String("lock", res.info.LockID()),
			zap.Strings("ddls", lr.op.DDLs), zap.Strings("instead", ddl.Texts(lr.ddls)))
	}
	var err error
	switch lr.mode {
	case lockSkip:
		failpoint.Inject("worker-before-skip") // a non-owner has its skip, nothing re-synced yet
		return s.sink.Flush(ctx, nil, lr.up)
	case lockExecFirst:
		failpoint.Inject("worker-before-exec")                                   // the owner has its exec operation, nothing ran yet
		err = s.exec.ExecDDLFirst(ctx, res.info.LockID(), lr.ddls, lr.in, lr.up) // nobody can have run them yet
	case lockExecOnce:
		failpoint.Inject("worker-before-exec")
		err = s.exec.ExecDDLOnce(ctx, res.info.LockID(), lr.ddls, lr.in, lr.up)
	}
	if err != nil && sink.DownstreamPermanent(err) && len(lr.starts) > 0 {
		err = &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: lr.first, Pos: lr.starts[0],
			Stmt: strings.Join(ddl.Texts(lr.ddls), "; "), Lock: res.info.LockID(), Cause: err}
	}
	return err
}

// lockView is what the DDL path reads of the other stages, read only, to decide a lock's operation:
// where the reader is, the start of the oldest prepared XA transaction (zero: none), the checkpoint the
// applier persisted, whether the flush before the lock wrote rows, the cursor's GTID sets at positions
// and the operators (binlog skip/replace) the user put at positions.
type lockView struct {
	lastPos       vocab.Position
	oldestXA      vocab.Position
	persisted     vocab.Position
	persistedGTID string
	flushedRows   bool
	gtidFor       func(vocab.Position) string
	operator      func(lock bool, at ...vocab.Position) (Operator, bool)
}

// lockMode is how the owner or a non-owner carries out a lock's DDLs.
type lockMode uint8

const (
	// lockSkip: a non-owner's skip (or a force-removed lock): the checkpoint past the DDLs alone.
	lockSkip lockMode = iota
	// lockExecOnce: the owner runs the DDLs exactly once, reading the markers first (an earlier
	// owner may have run some).
	lockExecOnce
	// lockExecFirst: the owner runs the DDLs of an info it wrote with exec: nobody can have run them.
	lockExecFirst
)

// lockReady is what the DDL path decided for a resolved lock of this source, for the unit to carry out:
// the DDLs to execute or skip with the checkpoint past them, the DML held back behind them to read
// again, and the group's next step.
type lockReady struct {
	// op is the operation carried out (a force-removed lock's: its info's DDLs, skipped); mode how;
	// ddls what runs downstream in mode exec (the operation's, or an operator's instead, whose
	// operator is then set); up the checkpoint that commits with them (or alone).
	op       pessimist.Operation
	mode     lockMode
	ddls     []ddl.Statement
	operator *Operator
	up       meta.CheckpointUpdate
	// done: mark the operation done in etcd (not for a force-removed lock, which is gone).
	done bool
	// resync: the re-read starts before any re-read under way; the unit's re-sync point moves there.
	resync     bool
	resolution shardgroup.Resolution
	// starts are where this source's DDLs of the lock start in the binlog, the first's first (an
	// operator for the lock's DDLs names one of them); first is its table and in its session settings,
	// in which the DDLs run.
	starts []vocab.Position
	first  vocab.TableName
	in     session.Settings
	// reread: DML was held back behind the DDLs; the reader goes back to rereadFrom (not past where it
	// is) and reads it again.
	reread     bool
	rereadFrom vocab.Position
	// post: the group's next step is synced, nothing was held back before it and the reader has passed
	// it: post its info now. (Otherwise the info waits in infoAt until the reader passes the step:
	// deferredDue.)
	post bool
}

// resolve marks the step res answers as resolved in its group and decides the whole of what the unit
// carries out (lockReady), from what it reads of the other stages (v). It does no I/O.
func (d *ddlPath) resolve(res opResult, v lockView) (lockReady, error) {
	lock := res.info.LockID()
	lastPos := v.lastPos
	op := res.op
	if res.removed {
		op = pessimist.Operation{Task: d.task, Source: d.source, Target: res.info.Target, DDLs: res.info.DDLs}
	}
	g := d.shard.groups[res.target]
	if g == nil {
		return lockReady{}, fmt.Errorf("source %s: lock %s answered for %s, which has no shard group here", d.source, lock, res.target)
	}
	delete(d.shard.pending, res.target)
	if st := g.Status(); !slices.Equal(st.ActiveDDLs, op.DDLs) {
		return lockReady{}, fmt.Errorf("source %s: lock %s answered DDLs %q, but the group waits on %q", d.source, lock, op.DDLs, st.ActiveDDLs)
	}
	resolution, err := g.ResolveActive()
	if err != nil {
		return lockReady{}, err
	}
	d.renameSettled(res.target, g)
	lr := lockReady{op: op, resolution: resolution, done: !res.removed}
	var parsed []ddl.Statement // the first DDL's, as its event was split
	// The DDLs run in the session of the first of them (their event's); one that ran in another is
	// logged.
	for _, t := range resolution.Tables {
		p := resolution.Positions[t]
		if ev, ok := d.shard.ddlStart[res.target][p]; ok {
			if len(lr.starts) == 0 || ev.start.Compare(lr.starts[0]) < 0 {
				lr.first, lr.in, parsed = t, ev.in, ev.stmts
				lr.starts = append([]vocab.Position{ev.start}, lr.starts...)
			} else {
				lr.starts = append(lr.starts, ev.start)
			}
		}
	}
	for _, t := range resolution.Tables {
		if ev, ok := d.shard.ddlStart[res.target][resolution.Positions[t]]; ok && ev.in.String() != lr.in.String() {
			d.log.Warn("a lock's DDLs ran upstream in different session settings: the first's apply downstream", zap.String("lock", lock),
				zap.Stringer("table", lr.first), zap.String("settings", lr.in.String()), zap.Stringer("other", t), zap.String("its", ev.in.String()))
		}
	}
	for p := range d.shard.ddlStart[res.target] {
		if p.Compare(resolution.ResyncFrom) <= 0 {
			delete(d.shard.ddlStart[res.target], p)
		}
	}
	// Held-back DML after ResyncFrom must be read again, so neither the reader nor a restart may
	// resume past it. If an earlier re-sync has not yet read that far, it goes on from where it is.
	// Every DML this group held back lies after ResyncFrom (it was blocked by this step); when there
	// is none, everything read so far is applied and the reader goes on (a restart of the reader
	// costs a few milliseconds per source and lock).
	lr.reread = d.shard.heldBack[res.target]
	delete(d.shard.heldBack, res.target) // a re-read that finds DML still blocked (by the next step) sets it again
	lr.rereadFrom = resolution.ResyncFrom
	if lr.reread && lastPos.Compare(lr.rereadFrom) < 0 {
		lr.rereadFrom = lastPos
	}
	if g.Status().Synced {
		// The next step is reached already. Its owner may run its DDLs as soon as the info is in, so
		// the info waits until the reader has passed every table's DDL of the step (deferredDue): DML
		// of a table read before its DDL goes downstream first. The reader is behind the step when
		// DML before it was held back and is read again now, and also when an earlier re-read, still
		// under way, went back past it with nothing held back here (the chaos soak, seed 16).
		if at, _ := g.SyncedAt(); lr.reread || lastPos.Compare(at) < 0 {
			d.shard.infoAt[res.target] = at
		} else {
			lr.post = true
		}
	}
	lr.resync = lr.reread && (d.shard.resync == nil || lr.rereadFrom.Compare(d.shard.resync.pos) < 0)

	// The checkpoint past the lock: where a restart may resume once the step is resolved (the reader's
	// position, back at the re-read's start if there is one, and never past a prepared XA transaction
	// or a group's unresolved step). When the flush before the lock wrote no rows, the position stays
	// where it was persisted, with the schemas that go with it, and the next flush moves both.
	global := lastPos
	if lr.reread {
		global = lr.rereadFrom
	}
	global = d.safeGlobal(global, v.oldestXA)
	globalGTID := ""
	if v.gtidFor != nil {
		globalGTID = v.gtidFor(global)
	}
	if !v.flushedRows && v.persisted.Compare(global) < 0 {
		global, globalGTID = v.persisted, v.persistedGTID
	}
	target := res.target
	lr.up = meta.CheckpointUpdate{Global: global, GlobalGTID: globalGTID, Resolved: resolution.Positions, ResolvedTarget: &target, ResolvedDDLs: op.DDLs}

	// The owner runs the DDLs, or what an operator (binlog skip/replace at one of their events) put in
	// their place; exactly once, and without reading the markers when its info carried exec (nobody
	// can have run them). A non-owner and a force-removed lock write the checkpoint alone.
	if op.Exec {
		lr.mode, lr.ddls = lockExecOnce, parsed
		if res.wroteExec {
			lr.mode = lockExecFirst
		}
		if !slices.Equal(ddl.Texts(parsed), op.DDLs) {
			// The DDLs' event was not split since the process started (an operation read back after
			// a restart, its event before the resume point): they are parsed here.
			var err error
			if lr.ddls, err = ddl.ParseStatements(op.DDLs); err != nil {
				return lockReady{}, fmt.Errorf("source %s: lock %s: %w", d.source, lock, err)
			}
		}
		if v.operator != nil {
			if o, ok := v.operator(true, lr.starts...); ok {
				sqls, err := ddl.ParseStatements(o.SQLs) // skip: none
				if err != nil {
					return lockReady{}, fmt.Errorf("source %s: lock %s: binlog %s: %w", d.source, lock, o.Op, err)
				}
				lr.operator, lr.ddls = &o, sqls
			}
		}
	}
	return lr, nil
}

// safeGlobal is where a restart may resume when the reader is at lastPos: not past the start of the
// oldest prepared XA transaction (oldestXA; zero: none), whose rows wait in memory, nor past the start
// of the event of a group's unresolved step, whose DDL a restart must read again.
func (d *ddlPath) safeGlobal(lastPos, oldestXA vocab.Position) vocab.Position {
	g := lastPos
	if !oldestXA.IsZero() && oldestXA.Compare(g) < 0 {
		g = oldestXA
	}
	for target, grp := range d.shard.groups {
		if u, ok := grp.Unresolved(); ok {
			p := u.FirstPosition
			if st, ok := d.shard.ddlStart[target][p]; ok {
				p = st.start
			}
			if p.Compare(g) < 0 {
				g = p
			}
		}
	}
	return g
}
