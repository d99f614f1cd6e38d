package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/router"
	routepkg "github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/syncer"
	"github.com/tributary-db/tributary/vocab"
)

// ServerConfig configures a dm-worker.
type ServerConfig struct {
	Name         string
	Addr         string // advertised gRPC address the masters query status at
	Client       *clientv3.Client
	KeepaliveTTL int // seconds; the source moves to another worker this long after this one dies
	Layout       pessimist.Layout
	Log          *zap.Logger
}

// Server is a dm-worker: it registers in etcd with a lease, and runs one subtask (a Syncer) per task
// of the source the leader master bound to it. Everything it does follows the state in etcd; when it
// loses its lease (etcd unreachable longer than the TTL) it stops every subtask at once, because
// its source may already be bound to another worker, and starts again from the state once etcd
// answers.
type Server struct {
	pb.UnimplementedWorkerServer
	cfg ServerConfig
	log *zap.Logger

	mu       sync.Mutex
	subtasks map[string]*subtask // by task name
	source   string
	// schemaOp is held while binlog-schema changes a subtask's tracked schema, and briefly by every
	// run of a subtask before it loads its checkpoint: no run starts on a half-made change.
	schemaOp sync.Mutex
}

// NewServer returns a worker; Run starts it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.KeepaliveTTL <= 0 {
		cfg.KeepaliveTTL = 60
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Layout.Root() == "" {
		cfg.Layout = pessimist.NewLayout("")
	}
	return &Server{cfg: cfg, log: cfg.Log.With(zap.String("worker", cfg.Name)), subtasks: map[string]*subtask{}}
}

// Run registers the worker and follows the cluster state until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if _, err := s.cfg.Client.Put(ctx, ha.WorkerKey(s.cfg.Name), ha.Encode(ha.Worker{Name: s.cfg.Name, Addr: s.cfg.Addr})); err != nil {
		return fmt.Errorf("register worker %s: %w", s.cfg.Name, err)
	}
	defer s.stopAll("worker stopping")
	var backoff termBackoff
	for ctx.Err() == nil {
		alive, err := s.term(ctx)
		s.stopAll("lost the etcd lease")
		if ctx.Err() != nil {
			break
		}
		wait := backoff.next(alive)
		s.log.Warn("etcd session ended; subtasks stopped until it is back", zap.Error(err), zap.Duration("retry-in", wait))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// termBackoff is how long a worker waits before its next etcd session: 0.5 s more for each session
// in a row that could not be set up, at most 5 s; a term in which the worker was up starts again at
// 0.5 s (a worker whose network flaps now and then must not wait 5 s after each flap for good).
type termBackoff struct{ failed int }

func (b *termBackoff) next(alive bool) time.Duration {
	if alive {
		b.failed = 0
	}
	b.failed++
	return min(time.Duration(b.failed)*500*time.Millisecond, 5*time.Second)
}

// term is one lease: keepalive key, then reconcile on every change until the lease is lost. alive:
// the keepalive key was written (the worker was up in this term).
func (s *Server) term(ctx context.Context) (alive bool, err error) {
	session, err := concurrency.NewSession(s.cfg.Client, concurrency.WithTTL(s.cfg.KeepaliveTTL), concurrency.WithContext(ctx))
	if err != nil {
		return false, err
	}
	defer session.Close()
	if _, err := s.cfg.Client.Put(ctx, ha.KeepaliveKey(s.cfg.Name), "", clientv3.WithLease(session.Lease())); err != nil {
		return false, err
	}
	s.log.Info("worker alive", zap.Int("keepalive-ttl", s.cfg.KeepaliveTTL))
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-session.Done():
			cancel()
		case <-tctx.Done():
		}
	}()
	for tctx.Err() == nil {
		st, err := ha.Load(tctx, s.cfg.Client)
		if err != nil {
			if tctx.Err() == nil {
				s.log.Warn("read cluster state", zap.Error(err))
				ha.SleepCtx(tctx, time.Second)
			}
			continue
		}
		s.reconcile(tctx, st)
		ha.WaitChange(tctx, s.cfg.Client, st.Rev, 5*time.Second)
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, errors.New("etcd lease lost")
}

// spec is what a subtask should be.
type spec struct {
	task   *config.Task
	inst   config.Instance
	source *config.Source
	epoch  int64
	stage  string
	start  *config.Meta // where start-task found the source when the task has no meta
	// timed: start is the position of start-task --start-time, which comes before the task's meta.
	timed bool
	topo  *routepkg.Topology
	key   string // everything but the stage: a change restarts the subtask
}

func (s *Server) desired(st ha.State) (string, map[string]spec) {
	b, ok := st.BoundTo(s.cfg.Name)
	if !ok {
		return "", nil
	}
	src, ok := st.Sources[b.Source]
	if !ok {
		return "", nil
	}
	out := map[string]spec{}
	for _, t := range st.Tasks {
		cfg, err := t.Parse()
		if err != nil {
			s.log.Error("stored task does not parse", zap.String("task", t.Name), zap.Error(err))
			continue
		}
		for _, inst := range cfg.MySQLInstances {
			if inst.SourceID != b.Source || t.IsStopped(b.Source) {
				continue // another source's, or stop-task -s removed the task from this one
			}
			var start *config.Meta
			if m, ok := t.Starts[b.Source]; ok {
				start = &m
			}
			out[t.Name] = spec{task: cfg, inst: inst, source: src.Parsed, epoch: b.Epoch, stage: t.StageOf(b.Source), start: start, timed: start != nil && t.StartTime != "", topo: t.Topology,
				key: fmt.Sprintf("%d\x00%d\x00%s\x00%s\x00%s", b.Epoch, t.ResumedOf(b.Source), t.Config, src.Config, ha.Encode(t.Topology))}
		}
	}
	return b.Source, out
}

func (s *Server) reconcile(ctx context.Context, st ha.State) {
	source, want := s.desired(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source = source
	for name, sub := range s.subtasks {
		sp, ok := want[name]
		if !ok || sp.key != sub.spec.key {
			sub.stop()
			delete(s.subtasks, name)
			s.log.Info("subtask removed", zap.String("task", name), zap.Bool("replaced", ok))
		}
	}
	for name, sp := range want {
		sub, ok := s.subtasks[name]
		if !ok {
			sub = newSubtask(sp, s.cfg, s.log)
			sub.schemaOp = &s.schemaOp
			s.subtasks[name] = sub
		}
		sub.setStage(ctx, sp.stage)
	}
}

func (s *Server) stopAll(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sub := range s.subtasks {
		sub.stop()
		delete(s.subtasks, name)
		s.log.Info("subtask stopped", zap.String("task", name), zap.String("why", why))
	}
	s.source = ""
}

// QueryStatus reports the worker's subtasks of one task ("" for all).
func (s *Server) QueryStatus(ctx context.Context, req *pb.QueryStatusRequest) (*pb.QueryStatusResponse, error) {
	s.mu.Lock()
	subs := make([]*subtask, 0, len(s.subtasks))
	for name, sub := range s.subtasks {
		if req.Name == "" || req.Name == name {
			subs = append(subs, sub)
		}
	}
	source := s.source
	s.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return subs[i].spec.task.Name < subs[j].spec.task.Name })
	resp := &pb.QueryStatusResponse{Result: true, SourceStatus: &pb.SourceStatus{Source: source, Worker: s.cfg.Name}}
	for _, sub := range subs {
		resp.SubTaskStatus = append(resp.SubTaskStatus, sub.status(ctx))
	}
	return resp, nil
}

// subtask runs one task's syncer for the bound source, resuming by itself after an error (with
// backoff, the error shown meanwhile) until it is stopped or paused.
type subtask struct {
	spec spec
	cfg  ServerConfig
	log  *zap.Logger // with the task, the source and the epoch
	// unitLog is the logger the units that name their task and source themselves (the syncer, the
	// pessimist agent) are given: with the epoch only, so that no log line has a key twice.
	unitLog *zap.Logger

	mu      sync.Mutex
	stage   string
	lastErr error
	syncer  *syncer.Syncer
	loader  *loader.Unit // while a task-mode all or full subtask loads
	// loaded: the load unit has finished in this subtask's life; a pause after it is the sync unit's.
	loaded bool
	cancel context.CancelFunc
	done   chan struct{}
	upDB   *sql.DB           // for the source's own position in status
	ops    *syncer.Operators // binlog skip|replace decisions, kept in etcd
	wake   chan struct{}     // a binlog skip or replace for the statement the subtask paused on
	// waiting: the run is paused on an error a retry cannot fix, until a wake or a resume.
	waiting  bool
	schemaOp *sync.Mutex // the server's (see Server.schemaOp)
}

// running reports whether the subtask's syncer runs or may start on its own (and its stage): not
// when it is paused, stopped, finished or waiting for the user on an error a retry cannot fix.
func (t *subtask) running() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stage, t.cancel != nil && !t.waiting
}

func newSubtask(sp spec, cfg ServerConfig, log *zap.Logger) *subtask {
	return &subtask{wake: make(chan struct{}, 1), spec: sp, cfg: cfg, ops: syncer.NewOperators(cfg.Client, sp.task.Name, sp.inst.SourceID, sp.epoch),
		log:     log.With(zap.String("task", sp.task.Name), zap.String("source", sp.inst.SourceID), zap.Int64("epoch", sp.epoch)),
		unitLog: log.With(zap.Int64("epoch", sp.epoch))}
}

// setStage starts or pauses the subtask.
func (t *subtask) setStage(ctx context.Context, stage string) {
	t.mu.Lock()
	running := t.cancel != nil
	t.mu.Unlock()
	switch {
	case stage == ha.StageRunning && !running:
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		t.mu.Lock()
		t.stage, t.lastErr, t.cancel, t.done = ha.StageRunning, nil, cancel, done
		t.mu.Unlock()
		go func() {
			defer close(done)
			t.run(rctx)
		}()
		t.log.Info("subtask running")
	case stage == ha.StagePaused:
		t.stop()
		t.mu.Lock()
		t.stage = ha.StagePaused
		t.mu.Unlock()
	}
}

// stop cancels the syncer and waits until it has returned, so no write of it can follow.
func (t *subtask) stop() {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.cancel, t.done = nil, nil
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	t.mu.Lock()
	if t.upDB != nil {
		t.upDB.Close()
		t.upDB = nil
	}
	t.mu.Unlock()
}

// resumeBackoff is how long a subtask waits before it resumes after an error that goes away by itself:
// 2 s, doubling with each error to 30 s; a run of resumeRollback without an error starts again at 2 s,
// as DM's backoff-rollback (a subtask that met a few errors over weeks must not wait 30 s on each
// later one).
type resumeBackoff struct{ failed int }

const resumeRollback = 5 * time.Minute

func (b *resumeBackoff) next(ranFor time.Duration) time.Duration {
	if ranFor >= resumeRollback {
		b.failed = 0
	}
	wait := min(time.Duration(1<<min(b.failed, 4))*2*time.Second, 30*time.Second)
	b.failed++
	return wait
}

func (t *subtask) run(ctx context.Context) {
	var backoff resumeBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := t.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if sink.IsPermanent(err) {
			// A retry meets the same refusal: wait for the user (binlog skip|replace wakes it,
			// resume-task restarts it).
			t.log.Error("subtask paused on an error a retry cannot fix; waiting for binlog skip|replace or resume-task", zap.Error(err))
			t.mu.Lock()
			t.stage, t.lastErr, t.syncer, t.waiting = ha.StagePaused, err, nil, true
			t.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.wake:
			}
			backoff = resumeBackoff{}
			t.mu.Lock()
			t.stage, t.waiting = ha.StageRunning, false
			t.mu.Unlock()
			continue
		}
		wait := backoff.next(time.Since(started))
		t.log.Error("subtask stopped on an error; resuming automatically", zap.Error(err), zap.Duration("backoff", wait))
		t.mu.Lock()
		t.stage, t.lastErr, t.syncer = ha.StagePaused, err, nil
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-t.wake:
		}
		t.mu.Lock()
		t.stage = ha.StageRunning
		t.mu.Unlock()
	}
}

func (t *subtask) runOnce(ctx context.Context) error {
	sp := t.spec
	if t.schemaOp != nil {
		t.schemaOp.Lock() // a binlog-schema change in progress ends first: this run loads it
		t.schemaOp.Unlock()
	}
	ba, rules := sp.task.Rules(sp.inst)
	router, err := router.NewRouter(ba, rules)
	if err != nil {
		return err
	}
	router.SetTopology(sp.topo)
	filters, skipped := config.MergeFilters(sp.task.FilterRulesOf(sp.inst), sp.source.Filters)
	for _, r := range skipped {
		t.log.Warn("a filter of the source file is left out: the task has one for the same tables, which wins",
			zap.String("filter", r.Name), zap.String("schema-pattern", r.SchemaPattern), zap.String("table-pattern", r.TablePattern))
	}
	filter, err := routepkg.NewFilter(filters)
	if err != nil {
		return err
	}
	var online *onlineddl.Rules
	if sp.task.OnlineDDLEnabled() {
		if online, err = onlineddl.NewRules(sp.task.OnlineDDLRules()); err != nil {
			return err
		}
		router.SkipToolTables(online.Tool)
	}
	target := sp.task.TargetDatabase
	target.Session = sink.DownstreamSession(target.Session)
	// Both pools take several statements a query (one round trip for many): every query on them is
	// built by Tributary, or is a statement of the binlog or of the user's `binlog replace`.
	down, err := dbutil.OpenDB(target, dbutil.MultiStatements)
	if err != nil {
		return err
	}
	defer down.Close()
	ddlDown, err := dbutil.OpenDB(target, dbutil.MultiStatements)
	if err != nil {
		return err
	}
	defer ddlDown.Close()
	ddlDown.SetMaxIdleConns(1)
	flavor, err := detectFlavor(ctx, sp.source)
	if err != nil {
		return err
	}
	if sp.task.Dumps() {
		if err := t.load(ctx, sp, router, down); err != nil {
			return err
		}
		t.mu.Lock()
		t.loaded = true
		t.mu.Unlock()
		if !sp.task.Syncs() { // task-mode full: done
			t.mu.Lock()
			t.stage, t.lastErr = ha.StageFinished, nil
			t.mu.Unlock()
			t.log.Info("full load finished")
			<-ctx.Done()
			return ctx.Err()
		}
	}
	sc := sp.task.SyncerOf(sp.inst)
	upTLS, err := sp.source.From.TLSConfig("source " + sp.inst.SourceID + " from")
	if err != nil {
		return err
	}
	cfg := syncer.SyncerConfig{
		Task: sp.task.Name, Source: sp.inst.SourceID, Flavor: flavor,
		Host: sp.source.From.Host, Port: uint16(sp.source.From.Port), User: sp.source.From.User, Password: sp.source.From.PlainPassword(), TLS: upTLS,
		ServerID: sp.source.ServerID, EnableGTID: sp.source.EnableGTID, Router: router, Filter: filter, Online: online, Downstream: down, DDLDownstream: ddlDown, GroupStatements: true,
		MetaSchema: sp.task.MetaSchema, Agent: t.agent(sp),
		BatchRows: sc.Batch, WorkerCount: sc.WorkerCount, Epoch: sp.epoch, Log: t.unitLog,
		Operators: t.ops, SafeMode: sc.SafeMode, SafeModeDuration: sc.SafeModeFor(), SpreadHotTables: sc.SpreadHotTables,
	}
	if cfg.ServerID == 0 {
		h := fnv.New32a()
		h.Write([]byte(sp.task.Name + "\x00" + sp.inst.SourceID))
		cfg.ServerID = 0x20000000 | h.Sum32()&0x0fffffff
	}
	m := sp.inst.Meta
	if m == nil || (m.BinlogName == "" && m.BinlogGTID == "") || sp.timed {
		m = sp.start // with --start-time, the time's position comes before the meta
	}
	if sp.task.Dumps() {
		m = nil // the load's checkpoint says where to start
	}
	if m != nil {
		cfg.Start = vocab.Position{File: m.BinlogName, Pos: max(m.BinlogPos, 4)}
		if m.BinlogName == "" {
			cfg.Start = vocab.Position{}
		}
		cfg.StartGTID = m.BinlogGTID
	}
	// Read at every start: a decision given to an earlier worker of the source, or while the subtask
	// waited on an error, applies from the first event.
	if err := t.ops.Load(ctx); err != nil {
		return err
	}
	syncer := syncer.NewSyncer(cfg)
	t.mu.Lock()
	t.syncer = syncer
	t.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-syncer.Started(): // the previous error is over
			t.mu.Lock()
			t.lastErr = nil
			t.mu.Unlock()
		case <-rctx.Done():
		}
	}()
	return syncer.Run(rctx)
}

// detectFlavor returns "mariadb" when the source says it is MariaDB, else the configured flavor.
func detectFlavor(ctx context.Context, src *config.Source) (string, error) {
	db, err := dbutil.OpenDB(src.From)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", fmt.Errorf("source %s (%s): %w", src.SourceID, src.From, err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return mysql.MariaDBFlavor, nil
	}
	return src.Flavor, nil
}

func (t *subtask) status(ctx context.Context) *pb.SubTaskStatus {
	t.mu.Lock()
	stage, lastErr, syncer, loaded := t.stage, t.lastErr, t.syncer, t.loaded
	t.mu.Unlock()
	out := &pb.SubTaskStatus{Name: t.spec.task.Name, Stage: stage, Unit: "Sync"}
	if t.spec.task.Dumps() && (syncer == nil && !loaded || !t.spec.task.Syncs()) {
		out.Unit = "Load"
		t.mu.Lock()
		if t.loader != nil {
			out.Load = loadStatus(t.loader.Progress())
		}
		t.mu.Unlock()
		if stage == ha.StageFinished {
			return out
		}
		if stage == ha.StageRunning && t.loader != nil {
			return out
		}
	}
	if lastErr != nil {
		out.Result = &pb.ProcessResult{Errors: []*pb.ProcessError{processError(lastErr)}}
	}
	if stage != ha.StageRunning {
		if stage == ha.StagePaused && out.Unit == "Sync" {
			out.Sync = t.pausedSync(ctx)
		}
		return out
	}
	if syncer == nil {
		out.Stage = "New"
		return out
	}
	select {
	case <-syncer.Started():
	default:
		out.Stage = "New" // still reading its checkpoint and the upstream tables
		return out
	}
	st := syncer.Status()
	if st.ReadErr != nil {
		// Running, but not reading: the source does not answer (readRetry).
		out.Result = &pb.ProcessResult{Errors: []*pb.ProcessError{{ErrCode: 36069, ErrClass: "sync-unit", ErrScope: "upstream", ErrLevel: "high",
			Message:  fmt.Sprintf("the binlog cannot be read; retrying (attempt %d, last failed at %s)", st.ReadAttempt, st.ReadErrAt.UTC().Format(time.RFC3339)),
			RawCause: st.ReadErr.Error(), Workaround: "transient: the syncer reconnects by itself with a backoff from 2 s doubling to 30 s; see that the source is up and reachable"}}}
	}
	sync := &pb.SyncStatus{TotalEvents: st.TotalEvents, SyncerBinlog: st.SyncerBinlog.String(), SyncerBinlogGtid: st.SyncerGTID,
		BlockingDDLs: st.BlockingDDLs, BinlogType: "remote",
		TotalRows: st.TotalRows, TotalRps: st.TotalRps, RecentRps: st.RecentRps, TotalTps: st.TotalTps, RecentTps: st.RecentTps}
	if len(st.LockIDs) > 0 {
		out.UnresolvedDDLLockID = st.LockIDs[0]
	}
	for _, x := range st.PreparedXA {
		sync.PreparedXA = append(sync.PreparedXA, &pb.PreparedXA{Xid: x.XID, Position: x.Pos.String(), Seconds: int64(time.Since(x.Since).Seconds())})
	}
	for _, u := range st.Unresolved {
		g := &pb.ShardingGroup{Target: u.Target.String(), DDLs: u.DDLs, FirstLocation: u.FirstPosition.String()}
		for _, tb := range u.Synced {
			g.Synced = append(g.Synced, tb.String())
		}
		for _, tb := range u.Unsynced {
			g.Unsynced = append(g.Unsynced, tb.String())
		}
		sync.UnresolvedGroups = append(sync.UnresolvedGroups, g)
	}
	if pos, gtid, err := t.masterStatus(ctx); err == nil {
		sync.MasterBinlog, sync.MasterBinlogGtid = pos.String(), gtid
		sync.Synced = len(st.Unresolved) == 0 && pos.Compare(st.SyncerBinlog) == 0
		sync.SecondsBehindMaster = int64(sink.ReplicationLag(t.spec.task.Name, t.spec.inst.SourceID, pos.Compare(st.SyncerBinlog) != 0))
	} else {
		t.log.Warn("read source position for status", zap.Error(err))
	}
	out.Sync = sync
	return out
}

// pausedSync is the sync status of a subtask whose syncer does not run: the positions it resumes
// from (its checkpoint) and the source's, which an operator needs exactly then (binlog skip -b,
// binlog-schema). nil when neither can be read.
func (t *subtask) pausedSync(ctx context.Context) *pb.SyncStatus {
	if t.spec.source == nil || t.spec.task.TargetDatabase.Host == "" {
		return nil // a subtask without servers (unit tests)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sync := &pb.SyncStatus{BinlogType: "remote"}
	ok := false
	if down, err := dbutil.OpenDB(t.spec.task.TargetDatabase); err == nil {
		store := meta.NewStore(down, t.spec.task.MetaSchema, t.spec.task.Name, t.spec.inst.SourceID)
		pos, gtid, err := store.LoadGlobal(ctx)
		down.Close()
		if err == nil && !pos.IsZero() {
			sync.SyncerBinlog, sync.SyncerBinlogGtid, ok = pos.String(), gtid, true
		} else if err != nil && !dbutil.IsNoSuchTable(err) {
			t.log.Warn("read checkpoint for status", zap.Error(err))
		}
	}
	if pos, gtid, err := t.masterStatus(ctx); err == nil {
		sync.MasterBinlog, sync.MasterBinlogGtid, ok = pos.String(), gtid, true
	} else {
		t.log.Warn("read source position for status", zap.Error(err))
	}
	if !ok {
		return nil
	}
	return sync
}

func (t *subtask) masterStatus(ctx context.Context) (vocab.Position, string, error) {
	t.mu.Lock()
	if t.upDB == nil {
		db, err := dbutil.OpenDB(t.spec.source.From)
		if err != nil {
			t.mu.Unlock()
			return vocab.Position{}, "", err
		}
		t.upDB = db
	}
	db := t.upDB
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return dbutil.SourcePosition(ctx, db)
}

// agent is the pessimist agent of a subtask's source. With the fault matrix's "agent-coordinated"
// switch (failpoint builds only) it leaves every exec to the coordinator, whose step between the last
// info and the exec the matrix kills processes at.
func (t *subtask) agent(sp spec) *pessimist.Agent {
	a := pessimist.NewAgent(t.cfg.Client, t.cfg.Layout, sp.task.Name, sp.inst.SourceID, t.unitLog)
	a.SetTaskKey(ha.TaskKey(sp.task.Name))
	if failpoint.Active("agent-coordinated") {
		a.LeaveExecToCoordinator()
	}
	return a
}
