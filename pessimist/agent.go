package pessimist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrLockRemoved means the lock's keys were removed (unlock --force-remove, stop-task) while this
// source was waiting on it or finishing it.
var ErrLockRemoved = errors.New("lock removed")

// Agent is the worker side of the protocol for one source of one task.
type Agent struct {
	cli    *clientv3.Client
	layout Layout
	task   string
	source string
	log    *zap.Logger
	retry  time.Duration
	gen    int64 // revision of this agent's AgentKey write; 0 until the first PutInfo
}

// ErrSuperseded means a newer agent (worker incarnation) of the same source has started.
var ErrSuperseded = errors.New("a newer worker of this source has started")

// NewAgent returns the agent of source in task.
func NewAgent(cli *clientv3.Client, layout Layout, task, source string, log *zap.Logger) *Agent {
	if log == nil {
		log = zap.NewNop()
	}
	return &Agent{cli: cli, layout: layout, task: task, source: source, retry: 100 * time.Millisecond,
		log: log.With(zap.String("task", task), zap.String("source", source))}
}

// PutInfo tells the master that every shard table of this source routed to target has reached ddls.
// Putting the same info again (a worker that re-read its binlog) writes nothing.
func (a *Agent) PutInfo(ctx context.Context, target string, ddls []string) (Info, error) {
	info := Info{Task: a.task, Source: a.source, Target: target, DDLs: ddls}
	key, val := a.layout.InfoKey(a.task, target, a.source), encode(info)
	genKey := a.layout.AgentKey(a.task, a.source)
	put := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", val)},
		[]clientv3.Op{clientv3.OpGet(key)},
		[]clientv3.Op{clientv3.OpPut(key, val), clientv3.OpGet(key)})
	// Only while this agent is the source's newest: a put from an older incarnation whose request
	// lands after the newer one finished the lock would leave an info nobody answers. The first put
	// claims the generation in the same transaction (one revision).
	txn := a.cli.Txn(ctx)
	claiming := a.gen == 0
	if claiming {
		// Claim only if no other agent claimed since we looked: an older incarnation's first put that
		// lands late must not take the source back.
		seen, err := a.cli.Get(ctx, genKey)
		if err != nil {
			return Info{}, fmt.Errorf("read agent generation of source %s: %w", a.source, err)
		}
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(genKey), "<", seen.Header.Revision+1)).
			Then(clientv3.OpPut(genKey, time.Now().UTC().Format(time.RFC3339Nano)), put)
	} else {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(genKey), "=", a.gen)).Then(put)
	}
	resp, err := txn.Commit()
	if err != nil {
		return Info{}, fmt.Errorf("put info of lock %s for source %s: %w", info.LockID(), a.source, err)
	}
	if !resp.Succeeded {
		return Info{}, fmt.Errorf("put info of lock %s for source %s: %w", info.LockID(), a.source, ErrSuperseded)
	}
	if claiming {
		a.gen = resp.Header.Revision
	}
	inner := resp.Responses[len(resp.Responses)-1].GetResponseTxn()
	rs := inner.Responses[len(inner.Responses)-1].GetResponseRange()
	if len(rs.Kvs) != 1 {
		return Info{}, fmt.Errorf("put info of lock %s for source %s: info vanished at once", info.LockID(), a.source)
	}
	info.CreateRevision, info.ModRevision = rs.Kvs[0].CreateRevision, rs.Kvs[0].ModRevision
	a.log.Info("info put", zap.String("lock", info.LockID()), zap.Strings("ddls", ddls), zap.Bool("new", !inner.Succeeded))
	return info, nil
}

// read returns the current operation and info of a lock for this source.
func (a *Agent) read(ctx context.Context, target string) (op *Operation, info *Info, err error) {
	opKey, infoKey := a.layout.OperationKey(a.task, target, a.source), a.layout.InfoKey(a.task, target, a.source)
	resp, err := a.cli.Txn(ctx).Then(clientv3.OpGet(opKey), clientv3.OpGet(infoKey)).Commit()
	if err != nil {
		return nil, nil, err
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		op = new(Operation)
		if err := decodeKV(kvs[0], op); err != nil {
			return nil, nil, err
		}
		op.ModRevision = kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		info = new(Info)
		if err := decodeKV(kvs[0], info); err != nil {
			return nil, nil, err
		}
		info.CreateRevision, info.ModRevision = kvs[0].CreateRevision, kvs[0].ModRevision
	}
	return op, info, nil
}

func decodeKV(kv *mvccpb.KeyValue, v any) error {
	if err := json.Unmarshal(kv.Value, v); err != nil {
		return fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return nil
}

// WaitOperation waits for the operation (exec or skip) that answers info. It returns ErrLockRemoved if
// the info is deleted meanwhile. Only what was read from etcd is returned: after a lost connection
// nothing is assumed.
func (a *Agent) WaitOperation(ctx context.Context, info Info) (Operation, error) {
	for {
		op, err := a.waitOperation(ctx, info)
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrLockRemoved) {
			return op, err
		}
		a.log.Warn("waiting for operation failed, retrying", zap.String("lock", info.LockID()), zap.Error(err))
		if err := sleep(ctx, a.retry); err != nil {
			return Operation{}, err
		}
	}
}

// waitOperation watches the operation and info keys first and reads them second, so no change after
// the read can be missed, and the watches start at the current revision (a watch that starts in the
// past is served by etcd's catch-up loop, which runs only every 100 ms).
func (a *Agent) waitOperation(ctx context.Context, info Info) (Operation, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	changed := make(chan error, 1)
	notify := func(err error) {
		select {
		case changed <- err:
		default:
		}
	}
	// An operation put is taken from the watch event itself: one round trip less per source.
	found := make(chan Operation, 1)
	opKey := a.layout.OperationKey(a.task, info.Target, a.source)
	created := make(chan struct{}, 2)
	for _, key := range []string{opKey, a.layout.InfoKey(a.task, info.Target, a.source)} {
		wch := a.cli.Watch(wctx, key, clientv3.WithCreatedNotify())
		go func() {
			for wr := range wch {
				if wr.Created {
					created <- struct{}{}
				}
				for _, ev := range wr.Events {
					var op Operation
					if ev.Type == clientv3.EventTypePut && key == opKey && decodeKV(ev.Kv, &op) == nil &&
						!op.Done && sameDDLs(op.DDLs, info.DDLs) {
						op.ModRevision = ev.Kv.ModRevision
						select {
						case found <- op:
						default:
						}
					}
				}
				if len(wr.Events) > 0 || wr.Err() != nil {
					notify(wr.Err())
				}
			}
			notify(errors.New("watch closed"))
		}()
	}
	for n := 0; n < 2; {
		select {
		case <-ctx.Done():
			return Operation{}, ctx.Err()
		case <-created:
			n++
		case err := <-changed:
			if err != nil {
				return Operation{}, fmt.Errorf("watch lock %s: %w", info.LockID(), err)
			}
			// A change before both watches exist: the read below sees it.
		}
	}
	for {
		op, cur, err := a.read(ctx, info.Target)
		if err != nil {
			return Operation{}, err
		}
		if op != nil && !op.Done && sameDDLs(op.DDLs, info.DDLs) {
			return *op, nil
		}
		if cur == nil {
			return Operation{}, fmt.Errorf("source %s waiting on lock %s: %w", a.source, info.LockID(), ErrLockRemoved)
		}
		select {
		case <-ctx.Done():
			return Operation{}, ctx.Err()
		case op := <-found:
			return op, nil
		case err := <-changed:
			if err != nil {
				return Operation{}, fmt.Errorf("watch lock %s: %w", info.LockID(), err)
			}
			select {
			case op := <-found:
				return op, nil
			default:
			}
		}
	}
}

// DoneOperationDeleteInfo marks op done and deletes info in one transaction: the master sends skips to the other
// sources only after the owner's done. Call it only once the operation has taken effect downstream and
// the checkpoint past the DDL is saved. An ambiguous commit is settled by reading the key again.
func (a *Agent) DoneOperationDeleteInfo(ctx context.Context, op Operation, info Info) error {
	opKey, infoKey := a.layout.OperationKey(a.task, op.Target, a.source), a.layout.InfoKey(a.task, op.Target, a.source)
	done := op
	done.Done = true
	val := encode(done)
	// When no other source has an info left (an operation that is not done always has its info) and
	// no unlock request is pending, this source is the last one: the same transaction clears the
	// lock's operations, which saves the coordinator's cleanup write.
	infoPrefix := a.layout.lockPrefix(kindInfo, a.task, op.Target)
	unlockKey := a.layout.UnlockKey(a.task, op.Target)
	last := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(infoPrefix), "=", 0).WithRange(infoKey),
		clientv3.Compare(clientv3.CreateRevision(infoKey+"\x00"), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(infoPrefix)),
		clientv3.Compare(clientv3.CreateRevision(unlockKey), "=", 0),
	}
	for {
		resp, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(opKey), "=", op.ModRevision),
				clientv3.Compare(clientv3.ModRevision(infoKey), "=", info.ModRevision)).
			Then(clientv3.OpTxn(last,
				[]clientv3.Op{clientv3.OpDelete(a.layout.lockPrefix(kindOp, a.task, op.Target), clientv3.WithPrefix()), clientv3.OpDelete(infoKey)},
				[]clientv3.Op{clientv3.OpPut(opKey, val), clientv3.OpDelete(infoKey)})).
			Commit()
		if err == nil && resp.Succeeded {
			cleared := resp.Responses[0].GetResponseTxn().Succeeded
			a.log.Info("operation done", zap.String("lock", op.LockID()), zap.Bool("exec", op.Exec), zap.Bool("lock-cleared", cleared))
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.log.Warn("done operation: commit unknown, reading back", zap.String("lock", op.LockID()), zap.Error(err))
			if err := sleep(ctx, a.retry); err != nil {
				return err
			}
		}
		cur, curInfo, err := a.read(ctx, op.Target)
		if err != nil {
			continue
		}
		switch {
		case cur != nil && cur.Done && cur.Exec == op.Exec && sameDDLs(cur.DDLs, op.DDLs):
			return nil // an earlier attempt committed
		case cur == nil && curInfo == nil:
			// The lock is gone: cleared by this source's earlier attempt (an ambiguous commit, or a
			// previous incarnation of this worker), or removed by the user. Nothing is left to do.
			a.log.Warn("operation already cleared", zap.String("lock", op.LockID()))
			return nil
		case cur == nil:
			return fmt.Errorf("source %s finishing lock %s: %w", a.source, op.LockID(), ErrLockRemoved)
		case cur.Exec != op.Exec || !sameDDLs(cur.DDLs, op.DDLs):
			return fmt.Errorf("source %s finishing lock %s: the operation was replaced by %+v", a.source, op.LockID(), *cur)
		}
		// Same operation, other revisions (the info was put again by a restarted worker): retry.
		op.ModRevision = cur.ModRevision
		info.ModRevision = 0
		if curInfo != nil {
			info.ModRevision = curInfo.ModRevision
		}
	}
}

// Operations returns this source's operations in the task that are not done yet. A restarted worker
// marks done those its checkpoint shows as already applied, and handles the others when its binlog
// reaches them again.
func (a *Agent) Operations(ctx context.Context) ([]Operation, error) {
	resp, err := a.cli.Get(ctx, a.layout.taskPrefix(kindOp, a.task), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []Operation
	for _, kv := range resp.Kvs {
		var o Operation
		if err := decodeKV(kv, &o); err != nil {
			return nil, err
		}
		if o.Source == a.source && !o.Done {
			o.ModRevision = kv.ModRevision
			out = append(out, o)
		}
	}
	return out, nil
}

// Info reads this source's info of a lock, if any.
func (a *Agent) Info(ctx context.Context, target string) (Info, bool, error) {
	_, info, err := a.read(ctx, target)
	if err != nil || info == nil {
		return Info{}, false, err
	}
	return *info, true, nil
}

// TaskStarted reports whether the task's key (its sources) exists: stop-task removes it together with
// the task's locks, unlock --force-remove leaves it.
func (a *Agent) TaskStarted(ctx context.Context) (bool, error) {
	resp, err := a.cli.Get(ctx, a.layout.TaskKey(a.task), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
