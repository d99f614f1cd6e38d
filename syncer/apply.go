// The applier stage: the batch on worker-count connections (partitions, key lanes: lanes.go), the flush
// pipeline with its checkpoint updates, and safe mode.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

// partition is one downstream connection's share of the batch. pos holds, per upstream table, the
// position its transaction may write as the table's (every row of the table up to there is in it or
// committed before); lanes, the position of the table's rows on this connection when they are spread
// by key (lanes.go).
type partition struct {
	idx   int
	sink  *sink.Sink
	batch []sink.Change
	// spare is the batch slice of the partition's last committed flush, emptied, for its next batch
	// (a flush in flight holds the other one).
	spare []sink.Change
	pos   map[vocab.TableName]vocab.Position
	lanes map[vocab.TableName]laneClaim
}

type laneClaim struct {
	pos   vocab.Position
	cols  []string
	chunk int
}

// partitionOf is the connection of a table's changes that are not spread by key.
func (a *applier) partitionOf(t vocab.TableName) *partition {
	h := fnv.New32a()
	h.Write([]byte(t.Schema))
	h.Write([]byte{0})
	h.Write([]byte(t.Name))
	return a.parts[h.Sum32()%uint32(len(a.parts))]
}

// place adds the changes of one rows event of src (ending at end) to the batch: by key lane with a
// plan, else on the table's own connection (lanes.go).
func (s *Syncer) place(ctx context.Context, src vocab.TableName, plan *keyPlan, changes []sink.Change, end vocab.Position) error {
	home := s.apply.partitionOf(src)
	lanes := s.apply.scratch.evLanes[:0]
	keys := s.apply.scratch.evKeys[:0]
	var offs []int // keys of change i: keys[offs[i]:offs[i+1]]
	// Only a hot table's changes are spread, and only theirs are tracked by key: a table on its own
	// connection keeps its binlog order there (as before key lanes, rows of two shard tables with the
	// same key are not ordered with each other).
	spread := plan != nil && s.apply.hot[src]
	serial := !spread
	if spread && !s.apply.spreadLog[src] {
		s.apply.spreadLog[src] = true
		s.log.Info("hot table: its changes are spread over the connections by key", zap.Stringer("table", src),
			zap.String("target", plan.target), zap.Strings("key", plan.cols), zap.Int("connections", len(s.apply.parts)))
	}
	if spread {
		offs = make([]int, 0, len(changes)+1)
		if s.apply.scratch.evLocal == nil {
			s.apply.scratch.evLocal = map[uint64]int{}
		}
		clear(s.apply.scratch.evLocal)
		n := len(s.apply.parts)
		for i := range changes {
			var l int
			l, s.apply.scratch.keyBuf = laneOf(s.apply.scratch.keyBuf, keyImage(&changes[i]), plan.laneIdx, n, plan.chunk)
			lanes = append(lanes, l)
			offs = append(offs, len(keys))
			keys, s.apply.scratch.keyBuf = plan.appendKeys(keys, s.apply.scratch.keyBuf, &changes[i])
			for _, k := range keys[offs[i]:] {
				if other, ok := s.apply.scratch.evLocal[k]; ok && other != l {
					serial = true // rows of this event pass a key between lanes
				}
				s.apply.scratch.evLocal[k] = l
			}
		}
		offs = append(offs, len(keys))
	}
	if serial {
		lanes = lanes[:0]
		for range changes {
			lanes = append(lanes, home.idx)
		}
	}
	// A barrier when a key of the event is on another connection in the batch, or (on the table's own
	// connection) when rows of the table are on another: they must commit first.
	conflict := false
	if spread {
		for i := range changes {
			for _, k := range keys[offs[i]:offs[i+1]] {
				if c, ok := s.apply.keyConn[k]; ok && c != lanes[i] {
					conflict = true
				}
			}
		}
	}
	if serial && !conflict {
		for _, p := range s.apply.parts {
			if _, ok := p.lanes[src]; ok && p != home {
				conflict = true
			}
			if _, ok := p.pos[src]; ok && p != home {
				conflict = true
			}
		}
	}
	if conflict {
		if err := s.barrier(ctx); err != nil {
			return err
		}
		// A new batch (which may spread other tables): decide again; nothing conflicts in it.
		return s.place(ctx, src, plan, changes, end)
	}
	s.apply.tableRows[src] += len(changes)
	for i := range changes {
		p := s.apply.parts[lanes[i]]
		if len(p.batch) == cap(p.batch) {
			// Doubled, rather than append's quarter for large slices: a batch of TxnRows changes is
			// megabytes, and each step copies it.
			p.batch = slices.Grow(p.batch, max(cap(p.batch), 64))
		}
		p.batch = append(p.batch, changes[i])
		s.apply.rows++
		s.apply.batchBytes += changes[i].Size()
		if spread {
			for _, k := range keys[offs[i]:offs[i+1]] {
				s.apply.keyConn[k] = lanes[i]
			}
			if !serial {
				p.lanes[src] = laneClaim{pos: end, cols: plan.cols, chunk: plan.chunk}
			}
		}
	}
	s.apply.scratch.evLanes, s.apply.scratch.evKeys = lanes, keys
	if serial {
		home.pos[src] = end
		if spread {
			// Rows of other lanes are on the table's connection: no lane position may be written for
			// them before they commit, so what follows goes in the next flush.
			return s.barrier(ctx)
		}
	}
	return nil
}

// barrier starts committing the batch (when there is one), so that whatever is added next commits
// after it.
func (s *Syncer) barrier(ctx context.Context) error {
	for _, p := range s.apply.parts {
		if len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0 {
			return s.flushAsync(ctx)
		}
	}
	return nil
}

func (a *applier) notePeak() {
	if n := int64(a.rows); n > a.peakRows.Load() {
		a.peakRows.Store(n)
	}
}

// PeakBatchedRows is the largest number of row changes the syncer has held in memory at once: held-back
// DML is re-read rather than buffered, so it stays within the batch size (plus one rows event) however
// long a lock waits.
func (s *Syncer) PeakBatchedRows() int64 { return s.apply.peakRows.Load() }

func (a *applier) resetBatch() {
	for _, p := range a.parts {
		p.batch, p.pos, p.lanes = p.batch[:0], map[vocab.TableName]vocab.Position{}, map[vocab.TableName]laneClaim{}
	}
	a.rows, a.batchBytes = 0, 0
	a.keyConn = map[uint64]int{}
	a.tableRows = map[vocab.TableName]int{}
}

// chooseHot picks the tables the next batch spreads by key, from a batch of total rows just flushed.
func (a *applier) chooseHot(total int) {
	if total >= a.txnRows/2 { // a barrier's or a tick's small batch says little
		a.hot = map[vocab.TableName]bool{}
		for t, n := range a.tableRows {
			if n*len(a.parts) > 2*total {
				a.hot[t] = true
			}
		}
	}
	clear(a.tableRows)
}

// takeOnlineDirty returns the online DDL runs changed since the last call, encoded ("" for a run that
// is over), or nil.
func (s *Syncer) takeOnlineDirty() map[vocab.TableName]string {
	if len(s.ddl.onlineDirty) == 0 {
		return nil
	}
	out := make(map[vocab.TableName]string, len(s.ddl.onlineDirty))
	for t := range s.ddl.onlineDirty {
		out[t] = onlineddl.Encode(s.ddl.runs[t])
	}
	s.ddl.onlineDirty = map[vocab.TableName]bool{}
	return out
}

// setSafeMode turns DM's safe mode on or off on every connection's sink.
func (s *Syncer) setSafeMode(on bool) {
	for _, p := range s.apply.parts {
		p.sink.SetSafeMode(on)
	}
	s.log.Info("safe mode", zap.Bool("on", on), zap.Bool("safe-mode", s.cfg.SafeMode), zap.Duration("safe-mode-duration", s.cfg.SafeModeDuration))
}

// maxBatchBytes bounds the memory of a batch of wide rows: a flush starts at TxnRows rows or this many
// bytes of values, whichever comes first.
const maxBatchBytes = 32 << 20

func (a *applier) batchFull() bool {
	return a.rows >= a.txnRows || a.batchBytes >= maxBatchBytes
}

// flushRows flushes when DML is batched (or lanes' table positions wait to be merged), and reports
// whether it did; a checkpoint with nothing else is left for the next flush.
func (s *Syncer) flushRows(ctx context.Context) (bool, error) {
	if err := s.waitFlush(ctx); err != nil {
		return false, err
	}
	busy := len(s.apply.consolidate) > 0
	for _, p := range s.apply.parts {
		busy = busy || len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0
	}
	if !busy {
		return false, nil
	}
	return true, s.flush(ctx)
}

// flush commits the batched changes with their checkpoints, one transaction per partition in
// parallel, and returns once they are committed, with the positions of tables whose rows it spread
// over lanes (a DDL follows it, which may change the keys). It may run between any two events: the
// per-table positions skip what is applied when it is read again. The resume position written is
// never past data that is not committed: with one partition involved it goes in the same transaction;
// with several, each writes the previous safe position and the new one follows in a later flush, once
// all have committed.
func (s *Syncer) flush(ctx context.Context) error {
	if err := s.flushWith(ctx, false); err != nil {
		return err
	}
	if len(s.apply.consolidate) > 0 {
		return s.flushWith(ctx, false)
	}
	return nil
}

// flushAsync starts committing the batch and returns at once: the next batch is read and built
// while it commits. The next flush of either kind first waits for it, so at most one flush is in
// flight and every state change of a commit (table checkpoints, the resume position) is made in
// commit order, in the event loop.
func (s *Syncer) flushAsync(ctx context.Context) error { return s.flushWith(ctx, true) }

// inflight is a flush whose transactions are running.
type inflight struct {
	done       chan struct{}
	busy       []*partition // the batches being committed (the partitions have new ones)
	ups        []meta.CheckpointUpdate
	spread     map[vocab.TableName]vocab.Position // tables it writes lanes of, with their last position
	merged     []vocab.TableName                  // tables whose lanes of earlier flushes it moves the table position past
	errs       []error
	global     vocab.Position
	globalGTID string
	persist    bool // the transactions move the resume position to global
	// prev is the resume position the first transaction writes when several commit: the previous
	// flush's, which committed whole (zero: none to write).
	prev     vocab.Position
	prevGTID string
}

func (s *Syncer) flushWith(ctx context.Context, async bool) error {
	if err := s.waitFlush(ctx); err != nil {
		return err
	}
	if !s.apply.safeUntil.IsZero() && time.Now().After(s.apply.safeUntil) {
		s.apply.safeUntil = time.Time{}
		s.setSafeMode(false)
	}
	global := s.safeGlobal()
	s.rows.schemas.prune(s.apply.persisted)
	s.ddl.pruneRuns(s.apply.persisted)
	ex := flushExtras{global: global, globalGTID: s.cur.gtidFor(global), schemas: s.rows.schemas.takeDirty(), online: s.takeOnlineDirty()}
	committed, err := s.apply.start(ctx, ex)
	if committed {
		s.afterCommit(ctx)
	}
	if err != nil || async || s.apply.flushing == nil {
		return err
	}
	return s.waitFlush(ctx)
}

// flushExtras is what a flush writes beside the batch that other stages own: where a restart may
// resume (the reader's last complete event group, held before any pending sharding DDL) and the
// tracked schemas and online-DDL runs changed since the last flush.
type flushExtras struct {
	global          vocab.Position
	globalGTID      string
	schemas, online map[vocab.TableName]string
}

// start starts committing the batch with ex, one transaction per busy partition, and leaves it in
// flight (flushing; wait records it). With no batch, a checkpoint that moved is committed at once
// (committed true) and nothing is left in flight.
func (a *applier) start(ctx context.Context, ex flushExtras) (committed bool, err error) {
	global, schemas, online := ex.global, ex.schemas, ex.online
	var busy []*partition
	for _, p := range a.parts {
		if len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0 {
			busy = append(busy, p)
		}
	}
	tables, lanes, spread := a.claims(busy)
	// The tables whose lanes the last flush committed: their table position moves past them now, in
	// the transaction that writes it anyway, else in the first.
	var merged []vocab.TableName
	merge := map[vocab.TableName]vocab.Position{}
	for t, pos := range a.consolidate {
		merged = append(merged, t)
		written := false
		for i := range busy {
			if _, ok := tables[i][t]; ok {
				written = true
			}
		}
		if !written {
			merge[t] = pos
		}
	}
	if len(busy) == 0 {
		if global.Compare(a.persisted) == 0 && schemas == nil && online == nil && len(merged) == 0 {
			return false, nil
		}
		if err := a.parts[0].sink.Flush(ctx, nil, meta.CheckpointUpdate{Global: global, GlobalGTID: ex.globalGTID, Tables: merge, Schemas: schemas, Online: online}); err != nil {
			return false, err
		}
		a.persisted = global
		a.persistedGTID = ex.globalGTID
		a.ckpt.Global = global
		a.noteTables(merge)
		clear(a.consolidate)
		return true, nil
	}
	for t, pos := range merge {
		tables[0][t] = pos
	}
	f := &inflight{done: make(chan struct{}), errs: make([]error, len(busy)), ups: make([]meta.CheckpointUpdate, len(busy)), spread: spread, merged: merged,
		global: global, globalGTID: ex.globalGTID, persist: len(busy) == 1}
	ups := f.ups
	for i, p := range busy {
		if f.persist {
			ups[i] = meta.CheckpointUpdate{Global: global, GlobalGTID: f.globalGTID, Tables: tables[i], Lanes: lanes[i], Schemas: schemas, Online: online}
		} else {
			// Several connections commit separately: none may move the resume position past another's
			// rows (the table checkpoints say what each committed), so none writes this flush's; the
			// first writes the previous flush's, and only it, so that they do not queue on its row lock
			// one behind the other.
			ups[i] = meta.CheckpointUpdate{Tables: tables[i], Lanes: lanes[i]}
			if i == 0 {
				ups[i].Schemas, ups[i].Online = schemas, online
				// The previous flush committed whole: its resume position is safe, and only this
				// transaction writes it.
				if a.committed.Compare(a.persisted) > 0 {
					f.prev, f.prevGTID = a.committed, a.committedGTID
					ups[i].Global, ups[i].GlobalGTID = f.prev, f.prevGTID
				}
			}
		}
		f.busy = append(f.busy, &partition{idx: p.idx, sink: p.sink, batch: p.batch})
		next := p.spare
		if next == nil {
			next = make([]sink.Change, 0, cap(p.batch))
		}
		p.batch, p.spare, p.pos, p.lanes = next, nil, map[vocab.TableName]vocab.Position{}, map[vocab.TableName]laneClaim{}
	}
	a.chooseHot(a.rows)
	a.rows, a.batchBytes = 0, 0
	clear(a.keyConn)
	var wg sync.WaitGroup
	for i, p := range f.busy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hook := testHookFlush; hook != nil {
				if f.errs[i] = hook(p.idx, len(f.busy)); f.errs[i] != nil {
					return
				}
			}
			f.errs[i] = p.sink.Flush(ctx, p.batch, ups[i])
		}()
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
	a.flushing = f
	return false, nil
}

// testHookFlush, when a test sets it, runs before each transaction of a flush (connection part of
// parts busy); an error stands for the transaction's failure (it does not run).
var testHookFlush func(part, parts int) error

// waitFlush waits for the flush in flight, if any, and records what it committed.
func (s *Syncer) waitFlush(ctx context.Context) error {
	committed, err := s.apply.wait(ctx)
	if committed {
		s.afterCommit(ctx)
	}
	return err
}

// wait waits for the flush in flight, if any, and records what it committed (committed true).
func (a *applier) wait(ctx context.Context) (committed bool, err error) {
	f := a.flushing
	if f == nil {
		return false, nil
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	a.flushing = nil
	for i, err := range f.errs {
		if err != nil && sink.DownstreamPermanent(err) {
			return false, a.refused(ctx, f.busy[i], err)
		}
	}
	if err := errors.Join(f.errs...); err != nil {
		return false, err
	}
	for _, b := range f.busy {
		// Committed: its batch slice holds the partition's next batch but one.
		clear(b.batch)
		a.parts[b.idx].spare = b.batch[:0]
	}
	for _, t := range f.merged {
		delete(a.consolidate, t)
	}
	for _, up := range f.ups {
		a.noteTables(up.Tables)
		for t, l := range up.Lanes {
			a.noteLanes(t, l)
		}
	}
	for t, pos := range f.spread {
		a.consolidate[t] = pos
	}
	if f.persist {
		a.persisted, a.persistedGTID = f.global, f.globalGTID
	} else if !f.prev.IsZero() {
		a.persisted, a.persistedGTID = f.prev, f.prevGTID
	}
	a.committed, a.committedGTID = f.global, f.globalGTID
	a.ckpt.Global = f.global
	return true, nil
}

// claims turns the busy partitions' positions into their checkpoint updates: a table whose rows are all
// on one connection gets its table position there; one spread over several gets a lane position on
// each (and the table position where a partition holds one), and is returned in spread with its last
// position.
func (a *applier) claims(busy []*partition) (tables []map[vocab.TableName]vocab.Position, lanes []map[vocab.TableName][]meta.Lane, spread map[vocab.TableName]vocab.Position) {
	on := map[vocab.TableName][]int{}
	for i, p := range busy {
		for t := range p.pos {
			on[t] = append(on[t], i)
		}
		for t := range p.lanes {
			if _, ok := p.pos[t]; !ok {
				on[t] = append(on[t], i)
			}
		}
	}
	tables = make([]map[vocab.TableName]vocab.Position, len(busy))
	lanes = make([]map[vocab.TableName][]meta.Lane, len(busy))
	for i := range busy {
		tables[i], lanes[i] = map[vocab.TableName]vocab.Position{}, map[vocab.TableName][]meta.Lane{}
	}
	spread = map[vocab.TableName]vocab.Position{}
	for t, idx := range on {
		if len(idx) == 1 {
			p := busy[idx[0]]
			pos := p.pos[t]
			if l, ok := p.lanes[t]; ok && l.pos.Compare(pos) > 0 {
				pos = l.pos
			}
			tables[idx[0]][t] = pos
			continue
		}
		var last vocab.Position
		for _, i := range idx {
			p := busy[i]
			if pos, ok := p.pos[t]; ok {
				tables[i][t] = pos
				if pos.Compare(last) > 0 {
					last = pos
				}
			}
			if l, ok := p.lanes[t]; ok {
				lanes[i][t] = append(lanes[i][t], meta.Lane{N: len(a.parts), Index: p.idx, Chunk: l.chunk, Cols: l.cols, Pos: l.pos})
				if l.pos.Compare(last) > 0 {
					last = l.pos
				}
			}
		}
		spread[t] = last
	}
	return tables, lanes, spread
}

// noteTables records committed table positions.
func (a *applier) noteTables(tables map[vocab.TableName]vocab.Position) {
	for t, pos := range tables {
		a.ckpt.Tables[t] = pos
		a.pruneLanes(t)
	}
}

// afterCommit forgets what no read from the resume position on can need.
func (s *Syncer) afterCommit(ctx context.Context) {
	if err := s.cfg.Operators.prune(ctx, s.apply.persisted); err != nil && ctx.Err() == nil {
		// They stay in etcd, past the checkpoint: the next commit tries again (so does the next
		// worker of the source), and binlog list shows them meanwhile.
		s.log.Warn("binlog operations used but not removed from etcd yet", zap.Stringer("checkpoint", s.apply.persisted), zap.Error(err))
	}
	for p := range s.cur.gtidAt {
		if p.Compare(s.apply.persisted) < 0 {
			delete(s.cur.gtidAt, p)
		}
	}
}

// refused turns a batch's failed transaction into the error of the change the downstream refuses
// for good, found by applying the batch's changes one by one in a transaction rolled back. Other
// errors are returned as they are (retried).
func (a *applier) refused(ctx context.Context, p *partition, err error) error {
	if !sink.DownstreamPermanent(err) || len(p.batch) == 0 {
		return err
	}
	i, cause := p.sink.Locate(ctx, p.batch)
	if i < 0 || !sink.DownstreamPermanent(cause) {
		c := p.batch[0]
		return &StatementError{Task: a.task, Source: a.source, Table: c.Source, Pos: c.Pos,
			Stmt: fmt.Sprintf("a transaction of %d row changes starting with %s", len(p.batch), c.Describe()), DML: true, Cause: err}
	}
	c := p.batch[i]
	a.log.Error("the downstream refuses a row change", zap.Stringer("table", c.Source), zap.Stringer("pos", c.Pos), zap.Error(cause))
	return &StatementError{Task: a.task, Source: a.source, Table: c.Source, Pos: c.Pos, Stmt: c.Describe(), DML: true, Cause: cause}
}

// applier is the applier stage's state: the batch over the partitions (one per downstream
// connection), the flush in flight, the key lanes of hot tables (lanes.go), and the resume positions
// committed and persisted.
type applier struct {
	txnRows       int // cfg.TxnRows: a flush starts at this many rows
	parts         []*partition
	rows          int // rows batched over all partitions
	batchBytes    int // their values' size, estimated (rowBytes)
	peakRows      atomic.Int64
	flushing      *inflight      // the flush committing while the next batch is built (flushAsync)
	safeUntil     time.Time      // safe mode ends then (safe-mode-duration; zero: no end or off)
	persisted     vocab.Position // the resume position last committed
	persistedGTID string
	committed     vocab.Position // the resume position of the last flush that committed (maybe not written)
	committedGTID string
	// tableRows counts the batch's rows per table; hot are the tables spread by key, chosen from the
	// last full batch: those with more than twice a connection's share of it. Others keep their own
	// connection (many tables already use every connection, and spread each would write a lane
	// position per table and connection).
	tableRows map[vocab.TableName]int
	hot       map[vocab.TableName]bool
	spreadLog map[vocab.TableName]bool // tables whose first spread batch was logged
	// Key lanes (lanes.go): the generation of the targets' unique keys (row shapes keep their key plan
	// for one), the keys, which connection each key of the batch is on, and the tables whose last
	// committed flush wrote lanes (their table position follows in the next transaction).
	keyGen      int // moves when the targets' keys are forgotten (after a DDL)
	targetKeys  map[vocab.TableName]*targetKeys
	keyConn     map[uint64]int
	consolidate map[vocab.TableName]vocab.Position
	scratch     laneScratch
	// ckpt is the source's checkpoint as committed (the Syncer's): the applier moves its table and lane
	// positions and its resume position as its flushes commit; the other stages read it.
	ckpt         *meta.Checkpoint
	task, source string // for the errors of refused changes
	log          *zap.Logger
}

// laneScratch is the buffers placing one rows event reuses from event to event: the key bytes, the
// event's keys and lanes, and which lane each of its keys is on.
type laneScratch struct {
	keyBuf  []byte
	evKeys  []uint64
	evLanes []int
	evLocal map[uint64]int
}

// rewound forgets the committed resume position: the reader reads again from an earlier point, and
// nothing past it is safe to resume from until a flush commits again.
func (a *applier) rewound() { a.committed, a.committedGTID = vocab.Position{}, "" }

// persistedAt records a checkpoint written outside a flush (a lock's, the start's) as the resume
// position committed downstream.
func (a *applier) persistedAt(global vocab.Position, gtid string) {
	a.ckpt.Global, a.persisted, a.persistedGTID = global, global, gtid
}

// view is the read-only view of the checkpoint the applier keeps, for the DDL path.
func (a *applier) view() appliedView { return appliedView{a.ckpt} }

// appliedView reads a checkpoint without changing it: where each table's changes are applied up to,
// and where each table's last shard step was resolved.
type appliedView struct{ c *meta.Checkpoint }

func (v appliedView) tableAt(t vocab.TableName) vocab.Position    { return v.c.Tables[t] }
func (v appliedView) resolvedAt(t vocab.TableName) vocab.Position { return v.c.Resolved[t] }
