package mysqlprimary

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Column is one column of a table as a table map event describes it.
type Column struct {
	Name     string
	Type     byte   // mysql.MYSQL_TYPE_*: LONG, LONGLONG, VARCHAR, BLOB, JSON, DATETIME2
	Meta     uint16 // VARCHAR: the maximum length in bytes; BLOB: the length's bytes (1-4); DATETIME2: fsp
	Unsigned bool
	Nullable bool
	// Invisible is an INVISIBLE column (8.0.23+) or a generated invisible primary key (my_row_id,
	// 8.0.30+): it is in the row image like any column; FULL metadata marks it.
	Invisible bool
	Collation uint16 // string columns; zero means utf8mb4_0900_ai_ci (255), MySQL 8's default
}

// Table is a table as the binlog describes it.
type Table struct {
	ID      uint64
	Schema  string
	Name    string
	Columns []Column
	PK      []int // column indexes of the primary key (FULL metadata)
	// Minimal leaves out what binlog_row_metadata=MINIMAL (MySQL's default) leaves out: column
	// names, the primary key, visibility.
	Minimal bool
}

// TableMap maps a table id to a table before its rows events.
type TableMap struct{ Table *Table }

func (TableMap) Type() replication.EventType { return replication.TABLE_MAP_EVENT }

func (m TableMap) Body(Server) []byte {
	t := m.Table
	b := fixed(t.ID, 6)
	b = binary.LittleEndian.AppendUint16(b, 1) // TM_BIT_LEN_EXACT_F
	b = append(append(append(b, byte(len(t.Schema))), t.Schema...), 0)
	b = append(append(append(b, byte(len(t.Name))), t.Name...), 0)
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(t.Columns)))
	var meta []byte
	for _, c := range t.Columns {
		b = append(b, c.Type)
		switch c.Type {
		case mysql.MYSQL_TYPE_VARCHAR:
			meta = binary.LittleEndian.AppendUint16(meta, c.Meta)
		case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_JSON:
			meta = append(meta, byte(c.Meta))
		case mysql.MYSQL_TYPE_DATETIME2:
			meta = append(meta, byte(c.Meta))
		case mysql.MYSQL_TYPE_DOUBLE:
			meta = append(meta, 8)
		}
	}
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(meta)))
	b = append(b, meta...)
	b = append(b, bitmap(len(t.Columns), func(i int) bool { return t.Columns[i].Nullable }, false)...)
	return append(b, t.optionalMetadata()...)
}

// optionalMetadata is binlog_event.h's Table_map_event optional metadata: (type, length, value)
// fields. MINIMAL writes signedness and character sets; FULL adds column names, the primary key and
// column visibility.
func (t *Table) optionalMetadata() []byte {
	var out []byte
	field := func(typ byte, v []byte) {
		out = append(out, typ)
		out = mysql.AppendLengthEncodedInteger(out, uint64(len(v)))
		out = append(out, v...)
	}
	var numeric []bool
	var charsets []byte
	for _, c := range t.Columns {
		switch c.Type {
		case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
			mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_NEWDECIMAL:
			numeric = append(numeric, c.Unsigned)
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_BLOB:
			coll := c.Collation
			if coll == 0 {
				coll = 255
			}
			charsets = mysql.AppendLengthEncodedInteger(charsets, uint64(coll))
		}
	}
	if len(numeric) > 0 {
		field(1, bitmap(len(numeric), func(i int) bool { return numeric[i] }, true)) // SIGNEDNESS
	}
	if len(charsets) > 0 {
		field(3, charsets) // COLUMN_CHARSET
	}
	if t.Minimal {
		return out
	}
	var names []byte
	for _, c := range t.Columns {
		names = mysql.AppendLengthEncodedInteger(names, uint64(len(c.Name)))
		names = append(names, c.Name...)
	}
	field(4, names) // COLUMN_NAME
	if len(t.PK) > 0 {
		var pk []byte
		for _, i := range t.PK {
			pk = mysql.AppendLengthEncodedInteger(pk, uint64(i))
		}
		field(8, pk) // SIMPLE_PRIMARY_KEY
	}
	field(12, bitmap(len(t.Columns), func(i int) bool { return !t.Columns[i].Invisible }, true)) // COLUMN_VISIBILITY
	return out
}

// bitmap packs n bits; msbFirst is the optional metadata's order, else the row image's (LSB first).
func bitmap(n int, bit func(int) bool, msbFirst bool) []byte {
	b := make([]byte, (n+7)/8)
	for i := range n {
		if !bit(i) {
			continue
		}
		if msbFirst {
			b[i/8] |= 0x80 >> (i % 8)
		} else {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

// Rows is a WRITE, UPDATE or DELETE_ROWS v2 event of a table, every column in the image
// (binlog_row_image=FULL). An update's Rows are before and after images in turn.
// PARTIAL_UPDATE_ROWS_EVENT is an update as binlog_row_value_options=PARTIAL_JSON writes it: each after
// image starts with the row's value options (PARTIAL_JSON_UPDATES) and a bitmap of its JSON columns
// written as diffs; here every JSON value is whole (bit 0), as MySQL writes a value replaced whole.
type Rows struct {
	Kind  replication.EventType // WRITE_ROWS_EVENTv2, UPDATE_ROWS_EVENTv2, DELETE_ROWS_EVENTv2, PARTIAL_UPDATE_ROWS_EVENT
	Table *Table
	Rows  [][]any
	// Last sets STMT_END_F: the statement's last rows event (the reader frees its table maps).
	Last bool
}

func (r Rows) Type() replication.EventType { return r.Kind }

func (r Rows) Body(Server) []byte {
	t := r.Table
	b := fixed(t.ID, 6)
	var flags uint16
	if r.Last {
		flags = 1
	}
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint16(b, 2) // extra data length: none
	n := len(t.Columns)
	b = mysql.AppendLengthEncodedInteger(b, uint64(n))
	all := bitmap(n, func(int) bool { return true }, false)
	b = append(b, all...)
	partial := r.Kind == replication.PARTIAL_UPDATE_ROWS_EVENT
	if r.Kind == replication.UPDATE_ROWS_EVENTv2 || partial {
		b = append(b, all...)
	}
	jsonCols := 0
	for _, c := range t.Columns {
		if c.Type == mysql.MYSQL_TYPE_JSON {
			jsonCols++
		}
	}
	for i, row := range r.Rows {
		if len(row) != n {
			panic(fmt.Sprintf("mysqlprimary: a row of %d values for %s.%s of %d columns", len(row), t.Schema, t.Name, n))
		}
		if partial && i%2 == 1 {
			b = mysql.AppendLengthEncodedInteger(b, 1) // PARTIAL_JSON_UPDATES
			b = append(b, make([]byte, (jsonCols+7)/8)...)
		}
		b = append(b, bitmap(n, func(i int) bool { return row[i] == nil }, false)...)
		for i, v := range row {
			if v != nil {
				b = appendValue(b, t.Columns[i], v)
			}
		}
	}
	return b
}

// appendValue writes one non-NULL value as the row image holds it (binary log row format).
func appendValue(b []byte, c Column, v any) []byte {
	switch c.Type {
	case mysql.MYSQL_TYPE_TINY:
		return append(b, byte(toInt(v)))
	case mysql.MYSQL_TYPE_SHORT:
		return binary.LittleEndian.AppendUint16(b, uint16(toInt(v)))
	case mysql.MYSQL_TYPE_INT24:
		return append(b, fixed(uint64(toInt(v)), 3)...)
	case mysql.MYSQL_TYPE_LONG:
		return binary.LittleEndian.AppendUint32(b, uint32(toInt(v)))
	case mysql.MYSQL_TYPE_LONGLONG:
		return binary.LittleEndian.AppendUint64(b, uint64(toInt(v)))
	case mysql.MYSQL_TYPE_DOUBLE:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.(float64)))
	case mysql.MYSQL_TYPE_VARCHAR:
		s := toBytes(v)
		if c.Meta < 256 {
			b = append(b, byte(len(s)))
		} else {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		}
		return append(b, s...)
	case mysql.MYSQL_TYPE_BLOB:
		s := toBytes(v)
		return append(append(b, fixed(uint64(len(s)), int(c.Meta))...), s...)
	case mysql.MYSQL_TYPE_JSON:
		doc := JSONBinary(v)
		return append(append(b, fixed(uint64(len(doc)), int(c.Meta))...), doc...)
	case mysql.MYSQL_TYPE_DATETIME2:
		return appendDatetime2(b, v.(time.Time), int(c.Meta))
	}
	panic(fmt.Sprintf("mysqlprimary: no encoding for column type %d", c.Type))
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint64:
		return int64(x)
	}
	panic(fmt.Sprintf("mysqlprimary: %T is no integer", v))
}

func toBytes(v any) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	panic(fmt.Sprintf("mysqlprimary: %T is no string", v))
}

// appendDatetime2 is DATETIME(fsp) in 5 big-endian bytes (sign bit set, year*13+month, day, hour,
// minute, second) and (fsp+1)/2 bytes of fraction.
func appendDatetime2(b []byte, t time.Time, fsp int) []byte {
	ym := uint64(t.Year()*13 + int(t.Month()))
	packed := uint64(1)<<39 | ym<<22 | uint64(t.Day())<<17 | uint64(t.Hour())<<12 | uint64(t.Minute())<<6 | uint64(t.Second())
	for i := 4; i >= 0; i-- {
		b = append(b, byte(packed>>(8*i)))
	}
	if n := (fsp + 1) / 2; n > 0 {
		frac := uint64(t.Nanosecond()/1000) / uint64(math.Pow10(6-2*n))
		for i := n - 1; i >= 0; i-- {
			b = append(b, byte(frac>>(8*i)))
		}
	}
	return b
}

// JSON types of MySQL's binary JSON (json_binary.h).
const (
	jsonSmallObject = 0x00
	jsonSmallArray  = 0x02
	jsonLiteral     = 0x04
	jsonInt16       = 0x05
	jsonInt64       = 0x09
	jsonDouble      = 0x0b
	jsonString      = 0x0c
)

// JSONBinary is v (nil, bool, int, int64, float64, string, []any, map[string]any) in MySQL's binary
// JSON (sql-common/json_binary.h, the "small" object and array forms): what a JSON column holds in a
// MySQL row image, where MariaDB writes text.
func JSONBinary(v any) []byte {
	typ, val := jsonValue(v)
	return append([]byte{typ}, val...)
}

func jsonValue(v any) (byte, []byte) {
	switch x := v.(type) {
	case nil:
		return jsonLiteral, []byte{0}
	case bool:
		if x {
			return jsonLiteral, []byte{1}
		}
		return jsonLiteral, []byte{2}
	case int:
		return jsonValue(int64(x))
	case int64:
		if x >= math.MinInt16 && x <= math.MaxInt16 {
			return jsonInt16, binary.LittleEndian.AppendUint16(nil, uint16(x))
		}
		return jsonInt64, binary.LittleEndian.AppendUint64(nil, uint64(x))
	case float64:
		return jsonDouble, binary.LittleEndian.AppendUint64(nil, math.Float64bits(x))
	case string:
		return jsonString, append(jsonLen(len(x)), x...)
	case []any:
		return jsonSmallArray, jsonContainer(nil, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// keys sorted by length, then bytes (json_binary.cc)
		sort.Slice(keys, func(i, j int) bool {
			if len(keys[i]) != len(keys[j]) {
				return len(keys[i]) < len(keys[j])
			}
			return keys[i] < keys[j]
		})
		vals := make([]any, len(keys))
		for i, k := range keys {
			vals[i] = x[k]
		}
		return jsonSmallObject, jsonContainer(keys, vals)
	}
	panic(fmt.Sprintf("mysqlprimary: %T has no binary JSON encoding here", v))
}

// jsonContainer is a small object (with keys) or array: element count and size (2 bytes each), key
// entries (offset, length), value entries (type, offset or an inlined literal/int16), keys, values.
// Offsets count from the container's first byte.
func jsonContainer(keys []string, vals []any) []byte {
	n := len(vals)
	head := 4 + 4*len(keys) + 3*n
	var tail []byte
	keyEntries := make([]byte, 0, 4*len(keys))
	for _, k := range keys {
		keyEntries = binary.LittleEndian.AppendUint16(keyEntries, uint16(head+len(tail)))
		keyEntries = binary.LittleEndian.AppendUint16(keyEntries, uint16(len(k)))
		tail = append(tail, k...)
	}
	valEntries := make([]byte, 0, 3*n)
	for _, v := range vals {
		typ, val := jsonValue(v)
		valEntries = append(valEntries, typ)
		if typ == jsonLiteral || typ == jsonInt16 {
			valEntries = append(valEntries, val[0], 0)
			if typ == jsonInt16 {
				valEntries[len(valEntries)-1] = val[1]
			}
			continue
		}
		valEntries = binary.LittleEndian.AppendUint16(valEntries, uint16(head+len(tail)))
		tail = append(tail, val...)
	}
	out := binary.LittleEndian.AppendUint16(nil, uint16(n))
	out = binary.LittleEndian.AppendUint16(out, uint16(head+len(tail)))
	out = append(out, keyEntries...)
	out = append(out, valEntries...)
	return append(out, tail...)
}

// jsonLen is a string's length in binary JSON: 7 bits per byte, the high bit set while more follow.
func jsonLen(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
