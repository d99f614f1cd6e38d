package worker

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/shardgroup"
)

// Position is a binlog position.
type Position = shardgroup.Position

// SyncerConfig configures the sync unit of one source of one task.
type SyncerConfig struct {
	Task, Source string
	Flavor       string // "mariadb" or "mysql"
	Host         string
	Port         uint16
	User         string
	Password     string      // in plain text (config.Database.PlainPassword)
	TLS          *tls.Config // the source's from.security; nil: no TLS
	ServerID     uint32      // replication server ID, unique per syncer
	Start        Position    // where to start without a checkpoint (zero: the source's current position)
	// EnableGTID (source enable-gtid) resumes by GTID set; StartGTID (task meta binlog-gtid) is where
	// to start without a checkpoint. MariaDB flavor only for now.
	EnableGTID bool
	StartGTID  string
	Router     *Router
	Filter     *router.Filter // binlog event filters (task filters); nil: none
	// Online recognises the ghost and trash tables of online schema change tools (task online-ddl;
	// nil: off). The Router must skip them too (Router.SkipToolTables).
	Online     *onlineddl.Rules
	Downstream *sql.DB
	// DDLDownstream, when set, is a pool to the same downstream opened with dbutil.MultiStatements: a
	// lock's DDL goes with its "started" marker in one round trip (NewDDLExecutor).
	DDLDownstream *sql.DB
	// GroupStatements says Downstream was opened with dbutil.MultiStatements too: a flush then sends its
	// multi-row INSERTs several to a query (Sink.SetGroupStatements), one round trip where each
	// statement cost one.
	GroupStatements bool
	MetaSchema      string
	Agent           *pessimist.Agent
	// BatchRows is syncers.batch: rows per multi-row statement downstream (at least 256). TxnRows is how many rows
	// (over all connections) one flush commits at most; 0 derives it: 1024 rows per connection, or
	// BatchRows when that is larger. DM's batch counts statements per transaction; giving it rows per
	// statement and grouping statements in larger transactions keeps a DM task file's batch: 100 from
	// costing one commit and one checkpoint write per 100 rows.
	BatchRows int
	TxnRows   int
	// WorkerCount is the number of downstream connections (syncers.worker-count). Each upstream table's
	// changes go through one of them; with SpreadHotTables (syncers.spread-hot-tables), a hot table's
	// are spread over all of them by the target's primary key, changes of one key (any unique key) in
	// binlog order (lanes.go).
	WorkerCount     int
	SpreadHotTables bool
	// laneChunk replaces laneChunk for a spread table's integer key (tests; -1: every key by its hash).
	laneChunk int
	// Epoch is the binding's epoch: the checkpoint is claimed for it at start, and every downstream
	// transaction fails with ErrFenced once a newer binding has claimed it (0: no fencing).
	Epoch int64
	Log   *zap.Logger
	// Operators are the user's binlog skip and replace decisions (nil: none).
	Operators *Operators
	// SafeMode (syncers safe-mode) writes inserts as REPLACE and updates as a delete and a REPLACE;
	// SafeModeDuration (safe-mode-duration) turns it on for that long after each start.
	SafeMode         bool
	SafeModeDuration time.Duration
}

// Syncer reads one source's binlog and writes the routed changes downstream, coordinating sharding
// DDL through the pessimist agent. DML of a table that passed its group's pending DDL is not buffered:
// it is skipped and read again from the binlog once the DDL is resolved (re-sync), so memory does not
// grow while a lock waits.
type Syncer struct {
	cfg      SyncerConfig
	log      *zap.Logger
	sink     *Sink        // partition 0's, for checkpoint-only writes
	ddl      *DDLExecutor // DDL downstream, exactly once (over partition 0's sink)
	upstream *sql.DB
	ckpt     Checkpoint
	groups   map[TableName]*shardgroup.ShardingGroup // by target
	ddlStart map[TableName]map[Position]ddlEvent     // per target: DDL item (end) position -> its event
	retry    readRetry                               // the reader's reconnects (readerr.go)
	infoAt   map[TableName]Position                  // per target: an info deferred until the re-read passes this (postDeferred)
	sessions eventSessions                           // the session settings of DDL events (eventsession.go)
	pending  map[TableName]bool                      // targets whose info is posted and operation awaited
	opCh     chan opResult

	file          string
	groupStart    Position  // start of the current event group (GTID event)
	evStart       Position  // start of the event being handled
	flushing      *inflight // the flush committing while the next batch is built (flushAsync)
	safeUntil     time.Time // safe mode ends then (safe-mode-duration; zero: no end or off)
	lastPos       Position  // end of the last complete event group handled
	parts         []*partition
	rows          int // rows batched over all partitions
	batchBytes    int // their values' size, estimated (rowBytes)
	peakRows      atomic.Int64
	persisted     Position // the resume position last committed
	persistedGTID string
	committed     Position // the resume position of the last flush that committed (maybe not written)
	committedGTID string
	resync        *resumePoint
	// heldBack: targets whose group held back DML (skipped it, to be re-read) since its active step
	// began. A step resolved with nothing held back needs no re-read.
	heldBack   map[TableName]bool
	resyncLock string                    // the lock whose resolution asked for the re-sync (for the trace)
	ddlReadAt  time.Time                 // when the DDL event being handled was read (for the trace)
	fresh      bool                      // no checkpoint yet: the task's first start on this source
	gtids      mariadbGTIDs              // GTID set after the last complete event group (GTID mode)
	curGTID    *mysql.MariadbGTID        // GTID of the event group being read
	gtidAt     map[Position]string       // GTID sets at DDL starts and ends, for resume points there
	schemas    *schemaTracker            // column lists by position, for binlogs without column names
	shapes     map[TableName]cachedShape // per table, the row shape of its last table map
	// loadKeys: tables a full load copied from more than one snapshot (it was resumed after a crash):
	// which snapshot holds which key, for the events between the snapshots.
	loadKeys map[TableName]*loader.KeyRanges
	// runs are the online schema change tools' runs by real table (cfg.Online), persisted with the
	// checkpoint; onlineDirty those changed since the last flush.
	runs        onlineddl.Runs
	onlineDirty map[TableName]bool
	// Key lanes (lanes.go): the generation of the targets' unique keys (row shapes keep their key plan
	// for one), the keys, which connection each key of the batch is on, and the tables whose last
	// committed flush wrote lanes (their table position follows in the next transaction).
	keyGen      int // moves when the targets' keys are forgotten (after a DDL)
	targetKeys  map[TableName]*targetKeys
	keyConn     map[uint64]int
	consolidate map[TableName]Position
	// tableRows counts the batch's rows per table; hot are the tables spread by key, chosen from the
	// last full batch: those with more than twice a connection's share of it. Others keep their own
	// connection (many tables already use every connection, and spread each would write a lane
	// position per table and connection).
	tableRows map[TableName]int
	hot       map[TableName]bool
	spreadLog map[TableName]bool // tables whose first spread batch was logged
	keyBuf    []byte
	evKeys    []uint64
	evLanes   []int
	evLocal   map[uint64]int
	// evChanges is the changes of the rows event being handled (reused from event to event).
	evChanges []Change
	renames   shardRenames // shard renames followed within their groups (rename.go)

	events   atomic.Int64
	rates    rateWindow // samples of rows and events, for the rates of Status
	started  chan struct{}
	statusMu sync.Mutex
	status   Status
}

// Status is a snapshot of a syncer for query-status, refreshed every flush interval.
type Status struct {
	SyncerBinlog Position // committed resume position
	SyncerGTID   string
	TotalEvents  int64
	BlockingDDLs []string // DDLs of the locks this source has put its info for and waits on
	LockIDs      []string
	Unresolved   []shardgroup.Unresolved

	// TotalRows are the rows committed downstream since the syncer started; the rates are per second
	// since then (Total) and over the last 30 seconds (Recent), of rows and of binlog events (Tps, DM's
	// name).
	TotalRows                                int64
	TotalRps, RecentRps, TotalTps, RecentTps int64

	// ReadErr is the binlog read failure being retried (nil: none), ReadAttempt the attempts since
	// the binlog last moved, ReadErrAt when it failed last.
	ReadErr     error
	ReadAttempt int
	ReadErrAt   time.Time
}

// Started is closed once the syncer has saved where it starts (a first start's position is fixed from
// then on) and begins to read the binlog.
func (s *Syncer) Started() <-chan struct{} { return s.started }

// Status returns the last snapshot.
func (s *Syncer) Status() Status {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	st := s.status
	st.TotalEvents = s.events.Load()
	st.TotalRows, st.TotalRps, st.RecentRps, st.TotalTps, st.RecentTps = s.rates.rates(time.Now(), appliedRows(s.cfg.Task, s.cfg.Source), st.TotalEvents)
	if attempt, err, at, ok := s.retry.failing(); ok {
		st.ReadErr, st.ReadAttempt, st.ReadErrAt = err, attempt, at
	}
	return st
}

// rateWindow turns cumulative counts of rows and events into rates: since the first sample and over
// the last 30 seconds. It keeps a sample a second at most.
type rateWindow struct {
	mu      sync.Mutex
	samples []rateSample // oldest first; the first is the start
}

type rateSample struct {
	at           time.Time
	rows, events int64
}

const recentRateWindow = 30 * time.Second

// note records the counts at now.
func (w *rateWindow) note(now time.Time, rows, events int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.samples); n > 0 && now.Sub(w.samples[n-1].at) < time.Second {
		return
	}
	w.samples = append(w.samples, rateSample{now, rows, events})
	// Keep the start, and from the rest the samples of the window plus the one just before it.
	for len(w.samples) > 3 && now.Sub(w.samples[2].at) > recentRateWindow {
		w.samples = append(w.samples[:1], w.samples[2:]...)
	}
}

// rates are the rows since the start, and the rows and events per second since the start and over
// the last 30 seconds (rows and events are the cumulative counts now).
func (w *rateWindow) rates(now time.Time, rows, events int64) (totalRows, totalRps, recentRps, totalTps, recentTps int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) == 0 {
		return 0, 0, 0, 0, 0
	}
	per := func(d int64, since time.Time) int64 {
		if secs := now.Sub(since).Seconds(); secs >= 1 {
			return int64(float64(d) / secs)
		}
		return 0
	}
	start := w.samples[0]
	recent := start
	for _, s := range w.samples {
		if now.Sub(s.at) <= recentRateWindow {
			break
		}
		recent = s
	}
	totalRows = rows - start.rows
	return totalRows, per(totalRows, start.at), per(rows-recent.rows, recent.at), per(events-start.events, start.at), per(events-recent.events, recent.at)
}

func (s *Syncer) publishStatus() {
	st := Status{SyncerBinlog: s.persisted, SyncerGTID: s.persistedGTID}
	targets := make([]TableName, 0, len(s.groups))
	for t := range s.groups {
		targets = append(targets, t)
	}
	slices.SortFunc(targets, func(a, b TableName) int { return strings.Compare(a.String(), b.String()) })
	for _, t := range targets {
		u, ok := s.groups[t].Unresolved()
		if !ok {
			continue
		}
		st.Unresolved = append(st.Unresolved, u)
		if s.pending[t] {
			st.BlockingDDLs = append(st.BlockingDDLs, u.DDLs...)
			st.LockIDs = append(st.LockIDs, pessimist.LockID(s.cfg.Task, t.String()))
		}
	}
	s.statusMu.Lock()
	s.status = st
	s.statusMu.Unlock()
	s.rates.note(time.Now(), appliedRows(s.cfg.Task, s.cfg.Source), s.events.Load())
}

// partition is one downstream connection's share of the batch. pos holds, per upstream table, the
// position its transaction may write as the table's (every row of the table up to there is in it or
// committed before); lanes, the position of the table's rows on this connection when they are spread
// by key (lanes.go).
type partition struct {
	idx   int
	sink  *Sink
	batch []Change
	// spare is the batch slice of the partition's last committed flush, emptied, for its next batch
	// (a flush in flight holds the other one).
	spare []Change
	pos   map[TableName]Position
	lanes map[TableName]laneClaim
}

type laneClaim struct {
	pos   Position
	cols  []string
	chunk int
}

// partitionOf is the connection of a table's changes that are not spread by key.
func (s *Syncer) partitionOf(t TableName) *partition {
	h := fnv.New32a()
	h.Write([]byte(t.Schema))
	h.Write([]byte{0})
	h.Write([]byte(t.Name))
	return s.parts[h.Sum32()%uint32(len(s.parts))]
}

// resumePoint is where a reader starts: a position, and in GTID mode the GTID set there.
type resumePoint struct {
	pos  Position
	gtid string
}

type opResult struct {
	target TableName
	info   pessimist.Info
	op     pessimist.Operation
	err    error
	at     time.Time // when the operation arrived (for the trace)
}

// NewSyncer returns a syncer; Run starts it.
func NewSyncer(cfg SyncerConfig) *Syncer {
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 1024
	}
	if cfg.TxnRows <= 0 {
		cfg.TxnRows = max(cfg.BatchRows, 1024) * max(cfg.WorkerCount, 4)
	}
	if cfg.WorkerCount <= 0 {
		cfg.WorkerCount = 4
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Flavor == "" {
		cfg.Flavor = mysql.MariaDBFlavor
	}
	if cfg.Downstream != nil {
		// Every connection of a flush goes back to the pool idle; database/sql keeps 2 by default, so
		// the others were closed and opened again at each flush.
		cfg.Downstream.SetMaxIdleConns(cfg.WorkerCount + 2)
	}
	s := &Syncer{cfg: cfg, log: cfg.Log.With(zap.String("task", cfg.Task), zap.String("source", cfg.Source)), started: make(chan struct{})}
	for i := 0; i < cfg.WorkerCount; i++ {
		sink := NewSink(cfg.Downstream, cfg.MetaSchema, cfg.Task, cfg.Source)
		sink.maxRows = max(cfg.BatchRows, 256) // at least the 256-row statements of the INSERT limit we measure against
		sink.SetEpoch(cfg.Epoch)
		sink.SetGroupStatements(cfg.GroupStatements)
		s.parts = append(s.parts, &partition{idx: i, sink: sink})
	}
	s.sink = s.parts[0].sink
	s.ddl = NewDDLExecutor(s.sink, cfg.DDLDownstream, s.log)
	return s
}

// Run replicates until ctx ends or an error stops it (the caller pauses the subtask with it).
func (s *Syncer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the goroutines waiting for operations
	if err := s.init(ctx); err != nil {
		return err
	}
	defer s.upstream.Close()
	if s.cfg.SafeMode || s.cfg.SafeModeDuration > 0 {
		s.setSafeMode(true)
		if !s.cfg.SafeMode {
			s.safeUntil = time.Now().Add(s.cfg.SafeModeDuration)
		}
	}
	s.publishStatus()
	close(s.started)
	r, err := s.connect(ctx, resumePoint{s.ckpt.Global, s.ckpt.GlobalGTID}, nil)
	if err != nil {
		return err
	}
	defer func() {
		if r != nil {
			r.stop()
		}
	}()
	flush := time.NewTicker(50 * time.Millisecond)
	defer flush.Stop()
	defer func() {
		if f := s.flushing; f != nil {
			<-f.done // no transaction of this syncer outlives Run
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-r.errc:
			// go-mysql has already retried the connection; back off and start a new reader from the
			// last complete event group, until the source is back or ctx ends (connect).
			if err := s.flush(ctx); err != nil {
				return err
			}
			r.stop()
			if r, err = s.connect(ctx, resumePoint{s.lastPos, s.gtidFor(s.lastPos)}, err); err != nil {
				return err
			}
		case ev := <-r.events:
			s.retry.read(ev.BinlogEvent)
			if err := s.handle(ctx, ev.BinlogEvent, ev.gtid); err != nil {
				return err
			}
			if len(s.infoAt) > 0 {
				if err := s.postDeferred(ctx); err != nil {
					return err
				}
			}
		case res := <-s.opCh:
			if err := s.applyOperation(ctx, res); err != nil {
				return err
			}
		case <-flush.C:
			if err := s.flushAsync(ctx); err != nil {
				return err
			}
			s.publishStatus()
		}
		if s.resync != nil {
			from := *s.resync
			s.resync = nil
			r.stop()
			s.log.Info("re-sync held-back DML", zap.Stringer("from", from.pos), zap.String("gtid", from.gtid))
			if r, err = s.connect(ctx, from, nil); err != nil {
				return err
			}
			s.trace(s.resyncLock, "re-sync started", time.Now())
		}
	}
}

func (s *Syncer) init(ctx context.Context) error {
	var err error
	// In UTC, as the downstream session: SHOW CREATE TABLE writes TIMESTAMP defaults in the session's zone.
	s.upstream, err = openUpstream(s.cfg.Host, s.cfg.Port, s.cfg.User, s.cfg.Password, s.cfg.TLS)
	if err != nil {
		return err
	}
	s.sessions = eventSessions{flavor: s.cfg.Flavor, up: s.upstream, down: s.cfg.Downstream, log: s.log}
	if err := s.sink.Init(ctx); err != nil {
		return err
	}
	if s.ckpt, err = s.sink.Load(ctx); err != nil {
		return err
	}
	loadRows, err := s.sink.meta.LoadRows(ctx)
	if err != nil {
		return err
	}
	if s.loadKeys, _, err = loader.Segments(loadRows); err != nil {
		return err
	}
	if s.cfg.EnableGTID && s.cfg.Flavor != mysql.MariaDBFlavor {
		return fmt.Errorf("source %s: GTID mode with flavor %s is not supported yet; use binlog positions", s.cfg.Source, s.cfg.Flavor)
	}
	s.fresh = s.ckpt.Global.IsZero() && s.ckpt.GlobalGTID == ""
	if s.fresh && s.cfg.EnableGTID && s.cfg.StartGTID != "" {
		s.ckpt.GlobalGTID = s.cfg.StartGTID
	} else if s.fresh {
		s.ckpt.Global = s.cfg.Start
		if s.ckpt.Global.IsZero() {
			if s.ckpt.Global, err = s.masterPosition(ctx); err != nil {
				return err
			}
		}
	}
	s.lastPos = s.ckpt.Global
	s.runs, s.onlineDirty = onlineddl.Runs{}, map[TableName]bool{}
	for t, js := range s.ckpt.Online {
		run, err := onlineddl.Decode(js)
		if err != nil {
			return fmt.Errorf("checkpoint of source %s, table %s: %w", s.cfg.Source, t, err)
		}
		if run != nil {
			s.runs[t] = run
		}
	}
	s.schemas = newSchemaTracker()
	s.shapes = map[TableName]cachedShape{}
	s.targetKeys, s.consolidate, s.spreadLog = map[TableName]*targetKeys{}, map[TableName]Position{}, map[TableName]bool{}
	for t := range s.ckpt.Lanes {
		s.pruneLanes(t)
	}
	if err := s.schemas.load(s.ckpt.Schemas); err != nil {
		return err
	}
	s.groups = map[TableName]*shardgroup.ShardingGroup{}
	s.ddlStart = map[TableName]map[Position]ddlEvent{}
	s.infoAt = map[TableName]Position{}
	s.gtidAt = map[Position]string{}
	s.pending = map[TableName]bool{}
	s.heldBack = map[TableName]bool{}
	s.renames = shardRenames{} // renames after the resume position are read again
	s.opCh = make(chan opResult, 16)
	s.resetBatch()
	if err := s.discover(ctx); err != nil {
		return err
	}
	// Save the start at once: a restart must resume here, not at a newer current position.
	if err := s.sink.Flush(ctx, nil, CheckpointUpdate{Global: s.ckpt.Global, GlobalGTID: s.ckpt.GlobalGTID, Schemas: s.schemas.takeDirty()}); err != nil {
		return err
	}
	s.persisted, s.persistedGTID = s.ckpt.Global, s.ckpt.GlobalGTID
	return s.recoverOperations(ctx)
}

// listTables lists the upstream's base tables the task replicates. information_schema.TABLES is not
// read in one snapshot: a RENAME that swaps two tables while it is read can hide both names, so the
// list is read until two reads agree.
func (s *Syncer) listTables(ctx context.Context) ([]TableName, error) {
	var prev []TableName
	for attempt := 0; ; attempt++ {
		tables, err := s.listTablesOnce(ctx)
		if err != nil {
			return nil, err
		}
		if (attempt > 0 && slices.Equal(tables, prev)) || attempt == 9 {
			return tables, nil
		}
		prev = tables
	}
}

func (s *Syncer) listTablesOnce(ctx context.Context) ([]TableName, error) {
	rows, err := s.upstream.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
	if err != nil {
		return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
	}
	defer rows.Close()
	var tables []TableName
	for rows.Next() {
		var t TableName
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
		}
		if !s.cfg.Router.Skip(t) {
			tables = append(tables, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
	}
	return tables, nil
}

// tablesAtResume is the set of replicated tables that existed at the resume position, as the tracked
// schemas say. A tracked table that did not exist there is left out even if it exists now: its
// CREATE TABLE is ahead in the binlog.
func (s *Syncer) tablesAtResume() []TableName {
	var out []TableName
	for t := range s.schemas.tables {
		if s.schemas.existsAt(t, s.ckpt.Global) && !s.cfg.Router.Skip(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (s *Syncer) masterPosition(ctx context.Context) (Position, error) {
	pos, _, err := SourcePosition(ctx, s.upstream)
	if err != nil {
		return Position{}, fmt.Errorf("read binlog position of source %s (is log_bin on?): %w", s.cfg.Source, err)
	}
	return pos, nil
}

// discover adds every upstream shard table to its target's group and creates missing downstream
// tables from the upstream's definition. On a task's first start the tables are the upstream's
// current ones. On a restart they are the tables that existed at the resume position, as the tracked
// schemas say: the binlog read from there brings every later CREATE, DROP and RENAME, while the
// upstream's current tables may already be past them (a table an online schema change tool has just
// swapped, one dropped since) and a group built from those would miss a member or count one twice.
func (s *Syncer) discover(ctx context.Context) error {
	var tables []TableName
	if !s.fresh && len(s.schemas.tables) > 0 {
		tables = s.tablesAtResume()
	} else {
		// A first start, or a checkpoint written before tables were tracked: the upstream's tables.
		var err error
		if tables, err = s.listTables(ctx); err != nil {
			return err
		}
	}
	created := map[TableName]bool{}
	for _, t := range tables {
		if err := s.schemas.initFromUpstream(ctx, s.upstream, t); err != nil {
			return err
		}
		target := s.cfg.Router.Route(t)
		if s.cfg.Router.Sharded(t) {
			if err := s.group(target).AddTable(t, s.ckpt.Resolved[t]); err != nil {
				return err
			}
		}
		if created[target] {
			continue
		}
		created[target] = true
		if s.fresh {
			if err := s.checkExisting(ctx, t, target); err != nil {
				return err
			}
		}
		var name, create string
		if err := s.upstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.String()).Scan(&name, &create); err != nil {
			if !s.fresh && dbutil.IsNoSuchTable(err) {
				created[target] = false // gone upstream since the resume position: another member may say
				continue
			}
			return fmt.Errorf("read definition of %s on source %s: %w", t, s.cfg.Source, err)
		}
		stmt, err := shardgroup.TargetDefinition(create, t, target, s.cfg.Router.Route)
		if err != nil {
			return fmt.Errorf("definition of %s on source %s: %w", t, s.cfg.Source, err)
		}
		if err := s.ddl.ExecDDL(ctx, []string{"CREATE DATABASE IF NOT EXISTS " + TableName{Schema: target.Schema}.String(), stmt}, nil, CheckpointUpdate{}); err != nil {
			return err
		}
	}
	return nil
}

// checkExisting compares a downstream table that exists before the task's first start with the
// upstream shard routed to it. A different schema is reported with both definitions; the downstream
// table is never dropped or altered by the tool.
func (s *Syncer) checkExisting(ctx context.Context, up, target TableName) error {
	down, err := signature(ctx, s.cfg.Downstream, target)
	if err != nil || len(down) == 0 {
		return err // missing: it is created
	}
	upCols, err := signature(ctx, s.upstream, up)
	if err != nil {
		return err
	}
	if slices.Equal(down, upCols) {
		return nil
	}
	var name, upDef, downDef string
	_ = s.upstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+up.String()).Scan(&name, &upDef)
	_ = s.cfg.Downstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+target.String()).Scan(&name, &downDef)
	return fmt.Errorf("source %s: downstream table %s already exists with a schema that does not match upstream %s; it is left untouched.\ndownstream: %s\nupstream:   %s",
		s.cfg.Source, target, up, downDef, upDef)
}

// signature is a table's columns as "name type", lower case, for comparing definitions.
func signature(ctx context.Context, db *sql.DB, t TableName) ([]string, error) {
	defs, err := tableColumns(ctx, db, t)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = strings.ToLower(d.name) + " " + strings.ToLower(d.typ)
	}
	return out, nil
}

func (s *Syncer) group(target TableName) *shardgroup.ShardingGroup {
	g, ok := s.groups[target]
	if !ok {
		g = shardgroup.NewShardingGroup(target)
		s.groups[target] = g
		s.ddlStart[target] = map[Position]ddlEvent{}
	}
	return g
}

// recoverOperations finishes operations whose effect the downstream checkpoint already shows (the
// worker stopped between its checkpoint and its done).
func (s *Syncer) recoverOperations(ctx context.Context) error {
	ops, err := s.cfg.Agent.Operations(ctx)
	if err != nil {
		return fmt.Errorf("list operations of source %s: %w", s.cfg.Source, err)
	}
	for _, op := range ops {
		for target, ddls := range s.ckpt.ResolvedDDLs {
			if target.String() != op.Target || !slices.Equal(ddls, op.DDLs) {
				continue
			}
			if err := finishOperation(ctx, s.cfg.Agent, op); err != nil {
				return err
			}
			s.log.Info("finished an operation applied before a restart", zap.String("lock", op.LockID()))
		}
	}
	return nil
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
	gtid *mysql.MariadbGTID
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
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	if s.cfg.EnableGTID && from.gtid != "" {
		if s.gtids, err = parseMariadbGTIDs(from.gtid); err != nil {
			bs.Close()
			return nil, fmt.Errorf("source %s: %w", s.cfg.Source, err)
		}
		var set mysql.GTIDSet
		if set, err = mysql.ParseMariadbGTIDSet(from.gtid); err == nil {
			streamer, err = bs.StartSyncGTID(set)
		}
	} else {
		s.gtids = mariadbGTIDs{}
		streamer, err = bs.StartSync(mysql.Position{Name: from.pos.File, Pos: from.pos.Pos})
	}
	if err != nil {
		bs.Close()
		return nil, fmt.Errorf("start binlog of source %s at %s %s: %w", s.cfg.Source, from.pos, from.gtid, err)
	}
	s.log.Info("start reading binlog", zap.Stringer("from", from.pos), zap.String("gtid", from.gtid))
	s.file, s.lastPos, s.groupStart, s.curGTID = from.pos.File, from.pos, from.pos, nil
	s.committed, s.committedGTID = Position{}, "" // reading again from here: nothing past it is safe yet
	s.resetBatch()
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
			if g, ok := ev.Event.(*replication.MariadbGTIDEvent); ok {
				gtid := g.GTID
				re.gtid = &gtid
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
func (s *Syncer) endGroup(end Position) {
	if s.curGTID != nil {
		s.gtids.add(*s.curGTID)
		s.curGTID = nil
	}
	s.lastPos = end
}

// gtidFor is the GTID set at a resume position: the current one, or one recorded at a DDL.
func (s *Syncer) gtidFor(pos Position) string {
	if !s.cfg.EnableGTID {
		return ""
	}
	if pos.Compare(s.lastPos) == 0 {
		return s.gtids.String()
	}
	return s.gtidAt[pos]
}

func (s *Syncer) handle(ctx context.Context, ev *replication.BinlogEvent, gtid *mysql.MariadbGTID) error {
	h := ev.Header
	s.events.Add(1)
	noteEvent(s.cfg.Task, s.cfg.Source, h.Timestamp) // metrics.go: the replication lag
	if e, ok := ev.Event.(*replication.RotateEvent); ok {
		s.file = string(e.NextLogName)
		return nil
	}
	if h.LogPos == 0 { // artificial events
		return nil
	}
	end := Position{File: s.file, Pos: h.LogPos}
	start := Position{File: s.file, Pos: h.LogPos - h.EventSize}
	s.evStart = start
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent, *replication.GTIDEvent:
		s.groupStart = start
		s.curGTID = gtid
	case *replication.RowsEvent:
		return s.handleRows(ctx, ev.Header.EventType, e, start, end)
	case *replication.XIDEvent:
		s.endGroup(end)
		if s.batchFull() {
			return s.flushAsync(ctx)
		}
	case *replication.QueryEvent:
		q := string(e.Query)
		if q == "BEGIN" {
			return nil
		}
		s.ddlReadAt = time.Now()
		if err := s.flush(ctx); err != nil {
			return err
		}
		if s.cfg.EnableGTID {
			s.gtidAt[s.groupStart] = s.gtids.String()
		}
		skip := false
		if op, ok := s.cfg.Operators.find(false, start, s.groupStart); ok {
			// binlog skip: as if the statement were not there; binlog replace: the user's statements
			// take its place (and its part in a shard group, when they are sharding DDLs).
			s.log.Warn("DDL handled by an operator (binlog "+op.Op+")", zap.String("ddl", q), zap.Stringer("pos", start), zap.Strings("sqls", op.SQLs))
			skip = op.Op == "skip"
			q = strings.Join(op.SQLs, ";\n")
		}
		if !skip {
			in, err := s.sessions.of(ctx, e, start)
			if err != nil {
				return err
			}
			if err := s.handleDDL(ctx, q, string(e.Schema), s.groupStart, end, in); err != nil {
				if downstreamPermanent(err) && !IsPermanent(err) {
					table := TableName{Schema: string(e.Schema)}
					if ts, terr := shardgroup.TablesOf(q, string(e.Schema)); terr == nil && len(ts) > 0 {
						table = ts[0]
					}
					return &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: table, Stmt: q, Pos: start, Cause: err}
				}
				return err
			}
		}
		s.endGroup(end)
		if s.cfg.EnableGTID {
			s.gtidAt[end] = s.gtids.String()
		}
	}
	return nil
}

func (s *Syncer) handleRows(ctx context.Context, typ replication.EventType, e *replication.RowsEvent, start, end Position) error {
	src := TableName{Schema: string(e.Table.Schema), Name: string(e.Table.Table)}
	if s.cfg.Router.Skip(src) {
		return nil
	}
	if end.Compare(s.ckpt.Tables[src]) <= 0 {
		return nil // applied before (re-sync or restart)
	}
	target := s.cfg.Router.Route(src)
	if g, ok := s.groups[target]; ok && g.Blocked(src, end) {
		s.heldBack[target] = true
		return nil // past the group's pending DDL: read again after it is resolved
	}
	if op, ok := s.cfg.Operators.find(false, start); ok {
		// The user's statements may change any row: everything before them commits first, and
		// everything after them after.
		if err := s.barrier(ctx); err != nil {
			return err
		}
		part := s.partitionOf(src)
		s.log.Warn("binlog event handled by an operator (binlog "+op.Op+")", zap.Stringer("table", src), zap.Stringer("pos", start), zap.Strings("sqls", op.SQLs))
		for _, q := range op.SQLs {
			part.batch = append(part.batch, Change{Kind: Raw, ChangeOrigin: &ChangeOrigin{Source: src, Target: target, SQL: q, Pos: start}})
			s.rows++
		}
		part.pos[src] = end // handled: a re-read (re-sync) must not run the replacement again
		return s.barrier(ctx)
	}
	if !s.cfg.Filter.Empty() {
		event := "insert"
		switch typ {
		case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
			event = "update"
		case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
			event = "delete"
		}
		switch act, rule := s.cfg.Filter.Decide(src, []string{event}, ""); act {
		case router.IgnoreEvent:
			return nil
		case router.FailEvent:
			return s.filterStop(rule, end, fmt.Sprintf("event %q of %s", event, src))
		}
	}
	shape, err := s.shapeOf(src, e.Table, end)
	if err != nil {
		return err
	}
	cols := shape.cols
	var plan *keyPlan
	if s.cfg.SpreadHotTables {
		if plan, err = s.planFor(ctx, target, shape); err != nil {
			return err
		}
	}
	// A row of a lane whose position is at or past this event was applied before a restart.
	perRow := s.lanesAfter(src, end)
	changes := s.evChanges[:0]
	if n := len(e.Rows); cap(changes) < n {
		changes = make([]Change, 0, n)
	}
	defer func() {
		clear(changes) // the rows are in the batch now; the scratch slice keeps none alive
		s.evChanges = changes[:0]
	}()
	origin := &ChangeOrigin{Source: src, Target: target, Columns: cols, Pos: start}
	add := func(kind ChangeKind, row, old []any) {
		if row != nil {
			row = shape.apply(row)
		}
		if old != nil {
			old = shape.apply(old)
		}
		c := Change{Kind: kind, Row: row, Old: old, ChangeOrigin: origin}
		if perRow && s.laneApplied(src, cols, keyImage(&c), end) {
			return
		}
		changes = append(changes, c)
	}
	defer s.notePeak()
	// copied: the row with this image is in a load's copy taken after this event (only for a table
	// loaded from more than one snapshot, between them).
	copied := func([]any) bool { return false }
	if kr := s.loadKeys[src]; kr != nil && end.Compare(kr.Max) <= 0 {
		copied = func(row []any) bool { return kr.Copied(row, end) }
	}
	switch typ {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			if !copied(r) {
				add(Insert, r, nil)
			}
		}
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			oldIn, newIn := copied(e.Rows[i]), copied(e.Rows[i+1])
			switch {
			case oldIn && newIn:
			case oldIn: // the old row had left the copy; the new one was not in it yet
				add(Insert, e.Rows[i+1], nil)
			case newIn: // the old row is in the copy, the new one too
				add(Delete, nil, e.Rows[i])
			default:
				add(Update, e.Rows[i+1], e.Rows[i])
			}
		}
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			if !copied(r) {
				add(Delete, nil, r)
			}
		}
	default:
		return nil
	}
	if err := s.place(ctx, src, plan, changes, end); err != nil {
		return err
	}
	if s.batchFull() {
		// Also inside a large upstream transaction: the table checkpoints are per rows event and the
		// resume position stays at the transaction's start, so memory is bounded and nothing repeats.
		return s.flushAsync(ctx)
	}
	return nil
}

// place adds the changes of one rows event of src (ending at end) to the batch: by key lane with a
// plan, else on the table's own connection (lanes.go).
func (s *Syncer) place(ctx context.Context, src TableName, plan *keyPlan, changes []Change, end Position) error {
	home := s.partitionOf(src)
	lanes := s.evLanes[:0]
	keys := s.evKeys[:0]
	var offs []int // keys of change i: keys[offs[i]:offs[i+1]]
	// Only a hot table's changes are spread, and only theirs are tracked by key: a table on its own
	// connection keeps its binlog order there (as before key lanes, rows of two shard tables with the
	// same key are not ordered with each other).
	spread := plan != nil && s.hot[src]
	serial := !spread
	if spread && !s.spreadLog[src] {
		s.spreadLog[src] = true
		s.log.Info("hot table: its changes are spread over the connections by key", zap.Stringer("table", src),
			zap.String("target", plan.target), zap.Strings("key", plan.cols), zap.Int("connections", len(s.parts)))
	}
	if spread {
		offs = make([]int, 0, len(changes)+1)
		if s.evLocal == nil {
			s.evLocal = map[uint64]int{}
		}
		clear(s.evLocal)
		n := len(s.parts)
		for i := range changes {
			var l int
			l, s.keyBuf = laneOf(s.keyBuf, keyImage(&changes[i]), plan.laneIdx, n, plan.chunk)
			lanes = append(lanes, l)
			offs = append(offs, len(keys))
			keys, s.keyBuf = plan.appendKeys(keys, s.keyBuf, &changes[i])
			for _, k := range keys[offs[i]:] {
				if other, ok := s.evLocal[k]; ok && other != l {
					serial = true // rows of this event pass a key between lanes
				}
				s.evLocal[k] = l
			}
		}
		offs = append(offs, len(keys))
	}
	if serial {
		lanes = lanes[:0]
		for range changes {
			lanes = append(lanes, home.idx)
		}
	}
	// A barrier when a key of the event is on another connection in the batch, or (on the table's own
	// connection) when rows of the table are on another: they must commit first.
	conflict := false
	if spread {
		for i := range changes {
			for _, k := range keys[offs[i]:offs[i+1]] {
				if c, ok := s.keyConn[k]; ok && c != lanes[i] {
					conflict = true
				}
			}
		}
	}
	if serial && !conflict {
		for _, p := range s.parts {
			if _, ok := p.lanes[src]; ok && p != home {
				conflict = true
			}
			if _, ok := p.pos[src]; ok && p != home {
				conflict = true
			}
		}
	}
	if conflict {
		if err := s.barrier(ctx); err != nil {
			return err
		}
		// A new batch (which may spread other tables): decide again; nothing conflicts in it.
		return s.place(ctx, src, plan, changes, end)
	}
	s.tableRows[src] += len(changes)
	for i := range changes {
		p := s.parts[lanes[i]]
		if len(p.batch) == cap(p.batch) {
			// Doubled, rather than append's quarter for large slices: a batch of TxnRows changes is
			// megabytes, and each step copies it.
			p.batch = slices.Grow(p.batch, max(cap(p.batch), 64))
		}
		p.batch = append(p.batch, changes[i])
		s.rows++
		s.batchBytes += rowBytes(changes[i].Row) + rowBytes(changes[i].Old)
		if spread {
			for _, k := range keys[offs[i]:offs[i+1]] {
				s.keyConn[k] = lanes[i]
			}
			if !serial {
				p.lanes[src] = laneClaim{pos: end, cols: plan.cols, chunk: plan.chunk}
			}
		}
	}
	s.evLanes, s.evKeys = lanes, keys
	if serial {
		home.pos[src] = end
		if spread {
			// Rows of other lanes are on the table's connection: no lane position may be written for
			// them before they commit, so what follows goes in the next flush.
			return s.barrier(ctx)
		}
	}
	return nil
}

// barrier starts committing the batch (when there is one), so that whatever is added next commits
// after it.
func (s *Syncer) barrier(ctx context.Context) error {
	for _, p := range s.parts {
		if len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0 {
			return s.flushAsync(ctx)
		}
	}
	return nil
}

// shapeOf returns how the rows of table map tm of src, at end, are written downstream. The shape is
// kept per table while the table map and the tracked schema version stay the same: a transaction's rows
// events share one table map, so a large one computes it once.
func (s *Syncer) shapeOf(src TableName, tm *replication.TableMapEvent, end Position) (*rowShape, error) {
	tracked, known := s.schemas.at(src, end)
	if c, ok := s.shapes[src]; ok && c.tm == tm && sameVersion(c.tracked, tracked) {
		return c.shape, nil
	}
	names := tm.ColumnNameString()
	if len(names) == 0 {
		// binlog_row_metadata is not FULL: use the columns tracked from the table's DDL.
		if !known || uint64(len(tracked)) != tm.ColumnCount {
			return nil, fmt.Errorf("source %s: the binlog has no column names for %s and the tracked schema (%d columns) does not fit the event (%d columns): set binlog_row_metadata=FULL",
				s.cfg.Source, src, len(tracked), tm.ColumnCount)
		}
		names = shardgroup.ColumnNames(tracked)
	}
	shape := newRowShape(tm, names, tracked, s.cfg.Flavor == mysql.MariaDBFlavor)
	s.shapes[src] = cachedShape{tm: tm, tracked: tracked, shape: shape}
	return shape, nil
}

type cachedShape struct {
	tm      *replication.TableMapEvent
	tracked []shardgroup.Column
	shape   *rowShape
}

// sameVersion reports whether two tracked column lists are the same version (the tracker never
// changes a version's list in place).
func sameVersion(a, b []shardgroup.Column) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// filterStop is the error of a binlog event filter rule with action Error.
func (s *Syncer) filterStop(rule string, end Position, what string) error {
	return &filterError{s.evStart, fmt.Errorf("source %s at %s: binlog event filter %s (action Error) stops at %s; to go on past it: binlog skip %s -b %s -s %s",
		s.cfg.Source, end, rule, what, s.cfg.Task, s.evStart.BinlogPos(), s.cfg.Source)}
}

// safeGlobal is the position a restart may resume from: the last complete event group, but not past
// the start of any pending sharding DDL (the rebuilt group must read it again).
func (s *Syncer) safeGlobal() Position {
	g := s.lastPos
	for target, grp := range s.groups {
		if u, ok := grp.Unresolved(); ok {
			p := u.FirstPosition
			if st, ok := s.ddlStart[target][p]; ok {
				p = st.start
			}
			if p.Compare(g) < 0 {
				g = p
			}
		}
	}
	return g
}

func (s *Syncer) notePeak() {
	if n := int64(s.rows); n > s.peakRows.Load() {
		s.peakRows.Store(n)
	}
}

// PeakBatchedRows is the largest number of row changes the syncer has held in memory at once: held-back
// DML is re-read rather than buffered, so it stays within the batch size (plus one rows event) however
// long a lock waits.
func (s *Syncer) PeakBatchedRows() int64 { return s.peakRows.Load() }

func (s *Syncer) resetBatch() {
	for _, p := range s.parts {
		p.batch, p.pos, p.lanes = p.batch[:0], map[TableName]Position{}, map[TableName]laneClaim{}
	}
	s.rows, s.batchBytes = 0, 0
	s.keyConn = map[uint64]int{}
	s.tableRows = map[TableName]int{}
}

// chooseHot picks the tables the next batch spreads by key, from a batch of total rows just flushed.
func (s *Syncer) chooseHot(total int) {
	if total >= s.cfg.TxnRows/2 { // a barrier's or a tick's small batch says little
		s.hot = map[TableName]bool{}
		for t, n := range s.tableRows {
			if n*len(s.parts) > 2*total {
				s.hot[t] = true
			}
		}
	}
	clear(s.tableRows)
}

// takeOnlineDirty returns the online DDL runs changed since the last call, encoded ("" for a run that
// is over), or nil.
func (s *Syncer) takeOnlineDirty() map[TableName]string {
	if len(s.onlineDirty) == 0 {
		return nil
	}
	out := make(map[TableName]string, len(s.onlineDirty))
	for t := range s.onlineDirty {
		out[t] = onlineddl.Encode(s.runs[t])
	}
	s.onlineDirty = map[TableName]bool{}
	return out
}

// flush commits the batched changes with their checkpoints, one transaction per partition in
// parallel. It may run between any two events: the per-table positions skip what is applied when it
// is read again. The resume position written is never past data that is not committed: with one
// partition involved it goes in the same transaction; with several, each writes the previous safe
// position and the new one follows in a later flush, once all have committed.
func (s *Syncer) setSafeMode(on bool) {
	for _, p := range s.parts {
		p.sink.SetSafeMode(on)
	}
	s.log.Info("safe mode", zap.Bool("on", on), zap.Bool("safe-mode", s.cfg.SafeMode), zap.Duration("safe-mode-duration", s.cfg.SafeModeDuration))
}

// maxBatchBytes bounds the memory of a batch of wide rows: a flush starts at TxnRows rows or this many
// bytes of values, whichever comes first.
const maxBatchBytes = 32 << 20

func (s *Syncer) batchFull() bool { return s.rows >= s.cfg.TxnRows || s.batchBytes >= maxBatchBytes }

// flush commits every batched change with the checkpoint and returns once it is committed, with the
// positions of tables whose rows it spread over lanes (a DDL follows it, which may change the keys).
// flushRows flushes when DML is batched (or lanes' table positions wait to be merged), and reports
// whether it did; a checkpoint with nothing else is left for the next flush.
func (s *Syncer) flushRows(ctx context.Context) (bool, error) {
	if err := s.waitFlush(ctx); err != nil {
		return false, err
	}
	busy := len(s.consolidate) > 0
	for _, p := range s.parts {
		busy = busy || len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0
	}
	if !busy {
		return false, nil
	}
	return true, s.flush(ctx)
}

func (s *Syncer) flush(ctx context.Context) error {
	if err := s.flushWith(ctx, false); err != nil {
		return err
	}
	if len(s.consolidate) > 0 {
		return s.flushWith(ctx, false)
	}
	return nil
}

// flushAsync starts committing the batch and returns at once: the next batch is read and built
// while it commits. The next flush of either kind first waits for it, so at most one flush is in
// flight and every state change of a commit (table checkpoints, the resume position) is made in
// commit order, in the event loop.
func (s *Syncer) flushAsync(ctx context.Context) error { return s.flushWith(ctx, true) }

// inflight is a flush whose transactions are running.
type inflight struct {
	done       chan struct{}
	busy       []*partition // the batches being committed (the partitions have new ones)
	ups        []CheckpointUpdate
	spread     map[TableName]Position // tables it writes lanes of, with their last position
	merged     []TableName            // tables whose lanes of earlier flushes it moves the table position past
	errs       []error
	global     Position
	globalGTID string
	persist    bool // the transactions move the resume position to global
	// prev is the resume position the first transaction writes when several commit: the previous
	// flush's, which committed whole (zero: none to write).
	prev     Position
	prevGTID string
}

func (s *Syncer) flushWith(ctx context.Context, async bool) error {
	if err := s.waitFlush(ctx); err != nil {
		return err
	}
	if !s.safeUntil.IsZero() && time.Now().After(s.safeUntil) {
		s.safeUntil = time.Time{}
		s.setSafeMode(false)
	}
	global := s.safeGlobal()
	var busy []*partition
	for _, p := range s.parts {
		if len(p.batch) > 0 || len(p.pos) > 0 || len(p.lanes) > 0 {
			busy = append(busy, p)
		}
	}
	s.schemas.prune(s.persisted)
	schemas := s.schemas.takeDirty()
	online := s.takeOnlineDirty()
	tables, lanes, spread := s.claims(busy)
	// The tables whose lanes the last flush committed: their table position moves past them now, in
	// the transaction that writes it anyway, else in the first.
	var merged []TableName
	merge := map[TableName]Position{}
	for t, pos := range s.consolidate {
		merged = append(merged, t)
		written := false
		for i := range busy {
			if _, ok := tables[i][t]; ok {
				written = true
			}
		}
		if !written {
			merge[t] = pos
		}
	}
	if len(busy) == 0 {
		if global.Compare(s.persisted) == 0 && schemas == nil && online == nil && len(merged) == 0 {
			return nil
		}
		if err := s.sink.Flush(ctx, nil, CheckpointUpdate{Global: global, GlobalGTID: s.gtidFor(global), Tables: merge, Schemas: schemas, Online: online}); err != nil {
			return err
		}
		s.persisted = global
		s.persistedGTID = s.gtidFor(global)
		s.ckpt.Global = global
		s.noteTables(merge)
		clear(s.consolidate)
		s.afterCommit()
		return nil
	}
	for t, pos := range merge {
		tables[0][t] = pos
	}
	f := &inflight{done: make(chan struct{}), errs: make([]error, len(busy)), ups: make([]CheckpointUpdate, len(busy)), spread: spread, merged: merged,
		global: global, globalGTID: s.gtidFor(global), persist: len(busy) == 1}
	ups := f.ups
	for i, p := range busy {
		if f.persist {
			ups[i] = CheckpointUpdate{Global: global, GlobalGTID: f.globalGTID, Tables: tables[i], Lanes: lanes[i], Schemas: schemas, Online: online}
		} else {
			// Several connections commit separately: none may move the resume position past another's
			// rows (the table checkpoints say what each committed), so none writes this flush's; the
			// first writes the previous flush's, and only it, so that they do not queue on its row lock
			// one behind the other.
			ups[i] = CheckpointUpdate{Tables: tables[i], Lanes: lanes[i]}
			if i == 0 {
				ups[i].Schemas, ups[i].Online = schemas, online
				// The previous flush committed whole: its resume position is safe, and only this
				// transaction writes it.
				if s.committed.Compare(s.persisted) > 0 {
					f.prev, f.prevGTID = s.committed, s.committedGTID
					ups[i].Global, ups[i].GlobalGTID = f.prev, f.prevGTID
				}
			}
		}
		f.busy = append(f.busy, &partition{idx: p.idx, sink: p.sink, batch: p.batch})
		next := p.spare
		if next == nil {
			next = make([]Change, 0, cap(p.batch))
		}
		p.batch, p.spare, p.pos, p.lanes = next, nil, map[TableName]Position{}, map[TableName]laneClaim{}
	}
	s.chooseHot(s.rows)
	s.rows, s.batchBytes = 0, 0
	clear(s.keyConn)
	var wg sync.WaitGroup
	for i, p := range f.busy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hook := testHookFlush; hook != nil {
				if f.errs[i] = hook(p.idx, len(f.busy)); f.errs[i] != nil {
					return
				}
			}
			f.errs[i] = p.sink.Flush(ctx, p.batch, ups[i])
		}()
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
	s.flushing = f
	if async {
		return nil
	}
	return s.waitFlush(ctx)
}

// testHookFlush, when a test sets it, runs before each transaction of a flush (connection part of
// parts busy); an error stands for the transaction's failure (it does not run).
var testHookFlush func(part, parts int) error

// waitFlush waits for the flush in flight, if any, and records what it committed.
func (s *Syncer) waitFlush(ctx context.Context) error {
	f := s.flushing
	if f == nil {
		return nil
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.flushing = nil
	for i, err := range f.errs {
		if err != nil && downstreamPermanent(err) {
			return s.refused(ctx, f.busy[i], err)
		}
	}
	if err := errors.Join(f.errs...); err != nil {
		return err
	}
	for _, b := range f.busy {
		// Committed: its batch slice holds the partition's next batch but one.
		clear(b.batch)
		s.parts[b.idx].spare = b.batch[:0]
	}
	for _, t := range f.merged {
		delete(s.consolidate, t)
	}
	for _, up := range f.ups {
		s.noteTables(up.Tables)
		for t, l := range up.Lanes {
			s.noteLanes(t, l)
		}
	}
	for t, pos := range f.spread {
		s.consolidate[t] = pos
	}
	if f.persist {
		s.persisted, s.persistedGTID = f.global, f.globalGTID
	} else if !f.prev.IsZero() {
		s.persisted, s.persistedGTID = f.prev, f.prevGTID
	}
	s.committed, s.committedGTID = f.global, f.globalGTID
	s.ckpt.Global = f.global
	s.afterCommit()
	return nil
}

// claims turns the busy partitions' positions into their checkpoint updates: a table whose rows are all
// on one connection gets its table position there; one spread over several gets a lane position on
// each (and the table position where a partition holds one), and is returned in spread with its last
// position.
func (s *Syncer) claims(busy []*partition) (tables []map[TableName]Position, lanes []map[TableName][]meta.Lane, spread map[TableName]Position) {
	on := map[TableName][]int{}
	for i, p := range busy {
		for t := range p.pos {
			on[t] = append(on[t], i)
		}
		for t := range p.lanes {
			if _, ok := p.pos[t]; !ok {
				on[t] = append(on[t], i)
			}
		}
	}
	tables = make([]map[TableName]Position, len(busy))
	lanes = make([]map[TableName][]meta.Lane, len(busy))
	for i := range busy {
		tables[i], lanes[i] = map[TableName]Position{}, map[TableName][]meta.Lane{}
	}
	spread = map[TableName]Position{}
	for t, idx := range on {
		if len(idx) == 1 {
			p := busy[idx[0]]
			pos := p.pos[t]
			if l, ok := p.lanes[t]; ok && l.pos.Compare(pos) > 0 {
				pos = l.pos
			}
			tables[idx[0]][t] = pos
			continue
		}
		var last Position
		for _, i := range idx {
			p := busy[i]
			if pos, ok := p.pos[t]; ok {
				tables[i][t] = pos
				if pos.Compare(last) > 0 {
					last = pos
				}
			}
			if l, ok := p.lanes[t]; ok {
				lanes[i][t] = append(lanes[i][t], meta.Lane{N: len(s.parts), Index: p.idx, Chunk: l.chunk, Cols: l.cols, Pos: l.pos})
				if l.pos.Compare(last) > 0 {
					last = l.pos
				}
			}
		}
		spread[t] = last
	}
	return tables, lanes, spread
}

// noteTables records committed table positions.
func (s *Syncer) noteTables(tables map[TableName]Position) {
	for t, pos := range tables {
		s.ckpt.Tables[t] = pos
		s.pruneLanes(t)
	}
}

// afterCommit forgets what no read from the resume position on can need.
func (s *Syncer) afterCommit() {
	s.cfg.Operators.prune(s.persisted)
	for p := range s.gtidAt {
		if p.Compare(s.persisted) < 0 {
			delete(s.gtidAt, p)
		}
	}
}

// refused turns a batch's failed transaction into the error of the change the downstream refuses
// for good, found by applying the batch's changes one by one in a transaction rolled back. Other
// errors are returned as they are (retried).
func (s *Syncer) refused(ctx context.Context, p *partition, err error) error {
	if !downstreamPermanent(err) || len(p.batch) == 0 {
		return err
	}
	i, cause := p.sink.Locate(ctx, p.batch)
	if i < 0 || !downstreamPermanent(cause) {
		c := p.batch[0]
		return &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: c.Source, Pos: c.Pos,
			Stmt: fmt.Sprintf("a transaction of %d row changes starting with %s", len(p.batch), describe(c)), DML: true, Cause: err}
	}
	c := p.batch[i]
	s.log.Error("the downstream refuses a row change", zap.Stringer("table", c.Source), zap.Stringer("pos", c.Pos), zap.Error(cause))
	return &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: c.Source, Pos: c.Pos, Stmt: describe(c), DML: true, Cause: cause}
}

// handleDDL handles the statement q of a query event; in are the event's session settings, which the
// DDLs it sends downstream run in.
func (s *Syncer) handleDDL(ctx context.Context, q, schema string, start, end Position, in session.Settings) error {
	if s.cfg.Online != nil {
		d, err := s.cfg.Online.Decide(s.runs, q, schema, end)
		if err != nil {
			return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
		}
		for _, t := range d.Changed {
			s.onlineDirty[t] = true
		}
		if !d.Pass {
			s.log.Info("online DDL tool statement", zap.String("ddl", q), zap.String("what", d.Note), zap.Strings("replaced-by", d.DDLs), zap.Stringer("pos", end))
			if len(d.DDLs) == 0 {
				return nil
			}
			return s.handleDDL(ctx, strings.Join(d.DDLs, ";\n"), schema, start, end, in)
		}
	}
	if err := s.schemas.apply(q, schema, end); err != nil {
		// Only binlogs without column names need it; those report a missing schema when they do.
		s.log.Debug("schema not tracked for statement", zap.Error(err))
	}
	parts, err := shardgroup.Split(q, schema, s.cfg.Router.Route)
	if errors.Is(err, shardgroup.ErrNotDDL) {
		return nil
	}
	if err != nil && schema != "" && s.cfg.Router.Skip(TableName{Schema: schema}) {
		// A statement the parser cannot read, run in a database this task does not replicate.
		s.log.Warn("skip unparsable statement of a filtered database", zap.String("schema", schema), zap.Error(err))
		return nil
	}
	if err != nil {
		// A statement the parser cannot read: only a filter's sql-pattern can say what it is.
		switch act, rule := s.cfg.Filter.Statement(schema, q); act {
		case router.IgnoreEvent:
			s.log.Info("statement ignored by a binlog event filter", zap.String("rule", rule), zap.String("ddl", q), zap.Stringer("pos", end))
			return nil
		case router.FailEvent:
			return s.filterStop(rule, end, fmt.Sprintf("%q", q))
		}
		pattern := schema
		if pattern == "" {
			pattern = "*"
		}
		return &filterError{s.evStart, fmt.Errorf("source %s at %s: %w; nothing ran downstream. To go on without this statement, binlog skip it, or ignore it with a binlog event filter "+
			"(filters: {skip-it: {schema-pattern: %q, sql-pattern: [...], action: Ignore}} and filter-rules: [skip-it] in this source's mysql-instances entry), "+
			"then stop-task and start-task with the changed file: the checkpoint is kept", s.cfg.Source, end, err, pattern)}
	}
	// Every part is decided before any runs: a statement with one refused part runs no part at all.
	type decided struct {
		shardgroup.Part
		scope shardgroup.Scope
		shardgroup.Decision
	}
	var plan []decided
	renamed := false
	for _, p := range parts {
		if s.cfg.Router.Skip(p.Source) {
			continue
		}
		switch act, rule := s.cfg.Filter.Decide(p.Source, shardgroup.FilterEvents(p.Kind), q); act {
		case router.IgnoreEvent:
			s.log.Info("DDL ignored by a binlog event filter", zap.String("rule", rule), zap.Stringer("table", p.Source), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
			continue
		case router.FailEvent:
			return s.filterStop(rule, end, fmt.Sprintf("%q", q))
		}
		scope := s.scopeOf(p)
		d := shardgroup.Decide(p.Kind, scope)
		if d.Action == shardgroup.FollowRename {
			// Each part of a multi-table RENAME in order, on the groups as the parts before it left them.
			if end.Compare(s.renames.at) <= 0 {
				continue // read again by a re-sync: the groups follow it already
			}
			why, err := s.rename(p, end)
			if err != nil {
				return err
			}
			if why != "" {
				d = shardgroup.Decision{Action: shardgroup.Refuse, Why: why}
			}
			renamed = true
		}
		if d.Action == shardgroup.Refuse {
			return &RefusedDDLError{Task: s.cfg.Task, Start: s.evStart, Source: s.cfg.Source, Pos: end, DDL: q, Kind: p.Kind, Table: p.Source, Scope: scope, Why: d.Why}
		}
		plan = append(plan, decided{p, scope, d})
	}
	if renamed {
		s.renames.at = end
	}
	var sharded []shardgroup.Part
	for _, x := range plan {
		p, scope, d := x.Part, x.scope, x.Decision
		tables := map[TableName]Position{}
		if p.Source.Name != "" {
			tables[p.Source] = end
		}
		switch d.Action {
		case shardgroup.Ignore:
			s.log.Warn("DDL not replicated downstream", zap.String("kind", string(p.Kind)), zap.Stringer("table", p.Source),
				zap.String("scope", scope.String()), zap.String("why", d.Why), zap.String("ddl", p.SQL), zap.Stringer("pos", end))
		case shardgroup.Run, shardgroup.RunIfNotExists:
			if p.Source.Name != "" && end.Compare(s.ckpt.Tables[p.Source]) <= 0 {
				continue // applied before a restart
			}
			stmt := s.sessions.defaultCharset(ctx, p)
			if d.Action == shardgroup.RunIfNotExists {
				if stmt, err = shardgroup.CreateIfNotExists(stmt); err != nil {
					return fmt.Errorf("source %s at %s: %w", s.cfg.Source, end, err)
				}
			}
			if err := s.ddl.ExecDDLOnce(ctx, s.sourceMarker(end), []string{stmt}, in, CheckpointUpdate{Tables: tables}); err != nil {
				return err
			}
			s.setTables(tables)
			s.forgetKeys()
		case shardgroup.JoinGroup:
			g := s.group(p.Target)
			if err := g.AddTable(p.Source, Position{}); err != nil {
				return fmt.Errorf("source %s: %w", s.cfg.Source, err)
			}
			if end.Compare(s.ckpt.Tables[p.Source]) <= 0 {
				continue // re-read after a restart: the table's rows after it are applied; keep its checkpoint
			}
			stmt, err := shardgroup.CreateIfNotExists(s.sessions.defaultCharset(ctx, p))
			if err != nil {
				return err
			}
			ddls := []string{stmt}
			if named, err := shardgroup.TablesOf(stmt, ""); err == nil && len(named) == 1 && p.Kind == shardgroup.KindCreateTableLike {
				ddls = nil // CREATE TABLE t_3 LIKE t_1 of two shards: the target is LIKE itself, and exists
			}
			if err := s.ddl.ExecDDL(ctx, ddls, in, CheckpointUpdate{Tables: tables}); err != nil {
				return err
			}
			s.setTables(tables)
		case shardgroup.LeaveGroup:
			leaving := []TableName{p.Source}
			if p.Kind == shardgroup.KindDropDatabase {
				leaving = s.shardsIn(p.Source.Schema)
			}
			for _, t := range leaving {
				target := s.cfg.Router.Route(t)
				g := s.group(target)
				res := g.RemoveTable(t, end)
				s.log.Info("shard table left its group", zap.Stringer("table", t), zap.Stringer("target", target), zap.String("ddl", p.SQL))
				if res.Synced && !s.pending[target] && g.InSharding() {
					if err := s.postInfo(ctx, target); err != nil {
						return err
					}
				}
			}
		case shardgroup.FollowRename:
			continue // done while deciding (rename.go)
		case shardgroup.DropTablesOnly:
			if err := s.dropReplicatedTables(ctx, p.Source.Schema, start, end); err != nil {
				return err
			}
		case shardgroup.Lock:
			sharded = append(sharded, p)
		default:
			return fmt.Errorf("source %s at %s: no action %s for %s", s.cfg.Source, end, d.Action, p.Kind)
		}
		if p.Kind == shardgroup.KindDropDatabase {
			s.schemas.dropSchema(p.Source.Schema, end)
		}
	}
	for _, item := range shardgroup.Items(sharded, end) {
		g := s.group(item.Target)
		res, err := g.TrySync(item)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.cfg.Source, err)
		}
		if res.Duplicate {
			continue
		}
		s.ddlStart[item.Target][end] = ddlEvent{start: start, in: in}
		s.log.Info("sharding DDL reached", zap.String("lock", pessimist.LockID(s.cfg.Task, item.Target.String())), zap.Stringer("table", item.Source), zap.Strings("ddls", item.DDLs),
			zap.Bool("synced", res.Synced), zap.Int("remaining", len(res.Remaining)))
		if res.Synced && !s.pending[item.Target] {
			if err := s.postInfo(ctx, item.Target); err != nil {
				return err
			}
		}
	}
	return nil
}

// sourceMarker is the DDL marker key of a statement of this source that runs downstream by itself:
// its binlog position is in it, so the statement read again after a crash finds its marker, and the
// same text later in the binlog (a second TRUNCATE of a table) is a statement of its own.
func (s *Syncer) sourceMarker(end Position) string {
	return "source:" + s.cfg.Source + "@" + end.String()
}

// scopeOf places a DDL part in the safety table's columns (shardgroup.Policy). A rename counts as the
// more merged of its two names: renaming a table into a shard group or onto a shared target is as
// dangerous as renaming a shard out of one. Each part of a multi-table RENAME is placed by its own
// pair of names.
func (s *Syncer) scopeOf(p shardgroup.Part) shardgroup.Scope {
	r := s.cfg.Router
	if p.Source.Name == "" {
		if r.MergedSchema(p.Source.Schema) {
			return shardgroup.MergedSchema
		}
		return shardgroup.Unsharded
	}
	tables := []TableName{p.Source}
	if (p.Kind == shardgroup.KindRenameTable || p.Kind == shardgroup.KindAlterTableRename) && p.RenamedTo.Name != "" {
		tables = append(tables, p.RenamedTo)
	}
	scope := shardgroup.Unsharded
	for _, t := range tables {
		switch {
		case r.Skip(t):
		case r.Sharded(t):
			return shardgroup.Shard
		case r.SharedTarget(t):
			scope = shardgroup.MergedSchema
		}
	}
	return scope
}

// shardsIn lists the shard tables of schema in this source's groups.
func (s *Syncer) shardsIn(schema string) []TableName {
	var out []TableName
	for _, g := range s.groups {
		for _, t := range g.Tables() {
			if strings.EqualFold(t.Schema, schema) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// dropReplicatedTables carries out DROP DATABASE of an unsharded schema: the downstream tables
// replicated from it are dropped, one by one, and the downstream database is left, since it may hold
// tables the task did not create.
func (s *Syncer) dropReplicatedTables(ctx context.Context, schema string, start, end Position) error {
	for _, t := range s.schemas.tablesIn(schema, end) {
		if s.cfg.Router.Skip(t) || s.cfg.Router.Sharded(t) || s.cfg.Router.SharedTarget(t) || end.Compare(s.ckpt.Tables[t]) <= 0 {
			continue
		}
		target := s.cfg.Router.Route(t)
		tables := map[TableName]Position{t: end}
		s.log.Info("DROP DATABASE: dropping a table replicated from it", zap.String("schema", schema), zap.Stringer("table", target))
		if err := s.ddl.ExecDDLOnce(ctx, s.sourceMarker(end), []string{"DROP TABLE IF EXISTS " + target.String()}, nil, CheckpointUpdate{Tables: tables}); err != nil {
			return err
		}
		s.setTables(tables)
	}
	s.forgetKeys()
	return nil
}

// RefusedDDLError is a DDL the safety table refuses: nothing ran downstream and the subtask stops
// before the statement.
type RefusedDDLError struct {
	Task   string
	Start  Position // start of the event (binlog skip -b)
	Source string
	Pos    Position
	DDL    string
	Kind   shardgroup.Kind
	Table  TableName
	Scope  shardgroup.Scope
	Why    string
}

// Permanent: the statement is refused again on every retry; the subtask waits for the user.
func (e *RefusedDDLError) Permanent() bool { return true }

func (e *RefusedDDLError) Error() string {
	ddl := e.DDL
	if len(ddl) > 256 {
		ddl = ddl[:256] + "..."
	}
	event := strings.ToLower(string(e.Kind))
	if evs := shardgroup.FilterEvents(e.Kind); len(evs) > 0 {
		event = evs[len(evs)-1]
	}
	return fmt.Sprintf("source %s at %s: %s of %s (%s) is refused: %s. Nothing ran downstream; the subtask stops before %q. "+
		"To go on without it, ignore it with a binlog event filter (filters: {skip-it: {schema-pattern: %q, table-pattern: %q, events: [%q], action: Ignore}} "+
		"and filter-rules: [skip-it] in this source's mysql-instances entry), then stop-task and start-task with the changed file: the checkpoint is kept; "+
		"or skip this one statement with `binlog skip %s -b %s -s %s`, or put statements the table allows in its place with `binlog replace %s -b %s -s %s \"SQL;...\"`",
		e.Source, e.Pos, e.Kind, e.Table, e.Scope, e.Why, ddl, e.Table.Schema, e.Table.Name, event,
		e.Task, e.Start.BinlogPos(), e.Source, e.Task, e.Start.BinlogPos(), e.Source)
}

func (s *Syncer) forgetKeys() {
	for _, p := range s.parts {
		p.sink.ForgetKeys()
	}
	s.keyGen++
	clear(s.targetKeys)
}

func (s *Syncer) setTables(tables map[TableName]Position) {
	for t, p := range tables {
		s.ckpt.Tables[t] = p
	}
}

// postInfo tells the master the group of target is synced and waits for the operation in the
// background, so other targets keep flowing.
func (s *Syncer) postInfo(ctx context.Context, target TableName) error {
	g := s.groups[target]
	ddls := g.Status().ActiveDDLs
	var in session.Settings
	if u, ok := g.Unresolved(); ok {
		in = s.ddlStart[target][u.FirstPosition].in
	}
	lock := pessimist.LockID(s.cfg.Task, target.String())
	s.trace(lock, "ddl read", s.ddlReadAt)
	s.trace(lock, "info putting", time.Now())
	info, err := s.cfg.Agent.PutInfoIn(ctx, target.String(), ddls, in.String())
	if err != nil {
		return err
	}
	s.trace(lock, "info put", time.Now())
	s.pending[target] = true
	go func() {
		op, err := s.cfg.Agent.WaitOperation(ctx, info)
		select {
		case s.opCh <- opResult{target: target, info: info, op: op, err: err, at: time.Now()}:
		case <-ctx.Done():
		}
	}()
	return nil
}

// postDeferred posts the infos applyOperation deferred whose steps the re-read has passed: the DML
// read before them goes downstream first.
func (s *Syncer) postDeferred(ctx context.Context) error {
	flushed := false
	for _, target := range slices.SortedFunc(maps.Keys(s.infoAt), func(a, b TableName) int { return strings.Compare(a.String(), b.String()) }) {
		if s.lastPos.Compare(s.infoAt[target]) < 0 {
			continue
		}
		delete(s.infoAt, target)
		g := s.groups[target]
		if g == nil || s.pending[target] || !g.Status().Synced {
			continue // posted meanwhile (the step's DDL read again), or no longer synced
		}
		if !flushed {
			if err := s.flush(ctx); err != nil {
				return err
			}
			flushed = true
		}
		if err := s.postInfo(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

// applyOperation executes or skips the DDLs of a resolved lock, saves the checkpoint past them, marks
// the operation done, and re-reads the DML held back behind them.
func (s *Syncer) applyOperation(ctx context.Context, res opResult) error {
	lock := res.info.LockID()
	s.trace(lock, "op received", res.at)
	s.trace(lock, "op applying", time.Now())
	ctx = withTrace(ctx, func(step string) { s.trace(lock, step, time.Now()) })
	removed := errors.Is(res.err, pessimist.ErrLockRemoved)
	if removed {
		// Only a lock force-removed from a task that still runs means "skip"; keys removed by
		// stop-task (which also removes the task's key) stop this syncer, which should be stopped.
		started, err := s.cfg.Agent.TaskStarted(ctx)
		if err != nil {
			return fmt.Errorf("source %s: lock %s removed; read its task: %w", s.cfg.Source, res.info.LockID(), err)
		}
		if !started {
			return fmt.Errorf("source %s: lock %s removed with its task (stop-task): %w", s.cfg.Source, res.info.LockID(), res.err)
		}
	}
	switch {
	case removed:
		// shard-ddl-lock unlock --force-remove: the user takes the DDLs over. They are skipped here
		// (recorded as resolved, so a restart does not post them again) and the held-back DML
		// follows; the downstream schema is the user's to fix by hand.
		s.log.Warn("lock was force-removed: its DDLs are skipped on this source; apply the right schema downstream by hand",
			zap.String("lock", res.info.LockID()), zap.Strings("ddls", res.info.DDLs))
		res.op = pessimist.Operation{Task: s.cfg.Task, Source: s.cfg.Source, Target: res.info.Target, DDLs: res.info.DDLs}
	case res.err != nil:
		return fmt.Errorf("source %s waiting for lock %s: %w", s.cfg.Source, res.info.LockID(), res.err)
	}
	// The DML read before the DDLs goes downstream first; a checkpoint alone (a position, tracked
	// schemas) need not: the checkpoint past the lock then keeps the resume position where it was
	// persisted, with the schemas that go with it, and the next flush moves both. The owner whose
	// info completed the lock has just read its own DDL, so it always has such a checkpoint to write,
	// a commit downstream (2 ms on a VM) before the DDL.
	rows, err := s.flushRows(ctx)
	if err != nil {
		return err
	}
	s.trace(lock, "flushed", time.Now())
	delete(s.pending, res.target)
	g := s.groups[res.target]
	if st := g.Status(); !slices.Equal(st.ActiveDDLs, res.op.DDLs) {
		return fmt.Errorf("source %s: lock %s answered DDLs %q, but the group waits on %q", s.cfg.Source, res.info.LockID(), res.op.DDLs, st.ActiveDDLs)
	}
	resolution, err := g.ResolveActive()
	if err != nil {
		return err
	}
	s.renameSettled(res.target, g)
	// Where this source's DDLs of the lock start in the binlog: an operator for the lock's DDLs
	// (binlog skip|replace after the owner's execution failed) names one of them.
	// The DDLs run in the session of the first of them (their event's); one that ran in another is
	// logged.
	var starts []Position
	var first TableName
	var in session.Settings
	for _, t := range resolution.Tables {
		p := resolution.Positions[t]
		if ev, ok := s.ddlStart[res.target][p]; ok {
			if len(starts) == 0 || ev.start.Compare(starts[0]) < 0 {
				first, in = t, ev.in
				starts = append([]Position{ev.start}, starts...)
			} else {
				starts = append(starts, ev.start)
			}
		}
	}
	for _, t := range resolution.Tables {
		if ev, ok := s.ddlStart[res.target][resolution.Positions[t]]; ok && ev.in.String() != in.String() {
			s.log.Warn("a lock's DDLs ran upstream in different session settings: the first's apply downstream", zap.String("lock", lock),
				zap.Stringer("table", first), zap.String("settings", in.String()), zap.Stringer("other", t), zap.String("its", ev.in.String()))
		}
	}
	for p := range s.ddlStart[res.target] {
		if p.Compare(resolution.ResyncFrom) <= 0 {
			delete(s.ddlStart[res.target], p)
		}
	}
	// Held-back DML after ResyncFrom must be read again, so neither the reader nor a restart may
	// resume past it. If an earlier re-sync has not yet read that far, it goes on from where it is.
	// Every DML this group held back lies after ResyncFrom (it was blocked by this step); when there
	// is none, everything read so far is applied and the reader goes on (a restart of the reader
	// costs a few milliseconds per source and lock).
	held := s.heldBack[res.target]
	delete(s.heldBack, res.target) // a re-read that finds DML still blocked (by the next step) sets it again
	from := resumePoint{pos: resolution.ResyncFrom}
	if held {
		if s.lastPos.Compare(from.pos) < 0 {
			from.pos = s.lastPos
		}
		from.gtid = s.gtidFor(from.pos)
		if s.cfg.EnableGTID {
			// Rewind the GTID set with the position: resume points computed from here pair them.
			s.gtidAt[from.pos] = from.gtid
			if s.gtids, err = parseMariadbGTIDs(from.gtid); err != nil {
				return err
			}
			s.curGTID = nil
		}
		s.lastPos = from.pos
		s.committed, s.committedGTID = Position{}, ""
	}
	target := res.target
	global := s.safeGlobal()
	globalGTID := s.gtidFor(global)
	if !rows && s.persisted.Compare(global) < 0 {
		global, globalGTID = s.persisted, s.persistedGTID // see flushRows above
	}
	up := CheckpointUpdate{Global: global, GlobalGTID: globalGTID, Resolved: resolution.Positions, ResolvedTarget: &target, ResolvedDDLs: res.op.DDLs}
	if res.op.Exec {
		failpoint.Inject("worker-before-exec") // the owner has its exec operation, nothing ran yet
		ddls := res.op.DDLs
		if op, ok := s.cfg.Operators.find(true, starts...); ok {
			s.log.Warn("lock DDLs handled by an operator (binlog "+op.Op+")", zap.String("lock", res.info.LockID()),
				zap.Strings("ddls", ddls), zap.Strings("instead", op.SQLs))
			ddls = op.SQLs // skip: none
		}
		if res.info.WroteExec() {
			err = s.ddl.ExecDDLFirst(ctx, res.info.LockID(), ddls, in, up) // nobody can have run them yet
		} else {
			err = s.ddl.ExecDDLOnce(ctx, res.info.LockID(), ddls, in, up)
		}
		if err != nil && downstreamPermanent(err) && len(starts) > 0 {
			err = &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: first, Pos: starts[0],
				Stmt: strings.Join(ddls, "; "), Lock: res.info.LockID(), Cause: err}
		}
	} else {
		failpoint.Inject("worker-before-skip") // a non-owner has its skip, nothing re-synced yet
		err = s.sink.Flush(ctx, nil, up)
	}
	if err != nil {
		return err
	}
	s.trace(lock, "checkpoint", time.Now())
	if res.op.Exec {
		failpoint.Inject("worker-before-done") // DDL and checkpoint committed downstream, done not yet in etcd
	}
	for t, p := range resolution.Positions {
		s.ckpt.Resolved[t] = p
	}
	s.ckpt.Global, s.persisted, s.persistedGTID = up.Global, up.Global, up.GlobalGTID
	if !removed {
		if err := s.cfg.Agent.DoneOperationDeleteInfo(ctx, res.op, res.info); err != nil {
			return err
		}
		s.trace(lock, "done", time.Now())
	}
	s.forgetKeys()
	s.log.Info("sharding DDL resolved", zap.String("lock", res.info.LockID()), zap.Bool("exec", res.op.Exec))
	if held && (s.resync == nil || from.pos.Compare(s.resync.pos) < 0) {
		s.resync, s.resyncLock = &from, lock
	}
	if g.Status().Synced {
		if held {
			// The next step is reached already, but DML before its DDLs was held back and is read
			// again now: its owner may run it as soon as the info is in, so the info waits until the
			// re-read has passed every table's DDL of the step (postDeferred).
			at, _ := g.SyncedAt()
			s.infoAt[target] = at
			return nil
		}
		return s.postInfo(ctx, target)
	}
	return nil
}
