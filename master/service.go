package master

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
)

// Service is the gRPC Master service dmctl calls. Lock queries and unlocks go to the coordinator,
// which exists only on the leader.
type Service struct {
	pb.UnimplementedMasterServer
	coord atomic.Pointer[pessimist.Coordinator]
}

// LeaderRun returns a Leadership Run that coordinates pessimistic locks under layout and serves them
// through svc while this master leads.
func LeaderRun(cli *clientv3.Client, layout pessimist.Layout, svc *Service, log *zap.Logger) func(context.Context, clientv3.Cmp) error {
	return func(ctx context.Context, fence clientv3.Cmp) error {
		c := pessimist.NewCoordinator(cli, layout, pessimist.WithFence(fence), pessimist.WithLogger(log))
		svc.coord.Store(c)
		defer svc.coord.CompareAndSwap(c, nil)
		return c.Run(ctx)
	}
}

const notLeader = "this master is not the leader; ask the leader (dmctl forwarding arrives with dm-master)"

// ShowDDLLocks implements dmctl shard-ddl-lock [task].
func (s *Service) ShowDDLLocks(ctx context.Context, req *pb.ShowDDLLocksRequest) (*pb.ShowDDLLocksResponse, error) {
	c := s.coord.Load()
	if c == nil {
		return &pb.ShowDDLLocksResponse{Msg: notLeader}, nil
	}
	locks, err := c.Locks()
	if err != nil {
		return &pb.ShowDDLLocksResponse{Msg: err.Error()}, nil
	}
	resp := &pb.ShowDDLLocksResponse{Result: true}
	for _, l := range locks {
		if req.Task != "" && l.Task != req.Task {
			continue
		}
		pl := &pb.DDLLock{ID: l.ID, Task: l.Task, Mode: l.Mode, Owner: l.Owner, DDLs: l.DDLs,
			Synced: l.Synced, Unsynced: l.Unsynced, Stage: l.Stage}
		for _, c := range l.Conflict {
			pl.Conflict = append(pl.Conflict, &pb.SourceDDLs{Source: c.Source, DDLs: c.DDLs})
		}
		resp.Locks = append(resp.Locks, pl)
	}
	if len(resp.Locks) == 0 {
		resp.Msg = "no DDL lock exists" // DM's words
	}
	return resp, nil
}

// UnlockDDLLock implements dmctl shard-ddl-lock unlock.
func (s *Service) UnlockDDLLock(ctx context.Context, req *pb.UnlockDDLLockRequest) (*pb.UnlockDDLLockResponse, error) {
	c := s.coord.Load()
	if c == nil {
		return &pb.UnlockDDLLockResponse{Msg: notLeader}, nil
	}
	if err := c.UnlockLock(ctx, req.ID, req.ReplaceOwner, req.ForceRemove); err != nil {
		return &pb.UnlockDDLLockResponse{Msg: err.Error()}, nil
	}
	return &pb.UnlockDDLLockResponse{Result: true}, nil
}
