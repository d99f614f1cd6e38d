// The binlog reader stage: the go-mysql stream, where an event group starts and ends, and the GTID set
// at a position (reconnects with backoff and the read errors: readerr.go).

package syncer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/eventclass"
	"github.com/tributary-db/tributary/vocab"
)

// resumePoint is where a reader starts: a position, and in GTID mode the GTID set there.
type resumePoint struct {
	pos  vocab.Position
	gtid string
}

type reader struct {
	cancel context.CancelFunc
	syncer *replication.BinlogSyncer
	events chan readEvent
	errc   chan error
	done   chan struct{}
}

// readEvent is an event with, for a MariaDB GTID event, a copy of its GTID taken as it was read
// (go-mysql v1.12 may overwrite the GTID of an event later).
type readEvent struct {
	*replication.BinlogEvent
	gtid string // an event group's GTID, on its first event
}

func (r *reader) stop() {
	r.cancel()
	<-r.done
	r.syncer.Close()
}

// readAheadEvents is how many binlog events the reader decodes ahead of the event loop (go-mysql's
// EventCacheCount), besides the reader's own channel.
const readAheadEvents = 512

func (s *Syncer) startReader(ctx context.Context, from resumePoint) (*reader, error) {
	bs := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: s.cfg.ServerID, Flavor: s.cfg.Flavor,
		Host: s.cfg.Host, Port: s.cfg.Port, User: s.cfg.User, Password: s.cfg.Password, TLSConfig: s.cfg.TLS,
		// Few quick retries inside go-mysql; longer outages go to Run's reconnect loop with backoff.
		HeartbeatPeriod: time.Second, ReadTimeout: 5 * time.Second, MaxReconnectAttempts: 2,
		// In MySQL GTID mode go-mysql would reconnect from its own set, which leaves out the last
		// transaction it saw (complete or not): a primary that has purged it (a failover to a server
		// with the same history and newer binlogs) refuses that set with ERROR 1236. The reader's
		// reconnect asks from its set of complete event groups instead.
		DisableRetrySync: s.cfg.EnableGTID && s.cfg.Flavor == mysql.MySQLFlavor,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		// TIMESTAMP values as UTC text; the downstream session's time_zone is +00:00 (OpenDB).
		TimestampStringLocation: time.UTC,
		RowsEventDecodeFunc:     decodeRows, // DATETIME values with a zero month or day read exactly
		// Events decoded ahead of the event loop. go-mysql's default, 10240, decoded a whole backlog of
		// hundreds of thousands of rows into memory while the loop waited on the downstream: a worker's
		// RSS, the GC's work over it, and page faults on a first catch-up. 512 keeps the loop fed.
		EventCacheCount: readAheadEvents,
	})
	var streamer *replication.BinlogStreamer
	var err error
	if s.cfg.EnableGTID && from.gtid == "" && s.cfg.Flavor == mysql.MySQLFlavor {
		// A MySQL GTID set holds every transaction: the one at a position is the file's previous
		// GTIDs and the groups before it, read from the binlog.
		if from.gtid, err = s.gtidsAt(ctx, from.pos); err != nil {
			bs.Close()
			return nil, err
		}
		s.log.Info("GTID set at the start position read from the binlog", zap.Stringer("pos", from.pos), zap.String("gtid", from.gtid))
	}
	if s.cfg.EnableGTID && from.gtid != "" {
		if s.cur.gtids, err = newGTIDSet(s.cfg.Flavor, from.gtid); err != nil {
			bs.Close()
			return nil, fmt.Errorf("source %s: %w", s.cfg.Source, err)
		}
		var set mysql.GTIDSet
		if set, err = mysql.ParseGTIDSet(s.cfg.Flavor, from.gtid); err == nil {
			streamer, err = bs.StartSyncGTID(set)
		}
	} else {
		s.cur.gtids, _ = newGTIDSet(s.cfg.Flavor, "")
		streamer, err = bs.StartSync(mysql.Position{Name: from.pos.File, Pos: from.pos.Pos})
	}
	if err != nil {
		bs.Close()
		return nil, fmt.Errorf("start binlog of source %s at %s %s: %w", s.cfg.Source, from.pos, from.gtid, err)
	}
	s.log.Info("start reading binlog", zap.Stringer("from", from.pos), zap.String("gtid", from.gtid))
	s.cur.file, s.cur.lastPos, s.cur.groupStart, s.cur.curGTID = from.pos.File, from.pos, from.pos, ""
	s.apply.rewound() // reading again from here: nothing past it is safe yet
	s.apply.resetBatch()
	rctx, cancel := context.WithCancel(ctx)
	r := &reader{cancel: cancel, syncer: bs, events: make(chan readEvent, 256), errc: make(chan error, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			ev, err := streamer.GetEvent(rctx)
			if err != nil {
				if rctx.Err() == nil {
					r.errc <- err
				}
				return
			}
			re := readEvent{BinlogEvent: ev}
			if re.gtid, err = gtidOf(ev.Event); err != nil {
				r.errc <- err
				return
			}
			select {
			case r.events <- re:
			case <-rctx.Done():
				return
			}
		}
	}()
	return r, nil
}

// endGroup records that the event group ending at end is complete.
func (c *cursor) endGroup(end vocab.Position) {
	c.txn = false
	if c.curGTID != "" {
		if err := c.gtids.add(c.curGTID); err != nil {
			panic(err) // gtidOf wrote it: it parses
		}
		c.curGTID = ""
	}
	c.lastPos = end
}

// gtidFor is the GTID set at a resume position: the current one, or one recorded at a DDL.
func (c *cursor) gtidFor(pos vocab.Position) string {
	if !c.gtidMode {
		return ""
	}
	if pos.Compare(c.lastPos) == 0 {
		return c.gtids.String()
	}
	return c.gtidAt[pos]
}

// rewind moves the cursor back to pos, where held-back DML is read again, and returns the resume
// point to read from. The GTID set goes back with the position: resume points computed from here
// pair them.
func (c *cursor) rewind(pos vocab.Position) (resumePoint, error) {
	from := resumePoint{pos: pos, gtid: c.gtidFor(pos)}
	if c.gtidMode {
		c.gtidAt[pos] = from.gtid
		gtids, err := newGTIDSet(c.flavor, from.gtid)
		if err != nil {
			return from, err
		}
		c.gtids, c.curGTID = gtids, ""
	}
	c.lastPos = pos
	return from, nil
}

// cursor is where the reader stage is in the binlog: the file, the event group and event being read,
// the last complete group, its GTID set and those recorded at DDLs, and the reconnects.
type cursor struct {
	gtidMode   bool   // cfg.EnableGTID: resume points carry GTID sets
	flavor     string // the source's: its GTID sets' form
	file       string
	groupStart vocab.Position            // start of the current event group (GTID event)
	evStart    vocab.Position            // start of the event being handled
	lastPos    vocab.Position            // end of the last complete event group handled
	gtids      gtidSet                   // GTID set after the last complete event group (GTID mode)
	curGTID    string                    // GTID of the event group being read
	gtidAt     map[vocab.Position]string // GTID sets at DDL starts and ends, for resume points there
	retry      readRetry                 // the reader's reconnects (readerr.go)
	version    eventclass.Version        // the source server's, from the binlog's format description
	// hold: the rows of the transaction being read are held, not written (an XA transaction's first
	// half, or a transaction after a savepoint; events.go). sameEnd: the events being handled share one
	// end position (a compressed transaction, a held transaction's commit): no flush between them.
	hold    *heldTxn
	sameEnd bool
	txn     bool // inside BEGIN ... COMMIT: a statement there does not end the group
}

func (c *cursor) inTxn() bool { return c.txn || c.hold != nil }
