package syncer

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/eventclass"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

// SyncerConfig configures the sync unit of one source of one task.
type SyncerConfig struct {
	Task, Source string
	Flavor       string // "mariadb" or "mysql"
	Host         string
	Port         uint16
	User         string
	Password     string         // in plain text (config.Database.PlainPassword)
	TLS          *tls.Config    // the source's from.security; nil: no TLS
	ServerID     uint32         // replication server ID, unique per syncer
	Start        vocab.Position // where to start without a checkpoint (zero: the source's current position)
	// EnableGTID (source enable-gtid) resumes by GTID set; StartGTID (task meta binlog-gtid) is where
	// to start without a checkpoint. MariaDB flavor only for now.
	EnableGTID bool
	StartGTID  string
	Router     *router.Router
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
	sink     *sink.Sink        // partition 0's, for checkpoint-only writes
	exec     *sink.DDLExecutor // DDL downstream, exactly once (over partition 0's sink)
	upstream *sql.DB
	ckpt     meta.Checkpoint
	sessions eventSessions // the session settings of DDL events (eventsession.go)
	fresh    bool          // no checkpoint yet: the task's first start on this source
	rows     rowDecoder    // the rows stage: shapes, tracked schemas (rows.go)
	cur      cursor        // the reader stage: where the binlog is read (reader.go)
	apply    applier       // the applier stage: batch, flush pipeline, committed positions (apply.go)
	ddl      ddlPath       // the DDL stage: online DDL, safety table, shard groups and locks (ddlpath.go, lock.go)
	board    statusBoard   // what query-status reads (status.go)
	xa       xaState       // prepared XA transactions waiting for their outcome (events.go)
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
	s := &Syncer{cfg: cfg, log: cfg.Log.With(zap.String("task", cfg.Task), zap.String("source", cfg.Source)), board: statusBoard{started: make(chan struct{})}}
	for i := 0; i < cfg.WorkerCount; i++ {
		sk := sink.NewSink(cfg.Downstream, cfg.MetaSchema, cfg.Task, cfg.Source)
		sk.SetMaxRows(max(cfg.BatchRows, 256)) // at least the 256-row statements of the INSERT limit we measure against
		sk.SetEpoch(cfg.Epoch)
		sk.SetGroupStatements(cfg.GroupStatements)
		s.apply.parts = append(s.apply.parts, &partition{idx: i, sink: sk})
	}
	s.sink = s.apply.parts[0].sink
	s.apply.txnRows, s.cur.gtidMode, s.cur.flavor = cfg.TxnRows, cfg.EnableGTID, cfg.Flavor
	s.rows.task, s.rows.source, s.rows.mariadb = cfg.Task, cfg.Source, cfg.Flavor == mysql.MariaDBFlavor
	s.apply.ckpt, s.apply.task, s.apply.source, s.apply.log = &s.ckpt, cfg.Task, cfg.Source, s.log
	s.exec = sink.NewDDLExecutor(s.sink, cfg.DDLDownstream, s.log)
	s.ddl = ddlPath{task: cfg.Task, source: cfg.Source, router: cfg.Router, filter: cfg.Filter, online: cfg.Online, log: s.log, applied: s.apply.view()}
	return s
}

// Run replicates until ctx ends or an error stops it (the caller pauses the subtask with it).
func (s *Syncer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the goroutines waiting for operations
	err := s.init(ctx)
	if s.upstream != nil {
		defer s.upstream.Close() // also when init fails after opening it
	}
	if err != nil {
		return err
	}
	if s.cfg.SafeMode || s.cfg.SafeModeDuration > 0 {
		s.setSafeMode(true)
		if !s.cfg.SafeMode {
			s.apply.safeUntil = time.Now().Add(s.cfg.SafeModeDuration)
		}
	}
	s.publishStatus()
	close(s.board.started)
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
		if f := s.apply.flushing; f != nil {
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
			if r, err = s.connect(ctx, resumePoint{s.cur.lastPos, s.cur.gtidFor(s.cur.lastPos)}, err); err != nil {
				return err
			}
		case ev := <-r.events:
			s.cur.retry.read(ev.BinlogEvent)
			if err := s.handle(ctx, ev.BinlogEvent, ev.gtid); err != nil {
				return err
			}
			if len(s.ddl.shard.infoAt) > 0 {
				if err := s.postDeferred(ctx); err != nil {
					return err
				}
			}
		case res := <-s.ddl.shard.opCh:
			if err := s.applyOperation(ctx, res); err != nil {
				return err
			}
		case <-flush.C:
			if err := s.flushAsync(ctx); err != nil {
				return err
			}
			s.publishStatus()
		}
		if s.ddl.shard.resync != nil {
			from := *s.ddl.shard.resync
			s.ddl.shard.resync = nil
			r.stop()
			s.log.Info("re-sync held-back DML", zap.Stringer("from", from.pos), zap.String("gtid", from.gtid))
			if r, err = s.connect(ctx, from, nil); err != nil {
				return err
			}
			s.trace(s.ddl.shard.resyncLock, "re-sync started", time.Now())
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
	loadRows, err := s.sink.Meta().LoadRows(ctx)
	if err != nil {
		return err
	}
	if s.rows.loadKeys, _, err = loader.Segments(loadRows); err != nil {
		return err
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
	s.cur.lastPos = s.ckpt.Global
	s.ddl.runs, s.ddl.onlineDirty = onlineddl.Runs{}, map[vocab.TableName]bool{}
	for t, js := range s.ckpt.Online {
		run, err := onlineddl.Decode(js)
		if err != nil {
			return fmt.Errorf("checkpoint of source %s, table %s: %w", s.cfg.Source, t, err)
		}
		if run != nil {
			s.ddl.runs[t] = run
		}
	}
	s.rows.schemas = newSchemaTracker()
	s.rows.shapes = map[vocab.TableName]cachedShape{}
	s.apply.targetKeys, s.apply.consolidate, s.apply.spreadLog = map[vocab.TableName]*targetKeys{}, map[vocab.TableName]vocab.Position{}, map[vocab.TableName]bool{}
	for t := range s.ckpt.Lanes {
		s.apply.pruneLanes(t)
	}
	if err := s.rows.schemas.load(s.ckpt.Schemas); err != nil {
		return err
	}
	s.ddl.schemas = s.rows.schemas
	s.ddl.shard = newShardState() // renames after the resume position are read again
	s.cur.gtidAt = map[vocab.Position]string{}
	s.apply.resetBatch()
	if err := s.discover(ctx); err != nil {
		return err
	}
	// Save the start at once: a restart must resume here, not at a newer current position.
	if err := s.sink.Flush(ctx, nil, meta.CheckpointUpdate{Global: s.ckpt.Global, GlobalGTID: s.ckpt.GlobalGTID, Schemas: s.rows.schemas.takeDirty()}); err != nil {
		return err
	}
	s.apply.persistedAt(s.ckpt.Global, s.ckpt.GlobalGTID)
	return s.recoverOperations(ctx)
}

func (s *Syncer) handle(ctx context.Context, ev *replication.BinlogEvent, gtid string) error {
	h := ev.Header
	s.board.events.Add(1)
	sink.NoteEvent(s.cfg.Task, s.cfg.Source, h.Timestamp) // metrics.go: the replication lag
	if e, ok := ev.Event.(*replication.RotateEvent); ok {
		s.cur.file = string(e.NextLogName)
		return nil
	}
	if e, ok := ev.Event.(*replication.FormatDescriptionEvent); ok {
		s.cur.version = eventclass.ParseVersion(e.ServerVersion) // executable comments are read against it
	}
	if h.LogPos == 0 { // artificial events
		return nil
	}
	end := vocab.Position{File: s.cur.file, Pos: h.LogPos}
	start := vocab.Position{File: s.cur.file, Pos: h.LogPos - h.EventSize}
	s.cur.evStart = start
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent, *replication.GTIDEvent, *replication.GtidTaggedLogEvent:
		s.cur.curGTID = gtid
	case *replication.TransactionPayloadEvent:
		return s.handlePayload(ctx, e, start, end)
	}
	return s.handleEvent(ctx, ev, start, end) // events.go: what eventclass decides
}

// handleStatement runs a DDL statement (a query event) through the DDL path.
func (s *Syncer) handleStatement(ctx context.Context, e *replication.QueryEvent, q string, start, end vocab.Position) error {
	s.ddl.shard.ddlReadAt = time.Now()
	if err := s.flush(ctx); err != nil {
		return err
	}
	if s.cfg.EnableGTID {
		s.cur.gtidAt[s.cur.groupStart] = s.cur.gtids.String()
	}
	skip := false
	if op, ok := s.cfg.Operators.find(false, start, s.cur.groupStart); ok {
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
		if err := s.handleDDL(ctx, q, string(e.Schema), s.cur.groupStart, end, in); err != nil {
			if sink.DownstreamPermanent(err) && !sink.IsPermanent(err) {
				table := vocab.TableName{Schema: string(e.Schema)}
				if ts, terr := ddl.TablesOf(q, string(e.Schema)); terr == nil && len(ts) > 0 {
					table = ts[0]
				}
				return &StatementError{Task: s.cfg.Task, Source: s.cfg.Source, Table: table, Stmt: q, Pos: start, Cause: err}
			}
			return err
		}
	}
	s.cur.endGroup(end)
	if s.cfg.EnableGTID {
		s.cur.gtidAt[end] = s.cur.gtids.String()
	}
	return nil
}

// safeGlobal is the position a restart may resume from: the last complete event group, but not past
// the start of any pending sharding DDL (the rebuilt group must read it again).
func (s *Syncer) safeGlobal() vocab.Position {
	xa, _ := s.xa.oldestPrepared()
	return s.ddl.safeGlobal(s.cur.lastPos, xa)
}
