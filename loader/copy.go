package loader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/vocab"
)

// Statement limits of the load's multi-row INSERTs.
const (
	stmtRows  = 256
	stmtBytes = 1 << 20
)

// copier copies one lane on one snapshot connection.
type copier struct {
	u    *Unit
	conn *sql.Conn
	lane *lane
	info tableInfo
	dest vocab.TableName
	pos  vocab.Position
	sem  chan struct{}

	exprs, names []string // selected expressions and written columns (generated ones are neither)
	key          int      // index of the key in exprs (-1: none)
	kinds        []valueKind
	insert       string // INSERT ... VALUES prefix
	loadData     bool   // rows go by LOAD DATA LOCAL INFILE
	loadCols     []string
	loadSet      []string
}

// valueKind is how a selected value is written into the INSERT's text.
type valueKind int

const (
	binaryValue valueKind = iota // _binary'...': the bytes the column holds (results are in charset binary)
	numberValue                  // as the server printed it: digits, sign, point, exponent
	textValue                    // '...' in the connection's charset (MySQL's JSON refuses binary strings)
)

var numericTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true,
	"decimal": true, "float": true, "double": true, "year": true}

// prepare decides how the lane's rows are written: LOAD DATA LOCAL INFILE from a stream when the
// downstream allows it and every column loads from text, else multi-row INSERTs.
func (c *copier) prepare() {
	c.key = -1
	c.exprs, c.names, c.kinds, c.loadCols, c.loadSet = nil, nil, nil, nil, nil
	c.loadData = !c.u.noLocalInfile.Load()
	for i, col := range c.info.Cols {
		if col.Generated {
			continue
		}
		if spatialTypes[c.dataType(i)] || c.dataType(i) == "json" {
			c.loadData = false // raw geometry and MySQL's JSON do not load from a binary text file
		}
	}
	for i, col := range c.info.Cols {
		if col.Generated {
			continue
		}
		data := c.dataType(i)
		expr := quote(col.Name)
		if data == "float" {
			// MariaDB prints a FLOAT with 6 digits; as a DOUBLE it is exact, and the downstream rounds it
			// back to the same FLOAT.
			expr = "CAST(" + expr + " AS DOUBLE)"
		}
		loadCol := quote(col.Name)
		if (data == "bit" || data == "year") && c.loadData {
			// LOAD DATA cannot assign bits from text, and it reads the text "0000" into a YEAR as
			// 2000: read a number, assign it through a variable.
			if data == "bit" {
				expr = "(" + expr + " + 0)"
			}
			loadCol = fmt.Sprintf("@c%d", i)
			c.loadSet = append(c.loadSet, quote(col.Name)+" = CAST("+loadCol+" AS UNSIGNED)")
		}
		if col.Name == c.info.Key {
			c.key = len(c.exprs)
		}
		c.exprs = append(c.exprs, expr)
		c.names = append(c.names, quote(col.Name))
		c.loadCols = append(c.loadCols, loadCol)
		kind := binaryValue
		switch {
		case numericTypes[data]:
			kind = numberValue
		case data == "json":
			kind = textValue
		}
		c.kinds = append(c.kinds, kind)
	}
	verb := "INSERT INTO "
	switch c.u.cfg.OnDuplicate {
	case "ignore":
		verb = "INSERT IGNORE INTO "
	case "replace":
		verb = "REPLACE INTO "
	}
	c.insert = verb + c.dest.String() + " (" + strings.Join(c.names, ", ") + ") VALUES "
}

var spatialTypes = map[string]bool{"geometry": true, "point": true, "linestring": true, "polygon": true,
	"multipoint": true, "multilinestring": true, "multipolygon": true, "geometrycollection": true, "geomcollection": true}

func (c *copier) dataType(i int) string {
	if f := strings.Fields(c.info.Sig[i]); len(f) > 0 {
		return f[len(f)-1]
	}
	return ""
}

func (c *copier) run(ctx context.Context) error {
	c.prepare()
	if len(c.exprs) == 0 {
		c.lane.commit("", c.pos, true, 0, 0)
		return c.u.inTx(ctx, func(tx *sql.Tx) error { return c.u.writeLane(ctx, tx, c.lane) })
	}
	for !c.lane.Done {
		if err := c.chunk(ctx); err != nil {
			return err
		}
	}
	return nil
}

// chunk copies the next chunk of the lane (the whole lane when it has no key) and commits it with the
// lane's state; a deadlock or lock wait timeout downstream copies the chunk again.
func (c *copier) chunk(ctx context.Context) error {
	q := "SELECT " + strings.Join(c.exprs, ", ") + " FROM " + c.lane.Table.String()
	limit := 0
	if !c.lane.Whole && c.key >= 0 {
		limit = max(c.info.ChunkRows, 1)
		key := quote(c.info.Key)
		var where []string
		if next := c.lane.next(); next != "" {
			where = append(where, key+" > "+next) // digits only (from the server or big.Int)
		}
		if c.lane.To != "" {
			where = append(where, key+" <= "+c.lane.To)
		}
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		q += fmt.Sprintf(" ORDER BY %s LIMIT %d", key, limit)
	}
	err := c.u.retry(ctx, "load chunk retried", func() error { return c.chunkOnce(ctx, q, limit) }, zap.Stringer("table", c.lane.Table))
	if errors.Is(err, errRetryWithInsert) {
		c.prepare()
		return c.chunk(ctx)
	}
	if err != nil {
		return fmt.Errorf("load %s into %s: %w", c.lane.Table, c.dest, err)
	}
	return nil
}

// copied is what one chunk wrote.
type copied struct {
	rows, bytes int64
	last        string // the key of the last row
}

// viaInsert writes the rows with multi-row INSERTs.
func (c *copier) viaInsert(ctx context.Context, tx *sql.Tx, rows *sql.Rows) (copied, error) {
	var st copied
	raw := make([]sql.RawBytes, len(c.exprs))
	dest := make([]any, len(raw))
	for i := range raw {
		dest[i] = &raw[i]
	}
	stmt := make([]byte, 0, stmtBytes+stmtBytes/4)
	inBatch := 0
	flush := func() error {
		if inBatch == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, string(stmt)); err != nil {
			return err
		}
		stmt, inBatch = stmt[:0], 0
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return st, err
		}
		if inBatch == 0 {
			stmt = append(stmt, c.insert...)
		} else {
			stmt = append(stmt, ',')
		}
		stmt = append(stmt, '(')
		for i, b := range raw {
			if i > 0 {
				stmt = append(stmt, ',')
			}
			stmt = appendValue(stmt, b, c.kinds[i], c.u.noBackslash)
			st.bytes += int64(len(b))
			c.u.sentBytes.Add(int64(len(b)))
		}
		stmt = append(stmt, ')')
		if c.key >= 0 {
			st.last = string(raw[c.key])
		}
		inBatch++
		st.rows++
		c.u.sentRows.Add(1)
		if inBatch >= stmtRows || len(stmt) >= stmtBytes {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	return st, flush()
}

var readerSeq atomic.Int64

// viaLoadData streams the rows into one LOAD DATA LOCAL INFILE. With LOCAL the server cannot stop the
// transfer, so it turns errors (a duplicate key, a value it had to change) into warnings: any warning
// fails the chunk, except duplicate keys that on-duplicate ignore asks to skip.
func (c *copier) viaLoadData(ctx context.Context, tx *sql.Tx, rows *sql.Rows) (copied, error) {
	src := &tsvReader{rows: rows, key: c.key, raw: make([]sql.RawBytes, len(c.exprs)), u: c.u}
	src.dest = make([]any, len(src.raw))
	for i := range src.raw {
		src.dest[i] = &src.raw[i]
	}
	name := fmt.Sprintf("tributary-load-%d", readerSeq.Add(1))
	mysql.RegisterReaderHandler(name, func() io.Reader { return src })
	defer mysql.DeregisterReaderHandler(name)
	mode := ""
	switch c.u.cfg.OnDuplicate {
	case "ignore":
		mode = "IGNORE "
	case "replace":
		mode = "REPLACE "
	}
	q := "LOAD DATA LOCAL INFILE 'Reader::" + name + "' " + mode + "INTO TABLE " + c.dest.String() +
		" CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (" + strings.Join(c.loadCols, ", ") + ")"
	if len(c.loadSet) > 0 {
		q += " SET " + strings.Join(c.loadSet, ", ")
	}
	_, err := tx.ExecContext(ctx, q)
	if src.err != nil {
		return src.st, src.err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1148 || me.Number == 3948 || me.Number == 2068 || me.Number == 4166) {
		c.u.log.Warn("the downstream refuses LOAD DATA LOCAL INFILE (local_infile is off): the load writes multi-row INSERTs", zap.Error(err))
		c.u.noLocalInfile.Store(true)
		return src.st, errRetryWithInsert
	}
	if err != nil {
		return src.st, err
	}
	var warnings int
	if err := tx.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return src.st, err
	}
	if warnings > 0 {
		msgs, dupOnly, err := showWarnings(ctx, tx)
		if err != nil {
			return src.st, err
		}
		if !(dupOnly && c.u.cfg.OnDuplicate == "ignore") {
			return src.st, fmt.Errorf("the downstream changed or skipped rows (%d warnings): %s", warnings, strings.Join(msgs, "; "))
		}
	}
	return src.st, nil
}

// errRetryWithInsert makes a chunk run again with INSERTs.
var errRetryWithInsert = errors.New("LOAD DATA LOCAL INFILE refused: retry with INSERT")

func showWarnings(ctx context.Context, tx *sql.Tx) (msgs []string, dupOnly bool, err error) {
	rows, err := tx.QueryContext(ctx, "SHOW WARNINGS LIMIT 5")
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	dupOnly = true
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return nil, false, err
		}
		msgs = append(msgs, fmt.Sprintf("%s %d: %s", level, code, msg))
		dupOnly = dupOnly && code == 1062
	}
	return msgs, dupOnly, rows.Err()
}

// tsvReader turns result rows into LOAD DATA's tab-separated text as the driver reads it.
type tsvReader struct {
	rows *sql.Rows
	raw  []sql.RawBytes
	dest []any
	key  int
	buf  []byte
	off  int
	st   copied
	err  error
	eof  bool
	u    *Unit // counts the rows sent (sentRows)
}

func (r *tsvReader) Read(p []byte) (int, error) {
	if r.u != nil {
		rows, bytes := r.st.rows, r.st.bytes
		defer func() { r.u.sentRows.Add(r.st.rows - rows); r.u.sentBytes.Add(r.st.bytes - bytes) }()
	}
	for r.off == len(r.buf) {
		if r.eof {
			return 0, io.EOF
		}
		r.buf, r.off = r.buf[:0], 0
		for len(r.buf) < 64<<10 {
			if !r.rows.Next() {
				r.eof = true
				if err := r.rows.Err(); err != nil {
					r.err = err
					return 0, err
				}
				break
			}
			if err := r.rows.Scan(r.dest...); err != nil {
				r.err = err
				return 0, err
			}
			for i, b := range r.raw {
				if i > 0 {
					r.buf = append(r.buf, '\t')
				}
				r.buf = appendTSV(r.buf, b)
				r.st.bytes += int64(len(b))
			}
			r.buf = append(r.buf, '\n')
			if r.key >= 0 {
				r.st.last = string(r.raw[r.key])
			}
			r.st.rows++
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// appendTSV writes one field of LOAD DATA's text: \N for NULL, and the bytes with the tab, newline,
// backslash, carriage return and zero byte escaped.
func appendTSV(buf []byte, b sql.RawBytes) []byte {
	if b == nil {
		return append(buf, '\\', 'N')
	}
	for _, ch := range b {
		switch ch {
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case 0:
			buf = append(buf, '\\', '0')
		default:
			buf = append(buf, ch)
		}
	}
	return buf
}

func (c *copier) chunkOnce(ctx context.Context, q string, limit int) (err error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	rows, err := c.conn.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	tx, err := c.u.cfg.Downstream.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err := c.u.cfg.Store.CheckEpoch(ctx, tx, true); err != nil {
		return err
	}
	var st copied
	counted := false // the chunk's sent rows moved to the committed ones
	defer func() {
		if !counted {
			c.u.sentRows.Add(-st.rows)
			c.u.sentBytes.Add(-st.bytes)
		}
	}()
	if c.loadData {
		st, err = c.viaLoadData(ctx, tx, rows)
	} else {
		st, err = c.viaInsert(ctx, tx, rows)
	}
	if err != nil {
		return err
	}
	total, bytes, last := st.rows, st.bytes, st.last
	done := limit == 0 || total < int64(limit)
	l := *c.lane
	l.Segs = slices.Clone(c.lane.Segs)
	if total == 0 && !done {
		return fmt.Errorf("chunk of %s returned no row", c.lane.Table)
	}
	l.commit(last, c.pos, done, total, bytes)
	if err := c.u.writeLane(ctx, tx, &l); err != nil {
		return err
	}
	failpoint.Inject("load-chunk-written") // a chunk's rows and state written downstream, not committed
	if err := tx.Commit(); err != nil {
		return err
	}
	*c.lane = l
	c.u.sentRows.Add(-total) // before the committed ones grow: a reader sees less for a moment, never more
	c.u.sentBytes.Add(-bytes)
	counted = true
	c.u.doneRows.Add(total)
	c.u.doneBytes.Add(bytes)
	failpoint.Inject("load-chunk-committed") // between chunks
	if c.u.cfg.AfterChunk != nil {
		return c.u.cfg.AfterChunk(c.lane.Table)
	}
	return nil
}

// appendValue writes one value of a row into an INSERT's text.
func appendValue(buf []byte, b sql.RawBytes, kind valueKind, noBackslash bool) []byte {
	if b == nil {
		return append(buf, "NULL"...)
	}
	if kind == numberValue && isNumber(b) {
		return append(buf, b...)
	}
	if kind == binaryValue {
		buf = append(buf, "_binary"...)
	}
	buf = append(buf, '\'')
	for _, ch := range b {
		switch {
		case ch == '\'':
			buf = append(buf, '\'', '\'')
		case noBackslash:
			buf = append(buf, ch)
		case ch == '\\':
			buf = append(buf, '\\', '\\')
		case ch == 0:
			buf = append(buf, '\\', '0')
		case ch == '\n':
			buf = append(buf, '\\', 'n')
		case ch == '\r':
			buf = append(buf, '\\', 'r')
		case ch == 0x1a:
			buf = append(buf, '\\', 'Z')
		default:
			buf = append(buf, ch)
		}
	}
	return append(buf, '\'')
}

// isNumber reports whether a server-printed value is a plain number (safe to write unquoted).
func isNumber(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, ch := range b {
		switch {
		case ch >= '0' && ch <= '9', ch == '-', ch == '+', ch == '.', ch == 'e', ch == 'E':
		default:
			return false
		}
	}
	return true
}
