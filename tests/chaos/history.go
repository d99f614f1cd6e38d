// Package chaos is the soak of `make chaos`: real masters, workers and MariaDB servers under a steady
// workload and continuous shard DDL while faults overlap, and the checkers that judge a run.
package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/tributary-db/tributary/pessimist"
)

// Event is one change of a pessimist key as etcd's watch delivers it: Value nil is a delete.
type Event struct {
	Key   string
	Value []byte
}

// History checks the lock protocol's invariants over the history of the pessimist keys, one etcd
// revision (one transaction) at a time, in revision order:
//
//   - no exec before every source's info: when an exec operation appears, every source of the task has
//     an info for the lock with the exec's DDLs (unless an operator's unlock request is there);
//   - no skip before the owner's done: a skip operation of a source's own appears only while the
//     lock's exec is done (or an unlock request stands for it), and no participant's info goes while the
//     exec is there and not done;
//   - never two owners: at no revision does a lock hold two exec operations.
//
// It is pure: the soak feeds it what its watch saw, a test feeds it made-up histories.
type History struct {
	layout  pessimist.Layout
	keys    map[string][]byte // the pessimist keys as of the last revision applied
	lastRev int64
	bad     []string
	locks   map[string]*lockSeen // by task/target
	// Resolved counts the lock rounds whose exec was done; Execs the exec operations written; Skips the
	// skip operations of a source's own.
	Resolved, Execs, Skips int
	// LongestPending is the longest a lock round was pending (its first info to its exec's done), and
	// which lock.
	LongestPending     time.Duration
	LongestPendingLock string
}

// lockSeen is what the checker follows of one lock.
type lockSeen struct {
	since time.Time // its first info of the current round (zero: none)
}

// NewHistory checks keys under layout; keys are the pessimist keys at the revision the history starts
// after (nil: none, a history from the cluster's first revision).
func NewHistory(layout pessimist.Layout, keys map[string][]byte) *History {
	h := &History{layout: layout, keys: map[string][]byte{}, locks: map[string]*lockSeen{}}
	for k, v := range keys {
		h.keys[k] = v
	}
	return h
}

// Violations are the invariants broken so far, each naming the revision, the lock and what was seen.
func (h *History) Violations() []string { return slices.Clone(h.bad) }

func (h *History) fail(rev int64, format string, args ...any) {
	h.bad = append(h.bad, fmt.Sprintf("revision %d: ", rev)+fmt.Sprintf(format, args...))
}

// Apply applies the events of revision rev, seen at time at. Revisions must come in increasing
// order; a gap (a compacted history) is reported, since nothing can be said of what it hid.
func (h *History) Apply(rev int64, at time.Time, evs []Event) {
	if rev <= h.lastRev {
		h.fail(rev, "revision applied after %d: the history is out of order", h.lastRev)
		return
	}
	h.lastRev = rev
	before := map[string][]byte{}
	for _, e := range evs {
		if _, ok := before[e.Key]; !ok {
			before[e.Key] = h.keys[e.Key]
		}
		if e.Value == nil {
			delete(h.keys, e.Key)
		} else {
			h.keys[e.Key] = e.Value
		}
	}
	touched := map[string]pessimist.Key{} // locks this revision changed, by task/target
	for _, e := range evs {
		k, err := h.layout.Parse(e.Key)
		if err != nil || k.Target == "" {
			continue
		}
		id := k.Task + "/" + k.Target
		touched[id] = k
		switch {
		case k.Kind == pessimist.KindOp && !k.Removed && e.Value != nil:
			op, err := decode[pessimist.Operation](e.Value)
			if err != nil {
				h.fail(rev, "operation %s: %v", e.Key, err)
				continue
			}
			old, _ := decode[pessimist.Operation](before[e.Key])
			fresh := before[e.Key] == nil || old.Exec != op.Exec || old.Done && !op.Done
			switch {
			case op.Exec && fresh:
				h.Execs++
				h.checkExec(rev, k, op)
			case !op.Exec && fresh:
				h.Skips++
				h.checkSkip(rev, k)
			}
			if op.Exec && op.Done && (before[e.Key] == nil || !old.Done) {
				h.resolved(at, id, k)
			}
		case k.Kind == pessimist.KindOp && k.Removed && e.Value != nil:
			h.lock(id).since = time.Time{} // force-removed: the operator's
		case k.Kind == pessimist.KindInfo && e.Value != nil && before[e.Key] == nil:
			if l := h.lock(id); l.since.IsZero() {
				l.since = at
			}
		case k.Kind == pessimist.KindInfo && e.Value == nil && before[e.Key] != nil:
			h.checkInfoGone(rev, k)
		}
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		h.followLock(rev, at, id, touched[id])
	}
}

// checkExec: an exec operation appears for source k.Source of k's lock.
func (h *History) checkExec(rev int64, k pessimist.Key, op pessimist.Operation) {
	lock := pessimist.LockID(k.Task, k.Target)
	if h.unlocking(k) {
		return
	}
	ts, err := decode[pessimist.TaskSources](h.keys[h.layout.TaskKey(k.Task)])
	if err != nil || len(ts.Sources) == 0 {
		h.fail(rev, "lock %s: exec for %s while the task has no source set", lock, k.Source)
		return
	}
	for _, src := range ts.Sources {
		raw := h.keys[h.layout.InfoKey(k.Task, k.Target, src)]
		if raw == nil {
			h.fail(rev, "lock %s: exec for %s before source %s's info", lock, k.Source, src)
			continue
		}
		info, err := decode[pessimist.Info](raw)
		if err != nil || !slices.Equal(info.DDLs, op.DDLs) {
			h.fail(rev, "lock %s: exec of %q for %s while source %s's info holds %q", lock, op.DDLs, k.Source, src, info.DDLs)
		}
	}
}

// checkSkip: a skip operation of its own appears for source k.Source.
func (h *History) checkSkip(rev int64, k pessimist.Key) {
	if h.unlocking(k) {
		return
	}
	owner, exec, ok := h.exec(k)
	if !ok || !exec.Done {
		h.fail(rev, "lock %s: skip for %s before the owner's done (exec of %q: present %v, done %v)",
			pessimist.LockID(k.Task, k.Target), k.Source, owner, ok, exec.Done)
	}
}

// checkInfoGone: source k.Source's info of the lock was deleted.
func (h *History) checkInfoGone(rev int64, k pessimist.Key) {
	owner, exec, ok := h.exec(k)
	if ok && !exec.Done && owner != k.Source && !h.unlocking(k) {
		h.fail(rev, "lock %s: participant %s finished (its info deleted) before the owner %s's done",
			pessimist.LockID(k.Task, k.Target), k.Source, owner)
	}
}

// exec is the lock's exec operation as of now, and its source; it fails the history when there are
// two.
func (h *History) exec(k pessimist.Key) (string, pessimist.Operation, bool) {
	var owner string
	var exec pessimist.Operation
	found := false
	for key, raw := range h.keys {
		o, err := h.layout.Parse(key)
		if err != nil || o.Kind != pessimist.KindOp || o.Removed || o.Task != k.Task || o.Target != k.Target {
			continue
		}
		op, err := decode[pessimist.Operation](raw)
		if err == nil && op.Exec {
			owner, exec, found = o.Source, op, true
		}
	}
	return owner, exec, found
}

// unlocking reports an operator's unlock request for k's lock: what follows is the operator's decision.
func (h *History) unlocking(k pessimist.Key) bool {
	return h.keys[h.layout.UnlockKey(k.Task, k.Target)] != nil
}

// followLock checks that the lock has one exec operation at most.
func (h *History) followLock(rev int64, at time.Time, id string, k pessimist.Key) {
	var owners []string
	for key, raw := range h.keys {
		o, err := h.layout.Parse(key)
		if err != nil || o.Kind != pessimist.KindOp || o.Removed || o.Task != k.Task || o.Target != k.Target {
			continue
		}
		if op, err := decode[pessimist.Operation](raw); err == nil && op.Exec {
			owners = append(owners, o.Source)
		}
	}
	if len(owners) > 1 {
		sort.Strings(owners)
		h.fail(rev, "lock %s has two owners: exec operations for %v", pessimist.LockID(k.Task, k.Target), owners)
	}
}

func (h *History) lock(id string) *lockSeen {
	l := h.locks[id]
	if l == nil {
		l = &lockSeen{}
		h.locks[id] = l
	}
	return l
}

// resolved: the lock's exec is done. Its round was pending since its first info created after the
// previous round's done (an info a source put for the next round before that done is not seen as
// the start: the figure errs short).
func (h *History) resolved(at time.Time, id string, k pessimist.Key) {
	h.Resolved++
	l := h.lock(id)
	if !l.since.IsZero() {
		if d := at.Sub(l.since); d > h.LongestPending {
			h.LongestPending, h.LongestPendingLock = d, pessimist.LockID(k.Task, k.Target)
		}
	}
	l.since = time.Time{}
}

// Pending are the lock rounds not done yet, with how long they have been pending (to now).
func (h *History) Pending(now time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for id, l := range h.locks {
		if !l.since.IsZero() {
			out[id] = now.Sub(l.since)
		}
	}
	return out
}

func decode[T any](raw []byte) (T, error) {
	var v T
	if raw == nil {
		return v, fmt.Errorf("no value")
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}
