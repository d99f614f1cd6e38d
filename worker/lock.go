// The lock round trip of a shard group: the info posted, the operation awaited, and the resolved DDLs
// executed or skipped, with the re-read of the DML held back behind them.

package worker

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
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/shardgroup"
)

type opResult struct {
	target TableName
	info   pessimist.Info
	op     pessimist.Operation
	err    error
	at     time.Time // when the operation arrived (for the trace)
}

// postInfo tells the master the group of target is synced and waits for the operation in the
// background, so other targets keep flowing.
func (s *Syncer) postInfo(ctx context.Context, target TableName) error {
	g := s.shard.groups[target]
	ddls := g.Status().ActiveDDLs
	var in session.Settings
	if u, ok := g.Unresolved(); ok {
		in = s.shard.ddlStart[target][u.FirstPosition].in
	}
	lock := pessimist.LockID(s.cfg.Task, target.String())
	s.trace(lock, "ddl read", s.shard.ddlReadAt)
	s.trace(lock, "info putting", time.Now())
	info, err := s.cfg.Agent.PutInfoIn(ctx, target.String(), ddls, in.String())
	if err != nil {
		return err
	}
	s.trace(lock, "info put", time.Now())
	s.shard.pending[target] = true
	go func() {
		op, err := s.cfg.Agent.WaitOperation(ctx, info)
		select {
		case s.shard.opCh <- opResult{target: target, info: info, op: op, err: err, at: time.Now()}:
		case <-ctx.Done():
		}
	}()
	return nil
}

// postDeferred posts the infos applyOperation deferred whose steps the re-read has passed: the DML
// read before them goes downstream first.
func (s *Syncer) postDeferred(ctx context.Context) error {
	flushed := false
	for _, target := range slices.SortedFunc(maps.Keys(s.shard.infoAt), func(a, b TableName) int { return strings.Compare(a.String(), b.String()) }) {
		if s.cur.lastPos.Compare(s.shard.infoAt[target]) < 0 {
			continue
		}
		delete(s.shard.infoAt, target)
		g := s.shard.groups[target]
		if g == nil || s.shard.pending[target] || !g.Status().Synced {
			continue // posted meanwhile (the step's DDL read again), or no longer synced
		}
		if !flushed {
			if err := s.flush(ctx); err != nil {
				return err
			}
			flushed = true
		}
		if err := s.postInfo(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

// applyOperation executes or skips the DDLs of a resolved lock, saves the checkpoint past them, marks
// the operation done, and re-reads the DML held back behind them.
func (s *Syncer) applyOperation(ctx context.Context, res opResult) error {
	lock := res.info.LockID()
	s.trace(lock, "op received", res.at)
	s.trace(lock, "op applying", time.Now())
	ctx = withTrace(ctx, func(step string) { s.trace(lock, step, time.Now()) })
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
	delete(s.shard.pending, res.target)
	g := s.shard.groups[res.target]
	if st := g.Status(); !slices.Equal(st.ActiveDDLs, res.op.DDLs) {
		return fmt.Errorf("source %s: lock %s answered DDLs %q, but the group waits on %q", s.cfg.Source, res.info.LockID(), res.op.DDLs, st.ActiveDDLs)
	}
	resolution, err := g.ResolveActive()
	if err != nil {
		return err
	}
	s.renameSettled(res.target, g)
	// Where this source's DDLs of the lock start in the binlog: an operator for the lock's DDLs
	// (binlog skip|replace after the owner's execution failed) names one of them.
	// The DDLs run in the session of the first of them (their event's); one that ran in another is
	// logged.
	var starts []Position
	var first TableName
	var in session.Settings
	for _, t := range resolution.Tables {
		p := resolution.Positions[t]
		if ev, ok := s.shard.ddlStart[res.target][p]; ok {
			if len(starts) == 0 || ev.start.Compare(starts[0]) < 0 {
				first, in = t, ev.in
				starts = append([]Position{ev.start}, starts...)
			} else {
				starts = append(starts, ev.start)
			}
		}
	}
	for _, t := range resolution.Tables {
		if ev, ok := s.shard.ddlStart[res.target][resolution.Positions[t]]; ok && ev.in.String() != in.String() {
			s.log.Warn("a lock's DDLs ran upstream in different session settings: the first's apply downstream", zap.String("lock", lock),
				zap.Stringer("table", first), zap.String("settings", in.String()), zap.Stringer("other", t), zap.String("its", ev.in.String()))
		}
	}
	for p := range s.shard.ddlStart[res.target] {
		if p.Compare(resolution.ResyncFrom) <= 0 {
			delete(s.shard.ddlStart[res.target], p)
		}
	}
	// Held-back DML after ResyncFrom must be read again, so neither the reader nor a restart may
	// resume past it. If an earlier re-sync has not yet read that far, it goes on from where it is.
	// Every DML this group held back lies after ResyncFrom (it was blocked by this step); when there
	// is none, everything read so far is applied and the reader goes on (a restart of the reader
	// costs a few milliseconds per source and lock).
	held := s.shard.heldBack[res.target]
	delete(s.shard.heldBack, res.target) // a re-read that finds DML still blocked (by the next step) sets it again
	from := resumePoint{pos: resolution.ResyncFrom}
	if held {
		if s.cur.lastPos.Compare(from.pos) < 0 {
			from.pos = s.cur.lastPos
		}
		from.gtid = s.cur.gtidFor(from.pos)
		if s.cfg.EnableGTID {
			// Rewind the GTID set with the position: resume points computed from here pair them.
			s.cur.gtidAt[from.pos] = from.gtid
			if s.cur.gtids, err = parseMariadbGTIDs(from.gtid); err != nil {
				return err
			}
			s.cur.curGTID = nil
		}
		s.cur.lastPos = from.pos
		s.apply.committed, s.apply.committedGTID = Position{}, ""
	}
	target := res.target
	global := s.safeGlobal()
	globalGTID := s.cur.gtidFor(global)
	if !rows && s.apply.persisted.Compare(global) < 0 {
		global, globalGTID = s.apply.persisted, s.apply.persistedGTID // see flushRows above
	}
	up := CheckpointUpdate{Global: global, GlobalGTID: globalGTID, Resolved: resolution.Positions, ResolvedTarget: &target, ResolvedDDLs: res.op.DDLs}
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
		if err != nil && downstreamPermanent(err) && len(starts) > 0 {
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
	if held && (s.shard.resync == nil || from.pos.Compare(s.shard.resync.pos) < 0) {
		s.shard.resync, s.shard.resyncLock = &from, lock
	}
	if g.Status().Synced {
		if held {
			// The next step is reached already, but DML before its DDLs was held back and is read
			// again now: its owner may run it as soon as the info is in, so the info waits until the
			// re-read has passed every table's DDL of the step (postDeferred).
			at, _ := g.SyncedAt()
			s.shard.infoAt[target] = at
			return nil
		}
		return s.postInfo(ctx, target)
	}
	return nil
}

// shardState is the DDL path's state of the source's shard groups: the groups by target, where their
// DDLs start, the infos posted and awaited, the DML held back and the re-read it asks for, and the
// renames followed.
type shardState struct {
	groups   map[TableName]*shardgroup.ShardingGroup // by target
	ddlStart map[TableName]map[Position]ddlEvent     // per target: DDL item (end) position -> its event
	infoAt   map[TableName]Position                  // per target: an info deferred until the re-read passes this (postDeferred)
	pending  map[TableName]bool                      // targets whose info is posted and operation awaited
	opCh     chan opResult
	// heldBack: targets whose group held back DML (skipped it, to be re-read) since its active step
	// began. A step resolved with nothing held back needs no re-read.
	heldBack   map[TableName]bool
	resync     *resumePoint
	resyncLock string       // the lock whose resolution asked for the re-sync (for the trace)
	ddlReadAt  time.Time    // when the DDL event being handled was read (for the trace)
	renames    shardRenames // shard renames followed within their groups (rename.go)
}
