package pessimist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/internal/failpoint"
)

// Coordinator is the master-side loop around the Keeper: it reads every pessimist key, watches for
// changes from that revision on, feeds them to the Keeper and writes what it decides. It holds no state
// that is not in etcd. Run it only while leader; give it the leader key's fence so that a deposed
// leader's late write fails.
type Coordinator struct {
	cli       *clientv3.Client
	layout    Layout
	fence     []clientv3.Cmp
	log       *zap.Logger
	retry     time.Duration
	maxTxnOps int

	mu     sync.Mutex
	keeper *Keeper // nil until the first full read

	afterLoad func() // test hook: runs between the full read and the watch
}

// CoordinatorOption configures a Coordinator.
type CoordinatorOption func(*Coordinator)

// WithFence guards every write with cmps (typically the leader key's create revision).
func WithFence(cmps ...clientv3.Cmp) CoordinatorOption {
	return func(c *Coordinator) { c.fence = cmps }
}

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) CoordinatorOption {
	return func(c *Coordinator) {
		if l != nil {
			c.log = l
		}
	}
}

// WithRetryInterval sets how soon a write that failed on an etcd error is tried again.
func WithRetryInterval(d time.Duration) CoordinatorOption {
	return func(c *Coordinator) { c.retry = d }
}

// WithMaxTxnOps sets etcd's --max-txn-ops (default DefaultMaxTxnOps); decisions stay within it.
func WithMaxTxnOps(n int) CoordinatorOption { return func(c *Coordinator) { c.maxTxnOps = n } }

// NewCoordinator returns a coordinator for the keys of layout.
func NewCoordinator(cli *clientv3.Client, layout Layout, opts ...CoordinatorOption) *Coordinator {
	c := &Coordinator{cli: cli, layout: layout, log: zap.NewNop(), retry: 200 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Run coordinates until ctx ends or the fence fails (ErrNotLeader). Watch failures, compaction and
// etcd errors restart it from a full read.
func (c *Coordinator) Run(ctx context.Context) error {
	for {
		err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrNotLeader) {
			c.log.Warn("pessimist coordinator stops: leadership lost")
			return err
		}
		c.log.Info("pessimist coordinator restarts from a full read", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.retry):
		}
	}
}

func (c *Coordinator) runOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.layout.Root(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read pessimist keys: %w", err)
	}
	k := NewKeeper(c.layout, c.maxTxnOps)
	k.SetRevision(resp.Header.Revision)
	for _, kv := range resp.Kvs {
		if err := k.ApplyKV(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision, false); err != nil {
			c.log.Warn("ignore malformed pessimist key", zap.ByteString("key", kv.Key), zap.Error(err))
		}
	}
	c.mu.Lock()
	c.keeper = k
	c.mu.Unlock()
	if c.afterLoad != nil {
		c.afterLoad()
	}
	c.log.Info("pessimist coordinator loaded", zap.Int64("revision", resp.Header.Revision), zap.Int("keys", len(resp.Kvs)))

	wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), c.layout.Root(),
		clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	retry := time.NewTicker(c.retry)
	defer retry.Stop()
	pending, err := c.decideAndWrite(ctx)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retry.C:
			if !pending {
				continue
			}
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watch: %w", err) // compacted: the full read catches up
			}
			c.mu.Lock()
			k.SetRevision(wr.Header.Revision)
			for _, ev := range wr.Events {
				kv := ev.Kv
				if err := k.ApplyKV(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision, ev.Type == clientv3.EventTypeDelete); err != nil {
					c.log.Warn("ignore malformed pessimist key", zap.ByteString("key", kv.Key), zap.Error(err))
				} else if ev.Type == clientv3.EventTypePut {
					c.logSessions(k, string(kv.Key), kv.Value)
				}
			}
			c.mu.Unlock()
		}
		if pending, err = c.decideAndWrite(ctx); err != nil {
			return err
		}
	}
}

// decideAndWrite writes the Keeper's decisions. It reports whether some write failed on an etcd error
// and must be retried; a write whose conditions failed needs nothing: the change that made it fail is
// on its way through the watch.
func (c *Coordinator) decideAndWrite(ctx context.Context) (bool, error) {
	c.mu.Lock()
	txns := c.keeper.Decide()
	c.mu.Unlock()
	pending := false
	for _, t := range txns {
		switch {
		case strings.HasPrefix(t.Reason, "exec by owner"):
			failpoint.Inject("master-before-exec") // every source's info is in; no exec yet
		case strings.HasPrefix(t.Reason, "skip after owner"):
			failpoint.Inject("master-before-skip") // the owner is done; no skip yet
		}
		ok, rev, err := applyRev(ctx, c.cli, t, c.fence)
		switch {
		case errors.Is(err, ErrNotLeader):
			return false, err
		case err != nil:
			c.log.Warn("pessimist write failed, will retry", zap.String("lock", t.LockID), zap.String("reason", t.Reason), zap.Error(err))
			c.mu.Lock()
			c.keeper.MarkDirty(t.LockID)
			c.mu.Unlock()
			pending = true
		case ok:
			c.mu.Lock()
			c.keeper.Written(t.LockID, rev)
			c.mu.Unlock()
			c.log.Info("pessimist decision written", zap.String("lock", t.LockID), zap.String("reason", t.Reason))
		default:
			c.log.Debug("pessimist decision outdated", zap.String("lock", t.LockID), zap.String("reason", t.Reason))
		}
	}
	return pending, nil
}

// logSessions says when an info's DDL events ran upstream in other session settings than another
// source's of the same lock: the lock's DDLs run downstream in its owner's.
func (c *Coordinator) logSessions(k *Keeper, key string, value []byte) {
	p, err := c.layout.parse(key)
	if err != nil || p.kind != kindInfo {
		return
	}
	var i Info
	if json.Unmarshal(value, &i) != nil {
		return
	}
	i.Task, i.Target, i.Source = p.task, p.target, p.source
	if o, ok := k.OtherSession(i); ok {
		c.log.Warn("a lock's DDLs ran upstream in different session settings on two sources: they run downstream in the owner's",
			zap.String("lock", i.LockID()), zap.String("source", i.Source), zap.String("settings", i.Session),
			zap.String("other", o.Source), zap.String("its", o.Session))
	}
}

// ErrNotReady is returned by queries before the coordinator's first full read.
var ErrNotReady = errors.New("pessimist coordinator is not ready")

// Locks returns every lock as the coordinator currently sees it.
func (c *Coordinator) Locks() ([]Lock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keeper == nil {
		return nil, ErrNotReady
	}
	return c.keeper.Locks(), nil
}

// UnlockLock carries out dmctl shard-ddl-lock unlock (see Keeper.Unlock). The request is one guarded
// write; the rest happens through the normal decisions, so it survives a restart half way.
func (c *Coordinator) UnlockLock(ctx context.Context, lockID, owner string, forceRemove bool) (Unlock, error) {
	c.mu.Lock()
	if c.keeper == nil {
		c.mu.Unlock()
		return Unlock{}, ErrNotReady
	}
	t, u, err := c.keeper.Unlock(lockID, owner, forceRemove)
	c.mu.Unlock()
	if err != nil {
		return Unlock{}, err
	}
	ok, err := apply(ctx, c.cli, t, c.fence)
	if err != nil {
		return Unlock{}, err
	}
	if !ok {
		return Unlock{}, fmt.Errorf("lock %s changed while unlocking; try again", lockID)
	}
	c.log.Info("lock unlocked by user", zap.String("lock", lockID), zap.String("owner", u.Owner), zap.Bool("force-remove", forceRemove),
		zap.Strings("ddls", u.DDLs), zap.Strings("overruled", u.Overrule), zap.Strings("missing", u.Missing))
	return u, nil
}

// LockTask returns the task of lockID, as the coordinator sees it.
func (c *Coordinator) LockTask(lockID string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keeper == nil {
		return "", ErrNotReady
	}
	l, ok := c.keeper.locks[lockID]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrLockNotFound, lockID)
	}
	return l.task, nil
}

// RemoveStoppedLock carries out dmctl shard-ddl-lock unlock of a lock whose task is stopped (see
// Keeper.RemoveStopped): the lock's keys go, nothing runs downstream. stopped is the key whose
// absence means the task is stopped; ErrTaskStarted if it is there.
func (c *Coordinator) RemoveStoppedLock(ctx context.Context, lockID, stopped string) error {
	c.mu.Lock()
	if c.keeper == nil {
		c.mu.Unlock()
		return ErrNotReady
	}
	t, err := c.keeper.RemoveStopped(lockID, stopped)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ok, err := apply(ctx, c.cli, t, c.fence)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("lock %s: %w", lockID, ErrTaskStarted)
	}
	c.log.Info("lock of a stopped task removed by user", zap.String("lock", lockID))
	return nil
}

// ErrTaskStarted is RemoveStoppedLock's answer when the lock's task was started meanwhile.
var ErrTaskStarted = errors.New("its task was started meanwhile; try again")

// PutTaskSources records the sources a task's locks wait for (the master calls it when a task starts
// or changes). The same sources again write nothing: the key's revision stays the one the arrivals of
// a lock kept across stop-task and start-task were counted against, so the infos that the restarted
// workers post again complete it as before.
func PutTaskSources(ctx context.Context, cli *clientv3.Client, layout Layout, task string, sources []string) error {
	key, val := layout.TaskKey(task), encode(TaskSources{Task: task, Sources: sources})
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", val)).Else(clientv3.OpPut(key, val)).Commit()
	return err
}

// DeleteTask removes every pessimist key of a task (start-task --remove-meta; stop-task keeps them). In the same
// transaction it puts the task's removal mark, which the agents' watches of the task's operations see
// (a wait on a lock with no operation has nothing else to see), and then deletes it: a mark left by a
// master that died in between is no lock state to anyone, and the task's next removal takes it.
func DeleteTask(ctx context.Context, cli *clientv3.Client, layout Layout, task string) error {
	mark := layout.TaskRemovedKey(task)
	ops := layout.taskPrefix(kindOp, task)
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpDelete(layout.TaskKey(task)),
		clientv3.OpDelete(layout.taskPrefix(kindInfo, task), clientv3.WithPrefix()),
		clientv3.OpDelete(mark+"\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd(ops))), // all but the mark
		clientv3.OpDelete(layout.taskPrefix(kindUnlock, task), clientv3.WithPrefix()),
		clientv3.OpDelete(layout.taskPrefix(kindAgent, task), clientv3.WithPrefix()),
		clientv3.OpDelete(layout.taskPrefix(kindDone, task), clientv3.WithPrefix()),
		clientv3.OpDelete(layout.taskPrefix(kindRound, task), clientv3.WithPrefix()),
		clientv3.OpDelete(layout.taskPrefix(kindArrive, task), clientv3.WithPrefix()),
		clientv3.OpPut(mark, encode(removal{Reason: "task removed"})),
	).Commit(); err != nil {
		return err
	}
	_, err := cli.Delete(ctx, mark)
	return err
}
