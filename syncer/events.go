// The sync unit's handling of what eventclass decides beyond rows and DDL: transactions whose rows are
// held (XA between PREPARE and its outcome, a transaction after a SAVEPOINT until it commits), MySQL 8's
// compressed transactions, statement-format DML and the statements and events that are skipped or stop.

package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/eventclass"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
)

// MariaDB's GTID event flag of the first half of an XA transaction (FL_PREPARED_XA).
const mariadbPreparedXA = 0x40

// heldEvent is a rows event whose changes are not written yet: it belongs to a transaction whose
// outcome is not read yet. Its shape is the one at the event (the tracked schema there); its changes
// are decoded when they are written, as of the position where they take effect.
type heldEvent struct {
	typ   replication.EventType
	ev    *replication.RowsEvent
	shape *rowShape
	src   vocab.TableName
	start vocab.Position
}

// heldTxn is an open transaction whose rows are held: an XA transaction until its PREPARE (then it
// waits in xaState.prepared), or a transaction that set a savepoint, until it commits.
type heldTxn struct {
	xa     bool
	xid    string // from XA START (MySQL) or XA END
	events []heldEvent
	marks  map[string]int // savepoint -> len(events) when it was set
}

// preparedXA is an XA transaction prepared upstream whose outcome has not been read yet.
type preparedXA struct {
	xid    string
	start  vocab.Position // start of its first half (the checkpoint does not pass it)
	events []heldEvent
	since  time.Time // when it was read
}

// xaState holds the prepared XA transactions by xid.
type xaState struct {
	prepared map[string]*preparedXA
}

// handleEvent decides one event (eventclass) and carries the decision out. start and end are the
// event's positions; inside a compressed transaction, the transaction's.
func (s *Syncer) handleEvent(ctx context.Context, ev *replication.BinlogEvent, start, end vocab.Position) error {
	h := ev.Header
	rule := eventclass.Event(h.EventType)
	switch rule.Outcome {
	case eventclass.Stop:
		if op, ok := s.cfg.Operators.find(false, start); ok && op.Op == "skip" {
			s.log.Warn("binlog event skipped by an operator (binlog skip)", zap.String("event", rule.Name), zap.Stringer("pos", start))
			return nil
		}
		return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: rule.Name, Why: rule.Why}
	case eventclass.Skip:
		s.log.Info("binlog event skipped", zap.String("event", rule.Name), zap.String("why", rule.Why), zap.Stringer("pos", start))
		return nil
	}
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent:
		s.beginGroup(start, e.Flags&mariadbPreparedXA != 0)
	case *replication.GTIDEvent, *replication.GtidTaggedLogEvent:
		s.beginGroup(start, false)
	case *replication.RowsEvent:
		return s.handleRows(ctx, h.EventType, e, start, end)
	case *replication.XIDEvent:
		return s.commitAt(ctx, end)
	case *replication.QueryEvent:
		return s.handleQuery(ctx, e, start, end)
	case *replication.GenericEvent:
		if h.EventType == replication.XA_PREPARE_LOG_EVENT {
			return s.xaPrepared(ctx, e.Data, end)
		}
	}
	return nil
}

// beginGroup starts an event group (a GTID event); xa: the first half of an XA transaction.
func (s *Syncer) beginGroup(start vocab.Position, xa bool) {
	s.cur.groupStart, s.cur.txn = start, false
	s.cur.hold = nil // a group read again from its start (a reconnect, a re-sync) collects anew
	if xa {
		s.startXA("")
	}
}

// startXA starts holding the rows of the group being read, an XA transaction's first half.
func (s *Syncer) startXA(xid string) {
	s.cur.hold = &heldTxn{xa: true, xid: xid}
	if s.cfg.EnableGTID {
		s.cur.gtidAt[s.cur.groupStart] = s.cur.gtids.String() // a resume point while it waits
	}
}

// holdRows keeps a rows event of a held transaction (its filters and shape as of the event).
func (s *Syncer) holdRows(typ replication.EventType, e *replication.RowsEvent, src vocab.TableName, start, end vocab.Position) error {
	if ignore, err := s.filterRows(typ, src, end); ignore || err != nil {
		return err
	}
	shape, err := s.rows.shapeOf(src, e.Table, end)
	if err != nil {
		return err
	}
	s.cur.hold.events = append(s.cur.hold.events, heldEvent{typ: typ, ev: e, shape: shape, src: src, start: start})
	return nil
}

// placeHeld writes held rows events as of end: the position where they take effect upstream (the
// commit). No flush happens between them: they share end, and a table's checkpoint at end must mean
// all of its changes there are written.
func (s *Syncer) placeHeld(ctx context.Context, events []heldEvent, end vocab.Position) (blocked bool, err error) {
	was := s.cur.sameEnd
	s.cur.sameEnd = true
	defer func() { s.cur.sameEnd = was }()
	for _, h := range events {
		target := s.cfg.Router.Route(h.src)
		if g, ok := s.ddl.shard.groups[target]; ok && end.Compare(s.ckpt.Tables[h.src]) > 0 && g.Blocked(h.src, end) {
			blocked = true
		}
		if err := s.rowsAt(ctx, h.typ, h.ev, h.src, h.start, end, h.shape); err != nil {
			return blocked, err
		}
	}
	return blocked, nil
}

// commitAt ends a transaction at end (an XID event, or a COMMIT query of a non-transactional table):
// the rows a savepoint held are written, the group is a resume point, and a full batch is flushed.
func (s *Syncer) commitAt(ctx context.Context, end vocab.Position) error {
	if err := s.commitHeld(ctx, end); err != nil {
		return err
	}
	s.cur.endGroup(end)
	if s.apply.batchFull() && !s.cur.sameEnd {
		return s.flushAsync(ctx)
	}
	return nil
}

// commitHeld writes the rows a savepoint held once their transaction commits at end (an XA's wait for
// their outcome instead).
func (s *Syncer) commitHeld(ctx context.Context, end vocab.Position) error {
	hold := s.cur.hold
	if hold == nil || hold.xa {
		return nil
	}
	s.cur.hold = nil
	_, err := s.placeHeld(ctx, hold.events, end)
	return err
}

// xaPrepared ends an XA transaction's first half: its rows wait for XA COMMIT or XA ROLLBACK.
func (s *Syncer) xaPrepared(ctx context.Context, body []byte, end vocab.Position) error {
	xid, onePhase, err := eventclass.ParseXAPrepare(body)
	if err != nil {
		return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: s.cur.evStart, End: end, Event: "XA_PREPARE_LOG_EVENT", Why: err.Error()}
	}
	hold := s.cur.hold
	s.cur.hold = nil
	if hold == nil {
		hold = &heldTxn{xa: true}
	}
	if onePhase {
		// XA COMMIT ... ONE PHASE written as a prepare event: the transaction commits here.
		s.log.Info("XA transaction committed in one phase", zap.String("xid", xid), zap.Stringer("pos", end))
		if _, err := s.placeHeld(ctx, hold.events, end); err != nil {
			return err
		}
		s.cur.endGroup(end)
		return nil
	}
	if s.xa.prepared == nil {
		s.xa.prepared = map[string]*preparedXA{}
	}
	s.xa.prepared[xid] = &preparedXA{xid: xid, start: s.cur.groupStart, events: hold.events, since: time.Now()}
	s.log.Info("XA transaction prepared: its rows wait for its XA COMMIT or XA ROLLBACK", zap.String("xid", xid),
		zap.Stringer("pos", s.cur.groupStart), zap.Int("rows-events", len(hold.events)))
	s.cur.endGroup(end)
	return nil
}

// xaOutcome writes (XA COMMIT) or drops (XA ROLLBACK) a prepared XA transaction's rows at end.
func (s *Syncer) xaOutcome(ctx context.Context, st eventclass.Statement, start, end vocab.Position) error {
	p, ok := s.xa.prepared[st.XID]
	if st.Class == eventclass.XARollback {
		if ok {
			delete(s.xa.prepared, st.XID)
		}
		s.log.Info("XA transaction rolled back: its rows are dropped", zap.String("xid", st.XID), zap.Bool("held", ok), zap.Stringer("pos", start))
		s.cur.endGroup(end)
		return nil
	}
	if !ok {
		return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: "XA COMMIT " + st.XID,
			Why: "the XA transaction was prepared before the position this task started reading from, so its rows are unknown here " +
				"(they are not in a load's snapshot either: they were not committed then). To go on without them, binlog skip this event " +
				"and write them downstream by hand; or start the task again from a position before its XA PREPARE"}
	}
	blocked, err := s.placeHeld(ctx, p.events, end)
	if err != nil {
		return err
	}
	if !blocked {
		delete(s.xa.prepared, st.XID)
	} // else: rows of a table past its group's pending DDL are read again (re-sync), this commit with them
	s.log.Info("XA transaction committed", zap.String("xid", st.XID), zap.Stringer("prepared-at", p.start), zap.Stringer("pos", start),
		zap.Int("rows-events", len(p.events)), zap.Bool("held-back", blocked))
	s.cur.endGroup(end)
	if s.apply.batchFull() {
		return s.flushAsync(ctx)
	}
	return nil
}

// oldestPrepared is the start of the oldest prepared XA transaction whose outcome is not read (ok:
// there is one): a restart must read it again.
func (x *xaState) oldestPrepared() (vocab.Position, bool) {
	var first vocab.Position
	found := false
	for _, p := range x.prepared {
		if !found || p.start.Compare(first) < 0 {
			first, found = p.start, true
		}
	}
	return first, found
}

// PreparedXA is a prepared XA transaction whose outcome the sync unit has not read yet.
type PreparedXA struct {
	XID   string
	Pos   vocab.Position
	Since time.Time
}

func (x *xaState) list() []PreparedXA {
	out := make([]PreparedXA, 0, len(x.prepared))
	for _, p := range x.prepared {
		out = append(out, PreparedXA{XID: p.xid, Pos: p.start, Since: p.since})
	}
	slices.SortFunc(out, func(a, b PreparedXA) int { return a.Pos.Compare(b.Pos) })
	return out
}

// handleQuery decides a query event by its statement's class (eventclass.Query) and carries it out.
func (s *Syncer) handleQuery(ctx context.Context, e *replication.QueryEvent, start, end vocab.Position) error {
	st := eventclass.Query(string(e.Query), s.cur.version)
	switch st.Class {
	case eventclass.Begin:
		s.cur.txn = true
		return nil
	case eventclass.ReleaseSavepoint:
		return nil
	case eventclass.Savepoint:
		if s.cur.hold == nil {
			s.cur.hold = &heldTxn{}
		}
		if s.cur.hold.marks == nil {
			s.cur.hold.marks = map[string]int{}
		}
		s.cur.hold.marks[strings.ToLower(st.Savepoint)] = len(s.cur.hold.events)
		return nil
	case eventclass.RollbackToSavepoint:
		if h := s.cur.hold; h != nil {
			if n, ok := h.marks[strings.ToLower(st.Savepoint)]; ok {
				s.log.Info("rows after a savepoint rolled back upstream are dropped", zap.String("savepoint", st.Savepoint),
					zap.Int("rows-events", len(h.events)-n), zap.Stringer("pos", start))
				h.events = h.events[:n]
				return nil
			}
		}
		return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: "ROLLBACK TO " + st.Savepoint,
			Why: "the savepoint is not in this transaction as read: which rows it rolled back cannot be known"}
	case eventclass.XAStart:
		s.startXA(st.XID)
		return nil
	case eventclass.XAEnd:
		if s.cur.hold != nil && s.cur.hold.xa {
			s.cur.hold.xid = st.XID
		}
		return nil
	case eventclass.XACommitOnePhase:
		// MySQL: XA START ... XA END then XA COMMIT ONE PHASE ends the same group.
		if h := s.cur.hold; h != nil {
			s.cur.hold = nil
			if _, err := s.placeHeld(ctx, h.events, end); err != nil {
				return err
			}
		}
		s.cur.endGroup(end)
		return nil
	case eventclass.XACommit, eventclass.XARollback:
		if op, ok := s.cfg.Operators.find(false, start, s.cur.groupStart); ok && op.Op == "skip" {
			s.log.Warn("XA outcome skipped by an operator (binlog skip): its held rows are dropped", zap.String("xid", st.XID), zap.Stringer("pos", start))
			delete(s.xa.prepared, st.XID)
			s.cur.endGroup(end)
			return nil
		}
		return s.xaOutcome(ctx, st, start, end)
	case eventclass.Commit:
		return s.commitAt(ctx, end)
	case eventclass.DDL:
		return s.handleStatement(ctx, e, st.Text, start, end)
	case eventclass.DML:
		return s.statementDML(e, st, start, end)
	}
	if op, ok := s.cfg.Operators.find(false, start, s.cur.groupStart); ok {
		// binlog skip / replace of a statement that would stop: the operator decides.
		if op.Op == "skip" {
			s.log.Warn("statement skipped by an operator (binlog skip)", zap.String("class", string(st.Class)), zap.Stringer("pos", start))
			if !s.cur.inTxn() {
				s.cur.endGroup(end)
			}
			return nil
		}
		return s.handleStatement(ctx, e, st.Text, start, end)
	}
	switch st.Outcome {
	case eventclass.Skip, eventclass.Track:
		fields := []zap.Field{zap.String("class", string(st.Class)), zap.String("why", st.Why), zap.Stringer("pos", start)}
		if st.Class != eventclass.Account { // may hold a password
			fields = append(fields, zap.String("statement", clip(st.Text, 256)))
		}
		s.log.Info("statement skipped", fields...)
		if !s.cur.inTxn() {
			s.cur.endGroup(end)
		}
		return nil
	}
	if ignored, err := s.filteredStatement(e, st, start, end); ignored || err != nil {
		return err
	}
	text := st.Text
	if st.Class == eventclass.Account {
		text = "(an account statement; its text may hold a password)"
	}
	return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: "QUERY_EVENT (" + string(st.Class) + ")", Stmt: text, Why: st.Why}
}

// statementDML decides a DML statement written in statement format: it stops when it may write a
// table of the task, and is skipped otherwise.
func (s *Syncer) statementDML(e *replication.QueryEvent, st eventclass.Statement, start, end vocab.Position) error {
	if op, ok := s.cfg.Operators.find(false, start, s.cur.groupStart); ok && op.Op == "skip" {
		s.log.Warn("statement-format DML skipped by an operator (binlog skip)", zap.String("statement", clip(st.Text, 256)), zap.Stringer("pos", start))
		return nil
	}
	tables, err := ddl.DMLTables(st.Text, string(e.Schema))
	replicated := err != nil // tables unknown: it may write one of the task's
	var first vocab.TableName
	for _, t := range tables {
		if !s.cfg.Router.Skip(t) {
			replicated, first = true, t
			break
		}
	}
	if !replicated {
		s.log.Info("statement-format DML on tables outside the task skipped", zap.String("statement", clip(st.Text, 256)), zap.Stringer("pos", start))
		return nil
	}
	if ignored, ferr := s.filteredStatement(e, st, start, end); ignored || ferr != nil {
		return ferr
	}
	why := st.Why
	if err != nil {
		why += "; its tables cannot be read: " + err.Error()
	}
	return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: "QUERY_EVENT (statement-format DML)", Table: first, Stmt: st.Text, Why: why}
}

// filteredStatement applies the binlog event filters' sql-pattern to a statement that would stop:
// a rule with action Ignore passes it (logged), one with action Error stops at it.
func (s *Syncer) filteredStatement(e *replication.QueryEvent, st eventclass.Statement, start, end vocab.Position) (bool, error) {
	switch act, rule := s.cfg.Filter.Statement(string(e.Schema), st.Text); act {
	case router.IgnoreEvent:
		s.log.Info("statement ignored by a binlog event filter", zap.String("rule", rule), zap.String("class", string(st.Class)), zap.Stringer("pos", start))
		if !s.cur.inTxn() {
			s.cur.endGroup(end)
		}
		return true, nil
	case router.FailEvent:
		return false, filterStop(s.cfg.Task, s.cfg.Source, start, rule, end, fmt.Sprintf("%q", clip(st.Text, 256)))
	}
	return false, nil
}

// handlePayload expands a compressed transaction (MySQL 8's TRANSACTION_PAYLOAD_EVENT) and decides
// each event inside as if it had arrived alone. They all start and end where the payload does (go-mysql
// stamps them so), and nothing is flushed between them: the transaction is written as one.
func (s *Syncer) handlePayload(ctx context.Context, p *replication.TransactionPayloadEvent, start, end vocab.Position) error {
	was := s.cur.sameEnd
	s.cur.sameEnd = true
	for _, inner := range p.Events {
		if inner == nil {
			continue
		}
		s.cur.evStart = start
		if err := s.handleEvent(ctx, inner, start, end); err != nil {
			s.cur.sameEnd = was
			return err
		}
	}
	s.cur.sameEnd = was
	if s.apply.batchFull() {
		return s.flushAsync(ctx)
	}
	return nil
}

// EventError stops the subtask at an event (or a statement) Tributary has decided not to pass: it names
// the event, its position, why, and the ways on.
type EventError struct {
	Task, Source string
	Start, End   vocab.Position
	Event        string
	Table        vocab.TableName
	Stmt         string
	Why          string
}

// Permanent: the event is the same on every retry; the subtask waits for the user.
func (e *EventError) Permanent() bool { return true }

func (e *EventError) stoppedAt() (vocab.Position, string, bool) { return e.Start, "internal", false }

func (e *EventError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "source %s at %s: %s", e.Source, e.Start, e.Event)
	if e.Table.Name != "" {
		fmt.Fprintf(&b, " on %s", e.Table)
	}
	if e.Stmt != "" {
		fmt.Fprintf(&b, " %q", clip(e.Stmt, 300))
	}
	fmt.Fprintf(&b, " stops replication: %s. Nothing of it ran downstream. Ways on: skip it with `binlog skip %s -b %s -s %s`"+
		" (then resume-task), or drop such events with a binlog event filter (filters: {skip-it: {schema-pattern: ..., sql-pattern: [...], action: Ignore}} "+
		"and filter-rules: [skip-it] in this source's mysql-instances entry), then stop-task and start-task with the changed file: the checkpoint is kept",
		e.Why, e.Task, e.Start.BinlogPos(), e.Source)
	return b.String()
}
