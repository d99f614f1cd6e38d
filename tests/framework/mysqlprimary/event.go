// Package mysqlprimary is a MySQL-speaking primary for tests: no MySQL server can be had on these
// machines, so the events MySQL 8.0 and 8.4 write are built here, byte for byte, and served over the
// replication protocol (go-mysql's server package). Where the encoding follows MySQL's
// documentation rather than a captured server, the comment names the page (the source of truth is
// MySQL's libbinlogevents; "binlog_event.h" below means its definitions).
package mysqlprimary

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
)

// headerSize is a v4 event header: timestamp, type, server_id, event_size, log_pos, flags.
const headerSize = 19

// Server says which server writes the events: its version (the format description carries it and
// decides, for a reader, whether events end in a checksum) and its server_id.
type Server struct {
	Version  string // "8.0.36", "8.4.3"
	ServerID uint32
	Checksum bool // binlog_checksum=CRC32 (MySQL's default)
}

// Event is one binlog event's type and body (the part after the 19-byte header).
type Event interface {
	Type() replication.EventType
	Body(s Server) []byte
}

// Encode returns ev as it is written at logPos-len (logPos is where it ends, as MySQL's header says)
// with timestamp ts: the header, the body and, with Checksum, the CRC32 of both.
func (s Server) Encode(ev Event, ts uint32, endPos uint32) []byte {
	body := ev.Body(s)
	size := headerSize + len(body)
	if s.Checksum {
		size += replication.BinlogChecksumLength
	}
	b := make([]byte, headerSize, size)
	binary.LittleEndian.PutUint32(b[0:], ts)
	b[4] = byte(ev.Type())
	binary.LittleEndian.PutUint32(b[5:], s.ServerID)
	binary.LittleEndian.PutUint32(b[9:], uint32(size))
	binary.LittleEndian.PutUint32(b[13:], endPos)
	// flags: 0 (LOG_EVENT_BINLOG_IN_USE_F is set on a format description of an open file; readers
	// that replicate do not look at it)
	b = append(b, body...)
	if s.Checksum {
		b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	return b
}

// Size is the length Encode gives ev.
func (s Server) Size(ev Event) int {
	n := headerSize + len(ev.Body(s))
	if s.Checksum {
		n += replication.BinlogChecksumLength
	}
	return n
}

// FormatDescription is the first event of every binlog file (and of every dump, after a rotate).
type FormatDescription struct{}

func (FormatDescription) Type() replication.EventType { return replication.FORMAT_DESCRIPTION_EVENT }

// postHeaderLengths are MySQL 8.0's post-header lengths per event type, type 1 first
// (binlog_event.h: QUERY_HEADER_LEN 13, ROTATE 8, TABLE_MAP 8, ROWS_V2 10, GTID 42, PAYLOAD 40, ...).
// A reader takes the table id size (6 bytes) from TABLE_MAP's and the rows events' lengths.
var postHeaderLengths = []byte{
	56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 98, 0, 4, 26, 8, 0, // 1-20
	0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, // 21-40
	0, 0, // 41 HEARTBEAT_LOG_EVENT_V2, 42 GTID_TAGGED_LOG_EVENT
}

func (FormatDescription) Body(s Server) []byte {
	b := binary.LittleEndian.AppendUint16(nil, 4) // binlog version
	v := make([]byte, 50)
	copy(v, s.Version)
	b = append(b, v...)
	b = binary.LittleEndian.AppendUint32(b, 0) // create timestamp: 0 except in a server's first file
	b = append(b, headerSize)
	b = append(b, postHeaderLengths...)
	if s.Checksum {
		b = append(b, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
	} else {
		b = append(b, byte(replication.BINLOG_CHECKSUM_ALG_OFF))
	}
	return b
}

// Rotate names the next file. A dump starts with one (a "fake" rotate: timestamp 0, log_pos 0) that
// names the file it reads.
type Rotate struct {
	Next string
	Pos  uint64
}

func (Rotate) Type() replication.EventType { return replication.ROTATE_EVENT }
func (r Rotate) Body(Server) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, r.Pos), r.Next...)
}

// PreviousGTIDs is the GTID set executed before a file (the second event of every MySQL binlog).
type PreviousGTIDs struct{ Set *mysql.MysqlGTIDSet }

func (PreviousGTIDs) Type() replication.EventType { return replication.PREVIOUS_GTIDS_EVENT }
func (p PreviousGTIDs) Body(Server) []byte {
	if p.Set == nil {
		return make([]byte, 8) // no SIDs
	}
	return p.Set.Encode()
}

// GTID starts a transaction (untagged: GTID_LOG_EVENT; with a Tag: GTID_TAGGED_LOG_EVENT, 8.3+).
type GTID struct {
	SID            uuid.UUID
	GNO            int64
	Tag            string
	LastCommitted  int64
	SequenceNumber int64
	CommitMicros   uint64 // immediate_commit_timestamp, microseconds since the epoch
}

func (g GTID) Type() replication.EventType {
	if g.Tag != "" {
		return replication.GTID_TAGGED_LOG_EVENT
	}
	return replication.GTID_EVENT
}

func (g GTID) Body(s Server) []byte {
	if g.Tag != "" {
		return g.taggedBody(s)
	}
	// binlog_event.h Gtid_event: flags(1: 1 = may have DDL/commit), SID(16), GNO(8),
	// lt_type(1: LOGICAL_TIMESTAMP_TYPECODE 2), last_committed(8), sequence_number(8),
	// immediate_commit_timestamp(7; top bit clear: the original equals it), transaction_length
	// (packed int), immediate_server_version(4; top bit clear: the original equals it).
	b := []byte{1}
	b = append(b, g.SID[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(g.GNO))
	b = append(b, replication.LogicalTimestampTypeCode)
	b = binary.LittleEndian.AppendUint64(b, uint64(g.LastCommitted))
	b = binary.LittleEndian.AppendUint64(b, uint64(g.SequenceNumber))
	b = append(b, fixed(g.CommitMicros, 7)...)
	b = mysql.AppendLengthEncodedInteger(b, 0)
	return binary.LittleEndian.AppendUint32(b, serverVersionNumber(s.Version))
}

// XID commits a transaction.
type XID struct{ XID uint64 }

func (XID) Type() replication.EventType { return replication.XID_EVENT }
func (x XID) Body(Server) []byte        { return binary.LittleEndian.AppendUint64(nil, x.XID) }

// Query is a statement: BEGIN, a DDL, a statement-logged DML.
type Query struct {
	Schema string
	SQL    string
	// Charset is the client's character set and the connection's and server's collations
	// (Q_CHARSET_CODE); zero means utf8mb4_0900_ai_ci (255), MySQL 8's default.
	Charset uint16
	SQLMode uint64 // Q_SQL_MODE_CODE; zero means MySQL 8's default
}

func (Query) Type() replication.EventType { return replication.QUERY_EVENT }

// MySQL 8's default sql_mode: ONLY_FULL_GROUP_BY, STRICT_TRANS_TABLES, NO_ZERO_IN_DATE,
// NO_ZERO_DATE, ERROR_FOR_DIVISION_BY_ZERO, NO_ENGINE_SUBSTITUTION as the binlog's bits.
const defaultSQLMode = 0x20 | 0x400000 | 0x800000 | 0x1000000 | 0x8000000 | 0x40000000

func (q Query) Body(Server) []byte {
	cs := q.Charset
	if cs == 0 {
		cs = 255
	}
	mode := q.SQLMode
	if mode == 0 {
		mode = defaultSQLMode
	}
	// status variables (binlog_event.h Query_event): Q_FLAGS2_CODE(0), Q_SQL_MODE_CODE(1),
	// Q_CATALOG_NZ_CODE(6) "std", Q_CHARSET_CODE(4).
	var st []byte
	st = append(st, 0)
	st = binary.LittleEndian.AppendUint32(st, 0)
	st = append(st, 1)
	st = binary.LittleEndian.AppendUint64(st, mode)
	st = append(st, 6, 3)
	st = append(st, "std"...)
	st = append(st, 4)
	for range 3 {
		st = binary.LittleEndian.AppendUint16(st, cs)
	}
	b := binary.LittleEndian.AppendUint32(nil, 1) // thread id
	b = binary.LittleEndian.AppendUint32(b, 0)    // execution time
	b = append(b, byte(len(q.Schema)))
	b = binary.LittleEndian.AppendUint16(b, 0) // error code
	b = binary.LittleEndian.AppendUint16(b, uint16(len(st)))
	b = append(b, st...)
	b = append(b, q.Schema...)
	b = append(b, 0)
	return append(b, q.SQL...)
}

// TransactionPayload is a transaction compressed with zstd (binlog_transaction_compression=ON,
// 8.0.20+): its events, without their positions, in one event.
type TransactionPayload struct{ Events []Event }

func (TransactionPayload) Type() replication.EventType { return replication.TRANSACTION_PAYLOAD_EVENT }

// Body follows binlog_event.h Transaction_payload_event: fields as (type, length, value) with
// OTW_PAYLOAD_SIZE_FIELD 1, OTW_PAYLOAD_COMPRESSION_TYPE_FIELD 2 (ZSTD 0),
// OTW_PAYLOAD_UNCOMPRESSED_SIZE_FIELD 3, then OTW_PAYLOAD_HEADER_END_MARK 0 and the payload. The inner
// events carry log_pos 0 (MySQL copies them from the transaction cache before it knows positions)
// and no checksum.
func (t TransactionPayload) Body(s Server) []byte {
	// the inner events end in no checksum: the payload event's covers them
	inner := s
	inner.Checksum = false
	var raw []byte
	for _, ev := range t.Events {
		raw = append(raw, inner.Encode(ev, 0, 0)...)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	payload := enc.EncodeAll(raw, nil)
	field := func(b []byte, typ byte, v uint64) []byte {
		n := packedLen(v)
		return append(append(b, typ, byte(n)), fixed(v, n)...)
	}
	b := field(nil, 1, uint64(len(payload)))
	b = field(b, 2, 0)
	b = field(b, 3, uint64(len(raw)))
	b = append(b, 0)
	return append(b, payload...)
}

// fixed is v little-endian in n bytes.
func fixed(v uint64, n int) []byte {
	b := make([]byte, n)
	for i := range n {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// packedLen is the fewest bytes that hold v (at least 1).
func packedLen(v uint64) int {
	n := 1
	for v >>= 8; v > 0; v >>= 8 {
		n++
	}
	return n
}

// serverVersionNumber is "8.4.3" as 80403, as the GTID event's immediate_server_version.
func serverVersionNumber(v string) uint32 {
	var a, b, c uint32
	fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c)
	return a*10000 + b*100 + c
}

// fileHeader is what every binlog file begins with.
var fileHeader = []byte(replication.BinLogFileHeader)

// joinEvents concatenates encoded events.
func joinEvents(evs ...[]byte) []byte { return bytes.Join(evs, nil) }

// taggedBody is a GTID_TAGGED_LOG_EVENT (8.3+) in MySQL's serialization format (the
// mysql::serialization library): a message version, the message size and the last non-ignorable
// field id, then each field as its id and its value; integers are variable-length (the count of
// trailing one bits of the first byte is the count of bytes that follow it), fixed-width integers
// are written a byte at a time (7 bits per output byte, or two bytes for a byte above 0x7f), a
// string is its length and its bytes. Optional fields (the original commit timestamp and server
// version: equal to the immediate ones here) are left out.
func (g GTID) taggedBody(s Server) []byte {
	var f []byte
	field := func(id uint64, v []byte) { f = append(append(f, varUint(id)...), v...) }
	field(0, fixedInt([]byte{1}))
	field(1, fixedInt(g.SID[:]))
	field(2, varInt(g.GNO))
	field(3, append(varUint(uint64(len(g.Tag))), g.Tag...))
	field(4, varInt(g.LastCommitted))
	field(5, varInt(g.SequenceNumber))
	field(6, varUint(g.CommitMicros))
	field(8, varUint(0)) // transaction_length
	field(9, varUint(uint64(serverVersionNumber(s.Version))))
	head := varUint(0) // message version
	size := len(f) + 3
	if size >= 128 {
		panic("mysqlprimary: a tagged GTID event longer than a one-byte size")
	}
	head = append(head, varUint(uint64(size))...)
	head = append(head, varUint(9)...) // last non-ignorable field
	return append(head, f...)
}

// varUint is mysql::serialization's variable-length unsigned integer (values below 2^56).
func varUint(v uint64) []byte {
	n := 1
	for n < 8 && v >= 1<<(7*n) {
		n++
	}
	enc := v<<n | (1<<(n-1) - 1)
	return fixed(enc, n)
}

// varInt is mysql::serialization's signed integer: the sign in the lowest bit of an unsigned one.
func varInt(v int64) []byte {
	if v >= 0 {
		return varUint(uint64(v) << 1)
	}
	return varUint(uint64(-(v+1))<<1 | 1)
}

// fixedInt is mysql::serialization's fixed-width integer encoding.
func fixedInt(b []byte) []byte {
	var out []byte
	for _, c := range b {
		switch {
		case c < 0x80:
			out = append(out, c<<1)
		default:
			out = append(out, (c&0x3f)<<2|1, c>>6)
		}
	}
	return out
}
