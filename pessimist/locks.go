package pessimist

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Lock is a lock as dmctl shard-ddl-lock shows it.
type Lock struct {
	ID     string   `json:"ID"`
	Task   string   `json:"task"`
	Target string   `json:"target"`
	Mode   string   `json:"mode"`
	Owner  string   `json:"owner"`
	DDLs   []string `json:"DDLs"`
	// Synced are the sources that have reached DDLs; Unsynced the task's sources that have not.
	Synced   []string `json:"synced"`
	Unsynced []string `json:"unsynced"`
	// Conflict lists, when sources sent different DDLs, each source with what it sent.
	Conflict []SourceDDLs `json:"conflict,omitempty"`
	// Stage is waiting, conflict, executing, skipping or unlocked (waiting for missing sources).
	Stage string `json:"stage"`
}

// SourceDDLs is what one source sent.
type SourceDDLs struct {
	Source string   `json:"source"`
	DDLs   []string `json:"DDLs"`
}

// Locks returns every lock, sorted by ID.
func (k *Keeper) Locks() []Lock {
	out := make([]Lock, 0, len(k.locks))
	for _, id := range sortedKeys(k.locks) {
		out = append(out, k.lockView(id, k.locks[id]))
	}
	return out
}

func (k *Keeper) lockView(id string, l *lockState) Lock {
	lk := Lock{ID: id, Task: l.task, Target: l.target, Mode: "pessimistic"}
	sources := slices.Sorted(slices.Values(k.tasks[l.task].Sources))
	reached := map[string]bool{}
	var exec *Operation
	for _, o := range l.ops {
		if o.Exec {
			o := o
			exec = &o
		}
	}
	switch {
	case exec != nil:
		lk.DDLs, lk.Owner = exec.DDLs, exec.Source
		lk.Stage = "executing"
		if exec.Done {
			lk.Stage = "skipping"
		}
		for src, o := range l.ops {
			if sameDDLs(o.DDLs, lk.DDLs) {
				reached[src] = true
			}
		}
		if r := l.round; r != nil && r.Owner == exec.Source {
			for _, src := range r.Participants {
				reached[src] = true // waiting for the owner, skipping, or finished
			}
		}
	default:
		var infos []Info
		for _, i := range l.infos {
			if _, has := l.ops[i.Source]; !has {
				infos = append(infos, i)
			}
		}
		sort.Slice(infos, func(a, b int) bool { return infos[a].CreateRevision < infos[b].CreateRevision })
		if len(infos) > 0 {
			lk.DDLs, lk.Owner, lk.Stage = infos[0].DDLs, infos[0].Source, "waiting"
			if k.counting[id] {
				// The info that completes the count writes the exec for its own source: the owner is
				// the last source to arrive (the first of those still missing, while several are).
				for _, src := range sources {
					if _, has := l.infos[src]; !has {
						lk.Owner = src
						break
					}
				}
			}
		}
		for _, i := range infos {
			if !sameDDLs(i.DDLs, lk.DDLs) {
				lk.Stage = "conflict"
			}
		}
		if lk.Stage == "conflict" {
			for _, i := range infos {
				lk.Conflict = append(lk.Conflict, SourceDDLs{i.Source, i.DDLs})
			}
			sort.Slice(lk.Conflict, func(a, b int) bool { return lk.Conflict[a].Source < lk.Conflict[b].Source })
		}
		if u := l.unlock; u != nil && (lk.DDLs == nil || sameDDLs(u.DDLs, lk.DDLs)) {
			lk.DDLs, lk.Owner = u.DDLs, u.Owner
			if u.Executed {
				lk.Stage = "unlocked"
				missing := setOf(u.Missing)
				for _, src := range sources {
					if !missing[src] {
						reached[src] = true
					}
				}
			}
		}
	}
	for src, i := range l.infos {
		if sameDDLs(i.DDLs, lk.DDLs) {
			reached[src] = true
		}
	}
	lk.Synced = slices.Sorted(maps.Keys(reached))
	for _, s := range sources {
		if !reached[s] {
			lk.Unsynced = append(lk.Unsynced, s)
		}
	}
	if lk.Synced == nil {
		lk.Synced = []string{}
	}
	if lk.Unsynced == nil {
		lk.Unsynced = []string{}
	}
	return lk
}

// Unlock validates a user's unlock of lockID against the current state and returns the transaction
// that carries it out:
//
//   - forceRemove deletes every key of the lock (infos, operations, unlock request) and nothing else,
//     and puts the lock's removal mark, which ends the waits of its sources. Nothing is executed; the
//     user fixes the downstream by hand.
//   - otherwise an Unlock request is written: owner (given, or the current owner, or the first source
//     that reached the DDLs) executes them without waiting for the sources that have not reached them;
//     those get a skip when they do. Decide carries it out from there, in any lock state, and a new
//     coordinator continues it after a restart.
//   - a lock whose sources sent different DDLs (a conflict) is unlocked as DM does: the owner's DDLs
//     run downstream and every other source skips its own (Unlock.Overrule).
//
// The returned Unlock says what runs and who skips (zero for forceRemove).
func (k *Keeper) Unlock(lockID, owner string, forceRemove bool) (Txn, Unlock, error) {
	l, ok := k.locks[lockID]
	if !ok {
		return Txn{}, Unlock{}, fmt.Errorf("%w: %s", ErrLockNotFound, lockID)
	}
	if forceRemove {
		return Txn{
			LockID: lockID, Reason: "unlock --force-remove",
			DeletePrefixes: []string{
				k.layout.lockPrefix(kindInfo, l.task, l.target),
				k.layout.lockPrefix(kindOp, l.task, l.target),
				k.layout.lockPrefix(kindDone, l.task, l.target),
			},
			Deletes: []string{k.layout.UnlockKey(l.task, l.target), k.layout.RoundKey(l.task, l.target), k.layout.ArriveKey(l.task, l.target)},
			Puts:    []KV{k.removalMark(l, "unlock --force-remove")},
		}, Unlock{}, nil
	}
	v, ok := k.view(l)
	if !ok {
		return Txn{}, Unlock{}, fmt.Errorf("lock %s: task %s has no known sources", lockID, l.task)
	}
	if u := l.unlock; u != nil && u.Executed {
		return Txn{}, Unlock{}, fmt.Errorf("lock %s was already unlocked and executed by %s; still waiting for %s to reach it (use --force-remove to stop waiting)",
			lockID, u.Owner, strings.Join(u.Missing, ", "))
	}
	var ddls, overrule []string
	var others []SourceDDLs
	participants := map[string]bool{}
	cand := v.candidates()
	if v.exec != nil {
		ddls = v.exec.DDLs
		for src := range l.ops {
			participants[src] = true
		}
		for src := range l.parts {
			participants[src] = true
		}
	} else {
		if len(cand) == 0 {
			return Txn{}, Unlock{}, fmt.Errorf("lock %s has no source waiting on it", lockID)
		}
		ddls = cand[0].DDLs
		if i, ok := l.infos[owner]; ok && owner != "" && v.inTask[owner] {
			if _, hasOp := l.ops[owner]; !hasOp {
				ddls = i.DDLs // the chosen owner's DDLs are the ones that run
			}
		}
		if v.conflict(cand) {
			for _, i := range cand {
				if !sameDDLs(i.DDLs, ddls) {
					overrule = append(overrule, i.Source)
					others = append(others, SourceDDLs{i.Source, i.DDLs})
					participants[i.Source] = true
				}
			}
		}
	}
	for _, i := range v.matching(cand, ddls) {
		participants[i.Source] = true
	}
	switch {
	case owner == "" && v.exec != nil && v.inTask[v.exec.Source]:
		owner = v.exec.Source
	case owner == "":
		if c := v.matching(cand, ddls); len(c) > 0 {
			owner = c[0].Source
		} else {
			return Txn{}, Unlock{}, fmt.Errorf("lock %s: no source of task %s can own it; pass --owner", lockID, l.task)
		}
	case !v.inTask[owner]:
		return Txn{}, Unlock{}, fmt.Errorf("lock %s: source %s is not a source of task %s", lockID, owner, l.task)
	case v.exec != nil && v.exec.Done && owner != v.exec.Source:
		return Txn{}, Unlock{}, fmt.Errorf("lock %s: DDLs were already executed by %s, the owner cannot change", lockID, v.exec.Source)
	case v.exec == nil || owner != v.exec.Source:
		i, ok := l.infos[owner]
		_, hasOp := l.ops[owner]
		if !ok || hasOp || !sameDDLs(i.DDLs, ddls) {
			return Txn{}, Unlock{}, fmt.Errorf("lock %s: source %s has not reached DDLs %q; choose an owner among %s",
				lockID, owner, ddls, strings.Join(slices.Sorted(maps.Keys(participants)), ", "))
		}
	}
	var missing []string
	for _, s := range v.sources {
		if !participants[s] {
			missing = append(missing, s)
		}
	}
	sort.Strings(overrule)
	sort.Slice(others, func(a, b int) bool { return others[a].Source < others[b].Source })
	u := Unlock{Task: l.task, Target: l.target, DDLs: ddls, Owner: owner, Missing: missing, Overrule: overrule}
	var prev int64
	if l.unlock != nil {
		prev = l.unlock.ModRevision
	}
	key := k.layout.UnlockKey(l.task, l.target)
	return Txn{
		LockID: lockID, Reason: "unlock by " + owner,
		Conds: []Cond{{Key: key, ModRevision: prev}},
		Puts:  []KV{{key, encode(u)}},
	}, withOthers(u, others), nil
}

// RemoveStopped validates the unlock of lockID whose task is stopped (no worker runs it) and returns
// the transaction that removes every key of the lock (infos, operations, its removal mark, round,
// dones, arrivals, unlock request) and puts nothing: no worker waits on it, and a start-task of the
// task re-reads the DDLs from its checkpoints and posts new infos, a new lock. stopped is the key whose
// absence means the task is stopped (the master's task key); the transaction holds only while it is
// absent, so a start-task in between makes it fail instead of removing a lock its workers wait on.
func (k *Keeper) RemoveStopped(lockID, stopped string) (Txn, error) {
	l, ok := k.locks[lockID]
	if !ok {
		return Txn{}, fmt.Errorf("%w: %s", ErrLockNotFound, lockID)
	}
	return Txn{
		LockID: lockID, Reason: "unlock of a stopped task",
		Conds: []Cond{{Key: stopped, ModRevision: 0}},
		DeletePrefixes: []string{
			k.layout.lockPrefix(kindInfo, l.task, l.target),
			k.layout.lockPrefix(kindOp, l.task, l.target),
			k.layout.lockPrefix(kindDone, l.task, l.target),
		},
		Deletes: []string{k.layout.RemovedKey(l.task, l.target), k.layout.UnlockKey(l.task, l.target),
			k.layout.RoundKey(l.task, l.target), k.layout.ArriveKey(l.task, l.target)},
	}, nil
}

func withOthers(u Unlock, others []SourceDDLs) Unlock {
	u.OverruledDDLs = others
	return u
}
