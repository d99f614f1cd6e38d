package syncer

import (
	"encoding/binary"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// decodeRows decodes a rows event as go-mysql does (by go-mysql, or for common tables by the fast path
// of fastrows.go), then reads its DATETIME values again from the event's bytes where the date has a
// zero month or day ('2024-05-00 10:00:00', which MariaDB's and MySQL's default sql_mode accept):
// go-mysql v1.12 builds them with time.Date, which turns them into another date ('2024-04-30
// 10:00:00'). It is the syncer's RowsEventDecodeFunc. The corrections are
// applied only when the walk over the event's row images accounts for every byte and every row
// go-mysql decoded; other layouts (MariaDB's compressed events, MySQL's partial JSON updates) keep
// go-mysql's values.
func decodeRows(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	if images := fastRowsKind(e); images == 0 || !decodeRowsFast(e, data, pos, images) { // fastrows.go
		if err := e.DecodeData(pos, data); err != nil {
			return err
		}
		resignRows(e)
	}
	if !hasDatetime(e.Table) {
		return nil
	}
	images := [][]byte{e.ColumnBitmap1}
	if e.ColumnBitmap2 != nil && len(e.Rows)%2 == 0 {
		images = append(images, e.ColumnBitmap2)
	}
	var fixes []datetimeFix
	row := 0
	for pos < len(data) && row < len(e.Rows) {
		for _, bitmap := range images {
			n, err := walkImage(e.Table, data[pos:], bitmap, row, &fixes)
			if err != nil {
				return nil // not a layout this walk knows
			}
			pos += n
			row++
		}
	}
	if pos != len(data) || row != len(e.Rows) {
		return nil
	}
	for _, f := range fixes {
		e.Rows[f.row][f.col] = f.value
	}
	return nil
}

type datetimeFix struct {
	row, col int
	value    string
}

func hasDatetime(tm *replication.TableMapEvent) bool {
	for _, t := range tm.ColumnType {
		if t == mysql.MYSQL_TYPE_DATETIME2 || t == mysql.MYSQL_TYPE_DATETIME {
			return true
		}
	}
	return false
}

// walkImage walks one row image (null bitmap, then the present non-NULL values), noting the DATETIME
// values with a zero month or day with their exact text. It returns the image's size.
func walkImage(tm *replication.TableMapEvent, data, bitmap []byte, row int, fixes *[]datetimeFix) (int, error) {
	n := int(tm.ColumnCount)
	if len(bitmap) < (n+7)/8 || len(tm.ColumnType) < n || len(tm.ColumnMeta) < n {
		return 0, fmt.Errorf("bitmap or table map shorter than %d columns", n)
	}
	present := 0
	for i := 0; i < n; i++ {
		if bitmap[i/8]&(1<<(i%8)) != 0 {
			present++
		}
	}
	if len(data) < (present+7)/8 {
		return 0, fmt.Errorf("short null bitmap")
	}
	nulls := data[:(present+7)/8]
	pos := len(nulls)
	k := 0 // index among the present columns
	for i := 0; i < n; i++ {
		if bitmap[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		isNull := nulls[k/8]&(1<<(k%8)) != 0
		k++
		if isNull {
			continue
		}
		tp, meta := tm.ColumnType[i], tm.ColumnMeta[i]
		size, err := valueSize(tp, meta, data[pos:])
		if err != nil {
			return 0, fmt.Errorf("column %d: %w", i, err)
		}
		if pos+size > len(data) {
			return 0, fmt.Errorf("column %d: value of %d bytes past the event's end", i, size)
		}
		var s string
		var ok bool
		switch tp {
		case mysql.MYSQL_TYPE_DATETIME2:
			s, ok = zeroInDatetime2(data[pos:pos+size], meta)
		case mysql.MYSQL_TYPE_DATETIME:
			s, ok = zeroInDatetime(data[pos : pos+size])
		}
		if ok {
			*fixes = append(*fixes, datetimeFix{row, i, s})
		}
		pos += size
	}
	return pos, nil
}

var compressedBytes = [...]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

// valueSize is the size of one value in a row image, as go-mysql's decodeValue reads it.
func valueSize(tp byte, meta uint16, data []byte) (int, error) {
	length := 0
	if tp == mysql.MYSQL_TYPE_STRING {
		tp, length = stringMeta(meta)
	}
	prefixed := func(bytes int) (int, error) {
		if len(data) < bytes {
			return 0, fmt.Errorf("short length prefix")
		}
		return bytes + int(mysql.FixedLengthInt(data[:bytes])), nil
	}
	switch tp {
	case mysql.MYSQL_TYPE_NULL:
		return 0, nil
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_YEAR:
		return 1, nil
	case mysql.MYSQL_TYPE_SHORT:
		return 2, nil
	case mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_TIME:
		return 3, nil
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_TIMESTAMP:
		return 4, nil
	case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_DATETIME:
		return 8, nil
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		prec, scale := int(meta>>8), int(meta&0xFF)
		intg := prec - scale
		return intg/9*4 + compressedBytes[intg%9] + scale/9*4 + compressedBytes[scale%9], nil
	case mysql.MYSQL_TYPE_BIT:
		nbits := int(meta>>8)*8 + int(meta&0xFF)
		return (nbits + 7) / 8, nil
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		return 4 + int(meta+1)/2, nil
	case mysql.MYSQL_TYPE_DATETIME2:
		return 5 + int(meta+1)/2, nil
	case mysql.MYSQL_TYPE_TIME2:
		return 3 + int(meta+1)/2, nil
	case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
		return int(meta & 0xFF), nil
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_VECTOR, mysql.MYSQL_TYPE_JSON:
		return prefixed(int(meta))
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		if meta < 256 {
			return prefixed(1)
		}
		return prefixed(2)
	case mysql.MYSQL_TYPE_STRING:
		if length < 256 {
			return prefixed(1)
		}
		return prefixed(2)
	}
	return 0, fmt.Errorf("type %d has no known size", tp)
}

// zeroInDatetime2 reads a DATETIME2 value (MySQL 5.6+ and MariaDB 10.1+ format) and formats it when
// its month or day is zero.
func zeroInDatetime2(data []byte, dec uint16) (string, bool) {
	intPart := int64(mysql.BFixedLengthInt(data[0:5])) - 0x8000000000
	if intPart <= 0 {
		return "", false // zero, or negative: go-mysql's own formatting is right
	}
	ymd := intPart >> 17
	ym := ymd >> 5
	day, month, year := int(ymd%(1<<5)), int(ym%13), int(ym/13)
	if month != 0 && day != 0 {
		return "", false
	}
	hms := intPart % (1 << 17)
	second, minute, hour := int(hms%(1<<6)), int((hms>>6)%(1<<6)), int(hms>>12)
	var usec int64
	switch dec {
	case 1, 2:
		usec = int64(data[5]) * 10000
	case 3, 4:
		usec = int64(binary.BigEndian.Uint16(data[5:7])) * 100
	case 5, 6:
		usec = int64(mysql.BFixedLengthInt(data[5:8]))
	}
	return formatDatetime(year, month, day, hour, minute, second, usec, int(dec)), true
}

// zeroInDatetime reads an old-format DATETIME (8 bytes, YYYYMMDDhhmmss as a number).
func zeroInDatetime(data []byte) (string, bool) {
	v := binary.LittleEndian.Uint64(data)
	if v == 0 {
		return "", false
	}
	d, t := v/1000000, v%1000000
	year, month, day := int(d/10000), int((d%10000)/100), int(d%100)
	if month != 0 && day != 0 {
		return "", false
	}
	return formatDatetime(year, month, day, int(t/10000), int((t%10000)/100), int(t%100), 0, 0), true
}

func formatDatetime(year, month, day, hour, minute, second int, usec int64, dec int) string {
	s := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", year, month, day, hour, minute, second)
	if dec > 0 {
		frac := fmt.Sprintf("%06d", usec)
		s += "." + frac[:dec]
	}
	return s
}

// resignRows gives integers the signed types go-mysql before v1.16 gave them and the fast path gives:
// go-mysql v1.16 decodes a column it takes for unsigned (the binlog's signedness metadata) as uint8..
// uint64, but counts MariaDB's bits as MySQL's (MariaDB gives YEAR a bit too, which shifts every later
// one: values.go unsignedColumns). The row shape widens unsigned columns itself, from the right bits.
func resignRows(e *replication.RowsEvent) {
	if e.Table == nil || len(e.Table.SignednessBitmap) == 0 {
		return
	}
	for _, row := range e.Rows {
		for i, v := range row {
			if i >= len(e.Table.ColumnType) {
				break
			}
			switch x := v.(type) {
			case uint8:
				row[i] = int8(x)
			case uint16:
				row[i] = int16(x)
			case uint32:
				if e.Table.ColumnType[i] == mysql.MYSQL_TYPE_INT24 {
					row[i] = int32(x<<8) >> 8 // 24 bits, sign-extended
				} else {
					row[i] = int32(x)
				}
			case uint64:
				row[i] = int64(x)
			}
		}
	}
}
