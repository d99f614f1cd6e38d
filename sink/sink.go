package sink

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

// ChangeKind is the kind of a row change.
type ChangeKind int

// Row change kinds.
const (
	Insert ChangeKind = iota
	Update
	Delete
	Raw // statements a user gave in place of a binlog event (binlog replace)
)

// Change is one row change routed to its target.
type Change struct {
	Kind ChangeKind
	Row  []any // new values (Insert, Update)
	Old  []any // old values (Update, Delete)
	// The changes of one rows event share their origin (a batch holds thousands of changes: a third
	// of the size each is a third of the memory to copy, clear and scan).
	*ChangeOrigin
}

// ChangeOrigin is where changes come from and go to.
type ChangeOrigin struct {
	Source  vocab.TableName // upstream table
	Target  vocab.TableName
	Columns []string
	SQL     string         // Raw
	Pos     vocab.Position // start of the binlog event it comes from
}

// Sink writes changes to the downstream (DDL goes through the source's DDLExecutor). Every transaction commits the rows together with the
// checkpoint rows of the events they came from, so a restart applies nothing twice. The meta tables
// (checkpoint, DDL markers, the epoch fence) are package meta's.
type Sink struct {
	db      *sql.DB
	meta    *meta.Store
	keys    map[vocab.TableName][]string
	maxRows int
	// stmt is the text of the last multi-row INSERT, kept for the next (a sink's transactions run one
	// after the other).
	stmt []byte
	// group: db takes multi-statement queries (SetGroupStatements). A flush's INSERTs with their
	// values written in then wait in pending (statements ended by ";") and go to the server together,
	// one round trip for up to maxStatementBytes of them instead of one each.
	group    bool
	pending  []byte
	pendingN int  // statements in pending
	fenced   bool // pending starts with the epoch fence's SELECT, whose row sendPending checks
	// safe: DM's safe mode. An insert is a REPLACE and an update a delete and a REPLACE, so a row that
	// is already there (another shard's with the same key, or one written before) is overwritten.
	safe atomic.Bool
}

// SetMaxRows is the most rows one multi-row INSERT takes (256 by default).
func (s *Sink) SetMaxRows(n int) { s.maxRows = n }

// Meta is the store of the source's meta tables that this sink's transactions write.
func (s *Sink) Meta() *meta.Store { return s.meta }

// SetSafeMode turns DM's safe mode on or off for the following transactions.
func (s *Sink) SetSafeMode(on bool) { s.safe.Store(on) }

// SetEpoch makes every transaction of this sink check that the source's checkpoint belongs to the
// binding of this epoch (Init claims it).
func (s *Sink) SetEpoch(epoch int64) { s.meta.SetEpoch(epoch) }

// SetGroupStatements says the sink's pool was opened with dbutil.MultiStatements: a transaction's
// multi-row INSERTs are sent several to a query (one round trip for the rows of a flush, where each
// statement cost one: what a downstream in another zone charges for every statement).
func (s *Sink) SetGroupStatements(on bool) { s.group = on }

// NewSink returns the sink of one source of a task.
func NewSink(db *sql.DB, metaSchema, task, source string) *Sink {
	return &Sink{db: db, meta: meta.NewStore(db, metaSchema, task, source), keys: map[vocab.TableName][]string{}, maxRows: 256}
}

// Init creates (or migrates) the task's meta tables and claims the source's checkpoint.
func (s *Sink) Init(ctx context.Context) error { return s.meta.Init(ctx) }

// Load reads the source's checkpoint (zero positions when there is none).
func (s *Sink) Load(ctx context.Context) (meta.Checkpoint, error) { return s.meta.Load(ctx) }

// Flush applies changes and the checkpoint update in one transaction.
// A deadlock (1213) or lock wait timeout (1205), with another source's transaction on the same merged
// table or a user's, rolls the transaction back (here, whole), so it is run again, a few times with
// backoff, before the error stops the syncer.
func (s *Sink) Flush(ctx context.Context, changes []Change, up meta.CheckpointUpdate) (err error) {
	var kinds changeKinds
	defer s.observeFlush(time.Now(), len(changes), &kinds, &err) // metrics.go
	wait := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		kinds = changeKinds{}
		err := s.flushOnce(ctx, changes, up, &kinds, s.group)
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // stopped in the middle: not a failure of the transaction
		}
		var grouped *groupError
		if errors.As(err, &grouped) && !dbutil.Retryable(err) {
			// The server does not say which statement of a group failed: the transaction (rolled
			// back) runs again a statement at a time, and its error names the rows and the table.
			kinds = changeKinds{}
			if err = s.flushOnce(ctx, changes, up, &kinds, false); err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if err == nil || attempt == 8 || !dbutil.Retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// changeKinds counts a flush's changes by kind.
type changeKinds [Raw + 1]int

// flushOnce runs one flush transaction; group: the INSERTs go several to a query.
func (s *Sink) flushOnce(ctx context.Context, changes []Change, up meta.CheckpointUpdate, kinds *changeKinds, group bool) error {
	defer func() {
		if s.pending, s.pendingN, s.fenced = s.pending[:0], 0, false; cap(s.pending) > 1<<20 {
			s.pending = nil // a group of wide rows: not kept
		}
	}()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if !group {
		if err := s.meta.CheckEpoch(ctx, tx, true); err != nil {
			return err
		}
	} else if q := s.meta.EpochSQL(); q != "" {
		// The fence's SELECT (under a share lock, as CheckEpoch reads it) leads the first query: its row
		// is checked before anything of the transaction can commit.
		if err := s.queue(ctx, tx, q+" LOCK IN SHARE MODE"); err != nil {
			return err
		}
		s.fenced = true
	}
	for i := 0; i < len(changes); {
		n, err := s.apply(ctx, tx, changes[i:], group)
		if err != nil {
			return err
		}
		kinds[changes[i].Kind] += n // the n changes of a statement are of one kind
		i += n
	}
	if group {
		// The checkpoint goes with the last group: with the fence and the rows, one query for the
		// whole transaction when it has only INSERTs.
		for _, q := range s.meta.WriteSQL(up) {
			if err := s.queue(ctx, tx, q); err != nil {
				return err
			}
		}
		if err := s.sendPending(ctx, tx); err != nil {
			return err
		}
	} else if err := s.meta.Write(ctx, tx, up); err != nil {
		return err
	}
	return tx.Commit()
}

// queue adds a statement to pending, sending what waits first if both would pass maxStatementBytes.
func (s *Sink) queue(ctx context.Context, tx *sql.Tx, q string) error {
	if len(s.pending) > 0 && len(s.pending)+len(q) > maxStatementBytes {
		if err := s.sendPending(ctx, tx); err != nil {
			return err
		}
	}
	s.pending = append(append(s.pending, q...), ";\n"...)
	s.pendingN++
	return nil
}

// groupError is the failure of a query of several statements (Sink.sendPending).
type groupError struct {
	statements int
	err        error
}

func (e *groupError) Error() string {
	return fmt.Sprintf("one of %d statements sent together: %v", e.statements, e.err)
}

func (e *groupError) Unwrap() error { return e.err }

// sendPending sends the statements waiting in s.pending as one query. The server runs them in order
// and stops at the first error, which the driver returns; when the fence's SELECT leads them, its row
// is checked (ErrFenced) and every later result is read for an error.
func (s *Sink) sendPending(ctx context.Context, tx *sql.Tx) error {
	if len(s.pending) == 0 {
		return nil
	}
	n, fenced := s.pendingN, s.fenced
	// The query without the last ";\n", over s.pending's bytes, not a copy of them (a tenth of the
	// worker's CPU in a catch-up: the driver copies the query into its packet buffer anyway). Neither
	// database/sql nor the driver keeps the query past the call, and s.pending is not written again
	// before this function returns (its rows are read to the end here).
	body := s.pending[:len(s.pending)-2]
	q := unsafe.String(unsafe.SliceData(body), len(body))
	s.pending, s.pendingN, s.fenced = s.pending[:0], 0, false
	if !fenced {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return &groupError{statements: n, err: err}
		}
		return nil
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return s.meta.ScanOwner(func(...any) error { return err }) // the fence's SELECT failed
	}
	defer rows.Close()
	if err := s.meta.ScanOwner(oneRow(rows)); err != nil {
		return err
	}
	// The statements after the SELECT answer without rows: one NextResultSet passes them all, and
	// stops at the first error (Close would drop it).
	for rows.NextResultSet() {
	}
	if err := rows.Err(); err != nil {
		return &groupError{statements: n - 1, err: err}
	}
	return nil
}

// oneRow scans the one row of rows' current result, as sql.Row.Scan does (sql.ErrNoRows: none); the
// statements of a multi-statement query each answer in a result of their own.
func oneRow(rows *sql.Rows) func(dest ...any) error {
	return func(dest ...any) error {
		if !rows.Next() {
			return cmp.Or(rows.Err(), sql.ErrNoRows)
		}
		return rows.Scan(dest...)
	}
}

// maxStatementBytes bounds the values of one multi-row INSERT (MariaDB's max_allowed_packet is 16 MiB
// by default, MySQL 8's 64 MiB).
const maxStatementBytes = 4 << 20

// rowBytes estimates the bytes a row's values take in a statement.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch x := v.(type) {
		case []byte:
			n += 2*len(x) + 3
		case string:
			n += 2*len(x) + 3
		default:
			n += 8
		}
	}
	return n
}

// appendInsertValues appends to buf head and the VALUES rows of a multi-row INSERT of rows with the
// values written in, as the driver writes them when it interpolates the placeholders of the same
// statement (interpolateParams; database/sql converts the arguments first): one conversion of the
// values and one copy of the text, instead of the argument slices and conversions of database/sql and
// the driver. A string or []byte value is quoted with a quote doubled, which means the same with and
// without NO_BACKSLASH_ESCAPES (the driver picks its escaping by the session's mode, which is not known
// here); a value with a backslash, whose escaping depends on the mode, or of another type returns
// false, and the caller has the driver interpolate the statement.
func appendInsertValues(buf []byte, head string, rows []Change) ([]byte, bool) {
	buf = append(buf, head...)
	for i := range rows {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '(')
		for j, v := range rows[i].Row {
			if j > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = appendLiteral(buf, v); !ok {
				return buf, false
			}
		}
		buf = append(buf, ')')
	}
	return buf, true
}

// appendLiteral appends v as a literal of the statement's text, as the driver writes it in place of a
// placeholder (the same text but for a quote, which the driver escapes as \' where the server reads
// backslash escapes): false for a type it does not write the same way, or a string with a backslash.
func appendLiteral(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(buf, "NULL"...), true
	case []byte:
		if x == nil {
			return append(buf, "NULL"...), true
		}
		buf = append(buf, "_binary'"...)
		return appendQuoted(buf, unsafe.String(unsafe.SliceData(x), len(x)))
	case string:
		buf = append(buf, '\'')
		return appendQuoted(buf, x)
	case int64:
		return strconv.AppendInt(buf, x, 10), true
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), true
	case int16:
		return strconv.AppendInt(buf, int64(x), 10), true
	case int8:
		return strconv.AppendInt(buf, int64(x), 10), true
	case int:
		return strconv.AppendInt(buf, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(buf, x, 10), true
	case uint32:
		return strconv.AppendUint(buf, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(buf, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(buf, uint64(x), 10), true
	case uint:
		return strconv.AppendUint(buf, uint64(x), 10), true
	case float64:
		return strconv.AppendFloat(buf, x, 'g', -1, 64), true
	case float32:
		return strconv.AppendFloat(buf, float64(x), 'g', -1, 64), true // database/sql widens it first
	}
	return buf, false
}

// appendInterpolated appends q with each ? outside its backquoted names replaced by the next of args
// written as appendLiteral writes it (q is a statement Tributary built: names are backquoted, and it
// holds no string literal). false when an argument is not one appendLiteral writes, or the count of ?
// and of args differ.
func appendInterpolated(buf []byte, q string, args []any) ([]byte, bool) {
	a, inName := 0, false
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '`':
			inName = !inName // a doubled backquote inside a name leaves it and enters it again
			buf = append(buf, c)
		case c == '?' && !inName:
			if a == len(args) {
				return buf, false
			}
			var ok bool
			if buf, ok = appendLiteral(buf, args[a]); !ok {
				return buf, false
			}
			a++
		default:
			buf = append(buf, c)
		}
	}
	return buf, a == len(args)
}

// appendQuoted appends the text of a quoted literal after its opening quote: s with each quote
// doubled, then the closing quote. Other bytes (NUL, newline, a double quote) stand for themselves in
// a quoted literal, as the driver sends them where the session has NO_BACKSLASH_ESCAPES. false when s
// holds a backslash.
func appendQuoted(buf []byte, s string) ([]byte, bool) {
	if strings.IndexByte(s, '\\') >= 0 {
		return buf, false
	}
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			return append(append(buf, s...), '\''), true
		}
		buf = append(append(buf, s[:i+1]...), '\'')
		s = s[i+1:]
	}
}

// Locate finds the change the downstream refuses in a batch whose transaction failed: it applies the
// changes one by one in a transaction it rolls back, and returns the first that fails and its error
// (-1 when none fails alone).
func (s *Sink) Locate(ctx context.Context, changes []Change) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return -1, err
	}
	defer tx.Rollback()
	for i := range changes {
		if _, err := s.apply(ctx, tx, changes[i:i+1], false); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// apply writes a run of changes starting at cs[0] and returns how many it consumed: consecutive
// inserts of one target with the same columns become one multi-row INSERT.
func (s *Sink) apply(ctx context.Context, tx *sql.Tx, cs []Change, group bool) (int, error) {
	c := cs[0]
	if !group || c.Kind == Raw {
		// Whatever waits goes first, in order.
		if err := s.sendPending(ctx, tx); err != nil {
			return 0, err
		}
	}
	switch c.Kind {
	case Insert:
		// A statement takes up to maxRows rows (syncers.batch), and stops short of maxStatementBytes of
		// values so that wide rows stay far below max_allowed_packet.
		n, size := 1, rowBytes(c.Row)
		for n < len(cs) && n < s.maxRows && size < maxStatementBytes && cs[n].Kind == Insert && (cs[n].ChangeOrigin == c.ChangeOrigin || cs[n].Target == c.Target && slices.Equal(cs[n].Columns, c.Columns)) {
			size += rowBytes(cs[n].Row)
			n++
		}
		verb := "INSERT INTO "
		if s.safe.Load() {
			verb = "REPLACE INTO "
		}
		head := verb + c.Target.String() + " (" + quoteCols(c.Columns) + ") VALUES "
		if group {
			if len(s.pending) > 0 && len(s.pending)+size > maxStatementBytes {
				if err := s.sendPending(ctx, tx); err != nil {
					return 0, err
				}
			}
			mark := len(s.pending)
			q, ok := appendInsertValues(s.pending, head, cs[:n])
			if ok {
				s.pending = append(q, ";\n"...)
				s.pendingN++
				return n, nil
			}
			// Values the driver must write: the group goes first, then this statement alone.
			s.pending = q[:mark]
			if err := s.sendPending(ctx, tx); err != nil {
				return 0, err
			}
		} else {
			q, ok := appendInsertValues(s.stmt[:0], head, cs[:n])
			s.stmt = q
			if cap(q) > 1<<20 {
				s.stmt = nil // a statement of wide rows: not kept
			}
			if ok {
				if _, err := tx.ExecContext(ctx, string(q)); err != nil {
					return 0, fmt.Errorf("insert %d rows of %s into %s: %w", n, c.Source, c.Target, err)
				}
				return n, nil
			}
		}
		var sb strings.Builder
		args := make([]any, 0, n*len(c.Columns))
		sb.WriteString(head)
		row := "(" + strings.TrimSuffix(strings.Repeat("?,", len(c.Columns)), ",") + ")"
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(row)
			args = append(args, cs[i].Row...)
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return 0, fmt.Errorf("insert %d rows of %s into %s: %w", n, c.Source, c.Target, err)
		}
		return n, nil
	case Raw:
		if _, err := tx.ExecContext(ctx, c.SQL); err != nil {
			return 0, fmt.Errorf("run %q (binlog replace) for %s: %w", c.SQL, c.Source, err)
		}
		return 1, nil
	case Update, Delete:
		where, wargs, err := s.where(ctx, c)
		if err != nil {
			return 0, err
		}
		type statement struct {
			q    string
			args []any
		}
		var stmts []statement
		switch {
		case c.Kind == Update && s.safe.Load():
			// Safe mode: the old row goes, the new one replaces whatever holds its key.
			stmts = []statement{{"DELETE FROM " + c.Target.String() + " WHERE " + where + " LIMIT 1", wargs},
				{"REPLACE INTO " + c.Target.String() + " (" + quoteCols(c.Columns) + ") VALUES (" + strings.TrimSuffix(strings.Repeat("?,", len(c.Columns)), ",") + ")", c.Row}}
		case c.Kind == Update:
			sets := make([]string, len(c.Columns))
			for i, col := range c.Columns {
				sets[i] = vocab.Quote(col) + " = ?"
			}
			stmts = []statement{{"UPDATE " + c.Target.String() + " SET " + strings.Join(sets, ", ") + " WHERE " + where + " LIMIT 1",
				append(slices.Clip(c.Row), wargs...)}}
		default:
			stmts = []statement{{"DELETE FROM " + c.Target.String() + " WHERE " + where + " LIMIT 1", wargs}}
		}
		if group {
			// With the values written in, the statements join the group; else what waits goes first.
			texts := make([]string, 0, len(stmts))
			for _, st := range stmts {
				b, ok := appendInterpolated(nil, st.q, st.args)
				if !ok {
					texts = nil
					break
				}
				texts = append(texts, string(b))
			}
			if texts != nil {
				for _, q := range texts {
					if err := s.queue(ctx, tx, q); err != nil {
						return 0, err
					}
				}
				return 1, nil
			}
			if err := s.sendPending(ctx, tx); err != nil {
				return 0, err
			}
		}
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return 0, fmt.Errorf("apply change of %s to %s: %w", c.Source, c.Target, err)
			}
		}
		return 1, nil
	}
	return 0, fmt.Errorf("unknown change kind %d", c.Kind)
}

// where identifies the old row: by the target's primary key, else by every column (NULL-safe).
func (s *Sink) where(ctx context.Context, c Change) (string, []any, error) {
	keys, err := s.keyColumns(ctx, c.Target)
	if err != nil {
		return "", nil, err
	}
	idx := map[string]int{}
	for i, col := range c.Columns {
		idx[strings.ToLower(col)] = i
	}
	var conds []string
	var args []any
	use := keys
	for _, k := range keys {
		if _, ok := idx[strings.ToLower(k)]; !ok {
			use = nil // the key is not in the row image; fall back to all columns
		}
	}
	exact := false
	if len(use) == 0 {
		// No key: every column, and strings byte for byte, or of two rows equal under a
		// case-insensitive or PAD SPACE collation ('a' and 'A ') the wrong one could change.
		use, exact = c.Columns, true
	}
	for _, k := range use {
		v := c.Old[idx[strings.ToLower(k)]]
		conds = append(conds, vocab.Quote(k)+" <=> ?")
		args = append(args, v)
		if b, ok := v.([]byte); ok && exact {
			conds = append(conds, "CAST("+vocab.Quote(k)+" AS BINARY) <=> ?")
			args = append(args, b)
		}
	}
	return strings.Join(conds, " AND "), args, nil
}

func (s *Sink) keyColumns(ctx context.Context, t vocab.TableName) ([]string, error) {
	if k, ok := s.keys[t]; ok {
		return k, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", t, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		keys = append(keys, c)
	}
	s.keys[t] = keys
	return keys, rows.Err()
}

// ForgetKeys drops cached key columns (after a DDL).
func (s *Sink) ForgetKeys() { s.keys = map[vocab.TableName][]string{} }

func quoteCols(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = vocab.Quote(c)
	}
	return strings.Join(q, ", ")
}

// Describe renders the change as the statement it becomes downstream, with its values, for an error.
func (c Change) Describe() string {
	vals := func(v []any) string {
		parts := make([]string, len(v))
		for i, x := range v {
			switch y := x.(type) {
			case nil:
				parts[i] = "NULL"
			case []byte:
				parts[i] = fmt.Sprintf("%q", clip(string(y), 40))
			case string:
				parts[i] = fmt.Sprintf("%q", clip(y, 40))
			default:
				parts[i] = fmt.Sprint(y)
			}
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	switch c.Kind {
	case Insert:
		return "INSERT INTO " + c.Target.String() + " (" + quoteCols(c.Columns) + ") VALUES " + vals(c.Row)
	case Update:
		return "UPDATE " + c.Target.String() + " row " + vals(c.Old) + " to " + vals(c.Row)
	case Delete:
		return "DELETE FROM " + c.Target.String() + " row " + vals(c.Old)
	case Raw:
		return c.SQL
	}
	return fmt.Sprintf("change %d", c.Kind)
}

// Size is the bytes of c's values, the measure of a batch.
func (c Change) Size() int { return rowBytes(c.Row) + rowBytes(c.Old) }
