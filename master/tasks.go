package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/checker"
	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/starttime"
)

// How long a command waits for the workers to carry it out before answering with what it saw.
const applyWait = 20 * time.Second

func (s *Service) logger() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
}

func (s *Service) layout() pessimist.Layout {
	if s.Layout.Root() == "" {
		return pessimist.NewLayout("")
	}
	return s.Layout
}

// errNoTask is DM's answer for an unknown task.
func errNoTask(name string) error {
	return fmt.Errorf("task %s has no source or not exist, please check the task name and status", name)
}

// OperateSource implements dmctl operate-source create|stop|show.
func (s *Service) OperateSource(ctx context.Context, req *pb.OperateSourceRequest) (*pb.OperateSourceResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.OperateSourceResponse, error) { return s.operateSource(ctx, l, req) },
		func(c pb.MasterClient) (*pb.OperateSourceResponse, error) { return c.OperateSource(ctx, req) },
		func(err error) *pb.OperateSourceResponse { return &pb.OperateSourceResponse{Msg: err.Error()} })
}

func (s *Service) operateSource(ctx context.Context, l *leaderState, req *pb.OperateSourceRequest) (*pb.OperateSourceResponse, error) {
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(req.Op) {
	case "create", "start":
		if len(req.Config) == 0 {
			return nil, errors.New("operate-source create needs at least one source file")
		}
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		var ids []string
		var errs []error
		for i, raw := range req.Config {
			src, err := config.ParseSource(fmt.Sprintf("source file #%d", i+1), []byte(raw))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, ok := st.Sources[src.SourceID]; ok || slices.Contains(ids, src.SourceID) {
				errs = append(errs, fmt.Errorf("source %s already exists (dmctl operate-source stop %s first to replace it)", src.SourceID, src.SourceID))
				continue
			}
			if err := ping(ctx, src.From); err != nil {
				errs = append(errs, fmt.Errorf("source %s: cannot connect to the database server its file names (from: %s): %v", src.SourceID, src.From, err))
				continue
			}
			stored, err := s.encryptPasswords(raw, []string{"from", "password"})
			if err != nil {
				errs = append(errs, fmt.Errorf("source %s: encrypt from.password: %w", src.SourceID, err))
				continue
			}
			ids = append(ids, src.SourceID)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(ha.SourceKey(src.SourceID)), "=", 0))
			ops = append(ops, clientv3.OpPut(ha.SourceKey(src.SourceID), stored))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("nothing created: %w", err)
		}
		ok, err := fencedTxn(ctx, s.Client, l.fence, cmps, ops...)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("a source of the same ID was created concurrently; nothing created")
		}
		s.logger().Info("sources created", zap.Strings("sources", ids))
		st, _ = s.waitState(ctx, func(st ha.State) bool {
			for _, id := range ids {
				if _, ok := st.Bindings[id]; !ok {
					return false
				}
			}
			return true
		})
		return sourcesResponse(st, ids), nil
	case "stop":
		if len(req.SourceID) == 0 {
			return nil, errors.New("operate-source stop needs source IDs")
		}
		var ops []clientv3.Op
		var errs []error
		for _, id := range req.SourceID {
			if _, ok := st.Sources[id]; !ok {
				errs = append(errs, fmt.Errorf("source %s does not exist", id))
				continue
			}
			for _, t := range sortedTasks(st) {
				switch {
				case slices.Contains(t.Sources(), id):
					errs = append(errs, fmt.Errorf("source %s is used by task %s; stop-task %s first", id, t.Name, t.Name))
				case slices.Contains(t.AllSources(), id):
					// stop-task -s took it out of the task, which still counts it: its shard DDL locks
					// wait for it, and start-task -s brings it back. Removing the source would leave
					// them waiting for a source that is gone.
					errs = append(errs, fmt.Errorf("source %s is still a source of task %s (stop-task -s stopped it there; the task's locks wait for it): "+
						"stop-task %s first, or start-task %s -s %s", id, t.Name, t.Name, t.Name, id))
				}
			}
			ops = append(ops, clientv3.OpDelete(ha.SourceKey(id)), clientv3.OpDelete(ha.BoundKey(id)))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("nothing stopped: %w", err)
		}
		if _, err := fencedTxn(ctx, s.Client, l.fence, nil, ops...); err != nil {
			return nil, err
		}
		resp := &pb.OperateSourceResponse{Result: true}
		for _, id := range req.SourceID {
			resp.Sources = append(resp.Sources, &pb.CommonWorkerResponse{Result: true, Source: id, Worker: st.Bindings[id].Worker})
		}
		return resp, nil
	case "show":
		ids := req.SourceID
		if len(ids) == 0 {
			ids = st.SortedSources()
		}
		for _, id := range ids {
			if _, ok := st.Sources[id]; !ok {
				return nil, fmt.Errorf("source %s does not exist", id)
			}
		}
		return sourcesResponse(st, ids), nil
	default:
		return nil, fmt.Errorf("operate-source: unknown operation %q (create, stop or show)", req.Op)
	}
}

func ping(ctx context.Context, d config.Database) error {
	db, err := dbutil.OpenDB(d)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func sourcesResponse(st ha.State, ids []string) *pb.OperateSourceResponse {
	resp := &pb.OperateSourceResponse{Result: true}
	for _, id := range ids {
		r := &pb.CommonWorkerResponse{Result: true, Source: id}
		if b, ok := st.Bindings[id]; ok {
			r.Worker = b.Worker
		} else {
			r.Msg = "no free worker: the source is bound when a dm-worker registers"
		}
		resp.Sources = append(resp.Sources, r)
	}
	return resp
}

func sortedTasks(st ha.State) []ha.Task {
	out := make([]ha.Task, 0, len(st.Tasks))
	for _, t := range st.Tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// waitState reloads the state until cond holds or applyWait passes, and returns the last state read.
func (s *Service) waitState(ctx context.Context, cond func(ha.State) bool) (ha.State, bool) {
	deadline := time.Now().Add(applyWait)
	for {
		st, err := ha.Load(ctx, s.Client)
		if err == nil && cond(st) {
			return st, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return st, false
		}
		ha.WaitChange(ctx, s.Client, st.Rev, 200*time.Millisecond)
	}
}

// checkSources returns the task's source configurations, or an error naming the missing ones.
func checkSources(task *config.Task, st ha.State) (map[string]*config.Source, error) {
	srcs := map[string]*config.Source{}
	var errs []error
	for i, inst := range task.MySQLInstances {
		src, ok := st.Sources[inst.SourceID]
		if !ok {
			errs = append(errs, fmt.Errorf("mysql-instances[%d].source-id %s: source not created (dmctl operate-source create FILE)", i, inst.SourceID))
			continue
		}
		srcs[inst.SourceID] = src.Parsed
	}
	return srcs, errors.Join(errs...)
}

// otherTasks checks that none of the cluster's other stored tasks writes a target of task
// (checker.OtherTasks), listing the tables of their sources.
func otherTasks(ctx context.Context, task *config.Task, st ha.State) []checker.Failure {
	var others []*config.Task
	var out []checker.Failure
	for _, t := range sortedTasks(st) {
		if t.Name == task.Name {
			continue
		}
		cfg, err := t.Parse()
		if err != nil {
			out = append(out, checker.Failure{Item: checker.ItemOneTaskPerTarget, Level: checker.Warning,
				Message: fmt.Sprintf("task %s's stored configuration cannot be read (%v): its targets are not compared", t.Name, err)})
			continue
		}
		others = append(others, cfg)
	}
	sources := make(map[string]*config.Source, len(st.Sources))
	for id, s := range st.Sources {
		sources[id] = s.Parsed
	}
	return append(out, checker.OtherTasks(ctx, task, others, sources)...)
}

// StartTask implements dmctl start-task [--remove-meta] [--start-time T].
func (s *Service) StartTask(ctx context.Context, req *pb.StartTaskRequest) (*pb.StartTaskResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.StartTaskResponse, error) { return s.startTask(ctx, l, req) },
		func(c pb.MasterClient) (*pb.StartTaskResponse, error) { return c.StartTask(ctx, req) },
		func(err error) *pb.StartTaskResponse { return &pb.StartTaskResponse{Msg: err.Error()} })
}

func (s *Service) startTask(ctx context.Context, l *leaderState, req *pb.StartTaskRequest) (*pb.StartTaskResponse, error) {
	task, err := config.ParseTask("task file", []byte(req.Task))
	if err != nil {
		return nil, err
	}
	sources := task.SourceIDs()
	var at starttime.Time
	if req.StartTime != "" {
		if at, err = checkStartTime(task, req.StartTime); err != nil {
			return nil, err
		}
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	if t, ok := st.Tasks[task.Name]; ok {
		if len(req.Sources) > 0 && len(notIn(req.Sources, t.Stopped)) == 0 {
			if req.RemoveMeta || req.StartTime != "" {
				// They would be ignored: the sources go on from their checkpoints, with the stored file.
				return nil, fmt.Errorf("start-task -s %s of started task %s starts the sources again from their checkpoints: --remove-meta and --start-time do not apply; "+
					"stop-task %s and start it whole to use them", strings.Join(req.Sources, ","), task.Name, task.Name)
			}
			for _, src := range req.Sources {
				if _, ok := st.Sources[src]; !ok {
					return nil, fmt.Errorf("start-task -s %s: source %s was removed (operate-source stop); operate-source create it again first", src, src)
				}
			}
			return s.restartSources(ctx, l, t, req.Sources)
		}
		if len(req.Sources) > 0 {
			return nil, fmt.Errorf("start-task -s %s: task %s is started and runs on %s; start-task -s starts only sources stop-task -s removed (%s)",
				strings.Join(notIn(req.Sources, t.Stopped), ","), task.Name, strings.Join(t.Sources(), ", "), strings.Join(t.Stopped, ", "))
		}
		return nil, fmt.Errorf("task %s is already started (stage %s); stop-task %s first, or resume-task it", task.Name, t.Stage, task.Name)
	}
	// start-task -s of a new task starts it on those sources only (DM's way): the others are stored as
	// stopped, and start-task -s starts them later. Its locks wait for every source of the file.
	if unknown := notIn(req.Sources, sources); len(unknown) > 0 {
		return nil, fmt.Errorf("start-task -s %s: not a source of task %s (its sources: %s)", strings.Join(unknown, ","), task.Name, strings.Join(sources, ", "))
	}
	var stopped []string
	if len(req.Sources) > 0 {
		stopped = notIn(sources, req.Sources)
	}
	srcs, err := checkSources(task, st)
	if err != nil {
		return nil, err
	}
	// Warnings and information do not stop the start (DM's way); they come back in checkResult.
	checks := append(checker.Check(ctx, task, srcs, req.RemoveMeta), otherTasks(ctx, task, st)...)
	if req.StartTime != "" {
		// The time says where each source without a checkpoint starts: its meta is not used.
		checks = slices.DeleteFunc(checks, func(f checker.Failure) bool { return f.Item == checker.ItemMetaPosition })
	}
	items := checker.Items(task)
	s.logPrecheck("start-task", task.Name, checks, items)
	checkResult := precheckResult(checks, items)
	if checker.Failed(checks) {
		return &pb.StartTaskResponse{Msg: "precheck failed; nothing started:\n" + checkResult, CheckResult: checkResult}, nil
	}
	// Whether a target is merged is the whole task's answer: the tables of every source, found now
	// (before anything is removed, so a source that cannot be read changes nothing) and stored with
	// the task, decide it for every worker.
	topo, err := checker.Topology(ctx, task, srcs)
	if err != nil {
		return nil, err
	}
	// Found before anything is removed: a time a source cannot serve changes nothing.
	var timed map[string]timeStart
	if req.StartTime != "" {
		if timed, err = s.timePositions(ctx, task, srcs, at, req.RemoveMeta); err != nil {
			return nil, err
		}
	}
	if req.RemoveMeta {
		down, err := dbutil.OpenDB(task.TargetDatabase)
		if err != nil {
			return nil, err
		}
		// The hidden tables of an interrupted load go first: their names are in the load headers of
		// the checkpoint table, and a new load refuses one that no header names.
		dropped, err := loader.DropHidden(ctx, down, task.MetaSchema, task.Name)
		if len(dropped) > 0 {
			names := make([]string, len(dropped))
			for i, t := range dropped {
				names[i] = t.String()
			}
			s.logger().Info("tables of the task's interrupted load dropped", zap.String("task", task.Name), zap.Strings("tables", names))
		}
		if err != nil {
			down.Close()
			return nil, fmt.Errorf("drop the tables of the interrupted load of task %s: %w", task.Name, err)
		}
		err = meta.Remove(ctx, down, task.MetaSchema, task.Name)
		down.Close()
		if err != nil {
			return nil, fmt.Errorf("remove checkpoint of task %s: %w", task.Name, err)
		}
		if err := pessimist.DeleteTask(ctx, s.Client, s.layout(), task.Name); err != nil {
			return nil, err
		}
		s.logger().Info("task meta removed", zap.String("task", task.Name))
	}
	starts, err := startPositions(ctx, task, srcs, req.RemoveMeta)
	if err != nil {
		return nil, err
	}
	if err := pessimist.PutTaskSources(ctx, s.Client, s.layout(), task.Name, sources); err != nil {
		return nil, err
	}
	stored, err := s.encryptPasswords(req.Task, []string{"target-database", "password"})
	if err != nil {
		return nil, fmt.Errorf("task %s: encrypt target-database.password: %w", task.Name, err)
	}
	t := ha.Task{Name: task.Name, Config: stored, Stage: ha.StageRunning, Starts: starts, Topology: topo, Stopped: stopped}
	for id, ts := range timed {
		if ts.point == nil {
			continue
		}
		m := config.Meta{BinlogName: ts.point.Pos.File, BinlogPos: ts.point.Pos.Pos, BinlogGTID: ts.point.GTID}
		if t.Starts == nil {
			t.Starts = map[string]config.Meta{}
		}
		t.Starts[id], t.StartTime = m, req.StartTime
		s.logger().Info("source starts at a time's position", zap.String("task", task.Name), zap.String("source", id),
			zap.String("start_time", req.StartTime), zap.Stringer("position", ts.point.Pos), zap.String("gtid", ts.point.GTID), zap.Bool("at_end", ts.point.AtEnd))
	}
	ok, err := fencedTxn(ctx, s.Client, l.fence,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ha.TaskKey(task.Name)), "=", 0)},
		clientv3.OpPut(ha.TaskKey(task.Name), ha.Encode(t)))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("task %s was started concurrently", task.Name)
	}
	sources = t.Sources()
	s.logger().Info("task started", zap.String("task", task.Name), zap.Strings("sources", sources), zap.Strings("stopped", stopped))
	// Wait until every subtask has fixed its start (a task without meta starts at the position of
	// that moment) or stopped on an error, so writes made after start-task returns are replicated.
	statuses := s.waitSubtasks(ctx, task.Name, sources, func(sub *pb.SubTaskStatus) bool {
		return sub != nil && (sub.Stage == ha.StageRunning || sub.Result != nil)
	})
	resp := startResponse(task.Name, sources, statuses)
	resp.CheckResult = checkResult
	for _, r := range resp.Sources {
		if ts, ok := timed[r.Source]; ok {
			r.Msg = strings.TrimPrefix(r.Msg+"; "+ts.msg, "; ")
		}
	}
	// A source of an incremental task without meta or checkpoint starts where its binlog is now:
	// its answer says where, and that what was written before is not copied (DM's behaviour, shown).
	for _, f := range checks {
		if f.Item != checker.ItemMetaPosition || f.Level != checker.Warning {
			continue
		}
		for _, r := range resp.Sources {
			if r.Source != f.Source || !r.Result {
				continue
			}
			at := "(query-status shows it as syncerBinlog)"
			if sub := subtaskOf(statuses[f.Source], task.Name); sub != nil && sub.Sync != nil {
				at = sub.Sync.SyncerBinlog
			}
			r.Msg = fmt.Sprintf("%s %s; rows written before it are not copied (give the source a meta, or use task-mode: all)", checker.NoMeta, at)
		}
	}
	return resp, nil
}

// restartSources is start-task -s for sources that stop-task -s removed from a running task: their
// subtasks start again from their checkpoints, with the task's stored file (a changed file needs
// stop-task and start-task of the whole task).
func (s *Service) restartSources(ctx context.Context, l *leaderState, t ha.Task, sources []string) (*pb.StartTaskResponse, error) {
	next := t
	next.Stopped = slices.DeleteFunc(slices.Clone(t.Stopped), func(src string) bool { return slices.Contains(sources, src) })
	key := ha.TaskKey(t.Name)
	ok, err := fencedTxn(ctx, s.Client, l.fence, []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", ha.Encode(t))},
		clientv3.OpPut(key, ha.Encode(next)))
	if err != nil || !ok {
		return nil, errors.Join(err, errConcurrent(ok, t.Name))
	}
	s.logger().Info("task started again on sources", zap.String("task", t.Name), zap.Strings("sources", sources))
	statuses := s.waitSubtasks(ctx, t.Name, sources, func(sub *pb.SubTaskStatus) bool {
		return sub != nil && (sub.Stage == next.Stage || sub.Result != nil)
	})
	return startResponse(t.Name, sources, statuses), nil
}

// startResponse is start-task's answer: true only when the subtask runs on every source; otherwise
// false, each source that did not start with its cause. The task stays registered either way: its
// subtasks retry by themselves (query-status shows them), and stop-task removes it.
func startResponse(task string, sources []string, statuses map[string]*pb.QueryStatusResponse) *pb.StartTaskResponse {
	resp := &pb.StartTaskResponse{Result: true}
	var failed []string
	for _, src := range sources {
		r := commonOf(src, statuses[src])
		if sub := subtaskOf(statuses[src], task); sub == nil || sub.Stage != ha.StageRunning {
			r.Result = false
			if sub != nil && sub.Result != nil && len(sub.Result.Errors) > 0 {
				r.Msg = sub.Result.Errors[0].RawCause
			} else if r.Msg == "" {
				r.Msg = "the subtask has not started yet; see query-status"
			}
		}
		if !r.Result {
			failed = append(failed, src)
		}
		resp.Sources = append(resp.Sources, r)
	}
	if len(failed) > 0 {
		resp.Result = false
		resp.Msg = fmt.Sprintf("task %s is created, but its subtask did not start on %s (the cause is in each source's msg); "+
			"it retries by itself: query-status %s shows it, stop-task %s removes the task", task, strings.Join(failed, ", "), task, task)
	}
	return resp
}

func subtaskOf(qs *pb.QueryStatusResponse, task string) *pb.SubTaskStatus {
	if qs == nil {
		return nil
	}
	for _, sub := range qs.SubTaskStatus {
		if sub.Name == task {
			return sub
		}
	}
	return nil
}

// startPositions reads the current binlog position (and GTID set) of every source that has neither
// meta nor checkpoint: "start from the current position" means the position at start-task.
func startPositions(ctx context.Context, task *config.Task, srcs map[string]*config.Source, fresh bool) (map[string]config.Meta, error) {
	down, err := dbutil.OpenDB(task.TargetDatabase)
	if err != nil {
		return nil, err
	}
	defer down.Close()
	out := map[string]config.Meta{}
	for _, inst := range task.MySQLInstances {
		if m := inst.Meta; m != nil && (m.BinlogName != "" || m.BinlogGTID != "") {
			continue
		}
		if !fresh {
			has, err := meta.HasCheckpoint(ctx, down, task.MetaSchema, task.Name, inst.SourceID)
			if err != nil {
				return nil, fmt.Errorf("read checkpoint of task %s: %w", task.Name, err)
			}
			if has {
				continue
			}
		}
		src := srcs[inst.SourceID]
		db, err := dbutil.OpenDB(src.From)
		if err != nil {
			return nil, err
		}
		pos, gtid, err := dbutil.SourcePosition(ctx, db)
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("source %s (%s): read binlog position: %w", inst.SourceID, src.From, err)
		}
		m := config.Meta{BinlogName: pos.File, BinlogPos: pos.Pos}
		if src.EnableGTID {
			m.BinlogGTID = gtid // MariaDB's gtid_binlog_pos or MySQL's Executed_Gtid_Set
		}
		out[inst.SourceID] = m
	}
	return out, nil
}

// commonOf summarises one source's status after a task command.
func commonOf(source string, qs *pb.QueryStatusResponse) *pb.CommonWorkerResponse {
	r := &pb.CommonWorkerResponse{Result: true, Source: source}
	if qs == nil {
		r.Result, r.Msg = false, "no status from the source's worker"
		return r
	}
	if qs.SourceStatus != nil {
		r.Worker = qs.SourceStatus.Worker
	}
	if !qs.Result {
		r.Result, r.Msg = false, qs.Msg
	}
	return r
}

// waitSubtasks polls the sources' workers until cond holds for the task's subtask on every source
// (nil: the worker does not run it) or applyWait passes, and returns the last statuses.
func (s *Service) waitSubtasks(ctx context.Context, task string, sources []string, cond func(*pb.SubTaskStatus) bool) map[string]*pb.QueryStatusResponse {
	deadline := time.Now().Add(applyWait)
	wait := 5 * time.Millisecond // a resume usually takes a few tens of ms: look soon, then less often
	for {
		st, err := ha.Load(ctx, s.Client)
		if err != nil {
			return nil
		}
		statuses := s.sourceStatuses(ctx, st, task, sources)
		all := true
		for _, src := range sources {
			if !cond(subtaskOf(statuses[src], task)) {
				all = false
			}
		}
		if all || time.Now().After(deadline) || ctx.Err() != nil {
			return statuses
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// sourceStatuses asks each source's worker, in parallel, for its subtasks of task ("" for all).
func (s *Service) sourceStatuses(ctx context.Context, st ha.State, task string, sources []string) map[string]*pb.QueryStatusResponse {
	out := map[string]*pb.QueryStatusResponse{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, src := range sources {
		w, err := liveWorker(st, src)
		if err != nil {
			out[src] = &pb.QueryStatusResponse{Msg: err.Error(), SourceStatus: &pb.SourceStatus{Source: src, Worker: st.Bindings[src].Worker}}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			qs, err := s.queryWorker(ctx, w.Addr, task)
			if err != nil {
				qs = &pb.QueryStatusResponse{Msg: fmt.Sprintf("worker %s (%s): %v", w.Name, w.Addr, err)}
			}
			if qs.SourceStatus == nil {
				qs.SourceStatus = &pb.SourceStatus{}
			}
			qs.SourceStatus.Source, qs.SourceStatus.Worker = src, w.Name
			mu.Lock()
			out[src] = qs
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// liveWorker is the worker a source is bound to, when that worker is alive.
func liveWorker(st ha.State, src string) (ha.Worker, error) {
	b, ok := st.Bindings[src]
	w, known := st.Workers[b.Worker]
	switch {
	case !ok:
		return ha.Worker{}, fmt.Errorf("source %s is not bound to any worker (no free dm-worker)", src)
	case !known || !st.Alive[b.Worker]:
		return ha.Worker{}, fmt.Errorf("worker %s of source %s is offline", b.Worker, src)
	}
	return w, nil
}

func (s *Service) queryWorker(ctx context.Context, addr, task string) (*pb.QueryStatusResponse, error) {
	conn, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pb.NewWorkerClient(conn).QueryStatus(ctx, &pb.QueryStatusRequest{Name: task})
}

// OperateTask implements dmctl stop-task, pause-task and resume-task.
func (s *Service) OperateTask(ctx context.Context, req *pb.OperateTaskRequest) (*pb.OperateTaskResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.OperateTaskResponse, error) { return s.operateTask(ctx, l, req) },
		func(c pb.MasterClient) (*pb.OperateTaskResponse, error) { return c.OperateTask(ctx, req) },
		func(err error) *pb.OperateTaskResponse { return &pb.OperateTaskResponse{Op: req.Op, Msg: err.Error()} })
}

func (s *Service) operateTask(ctx context.Context, l *leaderState, req *pb.OperateTaskRequest) (*pb.OperateTaskResponse, error) {
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	t, ok := st.Tasks[req.Name]
	if !ok {
		return nil, errNoTask(req.Name)
	}
	sources := t.Sources()
	op := strings.ToLower(req.Op)
	next, stopAll, err := t.Operate(op, req.Sources)
	if err != nil {
		if len(req.Sources) > 0 {
			return nil, fmt.Errorf("%s-task -s %s", op, err)
		}
		return nil, err
	}
	affected := sources
	if len(req.Sources) > 0 && !stopAll {
		affected = slices.DeleteFunc(slices.Clone(sources), func(s string) bool { return !slices.Contains(req.Sources, s) })
	}
	var cond func(*pb.SubTaskStatus) bool
	key := ha.TaskKey(t.Name)
	guard := []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", ha.Encode(t))}
	write := clientv3.OpPut(key, ha.Encode(next))
	switch op {
	case "stop":
		cond = func(sub *pb.SubTaskStatus) bool { return sub == nil }
		if stopAll {
			// The task's binlog skip|replace decisions go with it (a new start-task reads the binlog anew).
			if ok, err := fencedTxn(ctx, s.Client, l.fence, guard, clientv3.OpDelete(key), ha.DeleteTaskOperators(t.Name)); err != nil || !ok {
				return nil, errors.Join(err, errConcurrent(ok, t.Name))
			}
			break
		}
		// stop-task -s: those sources' decisions go with their subtasks; the task's locks keep
		// waiting for them (DM's way): shard-ddl-lock says so, and unlock or start-task -s resolves it.
		ops := []clientv3.Op{write}
		for _, src := range affected {
			ops = append(ops, clientv3.OpDelete(ha.OperatorsPrefix(t.Name, src), clientv3.WithPrefix()))
		}
		if ok, err := fencedTxn(ctx, s.Client, l.fence, guard, ops...); err != nil || !ok {
			return nil, errors.Join(err, errConcurrent(ok, t.Name))
		}
	case "pause":
		if ok, err := fencedTxn(ctx, s.Client, l.fence, guard, write); err != nil || !ok {
			return nil, errors.Join(err, errConcurrent(ok, t.Name))
		}
		cond = func(sub *pb.SubTaskStatus) bool { return sub != nil && sub.Stage == ha.StagePaused }
	case "resume":
		if ok, err := fencedTxn(ctx, s.Client, l.fence, guard, write); err != nil || !ok {
			return nil, errors.Join(err, errConcurrent(ok, t.Name))
		}
		cond = func(sub *pb.SubTaskStatus) bool { return sub != nil && sub.Stage == ha.StageRunning }
	}
	sources = affected
	s.logger().Info("task operated", zap.String("task", t.Name), zap.String("op", req.Op), zap.Strings("sources", affected), zap.Bool("whole-task", len(req.Sources) == 0 || stopAll))
	statuses := s.waitSubtasks(ctx, t.Name, sources, cond)
	resp := &pb.OperateTaskResponse{Op: req.Op, Result: true}
	for _, src := range sources {
		resp.Sources = append(resp.Sources, commonOf(src, statuses[src]))
	}
	// stop-task keeps the task's shard DDL locks (DM's way): shard-ddl-lock still shows them, unlock
	// removes them, start-task continues them and start-task --remove-meta removes them.
	return resp, nil
}

// notIn returns the elements of asked that all does not hold.
func notIn(asked, all []string) []string {
	return slices.DeleteFunc(slices.Clone(asked), func(s string) bool { return slices.Contains(all, s) })
}

func errConcurrent(ok bool, task string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("task %s changed concurrently; try again", task)
}

// QueryStatus implements dmctl query-status [task].
func (s *Service) QueryStatus(ctx context.Context, req *pb.QueryStatusListRequest) (*pb.QueryStatusListResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.QueryStatusListResponse, error) {
		resp, err := s.queryStatus(ctx, req)
		if err == nil {
			addPseudoGroups(resp, l)
			if req.Name != "" && l.coord != nil {
				// A lock of the task that waits for a paused or stopped source says so.
				if st, err := ha.Load(ctx, s.Client); err == nil {
					if locks, err := l.coord.Locks(); err == nil {
						if notes := waitNotes(st, locks, req.Name); len(notes) > 0 {
							resp.Msg = strings.Join(notes, "; ")
						}
					}
				}
			}
		}
		return resp, err
	},
		func(c pb.MasterClient) (*pb.QueryStatusListResponse, error) { return c.QueryStatus(ctx, req) },
		func(err error) *pb.QueryStatusListResponse { return &pb.QueryStatusListResponse{Msg: err.Error()} })
}

func (s *Service) queryStatus(ctx context.Context, req *pb.QueryStatusListRequest) (*pb.QueryStatusListResponse, error) {
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	var sources []string
	if req.Name != "" {
		t, ok := st.Tasks[req.Name]
		if !ok {
			return nil, errNoTask(req.Name)
		}
		sources = t.Sources()
	} else {
		sources = st.SortedSources()
	}
	if len(req.Sources) > 0 {
		if unknown := notIn(req.Sources, sources); len(unknown) > 0 {
			if req.Name != "" {
				return nil, fmt.Errorf("%s: not a source of task %s (its sources: %s)", strings.Join(unknown, ", "), req.Name, strings.Join(sources, ", "))
			}
			return nil, fmt.Errorf("%s: no such source (operate-source show lists them)", strings.Join(unknown, ", "))
		}
		sources = slices.DeleteFunc(sources, func(s string) bool { return !slices.Contains(req.Sources, s) })
	}
	sort.Strings(sources)
	statuses := s.sourceStatuses(ctx, st, req.Name, sources)
	resp := &pb.QueryStatusListResponse{Result: true}
	for _, src := range sources {
		resp.Sources = append(resp.Sources, statuses[src])
	}
	return resp, nil
}

// CheckTask implements dmctl check-task.
func (s *Service) CheckTask(ctx context.Context, req *pb.CheckTaskRequest) (*pb.CheckTaskResponse, error) {
	task, err := config.ParseTask("task file", []byte(req.Task))
	if err != nil {
		return &pb.CheckTaskResponse{Msg: err.Error()}, nil
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return &pb.CheckTaskResponse{Msg: err.Error()}, nil
	}
	srcs, err := checkSources(task, st)
	if err != nil {
		return &pb.CheckTaskResponse{Msg: err.Error()}, nil
	}
	fs := append(checker.Check(ctx, task, srcs, false), otherTasks(ctx, task, st)...)
	items := checker.Items(task)
	s.logPrecheck("check-task", task.Name, fs, items)
	if checker.Failed(fs) {
		return &pb.CheckTaskResponse{Msg: "precheck failed:\n" + precheckResult(fs, items)}, nil
	}
	// Warnings and information pass (DM's way): they are in the answer, which stays true.
	return &pb.CheckTaskResponse{Result: true, Msg: "pre-check is passed. \n" + precheckResult(fs, items)}, nil
}

// precheckResult is the precheck's answer: its results, one a line (errors, then warnings, then
// information), and a last line saying which items were checked and which were not, and why.
func precheckResult(fs []checker.Failure, items []checker.ItemRun) string {
	if len(fs) == 0 {
		return checker.ItemsLine(items)
	}
	return checker.Report(fs) + "\n" + checker.ItemsLine(items)
}

// logPrecheck logs a precheck's outcome: each error and warning once (its state fail or warning, as
// DM's; "level" is zap's), then one line with the counts and the items checked.
func (s *Service) logPrecheck(cmd, task string, fs []checker.Failure, items []checker.ItemRun) {
	var errs, warns int
	for _, f := range fs {
		if f.Level == checker.Info {
			continue
		}
		state := "warning" // DM's states: fail, warning
		if f.Level == checker.Error {
			errs++
			state = "fail"
		} else {
			warns++
		}
		s.logger().Warn("precheck item", zap.String("command", cmd), zap.String("task", task), zap.String("item", f.Item),
			zap.String("state", state), zap.String("source", f.Source), zap.String("message", f.Message))
	}
	var notRun []string
	for _, it := range items {
		if !it.Ran {
			notRun = append(notRun, it.Item)
		}
	}
	s.logger().Info("precheck done", zap.String("command", cmd), zap.String("task", task), zap.Bool("passed", !checker.Failed(fs)),
		zap.Int("errors", errs), zap.Int("warnings", warns), zap.Strings("checked", checker.Ran(items)), zap.Strings("not-run", notRun))
}

// ListMember implements dmctl list-member.
func (s *Service) ListMember(ctx context.Context, req *pb.ListMemberRequest) (*pb.ListMemberResponse, error) {
	all := !req.Leader && !req.Master && !req.Worker
	resp := &pb.ListMemberResponse{Result: true}
	want := func(name string) bool { return len(req.Names) == 0 || slices.Contains(req.Names, name) }
	if all || req.Leader {
		lm := &pb.ListLeaderMember{}
		name, err := Leader(ctx, s.Client, s.Election)
		if err != nil {
			lm.Msg = err.Error()
		} else if name == "" {
			lm.Msg = "no leader elected yet"
		} else {
			lm.Name = name
			if r, err := s.Client.Get(ctx, MembersPrefix+name); err == nil && len(r.Kvs) > 0 {
				lm.Addr = string(r.Kvs[0].Value)
			}
		}
		resp.Members = append(resp.Members, &pb.Members{Member: &pb.Members_Leader{Leader: lm}})
	}
	if all || req.Master {
		mm := &pb.ListMasterMember{}
		ml, err := s.Client.MemberList(ctx)
		if err != nil {
			mm.Msg = err.Error()
		} else {
			for _, m := range ml.Members {
				if !want(m.Name) {
					continue
				}
				mm.Masters = append(mm.Masters, &pb.MasterInfo{Name: m.Name, MemberID: m.ID, Alive: s.alive(ctx, m.ClientURLs),
					PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs})
			}
			sort.Slice(mm.Masters, func(i, j int) bool { return mm.Masters[i].Name < mm.Masters[j].Name })
		}
		resp.Members = append(resp.Members, &pb.Members{Member: &pb.Members_Master{Master: mm}})
	}
	if all || req.Worker {
		wm := &pb.ListWorkerMember{}
		st, err := ha.Load(ctx, s.Client)
		if err != nil {
			wm.Msg = err.Error()
		} else {
			for _, w := range st.Workers {
				if !want(w.Name) {
					continue
				}
				wi := &pb.WorkerInfo{Name: w.Name, Addr: w.Addr, Stage: "offline"}
				if st.Alive[w.Name] {
					wi.Stage = "free"
				}
				if b, ok := st.BoundTo(w.Name); ok {
					wi.Source = b.Source
					if st.Alive[w.Name] {
						wi.Stage = "bound"
					}
				}
				wm.Workers = append(wm.Workers, wi)
			}
			sort.Slice(wm.Workers, func(i, j int) bool { return wm.Workers[i].Name < wm.Workers[j].Name })
		}
		resp.Members = append(resp.Members, &pb.Members{Member: &pb.Members_Worker{Worker: wm}})
	}
	return resp, nil
}

// alive reports whether an etcd member answers on one of its client URLs.
// A client of its own is dialed: the master's own client may be bound to the local member.
func (s *Service) alive(ctx context.Context, urls []string) bool {
	if len(urls) == 0 {
		return false
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: time.Second, Logger: zap.NewNop(), TLS: s.TLS})
	if err != nil {
		return false
	}
	defer cli.Close()
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Status(ctx, u)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// OfflineMember implements dmctl offline-member: it removes a worker that is not alive (its
// registration and binding), or a master that does not answer (its etcd membership).
func (s *Service) OfflineMember(ctx context.Context, req *pb.OfflineMemberRequest) (*pb.OfflineMemberResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.OfflineMemberResponse, error) {
		return &pb.OfflineMemberResponse{Result: true}, s.offlineMember(ctx, l, req)
	},
		func(c pb.MasterClient) (*pb.OfflineMemberResponse, error) { return c.OfflineMember(ctx, req) },
		func(err error) *pb.OfflineMemberResponse { return &pb.OfflineMemberResponse{Msg: err.Error()} })
}

func (s *Service) offlineMember(ctx context.Context, l *leaderState, req *pb.OfflineMemberRequest) error {
	switch req.Type {
	case "worker":
		st, err := ha.Load(ctx, s.Client)
		if err != nil {
			return err
		}
		if _, ok := st.Workers[req.Name]; !ok {
			return fmt.Errorf("worker %s is not registered", req.Name)
		}
		if st.Alive[req.Name] {
			return fmt.Errorf("worker %s is alive; stop it before offline-member", req.Name)
		}
		ops := []clientv3.Op{clientv3.OpDelete(ha.WorkerKey(req.Name))}
		if b, ok := st.BoundTo(req.Name); ok {
			ops = append(ops, clientv3.OpDelete(ha.BoundKey(b.Source)))
		}
		ok, err := fencedTxn(ctx, s.Client, l.fence,
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ha.KeepaliveKey(req.Name)), "=", 0)}, ops...)
		if err == nil && !ok {
			err = fmt.Errorf("worker %s came back; not removed", req.Name)
		}
		return err
	case "master":
		if req.Name == s.Name {
			return fmt.Errorf("master %s is the one answering; offline-member removes only dead masters", req.Name)
		}
		ml, err := s.Client.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range ml.Members {
			if m.Name != req.Name {
				continue
			}
			if s.alive(ctx, m.ClientURLs) {
				return fmt.Errorf("master %s is alive; stop it before offline-member", req.Name)
			}
			if _, err := s.Client.MemberRemove(ctx, m.ID); err != nil {
				return fmt.Errorf("remove master %s from the etcd cluster: %w", req.Name, err)
			}
			_, err := s.Client.Delete(ctx, MembersPrefix+req.Name)
			return err
		}
		return fmt.Errorf("master %s is not a member", req.Name)
	default:
		return fmt.Errorf("offline-member --type must be master or worker, not %q", req.Type)
	}
}
