// The rows stage: a rows event to row changes (filters, operators, the load's snapshots, row shapes from
// the table map and the tracked schema).

package syncer

import (
	"context"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/eventclass"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

func (s *Syncer) handleRows(ctx context.Context, typ replication.EventType, e *replication.RowsEvent, start, end vocab.Position) error {
	src := vocab.TableName{Schema: string(e.Table.Schema), Name: string(e.Table.Table)}
	if s.cfg.Router.Skip(src) {
		return nil
	}
	if s.cur.hold != nil {
		return s.holdRows(typ, e, src, start, end) // events.go: written at the commit, or dropped
	}
	if typ == replication.PARTIAL_UPDATE_ROWS_EVENT {
		r := eventclass.Event(typ)
		return &EventError{Task: s.cfg.Task, Source: s.cfg.Source, Start: start, End: end, Event: r.Name, Table: src, Why: r.Why}
	}
	return s.rowsAt(ctx, typ, e, src, start, end, nil)
}

// filterRows applies the binlog event filters to a rows event of src: ignore it, or stop.
func (s *Syncer) filterRows(typ replication.EventType, src vocab.TableName, end vocab.Position) (ignore bool, err error) {
	if s.cfg.Filter.Empty() {
		return false, nil
	}
	event := "insert"
	switch typ {
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1:
		event = "update"
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		event = "delete"
	}
	switch act, rule := s.cfg.Filter.Decide(src, []string{event}, ""); act {
	case router.IgnoreEvent:
		return true, nil
	case router.FailEvent:
		return false, filterStop(s.cfg.Task, s.cfg.Source, s.cur.evStart, rule, end, fmt.Sprintf("event %q of %s", event, src))
	}
	return false, nil
}

// rowsAt writes the changes of rows event e of src (starting at start) as of end: where the event
// ends, or, for a held transaction's rows, where it commits. shape is the event's row shape when it
// is known already (held events), nil to find it.
func (s *Syncer) rowsAt(ctx context.Context, typ replication.EventType, e *replication.RowsEvent, src vocab.TableName, start, end vocab.Position, shape *rowShape) error {
	if end.Compare(s.ckpt.Tables[src]) <= 0 {
		return nil // applied before (re-sync or restart)
	}
	target := s.cfg.Router.Route(src)
	if g, ok := s.ddl.shard.groups[target]; ok && g.Blocked(src, end) {
		s.ddl.shard.heldBack[target] = true
		return nil // past the group's pending DDL: read again after it is resolved
	}
	if op, ok := s.cfg.Operators.find(false, start); ok {
		// The user's statements may change any row: everything before them commits first, and
		// everything after them after.
		if err := s.barrier(ctx); err != nil {
			return err
		}
		part := s.apply.partitionOf(src)
		s.log.Warn("binlog event handled by an operator (binlog "+op.Op+")", zap.Stringer("table", src), zap.Stringer("pos", start), zap.Strings("sqls", op.SQLs))
		for _, q := range op.SQLs {
			part.batch = append(part.batch, sink.Change{Kind: sink.Raw, ChangeOrigin: &sink.ChangeOrigin{Source: src, Target: target, SQL: q, Pos: start}})
			s.apply.rows++
		}
		part.pos[src] = end // handled: a re-read (re-sync) must not run the replacement again
		return s.barrier(ctx)
	}
	if ignore, err := s.filterRows(typ, src, end); ignore || err != nil {
		return err
	}
	if shape == nil {
		var err error
		if shape, err = s.rows.shapeOf(src, e.Table, end); err != nil {
			return err
		}
	}
	cols := shape.cols
	var plan *keyPlan
	if s.cfg.SpreadHotTables {
		var err error
		if plan, err = s.planFor(ctx, target, shape); err != nil {
			return err
		}
	}
	// A row of a lane whose position is at or past this event was applied before a restart.
	var applied func(c *sink.Change) bool
	if s.apply.lanesAfter(src, end) {
		applied = func(c *sink.Change) bool { return s.apply.laneApplied(src, cols, keyImage(c), end) }
	}
	changes := s.rows.evChanges[:0]
	if n := len(e.Rows); cap(changes) < n {
		changes = make([]sink.Change, 0, n)
	}
	defer func() {
		clear(changes) // the rows are in the batch now; the scratch slice keeps none alive
		s.rows.evChanges = changes[:0]
	}()
	defer s.apply.notePeak()
	var ok bool
	if changes, ok = s.rows.decode(changes, typ, e, shape, &sink.ChangeOrigin{Source: src, Target: target, Columns: cols, Pos: start}, end, applied); !ok {
		return nil
	}
	if err := s.place(ctx, src, plan, changes, end); err != nil {
		return err
	}
	if s.apply.batchFull() && !s.cur.sameEnd {
		// Also inside a large upstream transaction: the table checkpoints are per rows event and the
		// resume position stays at the transaction's start, so memory is bounded and nothing repeats.
		// Not between events that share one end (a compressed transaction, a held one's commit).
		return s.flushAsync(ctx)
	}
	return nil
}

// shapeOf returns how the rows of table map tm of src, at end, are written downstream. The shape is
// kept per table while the table map and the tracked schema version stay the same: a transaction's rows
// events share one table map, so a large one computes it once.
func (d *rowDecoder) shapeOf(src vocab.TableName, tm *replication.TableMapEvent, end vocab.Position) (*rowShape, error) {
	tracked, known := d.schemas.at(src, end)
	if c, ok := d.shapes[src]; ok && c.tm == tm && sameVersion(c.tracked, tracked) {
		return c.shape, nil
	}
	names := tm.ColumnNameString()
	if len(names) == 0 {
		// binlog_row_metadata is not FULL: use the columns tracked from the table's DDL.
		if !known || uint64(len(tracked)) != tm.ColumnCount {
			return nil, &SchemaMismatchError{Task: d.task, Source: d.source, Table: src, Tracked: len(tracked), Known: known, Event: int(tm.ColumnCount), At: end}
		}
		names = vocab.ColumnNames(tracked)
	}
	shape := newRowShape(tm, names, tracked, d.mariadb)
	d.shapes[src] = cachedShape{tm: tm, tracked: tracked, shape: shape}
	return shape, nil
}

type cachedShape struct {
	tm      *replication.TableMapEvent
	tracked []vocab.Column
	shape   *rowShape
}

// sameVersion reports whether two tracked column lists are the same version (the tracker never
// changes a version's list in place).
func sameVersion(a, b []vocab.Column) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// filterStop is the error of a binlog event filter rule with action Error at the event that starts at
// start and ends at end.
func filterStop(task, source string, start vocab.Position, rule string, end vocab.Position, what string) error {
	return &filterError{start, fmt.Errorf("source %s at %s: binlog event filter %s (action Error) stops at %s; to go on past it: binlog skip %s -b %s -s %s",
		source, end, rule, what, task, start.BinlogPos(), source)}
}

// decode appends to changes the row changes of rows event e (of kind typ, ending at end) in shape, with
// origin: the rows a load's copy taken after the event holds are left out (a table loaded from more
// than one snapshot, between them), and those applied reports applied before (nil: none). ok is false
// for an event that is not an insert, update or delete.
func (d *rowDecoder) decode(changes []sink.Change, typ replication.EventType, e *replication.RowsEvent, shape *rowShape, origin *sink.ChangeOrigin, end vocab.Position, applied func(c *sink.Change) bool) (_ []sink.Change, ok bool) {
	src := origin.Source
	add := func(kind sink.ChangeKind, row, old []any) {
		if row != nil {
			row = shape.apply(row)
		}
		if old != nil {
			old = shape.apply(old)
		}
		c := sink.Change{Kind: kind, Row: row, Old: old, ChangeOrigin: origin}
		if applied != nil && applied(&c) {
			return
		}
		changes = append(changes, c)
	}
	// copied: the row with this image is in a load's copy taken after this event (only for a table
	// loaded from more than one snapshot, between them).
	copied := func([]any) bool { return false }
	if kr := d.loadKeys[src]; kr != nil && end.Compare(kr.Max) <= 0 {
		copied = func(row []any) bool { return kr.Copied(row, end) }
	}
	switch typ {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			if !copied(r) {
				add(sink.Insert, r, nil)
			}
		}
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			oldIn, newIn := copied(e.Rows[i]), copied(e.Rows[i+1])
			switch {
			case oldIn && newIn:
			case oldIn: // the old row had left the copy; the new one was not in it yet
				add(sink.Insert, e.Rows[i+1], nil)
			case newIn: // the old row is in the copy, the new one too
				add(sink.Delete, nil, e.Rows[i])
			default:
				add(sink.Update, e.Rows[i+1], e.Rows[i])
			}
		}
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			if !copied(r) {
				add(sink.Delete, nil, r)
			}
		}
	default:
		return changes, false
	}
	return changes, true
}

// rowDecoder is the rows stage's state: the tracked schemas (column lists by binlog position, for
// binlogs without column names), the row shape of each table's last table map, and the key ranges of
// tables a full load copied from more than one snapshot.
type rowDecoder struct {
	task    string // for errors
	source  string // for errors
	mariadb bool   // the source's flavor is MariaDB (its binlog's signedness metadata)
	schemas *schemaTracker
	shapes  map[vocab.TableName]cachedShape // per table, the row shape of its last table map
	// loadKeys: tables a full load copied from more than one snapshot (it was resumed after a crash):
	// which snapshot holds which key, for the events between the snapshots.
	loadKeys map[vocab.TableName]*loader.KeyRanges
	// evChanges is the changes of the rows event being handled (reused from event to event).
	evChanges []sink.Change
}
