package syncer

import (
	"strings"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/tributary-db/tributary/vocab"
)

// conversion is what a binlog value needs before it is written downstream.
type conversion uint8

const (
	asIs conversion = iota
	// Integers arrive signed; an unsigned column's value is widened to its unsigned type (a SMALLINT
	// UNSIGNED 65535 arrives as int16 -1).
	toUint8
	toUint16
	toUint24
	toUint32
	toUint64
	// Strings of CHAR/VARCHAR/BINARY/VARBINARY columns are the column's raw bytes in its own charset.
	// Sent as bytes (the driver writes _binary'...'), they are stored unchanged in a column of the
	// same charset, whatever the connection's charset: latin1 text and binary with zero bytes alike.
	toBytes
	// BINARY(n) values arrive without their trailing zero bytes (the binlog strips the pad
	// character); they are padded back to n bytes, or a key or row match downstream (WHERE b <=> x'61'
	// against the stored x'61000000') finds nothing.
	toPaddedBytes
	// BIT values arrive as int64, so a BIT(64) with its highest bit set is negative: the column
	// stores -1 as all ones, but WHERE b <=> -1 matches no row. (SET values arrive as int64 too and
	// stay so: MariaDB compares a SET with its signed value, so -1 is the one that matches a full
	// 64-member SET.)
	toBitsUint64
)

// column conversions with their parameter (the length of a BINARY column).
type colConv struct {
	c conversion
	n int
}

// rowShape maps the row images of a table at one schema version onto the downstream: the columns
// written (generated columns never are: the downstream computes them) and their conversions.
type rowShape struct {
	cols []string  // names of the written columns
	keep []int     // index in the row image of each written column; nil: every column
	conv []colConv // per written column
	plan planCache // lanes.go
}

// binaryCollation is the collation id of the binary character set.
const binaryCollation = 63

// newRowShape describes the rows of table map tm. names are the columns' names (from the binlog, or
// tracked); tracked, when it fits the event, gives which columns are generated and unsigned. The
// binlog's own signedness metadata (binlog_row_metadata MINIMAL or FULL) wins where it is present.
func newRowShape(tm *replication.TableMapEvent, names []string, tracked []vocab.Column, mariadb bool) *rowShape {
	n := int(tm.ColumnCount)
	if len(tracked) != n {
		tracked = nil
	}
	for i := range tracked {
		if !strings.EqualFold(tracked[i].Name, names[i]) {
			tracked = nil // the tracked schema is not this version of the table
			break
		}
	}
	unsigned := unsignedColumns(tm, mariadb)
	var collations map[int]uint64
	if len(tm.DefaultCharset) > 0 || len(tm.ColumnCharset) > 0 {
		collations = tm.CollationMap()
	}
	sh := &rowShape{}
	all := true
	for i := 0; i < n; i++ {
		if tracked != nil && tracked[i].Generated {
			all = false
			continue
		}
		isUnsigned := tracked != nil && tracked[i].Unsigned
		if unsigned != nil {
			isUnsigned = unsigned[i]
		}
		conv := colConv{}
		switch tm.ColumnType[i] {
		case mysql.MYSQL_TYPE_TINY:
			conv.c = unsignedAs(isUnsigned, toUint8)
		case mysql.MYSQL_TYPE_SHORT:
			conv.c = unsignedAs(isUnsigned, toUint16)
		case mysql.MYSQL_TYPE_INT24:
			conv.c = unsignedAs(isUnsigned, toUint24)
		case mysql.MYSQL_TYPE_LONG:
			conv.c = unsignedAs(isUnsigned, toUint32)
		case mysql.MYSQL_TYPE_LONGLONG:
			conv.c = unsignedAs(isUnsigned, toUint64)
		case mysql.MYSQL_TYPE_BIT:
			conv.c = toBitsUint64
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
			conv.c = toBytes
		case mysql.MYSQL_TYPE_STRING:
			// CHAR, BINARY, ENUM and SET share the type; the metadata tells them apart. ENUM and SET
			// values arrive as numbers and are written as they are.
			realType, length := stringMeta(tm.ColumnMeta[i])
			switch {
			case realType == mysql.MYSQL_TYPE_ENUM || realType == mysql.MYSQL_TYPE_SET:
			case collations != nil && collations[i] == binaryCollation:
				conv = colConv{c: toPaddedBytes, n: length}
			case collations == nil && tracked != nil && tracked[i].BinaryLen > 0:
				// No charset metadata (binlog_row_metadata NO_LOG): the tracked schema knows BINARY(n).
				conv = colConv{c: toPaddedBytes, n: tracked[i].BinaryLen}
			default:
				conv.c = toBytes
			}
		}
		sh.cols = append(sh.cols, names[i])
		sh.keep = append(sh.keep, i)
		sh.conv = append(sh.conv, conv)
	}
	if all {
		sh.keep = nil
	}
	return sh
}

// stringMeta decodes the metadata of a MYSQL_TYPE_STRING column: its real type (STRING, ENUM or SET)
// and its length in bytes.
func stringMeta(meta uint16) (realType byte, length int) {
	if meta < 256 {
		return mysql.MYSQL_TYPE_STRING, int(meta)
	}
	b0, b1 := byte(meta>>8), byte(meta&0xFF)
	if b0&0x30 != 0x30 { // lengths above 255 keep two of their bits in the type byte
		return b0 | 0x30, int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return b0, int(b1)
}

// unsignedColumns decodes the binlog's signedness metadata (binlog_row_metadata MINIMAL or FULL): a
// bit per numeric column, in column order; nil when absent. go-mysql's UnsignedMap counts the numeric
// columns as MySQL does, but MariaDB gives YEAR (always unsigned) a bit too: on MariaDB it shifts
// every later bit onto the wrong column (a SMALLINT after a YEAR was taken for unsigned, -5 written
// as 65531, and an INT UNSIGNED for signed).
func unsignedColumns(tm *replication.TableMapEvent, mariadb bool) map[int]bool {
	if len(tm.SignednessBitmap) == 0 {
		return nil
	}
	out := map[int]bool{}
	bit := 0
	for i := 0; i < int(tm.ColumnCount) && bit/8 < len(tm.SignednessBitmap); i++ {
		switch tm.ColumnType[i] {
		case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
			mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_NEWDECIMAL, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		case mysql.MYSQL_TYPE_YEAR:
			if !mariadb {
				continue
			}
		default:
			continue
		}
		out[i] = tm.SignednessBitmap[bit/8]&(0x80>>(bit%8)) != 0
		bit++
	}
	return out
}

func unsignedAs(unsigned bool, c conversion) conversion {
	if unsigned {
		return c
	}
	return asIs
}

// apply returns row as it is written downstream. The row is go-mysql's own slice for this event, so it
// is converted in place when no column is left out.
func (sh *rowShape) apply(row []any) []any {
	out := row
	if sh.keep != nil {
		out = make([]any, len(sh.keep))
		for j, i := range sh.keep {
			out[j] = row[i]
		}
	}
	for j, c := range sh.conv {
		if c.c != asIs {
			out[j] = convert(out[j], c)
		}
	}
	return out
}

func convert(v any, c colConv) any {
	switch x := v.(type) {
	case int8:
		if c.c == toUint8 {
			return uint8(x)
		}
	case int16:
		if c.c == toUint16 {
			return uint16(x)
		}
	case int32:
		switch c.c {
		case toUint24:
			return uint32(x) & 0xFFFFFF
		case toUint32:
			return uint32(x)
		}
	case int64:
		if c.c == toUint64 || c.c == toBitsUint64 {
			return uint64(x)
		}
	case string:
		switch c.c {
		case toBytes:
			// The bytes themselves, not a copy: go-mysql's string is a view of the event's data, which
			// is read from the connection into a buffer of its own and never written again, and nothing
			// downstream writes into a row's values.
			if len(x) == 0 {
				return []byte{} // not nil: the driver writes a nil []byte as NULL
			}
			return unsafe.Slice(unsafe.StringData(x), len(x))
		case toPaddedBytes:
			b := make([]byte, max(len(x), c.n))
			copy(b, x)
			return b
		}
	}
	return v
}
