package starttime

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/vocab"
)

// Source is how Find reads a source's binlog.
type Source struct {
	Host     string
	Port     uint16
	User     string
	Password string
	TLS      *tls.Config
	Flavor   string // mysql.MariaDBFlavor or mysql.MySQLFlavor
	// ServerID is the replica ID the search connects with: one no replica of the source uses.
	ServerID uint32
	// GTID (the source's enable-gtid): the point carries the MariaDB GTID set executed before it.
	GTID bool
}

// Point is where a source starts for a time.
type Point struct {
	Pos  vocab.Position
	GTID string // MariaDB with GTID: the GTID set executed before Pos (gtid_binlog_pos there); else ""
	// Event is the timestamp of the group that begins at Pos (at or after the time); 0 when AtEnd.
	Event uint32
	// AtEnd: no event group of the source begins at or after the time (it is later than the last one,
	// or in the future). Pos is then the source's position at the search (SHOW MASTER STATUS).
	AtEnd bool
}

// TooEarlyError says that the time lies before the oldest binlog still on the source.
type TooEarlyError struct {
	Oldest string // the oldest binlog file
	First  uint32 // the timestamp of its first event
	Zone   string // First in the source's time zone, "YYYY-MM-DD HH:MM:SS"
}

func (e *TooEarlyError) Error() string {
	at := time.Unix(int64(e.First), 0).UTC().Format(time.RFC3339)
	if e.Zone != "" {
		at = e.Zone + " in the source's time zone (" + at + ")"
	}
	return fmt.Sprintf("the time lies before the oldest binlog still on the source: %s begins at %s; "+
		"the events before it are gone (purged, or never logged)", e.Oldest, at)
}

// idleTimeout bounds the wait for the next event of a file the search knows to hold more.
const idleTimeout = 30 * time.Second

// Find returns the position of the first event group of the source that begins at or after ts (Unix
// seconds). db is a connection to the source (SHOW MASTER STATUS, SHOW BINARY LOGS); the events are
// read over a replication connection as src says. A ts before the oldest binlog's first event is a
// *TooEarlyError; a ts after the last event group is a Point with AtEnd.
func Find(ctx context.Context, db *sql.DB, src Source, ts int64, log *zap.Logger) (Point, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if ts <= 0 || ts > int64(^uint32(0)) {
		return Point{}, fmt.Errorf("time %d is outside the binlog's timestamps", ts)
	}
	target := uint32(ts)
	// The end first: every file listed before it is complete, and the search never waits past it.
	end, endGTID, err := dbutil.SourcePosition(ctx, db)
	if err != nil {
		return Point{}, fmt.Errorf("read binlog position (SHOW MASTER STATUS): %w", err)
	}
	all, err := dbutil.BinaryLogs(ctx, db)
	if err != nil {
		return Point{}, fmt.Errorf("list binlogs (SHOW BINARY LOGS): %w", err)
	}
	var files []dbutil.BinaryLog
	for _, f := range all {
		files = append(files, f)
		if f.Name == end.File {
			break
		}
	}
	if len(files) == 0 || files[len(files)-1].Name != end.File {
		return Point{}, fmt.Errorf("the current binlog %s is not among SHOW BINARY LOGS", end.File)
	}
	r := &binlogReader{src: src}
	firsts := map[int]uint32{}
	first := func(i int) (uint32, error) {
		if t, ok := firsts[i]; ok {
			return t, nil
		}
		t, err := r.firstTimestamp(ctx, files[i].Name)
		if err != nil {
			return 0, err
		}
		log.Debug("binlog file first event", zap.String("file", files[i].Name), zap.Uint32("timestamp", t))
		firsts[i] = t
		return t, nil
	}
	idx, before, err := searchFiles(len(files), first, target)
	if err != nil {
		return Point{}, err
	}
	if before {
		e := &TooEarlyError{Oldest: files[0].Name, First: firsts[0]}
		var zone sql.NullString
		if db.QueryRowContext(ctx, "SELECT DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%d %H:%i:%s')", e.First).Scan(&zone) == nil {
			e.Zone = zone.String
		}
		return Point{}, e
	}
	sc := newScanner(target)
	for i := idx; i < len(files); i++ {
		limit := uint32(files[i].Size)
		if i == len(files)-1 {
			limit = end.Pos
		}
		pos, found, err := r.scan(ctx, files[i].Name, limit, sc)
		if err != nil {
			return Point{}, err
		}
		if found {
			p := Point{Pos: vocab.Position{File: files[i].Name, Pos: pos.Start}, Event: pos.Time}
			if src.GTID {
				p.GTID = sc.gtids.String()
			}
			log.Info("binlog position found for a time", zap.Int64("time", ts), zap.Stringer("position", p.Pos),
				zap.String("gtid", p.GTID), zap.Uint32("event_time", p.Event), zap.Int("files_scanned", i-idx+1))
			return p, nil
		}
	}
	p := Point{Pos: end, AtEnd: true}
	if src.GTID {
		p.GTID = sc.gtids.String()
		if p.GTID == "" {
			p.GTID = endGTID
		}
	}
	log.Info("no binlog event at or after the time: the current position", zap.Int64("time", ts), zap.Stringer("position", p.Pos), zap.String("gtid", p.GTID))
	return p, nil
}

// binlogReader opens a replication stream per file it reads.
type binlogReader struct{ src Source }

func (r *binlogReader) open(file string, pos uint32) (*replication.BinlogSyncer, *replication.BinlogStreamer, error) {
	bs := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: r.src.ServerID, Flavor: r.src.Flavor,
		Host: r.src.Host, Port: r.src.Port, User: r.src.User, Password: r.src.Password, TLSConfig: r.src.TLS,
		RawModeEnabled: true, MaxReconnectAttempts: 1, ReadTimeout: idleTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	st, err := bs.StartSync(mysql.Position{Name: file, Pos: pos})
	if err != nil {
		bs.Close()
		return nil, nil, fmt.Errorf("read binlog %s: %w", file, err)
	}
	return bs, st, nil
}

// next returns the next event that is not one the server makes up for the stream (a rotate or GTID
// list of position 0, a heartbeat).
func next(ctx context.Context, st *replication.BinlogStreamer, file string) (*replication.BinlogEvent, error) {
	for {
		ictx, cancel := context.WithTimeout(ctx, idleTimeout)
		ev, err := st.GetEvent(ictx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = fmt.Errorf("no event for %s", idleTimeout)
			}
			return nil, fmt.Errorf("read binlog %s: %w", file, err)
		}
		if ev.Header.LogPos == 0 || ev.Header.EventType == replication.HEARTBEAT_EVENT || ev.Header.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
			continue
		}
		return ev, nil
	}
}

// firstTimestamp is the timestamp of a file's first event (its format description: when the server
// opened the file).
func (r *binlogReader) firstTimestamp(ctx context.Context, file string) (uint32, error) {
	bs, st, err := r.open(file, 4)
	if err != nil {
		return 0, err
	}
	defer bs.Close()
	ev, err := next(ctx, st, file)
	if err != nil {
		return 0, err
	}
	return ev.Header.Timestamp, nil
}

// scan feeds a file's events to sc up to limit (the file's size, or the current position in the
// current file), and returns the event that begins the group searched for, if the file has it.
func (r *binlogReader) scan(ctx context.Context, file string, limit uint32, sc *scanner) (event, bool, error) {
	bs, st, err := r.open(file, 4)
	if err != nil {
		return event{}, false, err
	}
	defer bs.Close()
	parser := replication.NewBinlogParser()
	parser.SetFlavor(r.src.Flavor)
	parser.SetVerifyChecksum(false)
	parser.SetRawMode(false)
	for {
		ev, err := next(ctx, st, file)
		if err != nil {
			return event{}, false, err
		}
		h := ev.Header
		e := event{Type: h.EventType, Time: h.Timestamp, Start: h.LogPos - h.EventSize}
		switch h.EventType {
		case replication.FORMAT_DESCRIPTION_EVENT, replication.QUERY_EVENT, replication.MARIADB_GTID_EVENT, replication.MARIADB_GTID_LIST_EVENT:
			parsed, err := parser.Parse(ev.RawData)
			if err != nil {
				return event{}, false, fmt.Errorf("binlog %s at %d: %w", file, e.Start, err)
			}
			switch pe := parsed.Event.(type) {
			case *replication.QueryEvent:
				e.Query = string(pe.Query)
			case *replication.MariadbGTIDEvent:
				g := pe.GTID
				e.GTID = &g
			case *replication.MariadbGTIDListEvent:
				e.GTIDList = pe.GTIDs
			}
		}
		if sc.step(e) {
			return e, true, nil
		}
		if h.LogPos >= limit || h.EventType == replication.ROTATE_EVENT || h.EventType == replication.STOP_EVENT {
			return event{}, false, nil
		}
	}
}
