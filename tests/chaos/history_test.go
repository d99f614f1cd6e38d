package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/pessimist"
)

// lockHistory writes the revisions of one lock's rounds as the protocol writes them, so that a test
// can write them out of order.
type lockHistory struct {
	t      *testing.T
	layout pessimist.Layout
	task   string
	target string
	ddls   []string
}

func (l lockHistory) info(src string) Event {
	return l.put(l.layout.InfoKey(l.task, l.target, src), pessimist.Info{Task: l.task, Source: src, Target: l.target, DDLs: l.ddls})
}

func (l lockHistory) infoGone(src string) Event {
	return Event{Key: l.layout.InfoKey(l.task, l.target, src)}
}

func (l lockHistory) op(src string, exec, done bool) Event {
	return l.put(l.layout.OperationKey(l.task, l.target, src), pessimist.Operation{Task: l.task, Source: src, Target: l.target, DDLs: l.ddls, Exec: exec, Done: done})
}

func (l lockHistory) opGone(src string) Event {
	return Event{Key: l.layout.OperationKey(l.task, l.target, src)}
}

func (l lockHistory) sources(srcs ...string) Event {
	return l.put(l.layout.TaskKey(l.task), pessimist.TaskSources{Task: l.task, Sources: srcs})
}

func (l lockHistory) put(key string, v any) Event {
	b, err := json.Marshal(v)
	if err != nil {
		l.t.Fatal(err)
	}
	return Event{Key: key, Value: b}
}

// run applies revisions 1, 2, ... a second apart and returns the history.
func run(revs ...[]Event) *History {
	h := NewHistory(pessimist.NewLayout(""), nil)
	t0 := time.Unix(1000, 0)
	for i, evs := range revs {
		h.Apply(int64(i+1), t0.Add(time.Duration(i)*time.Second), evs)
	}
	return h
}

func revs(evs ...[]Event) [][]Event { return evs }
func at(evs ...Event) []Event       { return evs }

// TestHistoryAcceptsTheProtocol: a lock of three sources as the protocol writes it (the last info
// carries the exec; the owner's done; a participant's done; a late source's skip of its own after the
// done; the last done clears the keys), then a second round: no violation, two rounds resolved, and
// the first round pending from its first info to the owner's done.
func TestHistoryAcceptsTheProtocol(t *testing.T) {
	l := lockHistory{t: t, layout: pessimist.NewLayout(""), task: "task", target: "`db`.`t`", ddls: []string{"ALTER TABLE `db`.`t` ADD COLUMN c INT"}}
	round := revs(
		at(l.info("s1")),
		at(l.info("s2")),
		at(l.info("s3"), l.op("s3", true, false)),
		at(l.op("s3", true, true), l.infoGone("s3")),
		at(l.infoGone("s1")),
		at(l.op("s2", false, false)),
		at(l.op("s2", false, true), l.infoGone("s2"), l.opGone("s2"), l.opGone("s3")),
	)
	all := append(revs(at(l.sources("s1", "s2", "s3"))), round...)
	all = append(all, round...)
	h := run(all...)
	if bad := h.Violations(); len(bad) != 0 {
		t.Fatalf("violations in a correct history: %q", bad)
	}
	if h.Resolved != 2 || h.Execs != 2 || h.Skips != 2 {
		t.Fatalf("resolved %d, execs %d, skips %d; want 2, 2, 2", h.Resolved, h.Execs, h.Skips)
	}
	if h.LongestPending != 3*time.Second || h.LongestPendingLock != "task-`db`.`t`" {
		t.Fatalf("longest pending %v (%s), want 3s", h.LongestPending, h.LongestPendingLock)
	}
	if p := h.Pending(time.Unix(2000, 0)); len(p) != 0 {
		t.Fatalf("pending after the rounds: %v", p)
	}
}

// TestHistoryCatchesEachBrokenInvariant: each invariant broken once, by the smallest history that
// breaks it, is reported naming the lock and what was seen; an unlock request makes the operator's
// decisions legitimate.
func TestHistoryCatchesEachBrokenInvariant(t *testing.T) {
	l := lockHistory{t: t, layout: pessimist.NewLayout(""), task: "task", target: "`db`.`t`", ddls: []string{"ALTER TABLE `db`.`t` ADD COLUMN c INT"}}
	other := l
	other.ddls = []string{"ALTER TABLE `db`.`t` ADD COLUMN d INT"}
	unlock := l.put(l.layout.UnlockKey(l.task, l.target), pessimist.Unlock{Task: l.task, Target: l.target, Owner: "s2"})
	cases := []struct {
		name string
		revs [][]Event
		want string // "" : no violation
	}{
		{"exec before every info", revs(at(l.sources("s1", "s2")), at(l.info("s2"), l.op("s2", true, false))),
			"exec for s2 before source s1's info"},
		{"exec over a conflict", revs(at(l.sources("s1", "s2")), at(other.info("s1")), at(l.info("s2"), l.op("s2", true, false))),
			"while source s1's info holds"},
		{"exec by an unlock", revs(at(l.sources("s1", "s2")), at(unlock), at(l.info("s2"), l.op("s2", true, false))),
			""},
		{"skip before the owner's done", revs(at(l.sources("s1", "s2")), at(l.info("s1")), at(l.info("s2"), l.op("s2", true, false)), at(l.op("s1", false, false))),
			"skip for s1 before the owner's done"},
		{"skip with no exec", revs(at(l.sources("s1", "s2")), at(l.info("s1")), at(l.op("s1", false, false))),
			"skip for s1 before the owner's done"},
		{"participant done before the owner", revs(at(l.sources("s1", "s2")), at(l.info("s1")), at(l.info("s2"), l.op("s2", true, false)), at(l.infoGone("s1"))),
			"participant s1 finished (its info deleted) before the owner s2's done"},
		{"two owners", revs(at(l.sources("s1", "s2")), at(l.info("s1")), at(l.info("s2"), l.op("s2", true, false)), at(l.op("s1", true, false))),
			"has two owners: exec operations for [s1 s2]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := run(c.revs...)
			bad := h.Violations()
			if c.want == "" {
				if len(bad) != 0 {
					t.Fatalf("violations %q, want none", bad)
				}
				return
			}
			if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), c.want) || !strings.Contains(bad[0], "task-`db`.`t`") {
				t.Fatalf("violations %q, want one saying %q", bad, c.want)
			}
		})
	}
	h := run(revs(at(l.sources("s1")))...)
	h.Apply(1, time.Unix(0, 0), nil)
	if bad := h.Violations(); len(bad) != 1 || !strings.Contains(bad[0], "out of order") {
		t.Fatalf("a revision applied twice: %q", bad)
	}
}
