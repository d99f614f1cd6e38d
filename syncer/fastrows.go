package syncer

import (
	"encoding/binary"
	"reflect"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-mysql-org/go-mysql/utils"
)

// A fast path for go-mysql's decoding of rows events, for the tables a catch-up mostly meets: every
// column in the row images (binlog_row_image FULL), and only integer, FLOAT, DOUBLE, CHAR, BINARY,
// VARCHAR and VARBINARY columns. It reads the values with go-mysql's own functions into values of the
// same types (a string is a view of the event's data, as go-mysql's is), but the rows of an event
// share one slice of values and the event's row list is allocated once, where go-mysql allocates every
// row and grows the list (and the list of skipped columns) row by row. Any other event (another
// column type, a partial row image, a compressed MariaDB event, MySQL's partial JSON updates, a
// layout it cannot account for byte for byte) is decoded by go-mysql.

// rowsEventFields are the indexes of the RowsEvent fields the fast path needs and go-mysql does not
// export: the event type and whether the event is compressed. -1 when go-mysql has no such field
// (another version): every event goes to go-mysql.
var rowsEventFields = func() (f struct{ eventType, compressed int }) {
	f.eventType, f.compressed = -1, -1
	t := reflect.TypeFor[replication.RowsEvent]()
	if sf, ok := t.FieldByName("eventType"); ok && sf.Type.Kind() == reflect.Uint8 && len(sf.Index) == 1 {
		f.eventType = sf.Index[0]
	}
	if sf, ok := t.FieldByName("compressed"); ok && sf.Type.Kind() == reflect.Bool && len(sf.Index) == 1 {
		f.compressed = sf.Index[0]
	}
	return f
}()

// fastRowsKind is whether the fast path reads e: the number of row images per row (1 for inserts and
// deletes, 2 for updates), or 0 when it does not.
func fastRowsKind(e *replication.RowsEvent) int {
	f := rowsEventFields
	if f.eventType < 0 || f.compressed < 0 || e.Table == nil {
		return 0
	}
	v := reflect.ValueOf(e).Elem()
	if v.Field(f.compressed).Bool() {
		return 0
	}
	images := 0
	switch replication.EventType(v.Field(f.eventType).Uint()) {
	case replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		images = 1
	case replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		images = 2
	default:
		return 0
	}
	n := int(e.ColumnCount)
	tm := e.Table
	if n == 0 || len(tm.ColumnType) < n || len(tm.ColumnMeta) < n || !allSet(e.ColumnBitmap1, n) || (images == 2 && !allSet(e.ColumnBitmap2, n)) {
		return 0
	}
	for i := 0; i < n; i++ {
		switch tm.ColumnType[i] {
		case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG,
			mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		case mysql.MYSQL_TYPE_STRING:
			if realType, _ := stringMeta(tm.ColumnMeta[i]); realType != mysql.MYSQL_TYPE_STRING {
				return 0 // ENUM, SET
			}
		default:
			return 0
		}
	}
	return images
}

// allSet reports whether the first n bits of bitmap are set.
func allSet(bitmap []byte, n int) bool {
	if len(bitmap) < (n+7)/8 {
		return false
	}
	for i := 0; i < n; i++ {
		if bitmap[i/8]&(1<<(i%8)) == 0 {
			return false
		}
	}
	return true
}

// decodeRowsFast decodes the row images of data from pos (after the event's header) into e.Rows and
// e.SkippedColumns as go-mysql's DecodeData does, for an event fastRowsKind accepts with images row
// images per row. false, with e untouched, when the data does not hold whole rows of the table.
func decodeRowsFast(e *replication.RowsEvent, data []byte, pos, images int) bool {
	n := int(e.ColumnCount)
	tm := e.Table
	nullBytes := (n + 7) / 8
	// First the row images' boundaries: every value within the data, and the data used up exactly.
	count := 0
	for p := pos; p < len(data); count++ {
		if p+nullBytes > len(data) {
			return false
		}
		nulls := data[p : p+nullBytes]
		p += nullBytes
		for i := 0; i < n; i++ {
			if nulls[i/8]&(1<<(i%8)) != 0 {
				continue
			}
			size, ok := fastValueSize(tm.ColumnType[i], tm.ColumnMeta[i], data[p:])
			if !ok || p+size > len(data) {
				return false
			}
			p += size
		}
	}
	if count%images != 0 {
		return false // an update's before image without its after image
	}
	values := make([]any, count*n)
	rows := make([][]any, count)
	skipped := make([][]int, count)
	noSkips := make([]int, 0) // go-mysql's: an empty, non-nil list
	p := pos
	for r := range count {
		row := values[r*n : (r+1)*n : (r+1)*n]
		nulls := data[p : p+nullBytes]
		p += nullBytes
		for i := 0; i < n; i++ {
			if nulls[i/8]&(1<<(i%8)) != 0 {
				continue // nil
			}
			var size int
			row[i], size = fastValue(tm.ColumnType[i], tm.ColumnMeta[i], data[p:])
			p += size
		}
		rows[r], skipped[r] = row, noSkips
	}
	e.Rows, e.SkippedColumns = rows, skipped
	return true
}

// fastValueSize is the size of a value of a column type fastRowsKind accepts (false: the data is too
// short for its length prefix).
func fastValueSize(tp byte, meta uint16, data []byte) (int, bool) {
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		return 1, true
	case mysql.MYSQL_TYPE_SHORT:
		return 2, true
	case mysql.MYSQL_TYPE_INT24:
		return 3, true
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT:
		return 4, true
	case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE:
		return 8, true
	}
	n := stringPrefix(tp, meta)
	if len(data) < n {
		return 0, false
	}
	if n == 1 {
		return 1 + int(data[0]), true
	}
	return 2 + int(binary.LittleEndian.Uint16(data)), true
}

// stringPrefix is the size of the length before a CHAR, BINARY, VARCHAR or VARBINARY value: 1 byte
// up to 255 bytes of value, else 2 (go-mysql's decodeString).
func stringPrefix(tp byte, meta uint16) int {
	length := int(meta) // VARCHAR, VAR_STRING
	if tp == mysql.MYSQL_TYPE_STRING {
		_, length = stringMeta(meta)
	}
	if length < 256 {
		return 1
	}
	return 2
}

// fastValue reads a value as go-mysql's decodeValue does, and its size.
func fastValue(tp byte, meta uint16, data []byte) (any, int) {
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		return mysql.ParseBinaryInt8(data), 1
	case mysql.MYSQL_TYPE_SHORT:
		return mysql.ParseBinaryInt16(data), 2
	case mysql.MYSQL_TYPE_INT24:
		return mysql.ParseBinaryInt24(data), 3
	case mysql.MYSQL_TYPE_LONG:
		return mysql.ParseBinaryInt32(data), 4
	case mysql.MYSQL_TYPE_LONGLONG:
		return mysql.ParseBinaryInt64(data), 8
	case mysql.MYSQL_TYPE_FLOAT:
		return mysql.ParseBinaryFloat32(data), 4
	case mysql.MYSQL_TYPE_DOUBLE:
		return mysql.ParseBinaryFloat64(data), 8
	}
	size, _ := fastValueSize(tp, meta, data) // decodeRowsFast checked the sizes first
	return utils.ByteSliceToString(data[stringPrefix(tp, meta):size]), size
}
