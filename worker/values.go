package worker

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-db/tributary/shardgroup"
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
)

// rowShape maps the row images of a table at one schema version onto the downstream: the columns
// written (generated columns never are: the downstream computes them) and their conversions.
type rowShape struct {
	cols []string     // names of the written columns
	keep []int        // index in the row image of each written column; nil: every column
	conv []conversion // per written column
}

// newRowShape describes the rows of table map tm. names are the columns' names (from the binlog, or
// tracked); tracked, when it fits the event, gives which columns are generated and unsigned. The
// binlog's own signedness metadata (binlog_row_metadata MINIMAL or FULL) wins where it is present.
func newRowShape(tm *replication.TableMapEvent, names []string, tracked []shardgroup.Column) *rowShape {
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
	unsigned := tm.UnsignedMap()
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
		conv := asIs
		switch tm.ColumnType[i] {
		case mysql.MYSQL_TYPE_TINY:
			conv = unsignedAs(isUnsigned, toUint8)
		case mysql.MYSQL_TYPE_SHORT:
			conv = unsignedAs(isUnsigned, toUint16)
		case mysql.MYSQL_TYPE_INT24:
			conv = unsignedAs(isUnsigned, toUint24)
		case mysql.MYSQL_TYPE_LONG:
			conv = unsignedAs(isUnsigned, toUint32)
		case mysql.MYSQL_TYPE_LONGLONG:
			conv = unsignedAs(isUnsigned, toUint64)
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING:
			conv = toBytes // ENUM and SET share the STRING type but arrive as numbers: left as they are
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
		if c != asIs {
			out[j] = convert(out[j], c)
		}
	}
	return out
}

func convert(v any, c conversion) any {
	switch x := v.(type) {
	case int8:
		if c == toUint8 {
			return uint8(x)
		}
	case int16:
		if c == toUint16 {
			return uint16(x)
		}
	case int32:
		switch c {
		case toUint24:
			return uint32(x) & 0xFFFFFF
		case toUint32:
			return uint32(x)
		}
	case int64:
		if c == toUint64 {
			return uint64(x)
		}
	case string:
		if c == toBytes {
			return []byte(x)
		}
	}
	return v
}

// DownstreamSession returns the session settings of the syncer's downstream connections: the user's
// (task target-database.session) over these defaults. TIMESTAMP values are read as UTC text, so the
// session is in UTC; NO_AUTO_VALUE_ON_ZERO writes an AUTO_INCREMENT column's 0 as 0, as upstream stored
// it, instead of a new value; strict mode refuses a value rather than truncate it; zero dates that the
// upstream accepted are accepted (no NO_ZERO_DATE). The modes exist in MariaDB and MySQL 8 alike.
func DownstreamSession(user map[string]any) map[string]any {
	out := map[string]any{
		"time_zone": "+00:00",
		"sql_mode":  "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO",
	}
	for k, v := range user {
		out[k] = v
	}
	return out
}
