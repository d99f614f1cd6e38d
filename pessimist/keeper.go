package pessimist

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
)

type lockState struct {
	task, target string
	infos        map[string]Info
	ops          map[string]Operation
	unlock       *Unlock

	round *Round

	// exec is the lock's exec operation when it has exactly one, and parts its participants (from
	// its Round) as a set; both are set again (setExec) whenever an exec operation or the round
	// changes, a few times per round.
	exec  *Operation
	parts map[string]bool

	// Counts kept up to date with every change (see count), so that Decide can tell in O(1) that a
	// lock waiting for more infos or dones has nothing to do: without them each of a lock's N watch
	// events cost an O(N log N) decision, O(N² log N) per lock.
	cnt lockCounts
}

// setExec finds l's exec operation and its participants after an exec operation or the round changed.
func (l *lockState) setExec() {
	l.exec, l.parts = nil, nil
	n := 0
	for _, o := range l.ops {
		if o.Exec {
			n++
			o := o
			l.exec = &o
		}
	}
	if n != 1 {
		l.exec = nil // several execs (only in states a user made): no implicit skips
		return
	}
	if r := l.round; r != nil && r.Owner == l.exec.Source && r.ModRevision == l.exec.CreateRevision {
		l.parts = setOf(r.Participants)
	}
}

// participant reports whether src takes part in the round of l's exec operation (its skip is implicit).
func (l *lockState) participant(src string) bool { return l.exec != nil && l.parts[src] }

// implicitSkip reports whether info i is still in the round of l's exec operation as a participant:
// it was there when the exec was written (an info put after it is the source's next round) and has
// the exec's DDLs. The exec operation, once done, is its skip.
func (l *lockState) implicitSkip(i Info) bool {
	return l.participant(i.Source) && i.CreateRevision < l.exec.CreateRevision && sameDDLs(i.DDLs, l.exec.DDLs)
}

// verifyCounts makes Decide check every lock's kept counts against a recount (tests set it).
var verifyCounts bool

// taskSet is a task's sources, sorted and as a set, computed once per change of the task's key.
type taskSet struct {
	sorted []string
	in     map[string]bool
}

func (l *lockState) empty() bool {
	return len(l.infos) == 0 && len(l.ops) == 0 && l.unlock == nil && l.round == nil
}

// Keeper is the pure pessimistic-lock state machine. Its state is exactly the pessimist keys in etcd
// (fed in with Put*/Delete* or ApplyKV); Decide returns the transactions that move every lock forward.
// Because it holds nothing that is not in etcd, a new Keeper fed with a full read decides exactly as
// the old one would have: that is how a restarted or newly elected coordinator takes over.
type Keeper struct {
	layout Layout
	maxOps int
	rev    int64 // every key under the layout's root is known as of this revision
	tasks  map[string]TaskSources
	// taskSets holds, for every task in tasks, its sources sorted and as a set.
	taskSets map[string]taskSet
	locks    map[string]*lockState
	dirty    map[string]bool
	// written holds the revision of this Keeper's last successful write per lock: the lock is not
	// decided again before that write's changes have come back (else each watch event in between
	// would repeat the decision just written, and each repeat would fail in etcd).
	written map[string]int64
	// counting holds the locks whose arrival count holds (an ArriveKey that is not poisoned): the
	// info that completes such a lock writes the exec for its own source. Only for what Locks shows.
	counting map[string]bool
}

// NewKeeper returns an empty Keeper for keys in layout. maxTxnOps bounds the comparisons and the
// operations of one transaction (0: DefaultMaxTxnOps).
func NewKeeper(layout Layout, maxTxnOps int) *Keeper {
	if maxTxnOps <= 0 {
		maxTxnOps = DefaultMaxTxnOps
	}
	return &Keeper{layout: layout, maxOps: maxTxnOps, tasks: map[string]TaskSources{}, taskSets: map[string]taskSet{}, locks: map[string]*lockState{}, dirty: map[string]bool{}, written: map[string]int64{},
		counting: map[string]bool{}}
}

// SetRevision records that the Keeper has been fed every change up to rev (a full read's or a watch
// response's header revision).
func (k *Keeper) SetRevision(rev int64) {
	if rev > k.rev {
		k.rev = rev
	}
}

func (k *Keeper) lock(task, target string) *lockState {
	id := LockID(task, target)
	l, ok := k.locks[id]
	if !ok {
		l = &lockState{task: task, target: target, infos: map[string]Info{}, ops: map[string]Operation{}}
		k.locks[id] = l
	}
	k.dirty[id] = true
	return l
}

func (k *Keeper) gc(task, target string) {
	id := LockID(task, target)
	if l, ok := k.locks[id]; ok && l.empty() {
		delete(k.locks, id)
		delete(k.dirty, id)
	}
}

// PutInfo records an info (new or changed).
func (k *Keeper) PutInfo(i Info) {
	l := k.lock(i.Task, i.Target)
	k.change(l, i.Source, func() { l.infos[i.Source] = i })
}

// OtherSession returns an info of i's lock from another source whose DDL events ran in other session
// settings than i's (Info.Session), if there is one.
func (k *Keeper) OtherSession(i Info) (Info, bool) {
	l, ok := k.locks[LockID(i.Task, i.Target)]
	if !ok {
		return Info{}, false
	}
	sources := make([]string, 0, len(l.infos))
	for src := range l.infos {
		sources = append(sources, src)
	}
	slices.Sort(sources)
	for _, src := range sources {
		if o := l.infos[src]; src != i.Source && o.Session != i.Session {
			return o, true
		}
	}
	return Info{}, false
}

// DeleteInfo records that a source's info is gone.
func (k *Keeper) DeleteInfo(task, target, source string) {
	l := k.lock(task, target)
	k.change(l, source, func() { delete(l.infos, source) })
	k.gc(task, target)
}

// PutOperation records an operation (new, or marked done).
func (k *Keeper) PutOperation(o Operation) {
	l := k.lock(o.Task, o.Target)
	k.change(l, o.Source, func() { l.ops[o.Source] = o })
}

// DeleteOperation records that an operation is gone.
func (k *Keeper) DeleteOperation(task, target, source string) {
	l := k.lock(task, target)
	k.change(l, source, func() { delete(l.ops, source) })
	k.gc(task, target)
}

// PutRound records the participants of a lock's exec operation.
func (k *Keeper) PutRound(r Round) {
	l := k.lock(r.Task, r.Target)
	l.round = &r
	l.setExec()
	l.cnt = k.recount(l)
}

// DeleteRound records that a lock's round is gone.
func (k *Keeper) DeleteRound(task, target string) {
	l := k.lock(task, target)
	l.round = nil
	l.setExec()
	l.cnt = k.recount(l)
	k.gc(task, target)
}

// PutUnlock records a user's unlock request.
func (k *Keeper) PutUnlock(u Unlock) {
	c := u
	k.lock(u.Task, u.Target).unlock = &c
}

// DeleteUnlock records that an unlock request is gone.
func (k *Keeper) DeleteUnlock(task, target string) {
	k.lock(task, target).unlock = nil
	k.gc(task, target)
}

// SetTaskSources records the set of sources a task's locks wait for.
func (k *Keeper) SetTaskSources(ts TaskSources) {
	k.tasks[ts.Task] = ts
	k.taskSets[ts.Task] = taskSet{sorted: slices.Sorted(slices.Values(ts.Sources)), in: setOf(ts.Sources)}
	k.markTask(ts.Task)
}

// DeleteTaskSources records that a task is gone: its locks are no longer decided.
func (k *Keeper) DeleteTaskSources(task string) {
	delete(k.tasks, task)
	delete(k.taskSets, task)
	k.markTask(task)
}

// markTask marks the task's locks for a decision and recounts them against its (new) sources.
func (k *Keeper) markTask(task string) {
	for id, l := range k.locks {
		if l.task == task {
			k.dirty[id] = true
			l.cnt = k.recount(l)
		}
	}
}

// Written records that a transaction of Decide for lockID succeeded at revision rev: the lock is not
// decided again until the Keeper has been fed up to rev.
func (k *Keeper) Written(lockID string, rev int64) {
	if rev > k.rev {
		k.written[lockID] = rev
		k.dirty[lockID] = true
	}
}

// MarkDirty asks the next Decide to look at a lock again (after a failed write).
func (k *Keeper) MarkDirty(lockID string) {
	if _, ok := k.locks[lockID]; ok {
		k.dirty[lockID] = true
	}
}

// ApplyKV decodes one etcd key (and value, unless deleted) of the layout and feeds it in.
func (k *Keeper) ApplyKV(key string, value []byte, createRev, modRev int64, deleted bool) error {
	k.SetRevision(modRev)
	p, err := k.layout.parse(key)
	if err != nil {
		return err
	}
	decode := func(v any) error {
		if err := json.Unmarshal(value, v); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		return nil
	}
	switch p.kind {
	case kindArrive:
		// The agents' count; no lock state, but it says which source will run the DDLs (Locks).
		id := LockID(p.task, p.target)
		if deleted || string(value) == arrivePoison {
			delete(k.counting, id)
		} else {
			k.counting[id] = true
		}
		return nil
	case kindAgent, kindDone:
		return nil // fencing for agents, counters of dones for agents: no lock state
	case kindTask:
		if deleted {
			k.DeleteTaskSources(p.task)
			return nil
		}
		var ts TaskSources
		if err := decode(&ts); err != nil {
			return err
		}
		ts.Task, ts.ModRevision = p.task, modRev
		k.SetTaskSources(ts)
	case kindInfo:
		if deleted {
			k.DeleteInfo(p.task, p.target, p.source)
			return nil
		}
		var i Info
		if err := decode(&i); err != nil {
			return err
		}
		i.Task, i.Target, i.Source, i.CreateRevision, i.ModRevision = p.task, p.target, p.source, createRev, modRev
		k.PutInfo(i)
	case kindOp:
		if p.removed {
			return nil // the removal mark is for waiting agents
		}
		if deleted {
			k.DeleteOperation(p.task, p.target, p.source)
			return nil
		}
		var o Operation
		if err := decode(&o); err != nil {
			return err
		}
		o.Task, o.Target, o.Source, o.CreateRevision, o.ModRevision = p.task, p.target, p.source, createRev, modRev
		k.PutOperation(o)
	case kindRound:
		if deleted {
			k.DeleteRound(p.task, p.target)
			return nil
		}
		var r Round
		if err := decode(&r); err != nil {
			return err
		}
		r.Task, r.Target, r.ModRevision = p.task, p.target, modRev
		k.PutRound(r)
	case kindUnlock:
		if deleted {
			k.DeleteUnlock(p.task, p.target)
			return nil
		}
		var u Unlock
		if err := decode(&u); err != nil {
			return err
		}
		u.Task, u.Target, u.ModRevision = p.task, p.target, modRev
		k.PutUnlock(u)
	}
	return nil
}

// Decide returns the transactions that move the locks changed since the last Decide forward, at most
// one per lock, in lock-ID order. A transaction that fails its conditions was based on state that has
// changed; the change arrives as input and the lock is decided again.
func (k *Keeper) Decide() []Txn {
	if verifyCounts {
		for id, l := range k.locks {
			if c := k.recount(l); !sameCounts(c, l.cnt) {
				panic(fmt.Sprintf("pessimist: lock %s: kept counts %+v, recounted %+v", id, l.cnt, c))
			}
		}
	}
	ids := make([]string, 0, len(k.dirty))
	for id := range k.dirty {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []Txn
	for _, id := range ids {
		if k.rev < k.written[id] {
			continue // stays dirty: decided once this Keeper has seen its own write
		}
		delete(k.written, id)
		delete(k.dirty, id)
		l, ok := k.locks[id]
		if !ok {
			continue
		}
		if t := k.decideLock(l); t != nil {
			t.LockID = id
			out = append(out, *t)
		}
	}
	return out
}

// view is a lock's state as the decision rules see it.
type view struct {
	l       *lockState
	inTask  map[string]bool
	sources []string // the task's sources, sorted
	exec    *Operation
}

func (k *Keeper) view(l *lockState) (view, bool) {
	ts, ok := k.taskSets[l.task]
	if !ok {
		return view{}, false
	}
	// The task's sorted sources and set are shared by every view: decisions only read them.
	v := view{l: l, inTask: ts.in, sources: ts.sorted}
	if l.exec != nil {
		v.exec = l.exec
		return v, true
	}
	for _, o := range l.ops {
		if o.Exec {
			o := o
			v.exec = &o
		}
	}
	return v, true
}

// idle reports, in O(1), that l has nothing to decide: a lock without an unlock request and without
// keys of sources removed from the task, that waits for more infos (no exec yet) or for the owner's
// done or the other sources' dones (exec). decideLock would return nil for it; idle only saves the
// O(N log N) way there, which every watch event of the lock would pay.
func (k *Keeper) idle(l *lockState) bool {
	if l.unlock != nil || l.cnt.foreign != 0 || l.round != nil && len(l.cnt.execs) == 0 {
		return false // the last needs cleanupSkips: a round whose exec is gone
	}
	switch len(l.cnt.execs) {
	case 0:
		// No done operation to clean up, and some source of the task has not put its info yet.
		return l.cnt.done == 0 && l.cnt.waiting < len(k.taskSets[l.task].in)
	case 1:
		for src := range l.cnt.execs {
			if !l.ops[src].Done {
				return true // waiting for the owner
			}
		}
		// The owner is done: nobody waits for a skip, and someone has not finished its skip (one of
		// its own, or the exec's as a participant).
		return l.cnt.waiting == 0 && (l.cnt.notDone > 0 || l.cnt.implicit > 0)
	}
	return false
}

// candidates are the infos of the task's sources that have no operation and take no part in the
// exec's round, earliest first: the sources that wait for the next decision.
func (v view) candidates() []Info {
	var c []Info
	for src, i := range v.l.infos {
		if _, has := v.l.ops[src]; !has && v.inTask[src] && !v.l.participant(src) {
			c = append(c, i)
		}
	}
	sortInfos(c)
	return c
}

// implicit are the infos of the participants that have not finished the exec's round, earliest first.
func (v view) implicit() []Info {
	var c []Info
	for src := range v.l.parts {
		if i, ok := v.l.infos[src]; ok && v.inTask[src] && v.l.implicitSkip(i) {
			if _, has := v.l.ops[src]; !has {
				c = append(c, i)
			}
		}
	}
	sortInfos(c)
	return c
}

func sortInfos(c []Info) {
	sort.Slice(c, func(a, b int) bool {
		if c[a].CreateRevision != c[b].CreateRevision {
			return c[a].CreateRevision < c[b].CreateRevision
		}
		return c[a].Source < c[b].Source
	})
}

// unlockFor returns the unlock request if it concerns ddls.
func (v view) unlockFor(ddls []string) *Unlock {
	if u := v.l.unlock; u != nil && sameDDLs(u.DDLs, ddls) {
		return u
	}
	return nil
}

func (k *Keeper) decideLock(l *lockState) *Txn {
	if k.idle(l) {
		return nil
	}
	v, ok := k.view(l)
	if !ok {
		return nil // the task's sources are unknown: never guess who to wait for
	}
	if t := k.dropRemovedSources(v); t != nil {
		return t
	}
	if v.exec != nil {
		return k.decideRound(v)
	}
	if t := k.cleanupSkips(v); t != nil {
		return t
	}
	return k.decideNewRound(v)
}

// guard adds the conditions every decision about l rests on: the task's source set, and every info and
// operation of the lock, are as the Keeper knows them. (A prefix condition does not see deletions;
// decisions add a plain condition on each key whose deletion would matter.)
func (k *Keeper) guard(t *Txn, l *lockState) {
	t.Conds = append(t.Conds,
		Cond{Key: k.layout.TaskKey(l.task), ModRevision: k.tasks[l.task].ModRevision},
		Cond{Key: k.layout.lockPrefix(kindInfo, l.task, l.target), ModRevision: k.rev, Prefix: true},
		Cond{Key: k.layout.lockPrefix(kindOp, l.task, l.target), ModRevision: k.rev, Prefix: true})
}

// room is how many more operations t may hold.
func (k *Keeper) room(t *Txn) int {
	return k.maxOps - len(t.Puts) - len(t.Deletes) - len(t.DeletePrefixes)
}

// dropRemovedSources deletes the keys of sources no longer in the task (except a pending exec, which
// is moved to a new owner by decideRound) and forgets them in an unlock request.
func (k *Keeper) dropRemovedSources(v view) *Txn {
	l := v.l
	t := &Txn{Reason: "drop keys of sources removed from the task"}
	k.guard(t, l)
	for _, src := range sortedKeys(l.infos) {
		if v.inTask[src] || k.room(t) <= 2 {
			continue
		}
		if o, has := l.ops[src]; has && o.Exec && !o.Done {
			continue
		}
		if len(t.Puts) == 0 {
			// The arrivals counted so far may include the deleted infos: the count is poisoned
			// until the next new round (Agent.PutInfo).
			t.Puts = append(t.Puts, k.removalMark(l, "source removed from the task"),
				KV{k.layout.ArriveKey(l.task, l.target), arrivePoison})
		}
		t.Deletes = append(t.Deletes, k.layout.InfoKey(l.task, l.target, src))
	}
	for _, src := range sortedKeys(l.ops) {
		if o := l.ops[src]; v.inTask[src] || o.Done || o.Exec || k.room(t) <= 1 {
			continue // done operations go with the round's cleanup; a pending exec is moved
		}
		t.Deletes = append(t.Deletes, k.layout.OperationKey(l.task, l.target, src))
	}
	if u := l.unlock; u != nil {
		missing := slices.DeleteFunc(slices.Clone(u.Missing), func(s string) bool { return !v.inTask[s] })
		if len(missing) != len(u.Missing) {
			k.rewriteUnlock(t, u, missing, u.Executed)
		}
	}
	if len(t.Deletes) == 0 && len(t.Puts) == 0 {
		return nil
	}
	return t
}

// removalMark is the put of the lock's removal mark, which every transaction of the master that deletes
// infos carries: an agent waits on the lock through its one watch of the task's operations (not a watch
// of its info per wait, which would cost every wait a watch to create), and sees the mark there.
func (k *Keeper) removalMark(l *lockState, reason string) KV {
	return KV{Key: k.layout.RemovedKey(l.task, l.target), Value: encode(removal{Reason: reason})}
}

// rewriteUnlock adds to t the update (or deletion, when nobody is missing) of an unlock request.
func (k *Keeper) rewriteUnlock(t *Txn, u *Unlock, missing []string, executed bool) {
	key := k.layout.UnlockKey(u.Task, u.Target)
	t.Conds = append(t.Conds, Cond{Key: key, ModRevision: u.ModRevision})
	if len(missing) == 0 {
		t.Deletes = append(t.Deletes, key)
		return
	}
	nu := *u
	nu.Missing, nu.Executed = missing, executed
	t.Puts = append(t.Puts, KV{key, encode(nu)})
}

// decideRound moves a round that has an exec operation: move a pending exec whose owner left (or that
// the user re-assigned), send skips once the owner is done, and clean up once everyone is done.
func (k *Keeper) decideRound(v view) *Txn {
	l, e := v.l, v.exec
	ddls := e.DDLs
	u := v.unlockFor(ddls)
	execKey := k.layout.OperationKey(l.task, l.target, e.Source)
	if !e.Done {
		newOwner := ""
		switch {
		case !v.inTask[e.Source]:
			c := append(v.implicit(), v.matching(v.candidates(), ddls)...)
			sortInfos(c)
			if len(c) > 0 {
				newOwner = c[0].Source
			}
		case u != nil && u.Owner != e.Source && v.inTask[u.Owner]:
			if i, ok := l.infos[u.Owner]; ok && sameDDLs(i.DDLs, ddls) {
				if _, has := l.ops[u.Owner]; !has {
					newOwner = u.Owner
				}
			}
		}
		if newOwner == "" {
			return nil // wait for the owner
		}
		t := &Txn{Reason: fmt.Sprintf("move exec from %s to %s", e.Source, newOwner)}
		k.guard(t, l)
		t.Conds = append(t.Conds, Cond{Key: execKey, ModRevision: e.ModRevision})
		t.Deletes = append(t.Deletes, execKey)
		if _, ok := l.infos[e.Source]; ok && !v.inTask[e.Source] {
			t.Deletes = append(t.Deletes, k.layout.InfoKey(l.task, l.target, e.Source))
		}
		// Every source that has reached the DDLs takes part in the new exec's round, the old owner
		// too if it stays in the task.
		var parts []string
		for _, i := range append(v.implicit(), v.matching(v.candidates(), ddls)...) {
			parts = append(parts, i.Source)
		}
		if i, ok := l.infos[e.Source]; ok && v.inTask[e.Source] && sameDDLs(i.DDLs, ddls) {
			parts = append(parts, e.Source)
		}
		k.putExec(t, l, l.infos[newOwner], slices.DeleteFunc(parts, func(s string) bool { return s == newOwner }))
		return t
	}
	// The owner is done: its done operation is the skip of the round's participants. Every other
	// source of the task that has reached the DDLs and has no operation (it arrived after the exec)
	// gets a skip, as many as one transaction may hold; so does every source an unlock overruled (a
	// skip of its own DDLs).
	skips := v.matching(v.candidates(), ddls)
	if u != nil {
		skips = append(skips, v.overruled(v.candidates(), u)...)
	}
	if len(skips) > 0 {
		// The skips go out in operation-key order, so that each transaction's operations form one
		// key range, and the transaction is guarded by that range, not by every operation of the
		// lock: the dones of the sources skipped by the previous transaction, which arrive meanwhile,
		// do not fail it (with a guard on every operation, each of them did, and each failure cost a
		// new O(N) decision and an O(N) comparison in etcd).
		keys := make(map[string]string, len(skips))
		for _, i := range skips {
			keys[i.Source] = k.layout.OperationKey(l.task, l.target, i.Source)
		}
		sort.Slice(skips, func(a, b int) bool { return keys[skips[a].Source] < keys[skips[b].Source] })
		t := &Txn{Reason: "skip after owner " + e.Source + " is done"}
		t.Conds = append(t.Conds,
			Cond{Key: k.layout.TaskKey(l.task), ModRevision: k.tasks[l.task].ModRevision},
			Cond{Key: k.layout.lockPrefix(kindInfo, l.task, l.target), ModRevision: k.rev, Prefix: true},
			Cond{ModRevision: k.rev}, // the operations' range, once known
			Cond{Key: execKey, ModRevision: e.ModRevision})
		k.putOps(t, l, skips)
		t.Conds[2].Key, t.Conds[2].End = t.Puts[0].Key, t.Puts[len(t.Puts)-1].Key+"\x00"
		return t
	}
	var missing map[string]bool
	if u != nil {
		missing = setOf(u.Missing)
	}
	if l.cnt.implicit > 0 {
		return nil // wait for the participants to finish
	}
	pending := false
	for _, o := range l.ops {
		if !o.Done {
			if !missing[o.Source] {
				return nil // wait for this source to finish its skip
			}
			pending = true
		}
	}
	// The last source to finish clears the round itself when it can tell it is the last (see
	// Agent.DoneOperationDeleteInfo); otherwise (an unlock request, skips of their own, a participant
	// that left the task) it is cleared here.
	t := &Txn{Reason: "clean up resolved round"}
	k.guard(t, l)
	var done map[string]bool
	if pending {
		done = k.deleteDoneOps(t, l, 3)
	} else {
		// Every operation is done: one range delete, however many sources.
		t.DeletePrefixes = append(t.DeletePrefixes, k.layout.lockPrefix(kindOp, l.task, l.target))
		done = setOf(slices.Collect(maps.Keys(l.ops)))
	}
	if done[e.Source] {
		// The exec goes, and its round with it.
		k.deleteRound(t, l)
		for p := range l.parts {
			done[p] = true // the participants finished with the exec's round
		}
	}
	if u != nil {
		k.rewriteUnlock(t, u, slices.DeleteFunc(slices.Clone(u.Missing), func(s string) bool { return done[s] }), true)
	}
	return t
}

// deleteRound adds to t the deletion of l's round and of its done counters.
func (k *Keeper) deleteRound(t *Txn, l *lockState) {
	if l.round != nil {
		t.Conds = append(t.Conds, Cond{Key: k.layout.RoundKey(l.task, l.target), ModRevision: l.round.ModRevision})
		t.Deletes = append(t.Deletes, k.layout.RoundKey(l.task, l.target))
	}
	t.DeletePrefixes = append(t.DeletePrefixes, k.layout.lockPrefix(kindDone, l.task, l.target))
}

// cleanupSkips removes done skip operations sent to sources an unlock request had marked missing, and
// a round whose exec is gone.
func (k *Keeper) cleanupSkips(v view) *Txn {
	l := v.l
	t := &Txn{Reason: "clean up skips of sources missing at unlock"}
	k.guard(t, l)
	done := k.deleteDoneOps(t, l, 3)
	if l.round != nil {
		k.deleteRound(t, l)
	}
	if len(done) == 0 && l.round == nil {
		return nil
	}
	if u := l.unlock; u != nil {
		k.rewriteUnlock(t, u, slices.DeleteFunc(slices.Clone(u.Missing), func(s string) bool { return done[s] }), u.Executed)
	}
	return t
}

// deleteDoneOps adds deletes of done operations to t, leaving reserve operations free, and returns the
// sources whose operation it deletes.
func (k *Keeper) deleteDoneOps(t *Txn, l *lockState, reserve int) map[string]bool {
	done := map[string]bool{}
	for _, src := range sortedKeys(l.ops) {
		if !l.ops[src].Done || k.room(t) <= reserve {
			continue
		}
		t.Deletes = append(t.Deletes, k.layout.OperationKey(l.task, l.target, src))
		done[src] = true
	}
	return done
}

// decideNewRound looks at the infos waiting without an operation: skips for sources that an executed
// unlock had marked missing, or an exec operation once every required source has the same DDLs.
func (k *Keeper) decideNewRound(v view) *Txn {
	l := v.l
	cand := v.candidates()
	if u := l.unlock; u != nil && u.Executed {
		missing := setOf(u.Missing)
		var skips []Info
		for _, i := range v.matching(cand, u.DDLs) {
			if missing[i.Source] {
				skips = append(skips, i)
			}
		}
		if len(skips) > 0 {
			t := &Txn{Reason: "skip for sources missing at unlock"}
			k.guard(t, l)
			t.Conds = append(t.Conds, Cond{Key: k.layout.UnlockKey(l.task, l.target), ModRevision: u.ModRevision})
			k.putOps(t, l, skips)
			return t
		}
	}
	// Sources an unlock overruled (they sent other DDLs than its owner) do not take part in the
	// agreement: they count as present, and skip theirs once the owner is done.
	all := cand
	if u := l.unlock; u != nil && !u.Executed && len(u.Overrule) > 0 {
		over := setOf(v.overrule(cand, u))
		cand = slices.DeleteFunc(slices.Clone(cand), func(i Info) bool { return over[i.Source] })
	}
	if len(cand) == 0 || v.conflict(cand) {
		return nil
	}
	ddls := cand[0].DDLs
	required, owner := v.sources, cand[0].Source
	if u := v.unlockFor(ddls); u != nil && !u.Executed {
		missing := setOf(u.Missing)
		required = slices.DeleteFunc(slices.Clone(required), func(s string) bool { return missing[s] })
		if i, ok := l.infos[u.Owner]; ok && v.inTask[u.Owner] && sameDDLs(i.DDLs, ddls) {
			if _, has := l.ops[u.Owner]; !has {
				owner = u.Owner
			}
		}
	}
	byName := map[string]Info{}
	for _, i := range all {
		byName[i.Source] = i
	}
	for _, s := range required {
		if _, ok := byName[s]; !ok {
			return nil // s has not reached the DDLs yet (or is still finishing an earlier round)
		}
	}
	// Every other source that has reached the DDLs takes the owner's done as its skip.
	var parts []string
	for _, i := range all {
		if i.Source != owner && sameDDLs(i.DDLs, ddls) {
			parts = append(parts, i.Source)
		}
	}
	t := &Txn{Reason: "exec by owner " + owner}
	k.guard(t, l)
	k.putExec(t, l, byName[owner], parts)
	// A new round starts the count of arrivals again (see Agent.PutInfo): every info there now takes
	// part in this round (or is answered with it: a skip, an overruled source), so none is left
	// uncounted for the next one.
	t.Deletes = append(t.Deletes, k.layout.ArriveKey(l.task, l.target))
	return t
}

// putExec adds the exec operation of owner and its round (the participants) to t, conditioned on the
// owner's info. The participants' infos are covered by the guard: it fails if one is put meanwhile;
// a participant whose info is deleted meanwhile never finishes, which only leaves the cleanup to
// Decide.
func (k *Keeper) putExec(t *Txn, l *lockState, owner Info, parts []string) {
	sort.Strings(parts)
	t.Conds = append(t.Conds, Cond{Key: k.layout.InfoKey(l.task, l.target, owner.Source), ModRevision: owner.ModRevision})
	t.Puts = append(t.Puts,
		KV{k.layout.OperationKey(l.task, l.target, owner.Source), encode(Operation{
			Task: l.task, Source: owner.Source, Target: l.target, DDLs: owner.DDLs, Exec: true, Sources: len(parts) + 1,
		})},
		KV{k.layout.RoundKey(l.task, l.target), encode(Round{Task: l.task, Target: l.target, Owner: owner.Source, Participants: parts})})
}

// putOps adds skip operations for infos to t, as many as fit; each is conditioned on its info still
// being there (the guard sees changes, not deletions).
func (k *Keeper) putOps(t *Txn, l *lockState, infos []Info) {
	for _, i := range infos {
		if len(t.Puts) > 0 && (k.room(t) < 1 || len(t.Conds) >= k.maxOps) {
			return // the rest in the next transaction
		}
		t.Conds = append(t.Conds, Cond{Key: k.layout.InfoKey(l.task, l.target, i.Source), ModRevision: i.ModRevision})
		t.Puts = append(t.Puts, KV{k.layout.OperationKey(l.task, l.target, i.Source), encode(Operation{
			Task: l.task, Source: i.Source, Target: l.target, DDLs: i.DDLs,
		})})
	}
}

// overruled returns the infos of the sources unlock u overruled that still differ from its DDLs.
func (v view) overruled(infos []Info, u *Unlock) []Info {
	over := setOf(u.Overrule)
	var out []Info
	for _, i := range infos {
		if over[i.Source] && !sameDDLs(i.DDLs, u.DDLs) {
			out = append(out, i)
		}
	}
	return out
}

// overrule names the sources of overruled(infos, u).
func (v view) overrule(infos []Info, u *Unlock) []string {
	var out []string
	for _, i := range v.overruled(infos, u) {
		out = append(out, i.Source)
	}
	return out
}

func (v view) matching(infos []Info, ddls []string) []Info {
	var out []Info
	for _, i := range infos {
		if sameDDLs(i.DDLs, ddls) {
			out = append(out, i)
		}
	}
	return out
}

// conflict reports whether the waiting infos disagree on the DDLs.
func (v view) conflict(cand []Info) bool {
	for _, i := range cand[1:] {
		if !sameDDLs(i.DDLs, cand[0].DDLs) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// ErrLockNotFound is returned by Unlock for an unknown lock ID.
var ErrLockNotFound = errors.New("lock not found")
