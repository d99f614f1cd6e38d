package master

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/ha"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/vocab"
)

// HandleError implements dmctl binlog skip|replace|revert|list (DM's handle-error): the master passes
// skip, replace and revert to the workers of the task's sources (all, or --sources), each of which
// keeps it in etcd for its subtask and resumes the subtask when it was paused on that statement; list
// reads etcd.
func (s *Service) HandleError(ctx context.Context, req *pb.HandleErrorRequest) (*pb.HandleErrorResponse, error) {
	return onLeader(ctx, s, func(*leaderState) (*pb.HandleErrorResponse, error) { return s.handleError(ctx, req) },
		func(c pb.MasterClient) (*pb.HandleErrorResponse, error) { return c.HandleError(ctx, req) },
		func(err error) *pb.HandleErrorResponse { return &pb.HandleErrorResponse{Msg: err.Error()} })
}

func (s *Service) handleError(ctx context.Context, req *pb.HandleErrorRequest) (*pb.HandleErrorResponse, error) {
	switch req.Op {
	case pb.ErrorOp_Skip, pb.ErrorOp_Revert, pb.ErrorOp_List:
		if len(req.Sqls) > 0 {
			return nil, fmt.Errorf("binlog %s takes no SQL statements (only binlog replace does)", opName(req.Op))
		}
	case pb.ErrorOp_Replace:
		if len(req.Sqls) == 0 {
			return nil, fmt.Errorf("binlog replace needs the statements to run instead, e.g. \"ALTER TABLE db.t ADD COLUMN c INT;\"")
		}
	case pb.ErrorOp_Inject:
		return nil, fmt.Errorf("binlog inject is not supported (DM deprecated it): use binlog replace")
	default:
		return nil, fmt.Errorf("unknown binlog operation %d", req.Op)
	}
	if req.Task == "" {
		return nil, fmt.Errorf("binlog %s needs a task name", opName(req.Op))
	}
	if req.BinlogPos != "" {
		if _, err := vocab.ParseBinlogPos(req.BinlogPos); err != nil {
			return nil, fmt.Errorf("-b: %w", err)
		}
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	sources, err := taskSources(st, req.Task, req.Sources)
	if err != nil {
		return nil, err
	}
	if len(req.Sources) == 0 && req.BinlogPos != "" && len(sources) > 1 && req.Op != pb.ErrorOp_List {
		// A position means one source's binlog: DM asks for the source too.
		return nil, fmt.Errorf("-b %s names a position in one source's binlog: give that source with -s (task %s has %v)", req.BinlogPos, req.Task, sources)
	}
	sort.Strings(sources)
	if req.Op == pb.ErrorOp_List {
		return listOperators(ctx, s.Client, st, req.Task, sources)
	}
	resp := &pb.HandleErrorResponse{Result: true}
	out := make([]*pb.CommonWorkerResponse, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		w, err := liveWorker(st, src)
		if err != nil {
			out[i] = &pb.CommonWorkerResponse{Source: src, Worker: st.Bindings[src].Worker, Msg: err.Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As DM: a whole task's skip, replace or revert applies to the sources paused on a
			// statement; the others answer that nothing was paused there.
			pausedOnly := len(req.Sources) == 0 && req.BinlogPos == ""
			r, err := s.handleWorkerError(ctx, w.Addr, &pb.HandleWorkerErrorRequest{Op: req.Op, Task: req.Task, BinlogPos: req.BinlogPos, Sqls: req.Sqls, Source: src, PausedOnly: pausedOnly})
			if err != nil {
				r = &pb.CommonWorkerResponse{Msg: fmt.Sprintf("worker %s (%s): %v", w.Name, w.Addr, err)}
			}
			r.Source, r.Worker = src, w.Name
			out[i] = r
		}()
	}
	wg.Wait()
	for _, r := range out {
		if !r.Result {
			resp.Result = false
		}
	}
	resp.Sources = out
	return resp, nil
}

// listOperators answers binlog list from etcd, where the workers keep the decisions: each source's
// msg is the JSON list of its decisions waiting (DM's answer), whether or not a worker runs it now.
func listOperators(ctx context.Context, cli *clientv3.Client, st ha.State, task string, sources []string) (*pb.HandleErrorResponse, error) {
	resp := &pb.HandleErrorResponse{Result: true}
	for _, src := range sources {
		stored, _, err := ha.LoadOperators(ctx, cli, task, src)
		if err != nil {
			return nil, err
		}
		var ops []json.RawMessage
		for _, o := range stored {
			ops = append(ops, o.Value)
		}
		b, err := json.Marshal(ops)
		if err != nil {
			return nil, fmt.Errorf("task %s, source %s: stored binlog operations: %w", task, src, err)
		}
		resp.Sources = append(resp.Sources, &pb.CommonWorkerResponse{Result: true, Source: src, Worker: st.Bindings[src].Worker, Msg: string(b)})
	}
	return resp, nil
}

func (s *Service) handleWorkerError(ctx context.Context, addr string, req *pb.HandleWorkerErrorRequest) (*pb.CommonWorkerResponse, error) {
	conn, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pb.NewWorkerClient(conn).HandleError(ctx, req)
}

func opName(op pb.ErrorOp) string {
	switch op {
	case pb.ErrorOp_Skip:
		return "skip"
	case pb.ErrorOp_Replace:
		return "replace"
	case pb.ErrorOp_Revert:
		return "revert"
	case pb.ErrorOp_List:
		return "list"
	}
	return op.String()
}

// taskSources returns the sources of task that a command's -s names, or all of the task's (but
// those stop-task -s removed) without -s, refusing a source the task does not have.
func taskSources(st ha.State, task string, asked []string) ([]string, error) {
	t, ok := st.Tasks[task]
	if !ok {
		return nil, errNoTask(task)
	}
	sources := t.Sources()
	for _, src := range asked {
		if !slices.Contains(sources, src) {
			return nil, fmt.Errorf("source %s is not a source of task %s (its sources: %v)", src, task, sources)
		}
	}
	if len(asked) > 0 {
		return slices.Clone(asked), nil
	}
	return sources, nil
}
