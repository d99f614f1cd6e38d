package pessimist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// ErrLockRemoved means the lock's keys were removed (unlock --force-remove, an unlock of a stopped task, start-task --remove-meta) while this
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

	tmu      sync.Mutex
	tv       taskView // the task's sources as last read (PutInfo)
	fastExec bool     // an info that completes its lock writes the exec (PutInfo); see LeaveExecToCoordinator

	wmu sync.Mutex
	ops *opsWatch // the watch of the task's operations, nil when none runs

	taskKey string // the master's key of the task, which stop-task deletes (SetTaskKey); "" for none

	opsIdle time.Duration   // the operations watch ends after this long with no wait on it
	onWait  func(read bool) // tests: called once a wait is in place (read: it read the lock first)
}

// ErrSuperseded means a newer agent (worker incarnation) of the same source has started.
var ErrSuperseded = errors.New("a newer worker of this source has started")

// NewAgent returns the agent of source in task.
func NewAgent(cli *clientv3.Client, layout Layout, task, source string, log *zap.Logger) *Agent {
	if log == nil {
		log = zap.NewNop()
	}
	return &Agent{cli: cli, layout: layout, task: task, source: source, retry: 100 * time.Millisecond,
		opsIdle: time.Minute, fastExec: true,
		log: log.With(zap.String("task", task), zap.String("source", source))}
}

// PutInfo tells the master that every shard table of this source routed to target has reached ddls.
// Putting the same info again (a worker that re-read its binlog) writes nothing.
//
// The info whose creation completes the lock is its exec: each info created counts itself on the
// lock's ArriveKey in the same transaction, while the infos agree (same DDLs, same source set of the
// task), and the put that finds every other source of the task counted, with no round, operation or
// unlock request of the lock in etcd, writes the exec operation for its own source and the round
// (the other sources are its participants) in that transaction too: no master round trip lies
// between the last shard's DDL and its execution, and a lock costs 2N writes. Infos that disagree,
// a changed info or a source set this agent has not read poison the count; an unlock request, a
// round or an operation of the lock keeps it from completing. The coordinator then decides as
// before. See arrival for why the count is exact.
func (a *Agent) PutInfo(ctx context.Context, target string, ddls []string) (Info, error) {
	return a.PutInfoIn(ctx, target, ddls, "")
}

// PutInfoIn is PutInfo of DDLs whose events ran in the session settings session (Info.Session).
func (a *Agent) PutInfoIn(ctx context.Context, target string, ddls []string, session string) (Info, error) {
	info := Info{Task: a.task, Source: a.source, Target: target, DDLs: ddls, Session: session}
	key, val := a.layout.InfoKey(a.task, target, a.source), encode(info)
	genKey := a.layout.AgentKey(a.task, a.source)
	// Only while this agent is the source's newest: a put from an older incarnation whose request
	// lands after the newer one finished the lock would leave an info nobody answers. The first put
	// claims the generation in the same transaction (one revision).
	txn := a.cli.Txn(ctx)
	claiming := a.gen == 0
	var seenRev int64
	if claiming {
		// Claim only if no other agent claimed since we looked: an older incarnation's first put that
		// lands late must not take the source back. The task's sources are read in the same request.
		seen, err := a.cli.Txn(ctx).Then(clientv3.OpGet(genKey), clientv3.OpGet(a.layout.TaskKey(a.task))).Commit()
		if err != nil {
			return Info{}, fmt.Errorf("read agent generation of source %s: %w", a.source, err)
		}
		a.setTaskSources(seen.Responses[1].GetResponseRange())
		seenRev = seen.Header.Revision
	}
	arrive, n := a.arrival(info, key, val)
	if claiming {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(genKey), "<", seenRev+1)).
			Then(clientv3.OpPut(genKey, time.Now().UTC().Format(time.RFC3339Nano)), arrive)
	} else {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(genKey), "=", a.gen)).Then(arrive)
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
	info.created = !inner.Succeeded && info.CreateRevision == info.ModRevision
	if !inner.Succeeded {
		info.exec = a.arrived(inner.Responses[0].GetResponseTxn(), info, n, resp.Header.Revision)
	}
	a.log.Info("info put", zap.String("lock", info.LockID()), zap.Strings("ddls", ddls), zap.Bool("new", !inner.Succeeded),
		zap.Bool("exec", info.exec != nil))
	return info, nil
}

// LeaveExecToCoordinator makes the agent's infos never write an exec themselves (each poisons the
// count of arrivals instead): every lock this agent takes part in is decided by the coordinator. For
// tests of the coordinator's decisions, and for the fault matrix's step between the last info and
// the exec, which only the coordinator's path has.
func (a *Agent) LeaveExecToCoordinator() { a.fastExec = false }

// arrivePoison is the ArriveKey's value once an info did not agree with the ones counted: no put
// counts on it or completes the lock until a new round (or the lock's removal) deletes it.
const arrivePoison = "poison"

// taskView is what an agent knows of its task's source set: the TaskKey's revision and sources.
type taskView struct {
	rev     int64
	sources []string // sorted
	in      bool     // this agent's source is one of them
}

func (a *Agent) setTaskSources(rr *etcdserverpb.RangeResponse) {
	var tv taskView
	if rr != nil && len(rr.Kvs) == 1 {
		var ts TaskSources
		if decodeKV(rr.Kvs[0], &ts) == nil {
			tv.rev, tv.sources = rr.Kvs[0].ModRevision, slices.Sorted(slices.Values(ts.Sources))
			tv.in = slices.Contains(tv.sources, a.source)
		}
	}
	a.tmu.Lock()
	a.tv = tv
	a.tmu.Unlock()
}

// arrival is the transaction that puts info (under the generation's condition), counts it on the
// lock's ArriveKey if it is created, and writes the exec if it completes the lock. Its last response
// is the info's key, read back; when the info was not there already, its first is the counting
// transaction (see arrived).
//
// Why the count is exact when the exec is written: only the creation of an info counts (putting the
// same info again writes nothing; changing it poisons), by an agent of a source of the task as of the
// TaskKey's revision that the transaction compares and that the count's value names; a count with
// another value is poisoned, not added to. A counted info is deleted only after an exec was written
// (the exec deletes the count: infos counted after it are of the next round), by the removal of a
// source (poisons) or of the lock (deletes); a skip of its own poisons on its done. So when the count
// reads N-1, N-1 distinct sources of the task have an info with these DDLs, and this one is the N-th;
// the lock has no round, operation or unlock request. Any info of a source outside the task would
// have poisoned the count (or been deleted with it by a new round, which waits for such infos to go).
func (a *Agent) arrival(info Info, key, val string) (op clientv3.Op, sources int) {
	a.tmu.Lock()
	tv := a.tv
	a.tmu.Unlock()
	arrive, taskKey := a.layout.ArriveKey(a.task, info.Target), a.layout.TaskKey(a.task)
	poison := clientv3.OpPut(arrive, arrivePoison)
	var count clientv3.Op
	if !a.fastExec {
		count = clientv3.OpTxn(nil, []clientv3.Op{poison}, nil)
	} else if !tv.in {
		// Not a source of the task as far as this agent knows: do not count, and read the sources.
		count = clientv3.OpTxn(nil, []clientv3.Op{poison, clientv3.OpGet(taskKey)}, nil)
	} else {
		mine := arriveValue(info.DDLs, tv.rev)
		n := len(tv.sources)
		last := []clientv3.Cmp{
			clientv3.Compare(clientv3.Version(a.layout.RoundKey(a.task, info.Target)), "=", 0),
			clientv3.Compare(clientv3.Version(a.layout.UnlockKey(a.task, info.Target)), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(a.layout.lockPrefix(kindOp, a.task, info.Target)), "=", 0).WithPrefix(),
			clientv3.Compare(clientv3.Version(arrive), "=", n-1),
		}
		if n > 1 {
			last = append(last, clientv3.Compare(clientv3.Value(arrive), "=", mine))
		}
		var parts []string
		for _, s := range tv.sources {
			if s != a.source {
				parts = append(parts, s)
			}
		}
		exec := []clientv3.Op{
			clientv3.OpPut(a.layout.OperationKey(a.task, info.Target, a.source), encode(Operation{
				Task: a.task, Source: a.source, Target: info.Target, DDLs: info.DDLs, Exec: true, Sources: n})),
			clientv3.OpPut(a.layout.RoundKey(a.task, info.Target), encode(Round{Task: a.task, Target: info.Target, Owner: a.source, Participants: parts})),
			clientv3.OpDelete(arrive),
		}
		add := clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Version(arrive), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(arrive, mine)},
			[]clientv3.Op{clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(arrive), "=", mine)},
				[]clientv3.Op{clientv3.OpPut(arrive, mine)},
				[]clientv3.Op{poison})})
		count = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(taskKey), "=", tv.rev)},
			[]clientv3.Op{clientv3.OpTxn(last, exec, []clientv3.Op{add})},
			[]clientv3.Op{poison, clientv3.OpGet(taskKey)}) // the sources changed: read them
	}
	create := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, val), count},
		[]clientv3.Op{clientv3.OpPut(key, val), poison}) // a changed info: the count no longer holds
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", val)},
		[]clientv3.Op{clientv3.OpGet(key)},
		[]clientv3.Op{create, clientv3.OpGet(key)}), len(tv.sources)
}

// arriveValue is the ArriveKey's value while the arrivals agree: their DDLs and the revision of the
// task's source set they were counted against.
func arriveValue(ddls []string, taskRev int64) string {
	sum := sha256.Sum256([]byte(encode(ddls)))
	return hex.EncodeToString(sum[:16]) + "@" + strconv.FormatInt(taskRev, 10)
}

// arrived reads the response of arrival's create transaction: it returns the exec operation if the
// put wrote it, and takes a fresh read of the task's sources.
func (a *Agent) arrived(create *etcdserverpb.TxnResponse, info Info, n int, rev int64) *Operation {
	if create == nil || !create.Succeeded {
		return nil // a changed info
	}
	count := create.Responses[1].GetResponseTxn()
	if count == nil {
		return nil
	}
	if !count.Succeeded || len(count.Responses) == 2 && count.Responses[1].GetResponseRange() != nil {
		// Not counted: the task's sources are in the response.
		a.setTaskSources(count.Responses[len(count.Responses)-1].GetResponseRange())
		return nil
	}
	last := count.Responses[0].GetResponseTxn()
	if last == nil || !last.Succeeded {
		return nil
	}
	return &Operation{Task: a.task, Source: a.source, Target: info.Target, DDLs: info.DDLs, Exec: true, Sources: n,
		CreateRevision: rev, ModRevision: rev}
}

// lockView is what an agent reads of one lock: its own operation, the lock's exec operation (which
// may be its own) and its own info, each nil when absent.
type lockView struct {
	own, exec *Operation
	info      *Info
}

// read reads this source's view of a lock: the lock's operations (one or two keys, unless an unlock
// or late sources made skips of their own) and this source's info.
func (a *Agent) read(ctx context.Context, target string) (lockView, error) {
	opKey, infoKey := a.layout.OperationKey(a.task, target, a.source), a.layout.InfoKey(a.task, target, a.source)
	resp, err := a.cli.Txn(ctx).Then(
		clientv3.OpGet(a.layout.lockPrefix(kindOp, a.task, target), clientv3.WithPrefix()),
		clientv3.OpGet(infoKey)).Commit()
	if err != nil {
		return lockView{}, err
	}
	var v lockView
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		o := new(Operation)
		if err := decodeOp(kv, o); err != nil {
			return lockView{}, err
		}
		if string(kv.Key) == opKey {
			v.own = o
		}
		if o.Exec {
			v.exec = o
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		v.info = new(Info)
		if err := decodeKV(kvs[0], v.info); err != nil {
			return lockView{}, err
		}
		v.info.CreateRevision, v.info.ModRevision = kvs[0].CreateRevision, kvs[0].ModRevision
	}
	return v, nil
}

func decodeOp(kv *mvccpb.KeyValue, o *Operation) error {
	if err := decodeKV(kv, o); err != nil {
		return err
	}
	o.CreateRevision, o.ModRevision = kv.CreateRevision, kv.ModRevision
	return nil
}

// answer returns the operation that answers this source's info of ddls, if there is one: its own
// operation, or the implicit skip of a done exec operation whose round its info takes part in.
func (a *Agent) answer(own, exec *Operation, info *Info, ddls []string) *Operation {
	if own != nil {
		if !own.Done && sameDDLs(own.DDLs, ddls) {
			return own
		}
		return nil // a done operation: this info is of the next round
	}
	if skip, ok := a.implicitSkip(exec, info, ddls); ok {
		return &skip
	}
	return nil
}

// implicitSkip returns the skip that the done exec operation is for info, when info takes part in its
// round (the caller has seen that this source has no operation of its own): info has the exec's DDLs
// and was there before the exec; an info put after it is the next round of a source that has
// finished this one. See Operation for why this is exactly the exec's participants.
func (a *Agent) implicitSkip(exec *Operation, info *Info, ddls []string) (Operation, bool) {
	if exec == nil || !exec.Done || exec.Sources == 0 || info == nil || !sameDDLs(exec.DDLs, ddls) || !sameDDLs(info.DDLs, ddls) ||
		info.CreateRevision >= exec.CreateRevision || exec.Source == a.source {
		return Operation{}, false
	}
	return Operation{
		Task: a.task, Source: a.source, Target: exec.Target, DDLs: exec.DDLs, Sources: exec.Sources,
		CreateRevision: exec.CreateRevision, ModRevision: exec.ModRevision, Owner: exec.Source,
	}, true
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

// waitOperation subscribes to the agent's watch of its task's operations, created before the lock is
// read, so no change after the read can be missed (a watch that starts in the past is served by etcd's
// catch-up loop, which runs only every 100 ms). An operation put is taken from the watch event itself;
// any other change of the lock's operations, or a removal mark (every transaction of the master that
// deletes infos puts one: the lock's on unlock --force-remove, the task's on start-task --remove-meta), reads the lock
// again. The wait makes no watch of its own: with the operations watch kept between locks, nothing on
// its path waits for a watch's creation.
func (a *Agent) waitOperation(ctx context.Context, info Info) (Operation, error) {
	if info.exec != nil {
		return *info.exec, nil // the put wrote it
	}
	changed := make(chan error, 1)
	notify := func(err error) {
		select {
		case changed <- err:
		default:
		}
	}
	found := make(chan Operation, 1)
	opKey, opPrefix := a.layout.OperationKey(a.task, info.Target, a.source), a.layout.lockPrefix(kindOp, a.task, info.Target)
	removedKey, taskRemovedKey := a.layout.RemovedKey(a.task, info.Target), a.layout.TaskRemovedKey(a.task)
	unsubscribe, since, err := a.subscribeOps(ctx, func(events []*clientv3.Event, err error) {
		if err != nil {
			notify(err)
			return
		}
		// An operation put says all there is to know about its key: only other changes (an operation
		// removed, the lock removed) need the lock read again. Reading on every put made all of a
		// lock's sources read it at once when its exec was written, on the owner's path.
		reread := false
		for _, ev := range events {
			key := string(ev.Kv.Key)
			if key == removedKey || key == taskRemovedKey {
				reread = true
				continue
			}
			if !strings.HasPrefix(key, opPrefix) {
				continue // another lock of the task
			}
			var op Operation
			if ev.Type != clientv3.EventTypePut || decodeOp(ev.Kv, &op) != nil {
				reread = true
				continue
			}
			var answer *Operation
			if key == opKey {
				answer = a.answer(&op, nil, &info, info.DDLs)
			} else if op.Exec {
				answer = a.answer(nil, &op, &info, info.DDLs)
			}
			if answer != nil {
				select {
				case found <- *answer:
				default:
				}
			}
		}
		if reread {
			notify(nil)
		}
	})
	if err != nil {
		return Operation{}, fmt.Errorf("watch lock %s: %w", info.LockID(), err)
	}
	defer unsubscribe()
	// An info this agent has just created is answered only by writes after it: when the watch delivers
	// every event after it to this wait, there is nothing to read. Otherwise (an info put before, by
	// this or an earlier incarnation of the worker; a watch started or events handed out since) the
	// lock is read.
	read := !info.created || since > info.ModRevision
	hook := a.onWait
	for {
		if read {
			v, err := a.read(ctx, info.Target)
			if err != nil {
				return Operation{}, err
			}
			if op := a.answer(v.own, v.exec, v.info, info.DDLs); op != nil {
				return *op, nil
			}
			if v.info == nil {
				return Operation{}, fmt.Errorf("source %s waiting on lock %s: %w", a.source, info.LockID(), ErrLockRemoved)
			}
		}
		if hook != nil {
			hook(read)
			hook = nil
		}
		read = true
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

// watchStreamKey is the gRPC metadata that puts the agents' watches on streams of their own: etcd's
// client creates the watches of one stream one at a time, each waiting for the server's answer, and
// the server sends a stream's responses through one queue of 128, past which a watcher waits for its
// 10 ms or 100 ms catch-up loops. Each operations watch has a stream of its own (opsStreams numbers
// them; a task or source name may hold bytes gRPC metadata cannot).
const watchStreamKey = "tributary-watch"

var opsStreams atomic.Int64

// opsWatch is an agent's one watch of its task's operations, shared by its waits and kept between
// locks, so that a wait creates no watch on the owner's path: a watch costs a round trip to create,
// and a client creates the watches of a stream one after another (N agents on one client, 2N round
// trips in a row for each lock when every wait made its own).
type opsWatch struct {
	ready  chan struct{} // closed once etcd has created the watch
	start  int64         // the revision it was created at (events after it come); set before ready closes
	handed int64         // the highest revision of an event handed to the subscriptions (a.wmu)
	failed chan struct{} // closed when the watch ended (err says why); no subscription after that
	err    error
	cancel context.CancelFunc
	subs   map[*opsSub]struct{}
	idle   *time.Timer
}

type opsSub struct {
	handle func(events []*clientv3.Event, err error) // called on the watch's goroutine; must not block
}

// subscribeOps calls handle with every later event of the task's operations, and with the error once
// the watch ends. It returns when etcd has created the watch, so a read after it misses nothing, and
// since: handle gets every event of a revision above it.
func (a *Agent) subscribeOps(ctx context.Context, handle func([]*clientv3.Event, error)) (unsubscribe func(), since int64, err error) {
	sub := &opsSub{handle: handle}
	a.wmu.Lock()
	w := a.ops
	if w == nil {
		w = a.startOpsWatch()
	}
	since = w.handed
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	w.subs[sub] = struct{}{}
	a.wmu.Unlock()
	select {
	case <-ctx.Done():
		a.unsubscribeOps(w, sub)
		return nil, 0, ctx.Err()
	case <-w.failed:
		a.unsubscribeOps(w, sub)
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, w.err // the next wait starts a new watch
	case <-w.ready:
		return func() { a.unsubscribeOps(w, sub) }, max(since, w.start), nil
	}
}

func (a *Agent) unsubscribeOps(w *opsWatch, sub *opsSub) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	delete(w.subs, sub)
	if len(w.subs) > 0 || a.ops != w {
		return
	}
	w.idle = time.AfterFunc(a.opsIdle, func() {
		a.wmu.Lock()
		defer a.wmu.Unlock()
		if a.ops == w && len(w.subs) == 0 {
			a.ops = nil
			w.cancel()
		}
	})
}

// startOpsWatch starts the task's operations watch; a.wmu is held.
func (a *Agent) startOpsWatch() *opsWatch {
	stream := fmt.Sprintf("agent-%d", opsStreams.Add(1))
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(context.Background()), watchStreamKey, stream))
	w := &opsWatch{ready: make(chan struct{}), failed: make(chan struct{}), cancel: cancel, subs: map[*opsSub]struct{}{}}
	a.ops = w
	wch := a.cli.Watch(wctx, a.layout.taskPrefix(kindOp, a.task), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	go func() {
		err := errors.New("watch closed")
		created := false
		for wr := range wch {
			if wr.Created {
				if !created {
					created = true
					w.start = wr.Header.Revision
					close(w.ready)
				}
				continue
			}
			if wr.Err() != nil {
				err = wr.Err()
				break
			}
			a.wmu.Lock()
			if n := len(wr.Events); n > 0 {
				w.handed = max(w.handed, wr.Events[n-1].Kv.ModRevision)
			}
			subs := make([]*opsSub, 0, len(w.subs))
			for s := range w.subs {
				subs = append(subs, s)
			}
			a.wmu.Unlock()
			for _, s := range subs {
				s.handle(wr.Events, nil)
			}
		}
		cancel()
		a.wmu.Lock()
		if a.ops == w {
			a.ops = nil
		}
		w.err = err
		subs := w.subs
		w.subs = nil
		a.wmu.Unlock()
		close(w.failed)
		for s := range subs {
			s.handle(nil, err)
		}
	}()
	return w
}

// DoneOperationDeleteInfo marks op done and deletes info in one transaction: the master sends skips to the other
// sources only after the owner's done. Call it only once the operation has taken effect downstream and
// the checkpoint past the DDL is saved. An ambiguous commit is settled by reading the key again.
//
// The done of an implicit skip is the deletion of the info alone (guarded by the exec operation it
// answers). The owner and the participants each count their done on the round's DoneKey: the one that
// sees every other done counted, with no unlock request and no operation besides the exec, is the last
// and clears the lock's operations in the same transaction. That check costs O(1) in etcd (a version,
// and ranges that hold no keys), however many sources the lock has.
func (a *Agent) DoneOperationDeleteInfo(ctx context.Context, op Operation, info Info) error {
	for {
		resp, err := a.doneTxn(ctx, op, info).Commit()
		if err == nil && resp.Succeeded {
			cleared := len(resp.Responses) == 1 && resp.Responses[0].GetResponseTxn() != nil && resp.Responses[0].GetResponseTxn().Succeeded
			a.log.Info("operation done", zap.String("lock", op.LockID()), zap.Bool("exec", op.Exec), zap.Bool("implicit", op.Implicit()), zap.Bool("lock-cleared", cleared))
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
		v, err := a.read(ctx, op.Target)
		if err != nil {
			continue
		}
		if op.Implicit() {
			switch {
			case v.info == nil:
				// Deleted by an earlier attempt (an ambiguous commit), or the lock was removed by the
				// user: nothing is left to do.
				return nil
			case v.exec == nil || !v.exec.Done || v.exec.Source != op.Owner || v.exec.CreateRevision != op.CreateRevision:
				return fmt.Errorf("source %s finishing lock %s: the owner's operation is gone: %w", a.source, op.LockID(), ErrLockRemoved)
			}
			// Same round, other revisions (the info was put again by a restarted worker): retry.
			op.ModRevision, info.ModRevision = v.exec.ModRevision, v.info.ModRevision
			continue
		}
		cur := v.own
		switch {
		case cur != nil && cur.Done && cur.Exec == op.Exec && sameDDLs(cur.DDLs, op.DDLs):
			return nil // an earlier attempt committed
		case cur == nil && v.info == nil:
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
		op.CreateRevision, op.ModRevision = cur.CreateRevision, cur.ModRevision
		info.ModRevision = 0
		if v.info != nil {
			info.ModRevision = v.info.ModRevision
		}
	}
}

// doneTxn is the transaction of DoneOperationDeleteInfo.
func (a *Agent) doneTxn(ctx context.Context, op Operation, info Info) clientv3.Txn {
	infoKey := a.layout.InfoKey(a.task, op.Target, a.source)
	key := a.layout.OperationKey(a.task, op.Target, a.source) // the key holding op: the exec's for an implicit skip
	if op.Implicit() {
		key = a.layout.OperationKey(a.task, op.Target, op.Owner)
	}
	txn := a.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(key), "=", op.ModRevision),
		clientv3.Compare(clientv3.ModRevision(infoKey), "=", info.ModRevision))
	notLast := []clientv3.Op{clientv3.OpDelete(infoKey)}
	if !op.Implicit() {
		done := op
		done.Done = true
		notLast = append(notLast, clientv3.OpPut(key, encode(done)))
	}
	if !op.Exec && !op.Implicit() || op.CreateRevision == 0 || op.Sources == 0 {
		// A skip operation of its own (a source that came late or was overruled): not counted in the
		// round; the coordinator clears the lock. Its info may have been counted as an arrival: the
		// count is poisoned until the next new round (PutInfo).
		return txn.Then(append(notLast, clientv3.OpPut(a.layout.ArriveKey(a.task, op.Target), arrivePoison))...)
	}
	counter := a.layout.DoneKey(a.task, op.Target, op.CreateRevision)
	opPrefix := a.layout.lockPrefix(kindOp, a.task, op.Target)
	last := []clientv3.Cmp{
		clientv3.Compare(clientv3.Version(counter), "=", op.Sources-1),
		clientv3.Compare(clientv3.CreateRevision(a.layout.UnlockKey(a.task, op.Target)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(opPrefix), "=", 0).WithRange(key),
		clientv3.Compare(clientv3.CreateRevision(key+"\x00"), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(opPrefix)),
	}
	clear := []clientv3.Op{
		clientv3.OpDelete(opPrefix, clientv3.WithPrefix()),
		clientv3.OpDelete(a.layout.lockPrefix(kindDone, a.task, op.Target), clientv3.WithPrefix()),
		clientv3.OpDelete(a.layout.RoundKey(a.task, op.Target)),
		clientv3.OpDelete(infoKey),
	}
	return txn.Then(clientv3.OpTxn(last, clear, append(notLast, clientv3.OpPut(counter, ""))))
}

// Operations returns this source's operations in the task that are not done yet, implicit skips
// included. A restarted worker marks done those its checkpoint shows as already applied, and handles
// the others when its binlog reaches them again.
func (a *Agent) Operations(ctx context.Context) ([]Operation, error) {
	resp, err := a.cli.Get(ctx, a.layout.taskPrefix(kindOp, a.task), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []Operation
	mine := map[string]bool{} // targets on which this source has an operation key
	ops := make([]Operation, len(resp.Kvs))
	for n, kv := range resp.Kvs {
		if p, err := a.layout.parse(string(kv.Key)); err == nil && p.removed {
			continue // a removal mark, the lock's or the task's
		}
		if err := decodeOp(kv, &ops[n]); err != nil {
			return nil, err
		}
		if ops[n].Source == a.source {
			mine[ops[n].Target] = true
		}
	}
	for _, o := range ops {
		switch {
		case o.Source == a.source && !o.Done:
			out = append(out, o)
		case o.Exec && o.Done && o.Source != a.source:
			if _, own := mine[o.Target]; own {
				continue // an operation of its own answers this source
			}
			info, ok, err := a.Info(ctx, o.Target)
			if err != nil {
				return nil, err
			}
			if skip, yes := a.implicitSkip(&o, &info, o.DDLs); ok && yes {
				out = append(out, skip)
			}
		}
	}
	return out, nil
}

// Info reads this source's info of a lock, if any.
func (a *Agent) Info(ctx context.Context, target string) (Info, bool, error) {
	resp, err := a.cli.Get(ctx, a.layout.InfoKey(a.task, target, a.source))
	if err != nil || len(resp.Kvs) == 0 {
		return Info{}, false, err
	}
	var info Info
	if err := decodeKV(resp.Kvs[0], &info); err != nil {
		return Info{}, false, err
	}
	info.CreateRevision, info.ModRevision = resp.Kvs[0].CreateRevision, resp.Kvs[0].ModRevision
	return info, true, nil
}

// TaskStarted reports whether the task's key (its sources) exists: start-task --remove-meta removes it
// together with the task's locks, unlock --force-remove leaves it; stop-task keeps it with the locks
// (and an unlock of a stopped task's lock, which only the master's task key tells, leaves it too).
//
// With a master's task key (SetTaskKey) the task counts as started only while that key exists too: a
// lock of a task being stopped, unlocked while its subtasks still wind down, is then not taken for a
// force-remove (whose DDLs the worker would skip).
func (a *Agent) TaskStarted(ctx context.Context) (bool, error) {
	ops := []clientv3.Op{clientv3.OpGet(a.layout.TaskKey(a.task), clientv3.WithCountOnly())}
	if a.taskKey != "" {
		ops = append(ops, clientv3.OpGet(a.taskKey, clientv3.WithCountOnly()))
	}
	resp, err := a.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().Count == 0 {
			return false, nil
		}
	}
	return true, nil
}

// SetTaskKey names the master's key of the task (ha.TaskKey), which stop-task deletes: TaskStarted
// requires it.
func (a *Agent) SetTaskKey(key string) { a.taskKey = key }

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
