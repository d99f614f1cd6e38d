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
		case s.ddl.shard.opCh <- opResult{target: target, info: info, op: op, err: err, at: time.Now()}:
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

// applyOperation executes or skips the DDLs of a resolved lock, saves the checkpoint past them, marks
// the operation done, and re-reads the DML held back behind them.
func (s *Syncer) applyOperation(ctx context.Context, res opResult) error {
	lock := res.info.LockID()
	s.trace(lock, "op received", res.at)
	s.trace(lock, "op applying", time.Now())
	ctx = sink.WithTrace(ctx, func(step string) { s.trace(lock, step, time.Now()) })
	removed := errors.Is(res.err, pessimist.ErrLockRemoved)
	if removed {
		// Only a lock force-removed from a task that still runs means "skip"; keys removed by
		// stop-task (which also removes the task's key) stop this syncer, which should be stopped.
		started, err := s.cfg.Agent.TaskStarted(ctx)
		if err != nil {
			return fmt.Errorf("source %s: lock %s removed; read its task: %w", s.cfg.Source, res.info.LockID(), err)
		}
		if !started {
			return fmt.Errorf("source %s: lock %s removed with its task (stop-task): %w", s.cfg.Source, res.info.LockID(), res.err)
		}
	}
	switch {
	case removed:
		// shard-ddl-lock unlock --force-remove: the user takes the DDLs over. They are skipped here
		// (recorded as resolved, so a restart does not post them again) and the held-back DML
		// follows; the downstream schema is the user's to fix by hand.
		s.log.Warn("lock was force-removed: its DDLs are skipped on this source; apply the right schema downstream by hand",
			zap.String("lock", res.info.LockID()), zap.Strings("ddls", res.info.DDLs))
		res.op = pessimist.Operation{Task: s.cfg.Task, Source: s.cfg.Source, Target: res.info.Target, DDLs: res.info.DDLs}
	case res.err != nil:
		return fmt.Errorf("source %s waiting for lock %s: %w", s.cfg.Source, res.info.LockID(), res.err)
	}
	// The DML read before the DDLs goes downstream first; a checkpoint alone (a position, tracked
	// schemas) need not: the checkpoint past the lock then keeps the resume position where it was
	// persisted, with the schemas that go with it, and the next flush moves both. The owner whose
	// info completed the lock has just read its own DDL, so it always has such a checkpoint to write,
	// a commit downstream (2 ms on a VM) before the DDL.
	rows, err := s.flushRows(ctx)
	if err != nil {
		return err
	}
	s.trace(lock, "flushed", time.Now())
	lr, err := s.ddl.resolve(res, s.cur.lastPos)
	if err != nil {
		return err
	}
	resolution, starts, first, in, held := lr.resolution, lr.starts, lr.first, lr.in, lr.reread
	var from resumePoint
	if held {
		if from, err = s.cur.rewind(lr.rereadFrom); err != nil {
			return err
		}
		s.apply.committed, s.apply.committedGTID = vocab.Position{}, ""
	}
	target := res.target
	global := s.safeGlobal()
	globalGTID := s.cur.gtidFor(global)
	if !rows && s.apply.persisted.Compare(global) < 0 {
		global, globalGTID = s.apply.persisted, s.apply.persistedGTID // see flushRows above
	}
	up := meta.CheckpointUpdate{Global: global, GlobalGTID: globalGTID, Resolved: resolution.Positions, ResolvedTarget: &target, ResolvedDDLs: res.op.DDLs}
	if res.op.Exec {
		failpoint.Inject("worker-before-exec") // the owner has its exec operation, nothing ran yet
		ddls := res.op.DDLs
		if op, ok := s.cfg.Operators.find(true, starts...); ok {
			s.log.Warn("lock DDLs handled by an operator (binlog "+op.Op+")", zap.String("lock", res.info.LockID()),
				zap.Strings("ddls", ddls), zap.Strings("instead", op.SQLs))
			ddls = op.SQLs // skip: none
		}
		if res.info.WroteExec() {
			err = s.exec.ExecDDLFirst(ctx, res.info.LockID(), ddls, in, up) // nobody can have run them yet
		} else {
			err = s.exec.ExecDDLOnce(ctx, res.info.LockID(), ddls, in, up)
		}
		if err != nil && sink.DownstreamPermanent(err) && len(starts) > 0 {
			err = &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: first, Pos: starts[0],
				Stmt: strings.Join(ddls, "; "), Lock: res.info.LockID(), Cause: err}
		}
	} else {
		failpoint.Inject("worker-before-skip") // a non-owner has its skip, nothing re-synced yet
		err = s.sink.Flush(ctx, nil, up)
	}
	if err != nil {
		return err
	}
	s.trace(lock, "checkpoint", time.Now())
	if res.op.Exec {
		failpoint.Inject("worker-before-done") // DDL and checkpoint committed downstream, done not yet in etcd
	}
	for t, p := range resolution.Positions {
		s.ckpt.Resolved[t] = p
	}
	s.ckpt.Global, s.apply.persisted, s.apply.persistedGTID = up.Global, up.Global, up.GlobalGTID
	if !removed {
		if err := s.cfg.Agent.DoneOperationDeleteInfo(ctx, res.op, res.info); err != nil {
			return err
		}
		s.trace(lock, "done", time.Now())
	}
	s.forgetKeys()
	s.log.Info("sharding DDL resolved", zap.String("lock", res.info.LockID()), zap.Bool("exec", res.op.Exec))
	if held && (s.ddl.shard.resync == nil || from.pos.Compare(s.ddl.shard.resync.pos) < 0) {
		s.ddl.shard.resync, s.ddl.shard.resyncLock = &from, lock
	}
	if lr.post {
		return s.postInfo(ctx, target)
	}
	return nil
}

// lockReady is what the DDL path decided for a resolved lock of this source, for the unit to carry out:
// the DDLs to execute or skip with the checkpoint past them, the DML held back behind them to read
// again, and the group's next step.
type lockReady struct {
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

// resolve marks the step res answers as resolved in its group: the reader is at lastPos.
func (d *ddlPath) resolve(res opResult, lastPos vocab.Position) (lockReady, error) {
	lock := res.info.LockID()
	delete(d.shard.pending, res.target)
	g := d.shard.groups[res.target]
	if st := g.Status(); !slices.Equal(st.ActiveDDLs, res.op.DDLs) {
		return lockReady{}, fmt.Errorf("source %s: lock %s answered DDLs %q, but the group waits on %q", d.source, lock, res.op.DDLs, st.ActiveDDLs)
	}
	resolution, err := g.ResolveActive()
	if err != nil {
		return lockReady{}, err
	}
	d.renameSettled(res.target, g)
	lr := lockReady{resolution: resolution}
	// The DDLs run in the session of the first of them (their event's); one that ran in another is
	// logged.
	for _, t := range resolution.Tables {
		p := resolution.Positions[t]
		if ev, ok := d.shard.ddlStart[res.target][p]; ok {
			if len(lr.starts) == 0 || ev.start.Compare(lr.starts[0]) < 0 {
				lr.first, lr.in = t, ev.in
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
	return lr, nil
}
