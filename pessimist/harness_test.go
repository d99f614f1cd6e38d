package pessimist

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// memKV is an in-memory stand-in for etcd's revisioned key space, for unit tests of the pure Keeper:
// one revision per successful transaction, ModRevision 0 for a missing key.
type memKV struct {
	rev int64
	kv  map[string]memEntry
}

type memEntry struct {
	val         string
	create, mod int64
}

type memEvent struct {
	key, val    string
	create, mod int64
	deleted     bool
}

func newMemKV() *memKV { return &memKV{rev: 1, kv: map[string]memEntry{}} }

// txn applies t if its conditions hold, returning the events it produced.
func (m *memKV) txn(t Txn) ([]memEvent, bool) {
	for _, c := range t.Conds {
		if !c.Prefix && c.End == "" && m.kv[c.Key].mod != c.ModRevision {
			return nil, false
		}
		for k, e := range m.kv {
			in := c.Prefix && strings.HasPrefix(k, c.Key) || c.End != "" && k >= c.Key && k < c.End
			if in && e.mod > c.ModRevision {
				return nil, false
			}
		}
	}
	m.rev++
	var evs []memEvent
	del := func(k string) {
		if _, ok := m.kv[k]; ok {
			delete(m.kv, k)
			evs = append(evs, memEvent{key: k, mod: m.rev, deleted: true})
		}
	}
	for _, k := range t.Deletes {
		del(k)
	}
	for _, p := range t.DeletePrefixes {
		for _, k := range sortedKeys(m.kv) {
			if strings.HasPrefix(k, p) {
				del(k)
			}
		}
	}
	for _, p := range t.Puts {
		e := m.kv[p.Key]
		if e.create == 0 {
			e.create = m.rev
		}
		e.val, e.mod = p.Value, m.rev
		m.kv[p.Key] = e
		evs = append(evs, memEvent{key: p.Key, val: p.Value, create: e.create, mod: e.mod})
	}
	return evs, true
}

// harness drives one Keeper over a memKV the way the coordinator and the agents drive it over etcd.
type harness struct {
	t      *testing.T
	layout Layout
	kv     *memKV
	k      *Keeper
	task   string
	target string
	maxOps int
}

func newHarness(t *testing.T, sources ...string) *harness {
	h := &harness{t: t, layout: NewLayout("/t/"), kv: newMemKV(), task: "task", target: "`db`.`t`"}
	h.k = NewKeeper(h.layout, 0)
	h.setSources(sources...)
	return h
}

func (h *harness) lockID() string { return LockID(h.task, h.target) }

// write applies a txn to the kv and feeds the events to the Keeper.
func (h *harness) write(t Txn) bool {
	h.t.Helper()
	if max := h.maxOps; max > 0 {
		if n := len(t.Puts) + len(t.Deletes) + len(t.DeletePrefixes); len(t.Conds) > max || n > max {
			h.t.Fatalf("txn %s has %d conditions and %d operations, over the limit %d", t, len(t.Conds), n, max)
		}
	}
	evs, ok := h.kv.txn(t)
	for _, e := range evs {
		if err := h.k.ApplyKV(e.key, []byte(e.val), e.create, e.mod, e.deleted); err != nil {
			h.t.Fatal(err)
		}
	}
	return ok
}

func (h *harness) setSources(sources ...string) {
	key := h.layout.TaskKey(h.task)
	h.write(Txn{Puts: []KV{{key, encode(TaskSources{Task: h.task, Sources: sources})}}})
}

// info puts a source's info as the agent does.
func (h *harness) info(source string, ddls ...string) {
	h.infoFor(h.target, source, ddls...)
}

func (h *harness) infoFor(target, source string, ddls ...string) {
	key := h.layout.InfoKey(h.task, target, source)
	h.write(Txn{Puts: []KV{{key, encode(Info{Task: h.task, Source: source, Target: target, DDLs: ddls})}}})
}

func (h *harness) op(source string) (Operation, bool) {
	return h.opFor(h.target, source)
}

func (h *harness) opFor(target, source string) (Operation, bool) {
	e, ok := h.kv.kv[h.layout.OperationKey(h.task, target, source)]
	if !ok {
		return Operation{}, false
	}
	o := mustDecodeOp(h.t, e.val)
	o.ModRevision = e.mod
	return o, true
}

func mustDecodeOp(t *testing.T, v string) Operation {
	var o Operation
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// done finishes a source's round as the agent does: its own operation is marked done, or (a
// participant of a done exec) its info is deleted alone; the round's done counter is put. The last
// done's clearing of the lock is left to the Keeper here (agent_test and the model test cover the
// agent's).
func (h *harness) done(source string) { h.doneFor(h.target, source) }

func (h *harness) doneFor(target, source string) {
	h.t.Helper()
	infoKey := h.layout.InfoKey(h.task, target, source)
	t := Txn{Conds: []Cond{{Key: infoKey, ModRevision: h.kv.kv[infoKey].mod}}, Deletes: []string{infoKey}}
	o, ok := h.opFor(target, source)
	switch {
	case ok && !o.Done:
		opKey := h.layout.OperationKey(h.task, target, source)
		o.Done = true
		t.Conds = append(t.Conds, Cond{Key: opKey, ModRevision: o.ModRevision})
		t.Puts = append(t.Puts, KV{opKey, encode(o)})
		if o.Exec {
			t.Puts = append(t.Puts, KV{h.layout.DoneKey(h.task, target, h.kv.kv[opKey].create), ""})
		}
	case !ok:
		exec, execKey := h.execFor(target)
		if exec == nil || !exec.Done || exec.Source == source || h.kv.kv[infoKey].create >= h.kv.kv[execKey].create {
			h.t.Fatalf("source %s has no pending operation on %s (exec %+v)", source, target, exec)
		}
		t.Conds = append(t.Conds, Cond{Key: execKey, ModRevision: h.kv.kv[execKey].mod})
		t.Puts = append(t.Puts, KV{h.layout.DoneKey(h.task, target, h.kv.kv[execKey].create), ""})
	default:
		h.t.Fatalf("source %s has no pending operation on %s", source, target)
	}
	if !h.write(t) {
		h.t.Fatalf("done of %s failed", source)
	}
}

// execFor returns the exec operation of a lock and its key, if any.
func (h *harness) execFor(target string) (*Operation, string) {
	prefix := h.layout.lockPrefix(kindOp, h.task, target)
	for _, key := range sortedKeys(h.kv.kv) {
		if strings.HasPrefix(key, prefix) {
			if o := mustDecodeOp(h.t, h.kv.kv[key].val); o.Exec {
				return &o, key
			}
		}
	}
	return nil, ""
}

// settle runs Decide and applies its txns until nothing is left to do, returning what was applied.
func (h *harness) settle() []string {
	h.t.Helper()
	var applied []string
	for i := 0; i < 100; i++ {
		txns := h.k.Decide()
		if len(txns) == 0 {
			return applied
		}
		for _, t := range txns {
			if h.write(t) {
				applied = append(applied, t.Reason)
			} else {
				h.k.MarkDirty(t.LockID)
			}
		}
	}
	h.t.Fatal("Keeper does not settle")
	return nil
}

// restart replaces the Keeper with a new one built from a full read, as a new coordinator does.
func (h *harness) restart() {
	h.k = NewKeeper(h.layout, h.maxOps)
	h.k.SetRevision(h.kv.rev)
	for _, key := range sortedKeys(h.kv.kv) {
		e := h.kv.kv[key]
		if err := h.k.ApplyKV(key, []byte(e.val), e.create, e.mod, false); err != nil {
			h.t.Fatal(err)
		}
	}
}

// ops describes the lock's operations as "src:exec", "src:skip+done", sorted; a participant whose
// skip is the done exec operation and that has not finished shows as "src:skip(implicit)".
func (h *harness) ops() string {
	var out []string
	for _, key := range sortedKeys(h.kv.kv) {
		if !strings.HasPrefix(key, h.layout.Root()+kindOp+"/") || h.isMark(key) {
			continue
		}
		o := mustDecodeOp(h.t, h.kv.kv[key].val)
		s := o.Source + ":skip"
		if o.Exec {
			s = o.Source + ":exec"
		}
		if o.Done {
			s += "+done"
		}
		out = append(out, s)
		if !o.Exec || !o.Done {
			continue
		}
		var r Round
		if e, ok := h.kv.kv[h.layout.RoundKey(o.Task, o.Target)]; ok {
			if err := json.Unmarshal([]byte(e.val), &r); err != nil {
				h.t.Fatal(err)
			}
		}
		for _, p := range r.Participants {
			infoKey := h.layout.InfoKey(o.Task, o.Target, p)
			if e, ok := h.kv.kv[infoKey]; ok && e.create < h.kv.kv[key].create {
				out = append(out, p+":skip(implicit)")
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// isMark reports whether key is a lock's removal mark.
func (h *harness) isMark(key string) bool {
	p, err := h.layout.parse(key)
	return err == nil && p.removed
}

// marked reports whether target's lock has a removal mark.
func (h *harness) marked(target string) bool {
	_, ok := h.kv.kv[h.layout.RemovedKey(h.task, target)]
	return ok
}

// keys lists the keys of locks, without the task's sources and the removal marks (which stay).
func (h *harness) keys() []string {
	var out []string
	for _, k := range sortedKeys(h.kv.kv) {
		if !strings.HasPrefix(k, h.layout.Root()+kindTask+"/") && !h.isMark(k) {
			out = append(out, strings.TrimPrefix(k, h.layout.Root()))
		}
	}
	return out
}

func (h *harness) expectOps(want string) {
	h.t.Helper()
	if got := h.ops(); got != want {
		h.t.Fatalf("operations %q, want %q", got, want)
	}
}

func (h *harness) expectNoKeys() {
	h.t.Helper()
	if k := h.keys(); len(k) != 0 {
		h.t.Fatalf("keys left behind: %v", k)
	}
}

func (h *harness) lock() Lock {
	h.t.Helper()
	for _, l := range h.k.Locks() {
		if l.ID == h.lockID() {
			return l
		}
	}
	h.t.Fatalf("no lock %s", h.lockID())
	return Lock{}
}

func (h *harness) unlock(owner string, force bool) error {
	t, _, err := h.k.Unlock(h.lockID(), owner, force)
	if err != nil {
		return err
	}
	if !h.write(t) {
		return fmt.Errorf("unlock txn failed its conditions")
	}
	return nil
}

func eqStrings(a, b []string) bool { return slices.Equal(a, b) }
