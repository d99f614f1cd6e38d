package loader

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

// A lane is one part of a table that one reader copies in order: a range of a single-column integer
// primary key, copied in chunks, each chunk committed downstream with the lane's row of the load state;
// or a whole table without such a key, copied in one downstream transaction.
//
// A lane's committed rows are a list of segments: the keys (previous Upto, Upto] as the snapshot at Pos
// held them. A load that is never interrupted has one snapshot, so every segment has the same Pos. A
// load resumed after a crash reads the rest of a lane from a new snapshot (a later Pos): the sync unit
// then starts at the first snapshot and applies an event of the window between the snapshots to a row
// only where the segment holding the row's key was read before the event (KeyRanges).
type lane struct {
	Table vocab.TableName `json:"table"`
	N     int             `json:"n"`
	// From (exclusive) and To (inclusive) bound an integer lane; "" is unbounded.
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	Whole bool   `json:"whole,omitempty"`
	Segs  []seg  `json:"segs,omitempty"`
	Done  bool   `json:"done,omitempty"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// seg is a committed part of a lane: keys up to Upto ("" = the lane's end) read at Pos.
type seg struct {
	Upto string         `json:"upto"`
	Pos  vocab.Position `json:"pos"`
}

func (l *lane) id() string {
	t, _ := json.Marshal(l.Table)
	return fmt.Sprintf("%s%s#%d", meta.LoadPrefix, t, l.N)
}

// next is the exclusive lower bound of what remains to copy.
func (l *lane) next() string {
	if len(l.Segs) > 0 {
		return l.Segs[len(l.Segs)-1].Upto
	}
	return l.From
}

// commit records that keys up to upto (the lane's end when done) were copied at pos.
func (l *lane) commit(upto string, pos vocab.Position, done bool, rows, bytes int64) {
	if done {
		upto = l.To
	}
	if n := len(l.Segs); n > 0 && l.Segs[n-1].Pos == pos {
		l.Segs[n-1].Upto = upto
	} else {
		l.Segs = append(l.Segs, seg{Upto: upto, Pos: pos})
	}
	l.Done = done
	l.Rows += rows
	l.Bytes += bytes
}

// splitLanes divides [min, max] of an integer key into n lanes of equal width; the first is unbounded
// below and the last above, so rows written after the snapshot's bounds were read still fall in one.
func splitLanes(t vocab.TableName, min, max *big.Int, n int) []*lane {
	if min == nil || max == nil || n <= 1 || min.Cmp(max) >= 0 {
		return []*lane{{Table: t}}
	}
	width := new(big.Int).Sub(max, min)
	if width.Cmp(big.NewInt(int64(n))) < 0 {
		n = int(width.Int64())
	}
	var lanes []*lane
	prev := ""
	for i := 1; i < n; i++ {
		// bound = min + width*i/n
		b := new(big.Int).Mul(width, big.NewInt(int64(i)))
		b.Quo(b, big.NewInt(int64(n)))
		b.Add(b, min)
		lanes = append(lanes, &lane{Table: t, N: i - 1, From: prev, To: b.String()})
		prev = b.String()
	}
	return append(lanes, &lane{Table: t, N: n - 1, From: prev})
}

// KeyRanges says, for one table loaded from more than one snapshot, which snapshot each key's row was
// copied from: the sync unit skips an event for a row whose copy already holds it.
type KeyRanges struct {
	Ordinal  int            // the key column's index in the table's binlog rows
	Unsigned bool           // the key is unsigned (the binlog gives negative values above the signed range)
	Max      vocab.Position // no event after this needs a decision
	bounds   []*big.Int
	pos      []vocab.Position // pos[i] covers keys up to bounds[i] (the last: to +inf)
}

// Copied reports whether the copy of the row with this binlog row image already reflects the event
// ending at end: the key's segment was read at or after end.
func (k *KeyRanges) Copied(row []any, end vocab.Position) bool {
	if k.Ordinal >= len(row) {
		return false
	}
	v, ok := intValue(row[k.Ordinal], k.Unsigned)
	if !ok {
		return false
	}
	i := sort.Search(len(k.bounds), func(i int) bool { return k.bounds[i] == nil || v.Cmp(k.bounds[i]) <= 0 })
	if i == len(k.pos) {
		return false
	}
	return end.Compare(k.pos[i]) <= 0
}

// intValue reads an integer as go-mysql decodes it.
func intValue(v any, unsigned bool) (*big.Int, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rv.Int()
		if unsigned && n < 0 {
			// two's complement at the column's width
			bits := uint(rv.Type().Bits())
			u := new(big.Int).SetInt64(n)
			return u.Add(u, new(big.Int).Lsh(big.NewInt(1), bits)), true
		}
		return big.NewInt(n), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return new(big.Int).SetUint64(rv.Uint()), true
	}
	return nil, false
}

// Segments reads the load state rows of a source (meta.Store.LoadRows) and returns, for each table
// whose lanes were copied from more than one snapshot, its KeyRanges, and for every loaded table the
// position from which its events apply without a decision (the earliest snapshot of its rows: events
// up to it are in every copy).
func Segments(rows map[string]meta.LoadRow) (ranges map[vocab.TableName]*KeyRanges, from map[vocab.TableName]vocab.Position, err error) {
	h, lanes, err := decodeState(rows)
	if err != nil || h == nil {
		return nil, nil, err
	}
	byTable := map[vocab.TableName][]*lane{}
	for _, l := range lanes {
		byTable[l.Table] = append(byTable[l.Table], l)
	}
	ranges, from = map[vocab.TableName]*KeyRanges{}, map[vocab.TableName]vocab.Position{}
	for _, ti := range h.Tables {
		ls := byTable[ti.Src]
		sort.Slice(ls, func(i, j int) bool { return ls[i].N < ls[j].N })
		kr := &KeyRanges{Ordinal: ti.KeyOrdinal, Unsigned: ti.KeyUnsigned}
		var lo vocab.Position
		for _, l := range ls {
			for _, s := range l.Segs {
				if lo.IsZero() || s.Pos.Compare(lo) < 0 {
					lo = s.Pos
				}
				if s.Pos.Compare(kr.Max) > 0 {
					kr.Max = s.Pos
				}
				var b *big.Int
				if s.Upto != "" {
					b, _ = new(big.Int).SetString(s.Upto, 10)
				}
				kr.bounds, kr.pos = append(kr.bounds, b), append(kr.pos, s.Pos)
			}
		}
		if lo.IsZero() {
			lo = h.Pos
		}
		from[ti.Src] = lo
		if kr.Max.Compare(lo) > 0 && ti.Key != "" {
			ranges[ti.Src] = kr
		}
	}
	return ranges, from, nil
}

// decodeState splits a source's load state rows into its header and lanes (nil header: no load).
func decodeState(rows map[string]meta.LoadRow) (*header, []*lane, error) {
	hr, ok := rows[meta.LoadPrefix]
	if !ok {
		return nil, nil, nil
	}
	h := &header{}
	if err := json.Unmarshal([]byte(hr.Data), h); err != nil {
		return nil, nil, fmt.Errorf("load state header: %w", err)
	}
	h.Pos, h.GTID = hr.Pos, hr.GTID
	var lanes []*lane
	for id, r := range rows {
		if id == meta.LoadPrefix {
			continue
		}
		l := &lane{}
		if err := json.Unmarshal([]byte(r.Data), l); err != nil {
			return nil, nil, fmt.Errorf("load state %s: %w", id, err)
		}
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool {
		if c := lanes[i].Table.String(); c != lanes[j].Table.String() {
			return c < lanes[j].Table.String()
		}
		return lanes[i].N < lanes[j].N
	})
	return h, lanes, nil
}

// header is a source's load state: the first snapshot and what was found in it.
type header struct {
	State string `json:"state"` // loading, loaded, switched
	// LoadID names this source's load in the marks of the hidden tables it creates (hiddenMark);
	// empty in headers of older versions, whose hidden tables have no mark.
	LoadID  string      `json:"load_id,omitempty"`
	Targets []hiddenMap `json:"targets"`
	Tables  []tableInfo `json:"tables"`
	// Pos and GTID are the first snapshot's, kept in the row's position columns.
	Pos  vocab.Position `json:"-"`
	GTID string         `json:"-"`
}

// Load states.
const (
	stateLoading  = "loading"
	stateLoaded   = "loaded"   // every lane copied; waiting for the cut-over
	stateSwitched = "switched" // cut over, and the sync unit's checkpoint written
)

// hiddenMap is a target loaded under a hidden name ("" when loaded in place: it existed before).
type hiddenMap struct {
	Target vocab.TableName `json:"target"`
	Hidden string          `json:"hidden,omitempty"`
	// Comment is the table comment of the upstream table the hidden table is defined from: the
	// target's after the cut-over (the hidden table's comment is the load's mark until then).
	Comment string `json:"comment,omitempty"`
}

// tableInfo is an upstream table of the load as the first snapshot held it.
type tableInfo struct {
	Src         vocab.TableName `json:"src"`
	Target      vocab.TableName `json:"target"`
	Cols        []vocab.Column  `json:"cols"`
	Sig         []string        `json:"sig"`
	Key         string          `json:"key,omitempty"` // single-column integer primary key
	KeyOrdinal  int             `json:"key_ordinal,omitempty"`
	KeyUnsigned bool            `json:"key_unsigned,omitempty"`
	ChunkRows   int             `json:"chunk_rows,omitempty"`
}
