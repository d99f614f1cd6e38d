package syncer

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

// Key lanes (syncers.spread-hot-tables, off by default): the changes of a hot upstream table (over
// twice a connection's share of the last full batch) are spread over the downstream connections by the
// target's primary key, so it uses every connection (syncers.worker-count). An integer primary key of
// one column goes by runs of laneChunk consecutive values (value / laneChunk mod connections); any
// other key by the hash of its values. Only those changes are tracked by key; a table on its own
// connection keeps its order there.
//
// Order. Two changes of the same key (the primary key or any unique key of the target, in either
// image) must commit in binlog order. Within a flush each connection's transaction keeps its changes
// in order, so changes of one key on one connection are safe; a change whose key is already on
// another connection in the batch (an update that moves a row to a key of another lane, a unique
// value passed from one row to another) is a conflict: the batch is flushed first (a barrier; the
// next flush commits only after it), then the change goes to its own lane. A rows event whose own
// rows conflict with each other (UPDATE t SET id = id + 1) goes whole to the table's own connection,
// between two barriers: no lane position may be written while rows of that lane sit on another
// connection.
//
// Exactly once. Each transaction commits its rows with their positions. When all of a table's rows of
// a flush are on one connection, that connection writes the table's position, as before. When they
// are on several, each writes its lane's position (meta.Lane) and the next transaction moves the table
// position past all of them (consolidation; a synchronous flush, before every DDL, does it at once).
// A row read again after a restart is applied when its table's or its lane's position is at or past
// its event, the lane computed with the key columns the lane row names.
//
// Only targets whose every unique key is made of columns that compare byte for byte (integers,
// decimals, dates and times, binary strings and _bin collations; trailing spaces ignored) are spread:
// two strings equal under a case- or accent-insensitive collation would hash apart and their order be
// lost. Other targets, tables without a primary key and tables whose rows lack a key column keep one
// connection per upstream table.

// targetKeys are a downstream target's unique keys, read from its definition.
type targetKeys struct {
	uniques []uniqueKey // the primary key first
	intPK   bool        // the primary key is one integer column
	spread  bool
	why     string // why the target is not spread (for the log)
	warned  bool   // rows lacking a key column were logged
}

type uniqueKey struct {
	name string
	cols []string
}

// exactTypes are the column types whose equal values have equal bytes in the binlog (strings: under a
// binary collation).
var exactTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true,
	"decimal": true, "date": true, "datetime": true, "timestamp": true, "time": true, "year": true, "bit": true}

var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}

var stringTypes = map[string]bool{"char": true, "varchar": true, "binary": true, "varbinary": true,
	"tinytext": true, "text": true, "mediumtext": true, "longtext": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true}

func readTargetKeys(ctx context.Context, db *sql.DB, t vocab.TableName) (*targetKeys, error) {
	rows, err := db.QueryContext(ctx, `SELECT s.INDEX_NAME, s.COLUMN_NAME, s.SUB_PART, c.DATA_TYPE, c.COLLATION_NAME
		FROM information_schema.STATISTICS s LEFT JOIN information_schema.COLUMNS c
		  ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME
		WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ? AND s.NON_UNIQUE = 0
		ORDER BY s.INDEX_NAME = 'PRIMARY' DESC, s.INDEX_NAME, s.SEQ_IN_INDEX`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("unique keys of %s: %w", t, err)
	}
	defer rows.Close()
	k := &targetKeys{spread: true}
	for rows.Next() {
		var index string
		var col, typ, coll sql.NullString
		var sub sql.NullInt64
		if err := rows.Scan(&index, &col, &sub, &typ, &coll); err != nil {
			return nil, err
		}
		if n := len(k.uniques); n == 0 || k.uniques[n-1].name != index {
			k.uniques = append(k.uniques, uniqueKey{name: index})
		}
		u := &k.uniques[len(k.uniques)-1]
		u.cols = append(u.cols, col.String)
		if index == "PRIMARY" {
			k.intPK = len(u.cols) == 1 && intTypes[typ.String]
		}
		switch {
		case !k.spread:
		case !col.Valid:
			k.spread, k.why = false, "key "+index+" has an expression"
		case sub.Valid:
			k.spread, k.why = false, "key "+index+" has a prefix of "+col.String
		case exactTypes[typ.String]:
		case stringTypes[typ.String] && (!coll.Valid || coll.String == "binary" || strings.HasSuffix(coll.String, "_bin")):
		default:
			k.spread, k.why = false, fmt.Sprintf("key %s has column %s of type %s %s", index, col.String, typ.String, coll.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(k.uniques) == 0 || k.uniques[0].name != "PRIMARY" {
		k.spread, k.why = false, "no primary key"
	}
	return k, nil
}

// keyPlan is how the rows of one column list of a target are laned: the row indexes of the primary
// key (the lane) and of every unique key (the conflicts). A nil plan keeps the table on one connection.
type keyPlan struct {
	target  string
	laneIdx []int
	chunk   int      // laneChunk for an integer key of one column, else 0 (the hash)
	cols    []string // the primary key's column names, stored with the lanes
	keys    [][]int
	names   []string
}

// planCache is a row shape's key plan, valid while the target and the key generation are the same
// (a DDL forgets the targets' keys).
type planCache struct {
	ok     bool
	gen    int
	target vocab.TableName
	plan   *keyPlan
}

// columnIndexes returns the indexes of names in cols (case-insensitive), or false when one is missing.
func columnIndexes(cols, names []string) ([]int, bool) {
	idx := make([]int, len(names))
	for i, n := range names {
		idx[i] = -1
		for j, c := range cols {
			if strings.EqualFold(c, n) {
				idx[i] = j
				break
			}
		}
		if idx[i] < 0 {
			return nil, false
		}
	}
	return idx, true
}

// planFor returns the key plan of target's rows of shape (nil: one connection per table). It is kept
// with the shape (a transaction's rows events share one).
func (s *Syncer) planFor(ctx context.Context, target vocab.TableName, shape *rowShape) (*keyPlan, error) {
	cols := shape.cols
	if len(s.apply.parts) < 2 || len(cols) == 0 {
		return nil, nil
	}
	if c := &shape.plan; c.ok && c.gen == s.apply.keyGen && c.target == target {
		return c.plan, nil
	}
	tk, ok := s.apply.targetKeys[target]
	if !ok {
		var err error
		if tk, err = readTargetKeys(ctx, s.cfg.Downstream, target); err != nil {
			return nil, err
		}
		s.apply.targetKeys[target] = tk
		if !tk.spread {
			s.log.Info("target's changes stay on one connection per upstream table", zap.Stringer("target", target), zap.String("why", tk.why))
		}
	}
	var plan *keyPlan
	if tk.spread {
		plan = &keyPlan{target: target.String(), cols: tk.uniques[0].cols}
		for i, u := range tk.uniques {
			idx, ok := columnIndexes(cols, u.cols)
			if !ok {
				plan = nil
				if !tk.warned {
					tk.warned = true
					s.log.Info("rows lack a key column: they stay on one connection", zap.Stringer("target", target), zap.Strings("key", u.cols))
				}
				break
			}
			if i == 0 {
				plan.laneIdx = idx
				if tk.intPK && len(idx) == 1 {
					plan.chunk = cmp.Or(s.cfg.laneChunk, laneChunk)
				}
				plan.chunk = max(plan.chunk, 0)
			}
			plan.keys = append(plan.keys, idx)
			plan.names = append(plan.names, u.name)
		}
	}
	shape.plan = planCache{ok: true, gen: s.apply.keyGen, target: target, plan: plan}
	return plan, nil
}

// appendKeyValue appends the canonical bytes of a key value: integers as decimal text whatever their
// Go type, strings and bytes without trailing spaces (PAD SPACE collations compare them equal), times
// in RFC 3339. The encoding and laneHash are stored meaning (lane rows of checkpoints): never change
// them.
func appendKeyValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 0)
	case int8:
		return strconv.AppendInt(append(b, 1), int64(x), 10)
	case int16:
		return strconv.AppendInt(append(b, 1), int64(x), 10)
	case int32:
		return strconv.AppendInt(append(b, 1), int64(x), 10)
	case int64:
		return strconv.AppendInt(append(b, 1), x, 10)
	case int:
		return strconv.AppendInt(append(b, 1), int64(x), 10)
	case uint8:
		return strconv.AppendUint(append(b, 1), uint64(x), 10)
	case uint16:
		return strconv.AppendUint(append(b, 1), uint64(x), 10)
	case uint32:
		return strconv.AppendUint(append(b, 1), uint64(x), 10)
	case uint64:
		return strconv.AppendUint(append(b, 1), x, 10)
	case string:
		x = strings.TrimRight(x, " ")
		return append(binary.AppendUvarint(append(b, 2), uint64(len(x))), x...)
	case []byte:
		for len(x) > 0 && x[len(x)-1] == ' ' {
			x = x[:len(x)-1]
		}
		return append(binary.AppendUvarint(append(b, 2), uint64(len(x))), x...)
	case time.Time:
		return x.AppendFormat(append(b, 3), time.RFC3339Nano)
	default:
		s := fmt.Sprint(x)
		return append(binary.AppendUvarint(append(b, 4), uint64(len(s))), s...)
	}
}

// laneHash is FNV-1a over b, then murmur3's finalizer so that its low bits (lane = hash % n) are
// mixed.
func laneHash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// laneChunk is how many consecutive values of an integer primary key share a lane. A hot table's rows
// mostly arrive in key order (auto-increment); hashing each key to a lane sent every connection's
// inserts to the same last page of the index, runs of consecutive keys give each connection pages of
// its own (BenchmarkHotTable with spread-hot-tables: 254-260k -> 325k rows/s with DM's settings). A
// lane row stores its chunk (meta.Lane.Chunk), so changing this changes only lanes written later.
const laneChunk = 1024

// laneOf is the lane of n of the row image's values at idx: with chunk > 0 and one integer value,
// value / chunk mod n; else the hash of the values mod n.
func laneOf(buf []byte, image []any, idx []int, n, chunk int) (int, []byte) {
	if chunk > 0 && len(idx) == 1 {
		if v, ok := intKeyBits(image[idx[0]]); ok {
			return int(v / uint64(chunk) % uint64(n)), buf
		}
	}
	buf = buf[:0]
	for _, i := range idx {
		buf = appendKeyValue(buf, image[i])
	}
	return int(laneHash(buf) % uint64(n)), buf
}

// intKeyBits is an integer's two's complement bits, whatever its Go type (a value decodes to the same
// number as int32, int64 or uint64 alike).
func intKeyBits(v any) (uint64, bool) {
	switch x := v.(type) {
	case int8:
		return uint64(int64(x)), true
	case int16:
		return uint64(int64(x)), true
	case int32:
		return uint64(int64(x)), true
	case int64:
		return uint64(x), true
	case int:
		return uint64(int64(x)), true
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	return 0, false
}

// keyImage is the image that locates a change's row: the old one of an update or delete.
func keyImage(c *sink.Change) []any {
	if c.Kind == sink.Insert {
		return c.Row
	}
	return c.Old
}

// appendKeys appends the hashes of every unique key value of c (both images of an update); a key with
// a NULL value is not one (NULLs do not collide in unique keys).
func (p *keyPlan) appendKeys(keys []uint64, buf []byte, c *sink.Change) ([]uint64, []byte) {
	for _, image := range [][]any{c.Row, c.Old} {
		if image == nil {
			continue
		}
	key:
		for k, idx := range p.keys {
			buf = append(buf[:0], p.target...)
			buf = append(append(buf, 0), p.names[k]...)
			buf = append(buf, 0)
			for _, i := range idx {
				if image[i] == nil {
					continue key
				}
				buf = appendKeyValue(buf, image[i])
			}
			keys = append(keys, laneHash(buf))
		}
	}
	return keys, buf
}

// laneApplied reports whether a row of src at end, located by image (with columns cols), is applied
// by a lane position of the checkpoint.
func (a *applier) laneApplied(src vocab.TableName, cols []string, image []any, end vocab.Position) bool {
	for _, l := range a.ckpt.Lanes[src] {
		if end.Compare(l.Pos) > 0 {
			continue
		}
		idx, ok := columnIndexes(cols, l.Cols)
		if !ok {
			continue
		}
		var lane int
		lane, a.scratch.keyBuf = laneOf(a.scratch.keyBuf, image, idx, l.N, l.Chunk)
		if lane == l.Index {
			return true
		}
	}
	return false
}

// lanesAfter reports whether a lane position of src is at or past end (rows of the event may be
// applied one by one).
func (a *applier) lanesAfter(src vocab.TableName, end vocab.Position) bool {
	for _, l := range a.ckpt.Lanes[src] {
		if end.Compare(l.Pos) <= 0 {
			return true
		}
	}
	return false
}

// noteLanes records lanes committed for t, and forgets those its table position has passed.
func (a *applier) noteLanes(t vocab.TableName, lanes []meta.Lane) {
	if a.ckpt.Lanes == nil {
		a.ckpt.Lanes = map[vocab.TableName][]meta.Lane{}
	}
	cur := a.ckpt.Lanes[t]
next:
	for _, l := range lanes {
		for i := range cur {
			if cur[i].N == l.N && cur[i].Index == l.Index && slicesEqualFold(cur[i].Cols, l.Cols) {
				cur[i].Pos = l.Pos
				continue next
			}
		}
		cur = append(cur, l)
	}
	a.ckpt.Lanes[t] = cur
}

// pruneLanes forgets the lanes of t its table position has passed.
func (a *applier) pruneLanes(t vocab.TableName) {
	cur := a.ckpt.Lanes[t]
	if len(cur) == 0 {
		return
	}
	keep := cur[:0]
	for _, l := range cur {
		if l.Pos.Compare(a.ckpt.Tables[t]) > 0 {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		delete(a.ckpt.Lanes, t)
	} else {
		a.ckpt.Lanes[t] = keep
	}
}

func slicesEqualFold(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}
