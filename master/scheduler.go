package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
)

// fencedTxn runs cmps→ops as one transaction inside the leader fence: ErrNotLeader when the fence
// fails, otherwise whether cmps held.
func fencedTxn(ctx context.Context, cli *clientv3.Client, fence clientv3.Cmp, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	resp, err := cli.Txn(ctx).If(fence).Then(clientv3.OpTxn(cmps, ops, nil)).Commit()
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, pessimist.ErrNotLeader
	}
	return resp.Responses[0].GetResponseTxn().Succeeded, nil
}

// RunScheduler keeps every source bound to one live worker while this master leads: it reads the
// state from etcd, carries out ha.Plan, and waits for the next change of sources, workers or
// bindings. Every write is fenced; a binding is only created while its worker's keepalive exists and
// the source is unbound, and only removed if it is still the binding the plan saw.
func RunScheduler(ctx context.Context, cli *clientv3.Client, fence clientv3.Cmp, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("scheduler")
	for ctx.Err() == nil {
		st, err := ha.Load(ctx, cli)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("read state", zap.Error(err))
			ha.SleepCtx(ctx, time.Second)
			continue
		}
		plan := ha.Plan(st)
		for _, b := range plan.Unbind {
			ok, err := fencedTxn(ctx, cli, fence,
				[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ha.BoundKey(b.Source)), "=", b.Epoch)},
				clientv3.OpDelete(ha.BoundKey(b.Source)))
			if err != nil {
				return err
			}
			log.Info("source unbound", zap.String("source", b.Source), zap.String("worker", b.Worker), zap.Bool("applied", ok))
		}
		for _, b := range plan.Bind {
			resp, err := fencedTxn(ctx, cli, fence,
				[]clientv3.Cmp{
					clientv3.Compare(clientv3.CreateRevision(ha.BoundKey(b.Source)), "=", 0),
					clientv3.Compare(clientv3.CreateRevision(ha.KeepaliveKey(b.Worker)), ">", 0),
					clientv3.Compare(clientv3.CreateRevision(ha.SourceKey(b.Source)), ">", 0),
				},
				clientv3.OpPut(ha.BoundKey(b.Source), ha.Encode(b)))
			if err != nil {
				return err
			}
			log.Info("source bound", zap.String("source", b.Source), zap.String("worker", b.Worker), zap.Bool("applied", resp))
		}
		if len(plan.Bind)+len(plan.Unbind) > 0 {
			continue // read what was written (or what raced with it) before waiting
		}
		ha.WaitChange(ctx, cli, st.Rev, 10*time.Second)
	}
	return ctx.Err()
}

// TransferSource implements dmctl transfer-source: it binds a source to another, free, live worker.
func (s *Service) TransferSource(ctx context.Context, req *pb.TransferSourceRequest) (*pb.TransferSourceResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.TransferSourceResponse, error) { return s.transferSource(ctx, l, req) },
		func(c pb.MasterClient) (*pb.TransferSourceResponse, error) { return c.TransferSource(ctx, req) },
		func(err error) *pb.TransferSourceResponse { return &pb.TransferSourceResponse{Msg: err.Error()} })
}

// transferSource moves the binding the way the scheduler makes one: one put of the source's bound
// key, fenced by the leader key. Its new mod revision is the binding's new epoch, so the old worker
// (which stops the source's subtasks when it sees the binding go) can commit nothing more, and the
// new one claims the checkpoint with it and resumes from there. The write holds only if the state
// ha.Transfer decided on still holds: the source's binding is the one read, the worker is alive,
// no binding was made since (the worker is still free) and no task changed (none was resumed).
func (s *Service) transferSource(ctx context.Context, l *leaderState, req *pb.TransferSourceRequest) (*pb.TransferSourceResponse, error) {
	if req.Source == "" || req.Worker == "" {
		return nil, errors.New("transfer-source needs a source ID and a worker name")
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	b, changed, err := ha.Transfer(st, req.Source, req.Worker)
	if err != nil {
		return nil, err
	}
	if !changed {
		return &pb.TransferSourceResponse{Result: true, Msg: fmt.Sprintf("source %s is already bound to worker %s; nothing changed", req.Source, req.Worker)}, nil
	}
	old := st.Bindings[req.Source]
	ok, err := moveBinding(ctx, s.Client, l.fence, st, b)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("source %s: the bindings, the workers or the tasks changed while transfer-source decided; nothing changed, try again", req.Source)
	}
	s.logger().Info("source transferred", zap.String("source", b.Source), zap.String("worker", b.Worker), zap.String("from", old.Worker))
	// Answer once the new worker runs the source (its subtasks as their stage says), so a resume-task
	// right after reaches it.
	if w, ok := st.Workers[b.Worker]; ok {
		deadline := time.Now().Add(applyWait)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if qs, err := s.queryWorker(ctx, w.Addr, ""); err == nil && qs.SourceStatus != nil && qs.SourceStatus.Source == b.Source {
				break
			}
			ha.SleepCtx(ctx, 50*time.Millisecond)
		}
	}
	return &pb.TransferSourceResponse{Result: true}, nil
}

// moveBinding writes binding b (the scheduler's bound key put, inside the leader fence) only if what
// st showed still holds: the source's binding is the one read (or there was none), b's worker is
// alive, the source exists, no binding was made or changed since st.Rev (so the worker is still
// free) and no task changed (none was resumed). It reports whether it wrote.
func moveBinding(ctx context.Context, cli *clientv3.Client, fence clientv3.Cmp, st ha.State, b ha.Binding) (bool, error) {
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(ha.KeepaliveKey(b.Worker)), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(ha.SourceKey(b.Source)), ">", 0),
		clientv3.Compare(clientv3.ModRevision(ha.BoundKey("")), "<", st.Rev+1).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(ha.TaskKey("")), "<", st.Rev+1).WithPrefix(),
	}
	if old, ok := st.Bindings[b.Source]; ok {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(ha.BoundKey(b.Source)), "=", old.Epoch))
	} else {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(ha.BoundKey(b.Source)), "=", 0))
	}
	return fencedTxn(ctx, cli, fence, cmps, clientv3.OpPut(ha.BoundKey(b.Source), ha.Encode(b)))
}
