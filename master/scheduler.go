package master

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
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
