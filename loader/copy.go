package loader

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/internal/failpoint"
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
	dest TableName
	pos  Position
	sem  chan struct{}

	exprs, names []string // selected expressions and written columns (generated ones are neither)
	key          int      // index of the key in exprs (-1: none)
	asString     []bool   // values passed as text, not _binary (MySQL's JSON refuses binary strings)
	insert       string   // INSERT ... VALUES prefix
	row          string   // one row's placeholders
}

func (c *copier) prepare() {
	c.key = -1
	for i, col := range c.info.Cols {
		if col.Generated {
			continue
		}
		data := ""
		if f := strings.Fields(c.info.Sig[i]); len(f) > 0 {
			data = f[len(f)-1]
		}
		expr := quote(col.Name)
		if data == "float" {
			// MariaDB prints a FLOAT with 6 digits; as a DOUBLE it is exact, and the downstream rounds it
			// back to the same FLOAT.
			expr = "CAST(" + expr + " AS DOUBLE)"
		}
		if col.Name == c.info.Key {
			c.key = len(c.exprs)
		}
		c.exprs = append(c.exprs, expr)
		c.names = append(c.names, quote(col.Name))
		c.asString = append(c.asString, data == "json")
	}
	verb := "INSERT INTO "
	switch c.u.cfg.OnDuplicate {
	case "ignore":
		verb = "INSERT IGNORE INTO "
	case "replace":
		verb = "REPLACE INTO "
	}
	c.insert = verb + c.dest.String() + " (" + strings.Join(c.names, ", ") + ") VALUES "
	c.row = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(c.names)), ", ") + ")"
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
	for attempt := 1; ; attempt++ {
		err := c.chunkOnce(ctx, q, limit)
		if err == nil || !retryable(err) || attempt >= 5 || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("load %s into %s: %w", c.lane.Table, c.dest, err)
			}
			return nil
		}
		c.u.log.Warn("load chunk retried", zap.Stringer("table", c.lane.Table), zap.Error(err), zap.Int("attempt", attempt))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt*attempt) * 100 * time.Millisecond):
		}
	}
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
	n := len(c.exprs)
	raw := make([]sql.RawBytes, n)
	dest := make([]any, n)
	for i := range raw {
		dest[i] = &raw[i]
	}
	var (
		args      []any
		inBatch   int
		batchSize int
		total     int64
		bytes     int64
		last      string
	)
	flush := func() error {
		if inBatch == 0 {
			return nil
		}
		var sb strings.Builder
		sb.Grow(len(c.insert) + inBatch*(len(c.row)+2))
		sb.WriteString(c.insert)
		for i := 0; i < inBatch; i++ {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(c.row)
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return err
		}
		args, inBatch, batchSize = args[:0], 0, 0
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for i, b := range raw {
			var v any
			switch {
			case b == nil:
			case c.asString[i]:
				v = string(b)
			default:
				v = slices.Clone([]byte(b))
			}
			args = append(args, v)
			batchSize += len(b)
			bytes += int64(len(b))
		}
		if c.key >= 0 {
			last = string(raw[c.key])
		}
		inBatch++
		total++
		if inBatch >= stmtRows || batchSize >= stmtBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
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
	c.u.doneRows.Add(total)
	c.u.doneBytes.Add(bytes)
	failpoint.Inject("load-chunk-committed") // between chunks
	if c.u.cfg.AfterChunk != nil {
		return c.u.cfg.AfterChunk(c.lane.Table)
	}
	return nil
}
