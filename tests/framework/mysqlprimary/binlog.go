package mysqlprimary

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"
)

// Binlog is a primary's binary log: its files, in order, and the GTID set they executed. A test
// appends transactions; dumps read them as they come.
type Binlog struct {
	srv  Server
	uuid uuid.UUID
	base string // file name prefix: "binlog" as MySQL 8's default log_bin basename

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every append
	files    []*file
	executed *mysql.MysqlGTIDSet
	gno      map[string]int64 // the next GNO per tag ("" for untagged)
	xid      uint64
	seq      int64
	clock    func() time.Time
	compress bool
}

// file is one binlog file.
type file struct {
	name   string
	prev   *mysql.MysqlGTIDSet // its PREVIOUS_GTIDS
	events []stored
	size   uint32 // the end of its last event (4 for a file with only its header)
}

// stored is one event of a file.
type stored struct {
	start, end uint32
	raw        []byte
	ts         uint32
	gtid       string // on a transaction's GTID event: "uuid[:tag]:gno"; the transaction runs to the next one
}

// NewBinlog starts a binary log with its first file.
func NewBinlog(srv Server, serverUUID uuid.UUID) *Binlog {
	empty, _ := mysql.ParseMysqlGTIDSet("")
	b := &Binlog{srv: srv, uuid: serverUUID, base: "binlog", changed: make(chan struct{}),
		executed: empty.(*mysql.MysqlGTIDSet), gno: map[string]int64{}, clock: time.Now}
	b.mu.Lock()
	b.openFile()
	b.mu.Unlock()
	return b
}

// openFile starts the next file with its format description and previous GTIDs (b.mu held).
func (b *Binlog) openFile() {
	f := &file{name: fmt.Sprintf("%s.%06d", b.base, len(b.files)+1), prev: b.executed.Clone().(*mysql.MysqlGTIDSet), size: 4}
	b.files = append(b.files, f)
	b.append(f, FormatDescription{}, "")
	b.append(f, PreviousGTIDs{Set: f.prev}, "")
}

// append encodes ev at the end of f (b.mu held).
func (b *Binlog) append(f *file, ev Event, gtid string) {
	ts := uint32(b.clock().Unix())
	end := f.size + uint32(b.srv.Size(ev))
	f.events = append(f.events, stored{start: f.size, end: end, raw: b.srv.Encode(ev, ts, end), ts: ts, gtid: gtid})
	f.size = end
}

// notify wakes the dumps (b.mu held).
func (b *Binlog) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// SetCompression writes the next transactions as TRANSACTION_PAYLOAD events
// (binlog_transaction_compression=ON).
func (b *Binlog) SetCompression(on bool) {
	b.mu.Lock()
	b.compress = on
	b.mu.Unlock()
}

// Commit writes one transaction: its GTID (with tag, when not empty), BEGIN, evs and XID; in one
// TRANSACTION_PAYLOAD when compression is on. It returns the transaction's GTID.
func (b *Binlog) Commit(tag string, evs ...Event) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.xid++
	body := append([]Event{Query{SQL: "BEGIN"}}, evs...)
	body = append(body, XID{XID: b.xid})
	return b.transaction(tag, body)
}

// DDL writes a statement as its own transaction (a GTID and the query), as MySQL logs DDL.
func (b *Binlog) DDL(tag, schema, sql string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.transaction(tag, []Event{Query{Schema: schema, SQL: sql}})
}

func (b *Binlog) transaction(tag string, body []Event) string {
	b.gno[tag]++
	gno := b.gno[tag]
	b.seq++
	g := GTID{SID: b.uuid, GNO: gno, Tag: tag, LastCommitted: b.seq - 1, SequenceNumber: b.seq, CommitMicros: uint64(b.clock().UnixMicro())}
	id := b.uuid.String()
	if tag != "" {
		id += ":" + tag
	}
	id = fmt.Sprintf("%s:%d", id, gno)
	f := b.files[len(b.files)-1]
	b.append(f, g, id)
	if b.compress && len(body) > 1 {
		b.append(f, TransactionPayload{Events: body}, "")
	} else {
		for _, ev := range body {
			b.append(f, ev, "")
		}
	}
	if err := b.executed.Update(id); err != nil {
		panic(err)
	}
	b.notify()
	return id
}

// Rotate ends the current file with a ROTATE event and opens the next (FLUSH BINARY LOGS).
func (b *Binlog) Rotate() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := fmt.Sprintf("%s.%06d", b.base, len(b.files)+1)
	b.append(b.files[len(b.files)-1], Rotate{Next: next, Pos: 4}, "")
	b.openFile()
	b.notify()
	return next
}

// switchTo makes the binlog another server's with the same GTID history, as a replica promoted in a
// failover has it: new files (base.000001 on), whose first PREVIOUS_GTIDS is everything executed so
// far, and new transactions under the new server's UUID.
func (b *Binlog) switchTo(serverUUID uuid.UUID, serverID uint32, base string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uuid, b.base, b.srv.ServerID = serverUUID, base, serverID
	b.gno = map[string]int64{}
	b.files = nil
	b.openFile()
	b.notify()
}

// Purge removes the files before name (PURGE BINARY LOGS TO).
func (b *Binlog) Purge(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range b.files {
		if f.name == name {
			b.files = b.files[i:]
			return
		}
	}
}

// Status is SHOW BINARY LOG STATUS: the current file, its end and the executed GTID set.
func (b *Binlog) Status() (mysql.Position, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.files[len(b.files)-1]
	return mysql.Position{Name: f.name, Pos: f.size}, b.executed.String()
}

// Files is SHOW BINARY LOGS: each file's name and size.
func (b *Binlog) Files() []mysql.Position {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]mysql.Position, len(b.files))
	for i, f := range b.files {
		out[i] = mysql.Position{Name: f.name, Pos: f.size}
	}
	return out
}

// Executed is @@gtid_executed.
func (b *Binlog) Executed() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.executed.String()
}

// cursor is where a dump reads: a file and an event in it.
type cursor struct {
	file int // index in b.files at the time it was read; names are checked again on every read
	name string
	ev   int
	skip *mysql.MysqlGTIDSet // a GTID dump leaves out the transactions the replica has
}

// seek finds pos in the binlog: the event that starts at pos.Pos of file pos.Name.
func (b *Binlog) seek(pos mysql.Position) (cursor, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range b.files {
		if f.name != pos.Name {
			continue
		}
		if pos.Pos <= 4 {
			return cursor{file: i, name: f.name}, nil
		}
		for j, ev := range f.events {
			if ev.start == pos.Pos {
				return cursor{file: i, name: f.name, ev: j}, nil
			}
		}
		if pos.Pos == f.size {
			return cursor{file: i, name: f.name, ev: len(f.events)}, nil
		}
		return cursor{}, mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG,
			fmt.Sprintf("Client requested source to start replication from position %d of %s: no event starts there", pos.Pos, pos.Name))
	}
	return cursor{}, mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG,
		fmt.Sprintf("Could not find first log file name in binary log index file (%s)", pos.Name))
}

// seekGTID finds where a replica with the GTID set has must start: the oldest file whose previous
// GTIDs it has (MySQL looks from the newest file back), with the transactions it has left out. A set
// that misses GTIDs the primary has purged is refused, as MySQL refuses it (ER 1236).
func (b *Binlog) seekGTID(has *mysql.MysqlGTIDSet) (cursor, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.files) - 1; i >= 0; i-- {
		if has.Contain(b.files[i].prev) {
			return cursor{file: i, name: b.files[i].name, skip: has}, nil
		}
	}
	return cursor{}, mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG,
		"Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup.")
}

// next returns the events after c (leaving out skipped transactions), waiting for new ones while
// there are none; done closes the wait. rotated names the file the events are in when it changed.
func (b *Binlog) next(c *cursor, done <-chan struct{}) ([]stored, error) {
	for {
		b.mu.Lock()
		i := c.file
		for i < len(b.files) && b.files[i].name != c.name {
			i++ // files before it were purged
		}
		if i == len(b.files) {
			b.mu.Unlock()
			return nil, fmt.Errorf("binlog %s was purged while a dump read it", c.name)
		}
		c.file = i
		f := b.files[i]
		var out []stored
		for c.ev < len(f.events) {
			out = append(out, f.events[c.ev])
			c.ev++
		}
		if len(out) == 0 && c.file+1 < len(b.files) {
			c.file++
			c.name = b.files[c.file].name
			c.ev = 0
			b.mu.Unlock()
			continue
		}
		wait := b.changed
		b.mu.Unlock()
		if len(out) > 0 {
			return b.leaveOut(c, out), nil
		}
		select {
		case <-wait:
		case <-done:
			return nil, errDumpClosed
		}
	}
}

// leaveOut drops the transactions of c.skip from evs (a GTID dump).
func (b *Binlog) leaveOut(c *cursor, evs []stored) []stored {
	if c.skip == nil {
		return evs
	}
	out := evs[:0:0]
	skipping := false
	for _, ev := range evs {
		if ev.gtid != "" {
			one, err := mysql.ParseMysqlGTIDSet(ev.gtid)
			if err != nil {
				panic(err)
			}
			skipping = c.skip.Contain(one)
		}
		typ := replication.EventType(ev.raw[4])
		if skipping && typ != replication.ROTATE_EVENT && typ != replication.FORMAT_DESCRIPTION_EVENT && typ != replication.PREVIOUS_GTIDS_EVENT {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// formatDescription returns file name's format description event as a dump that starts inside the
// file sends it: log_pos 0, so the replica does not take it for a position.
func (b *Binlog) formatDescription(name string) []byte {
	return b.srv.Encode(FormatDescription{}, uint32(b.clock().Unix()), 0)
}
