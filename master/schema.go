package master

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tributary-db/tributary/ha"
	pb "github.com/tributary-db/tributary/proto"
)

// OperateSchema implements dmctl binlog-schema list|update|delete (DM's operate-schema): the master
// passes the operation to the workers of the named sources, each of which reads or changes its
// subtask's tracked schema in the checkpoint.
func (s *Service) OperateSchema(ctx context.Context, req *pb.OperateSchemaRequest) (*pb.OperateSchemaResponse, error) {
	return onLeader(ctx, s, func(*leaderState) (*pb.OperateSchemaResponse, error) { return s.operateSchema(ctx, req) },
		func(c pb.MasterClient) (*pb.OperateSchemaResponse, error) { return c.OperateSchema(ctx, req) },
		func(err error) *pb.OperateSchemaResponse { return &pb.OperateSchemaResponse{Msg: err.Error()} })
}

func (s *Service) operateSchema(ctx context.Context, req *pb.OperateSchemaRequest) (*pb.OperateSchemaResponse, error) {
	if err := checkSchemaRequest(req); err != nil {
		return nil, err
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	sources, err := taskSources(st, req.Task, req.Sources)
	if err != nil {
		return nil, err
	}
	sort.Strings(sources)
	sources = slices.Compact(sources)
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
			r, err := s.operateWorkerSchema(ctx, w.Addr, &pb.OperateWorkerSchemaRequest{Op: req.Op, Task: req.Task, Source: src,
				Database: req.Database, Table: req.Table, Schema: req.Schema, Flush: req.Flush, Sync: req.Sync, FromSource: req.FromSource, FromTarget: req.FromTarget})
			if err != nil {
				r = &pb.CommonWorkerResponse{Msg: fmt.Sprintf("worker %s (%s): %v", w.Name, w.Addr, err)}
			}
			r.Source, r.Worker = src, w.Name
			out[i] = r
		}()
	}
	wg.Wait()
	resp := &pb.OperateSchemaResponse{Result: true, Sources: out}
	for _, r := range out {
		if !r.Result {
			resp.Result = false
		}
	}
	return resp, nil
}

// checkSchemaRequest refuses what no worker could do, naming the argument.
func checkSchemaRequest(req *pb.OperateSchemaRequest) error {
	if req.Task == "" {
		return fmt.Errorf("binlog-schema needs a task name")
	}
	if req.Database == "" || req.Table == "" {
		return fmt.Errorf("binlog-schema needs the upstream database and table")
	}
	switch req.Op {
	case pb.SchemaOp_GetSchema:
	case pb.SchemaOp_SetSchema:
		n := 0
		for _, b := range []bool{req.Schema != "", req.FromSource, req.FromTarget} {
			if b {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("binlog-schema update needs exactly one of a schema file, --from-source and --from-target (got %d)", n)
		}
		if len(req.Sources) == 0 {
			return fmt.Errorf("binlog-schema update changes one source's tracked schema: give the source with -s")
		}
	case pb.SchemaOp_RemoveSchema:
		if len(req.Sources) == 0 {
			return fmt.Errorf("binlog-schema delete changes one source's tracked schema: give the source with -s")
		}
	default:
		return fmt.Errorf("unknown binlog-schema operation %d", req.Op)
	}
	return nil
}

func (s *Service) operateWorkerSchema(ctx context.Context, addr string, req *pb.OperateWorkerSchemaRequest) (*pb.CommonWorkerResponse, error) {
	conn, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pb.NewWorkerClient(conn).OperateSchema(ctx, req)
}
