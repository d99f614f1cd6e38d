package ha

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func state(sources []string, alive map[string]bool, bound map[string]string) State {
	st := State{Sources: map[string]Source{}, Workers: map[string]Worker{}, Alive: alive, Bindings: map[string]Binding{}}
	for _, s := range sources {
		st.Sources[s] = Source{}
	}
	for w := range alive {
		st.Workers[w] = Worker{Name: w}
	}
	for s, w := range bound {
		st.Bindings[s] = Binding{Source: s, Worker: w, Epoch: 1}
	}
	return st
}

func TestPlanBindsFreeWorkersAndMovesSourcesOfDeadOnes(t *testing.T) {
	st := state([]string{"s1", "s2", "s3"}, map[string]bool{"w1": false, "w2": true, "w3": true, "w4": true}, map[string]string{"s1": "w1", "s2": "w2", "gone": "w3"})
	p := Plan(st)
	if got := fmt.Sprint(p.Unbind); got != "[{gone w3 1} {s1 w1 1}]" {
		t.Fatalf("unbind %s", got)
	}
	// w2 keeps s2; w3's binding is to a removed source, so it is not busy; s1 and s3 go to w3, w4.
	if got := fmt.Sprint(p.Bind); got != "[{s1 w3 0} {s3 w4 0}]" {
		t.Fatalf("bind %s", got)
	}
}

func TestPlanWithoutFreeWorkerLeavesSourceUnbound(t *testing.T) {
	st := state([]string{"s1", "s2"}, map[string]bool{"w1": true}, map[string]string{"s2": "w1"})
	p := Plan(st)
	if len(p.Bind) != 0 || len(p.Unbind) != 0 {
		t.Fatalf("plan %+v", p)
	}
}

// Applying plans over random states converges to: every source bound to a distinct live worker while
// live workers remain, never two sources on one worker, and a stable plan (nothing more to do).
func TestPlanInvariantsRandom(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		var sources []string
		for i := range r.IntN(6) {
			sources = append(sources, fmt.Sprintf("s%d", i))
		}
		alive := map[string]bool{}
		var workers []string
		for i := range r.IntN(6) {
			w := fmt.Sprintf("w%d", i)
			alive[w] = r.IntN(4) > 0
			workers = append(workers, w)
		}
		bound := map[string]string{}
		for _, s := range append(slices.Clone(sources), "old") {
			if len(workers) > 0 && r.IntN(2) == 0 {
				bound[s] = workers[r.IntN(len(workers))]
			}
		}
		st := state(sources, alive, bound)
		for round := 0; round < 3; round++ {
			p := Plan(st)
			for _, b := range p.Unbind {
				delete(st.Bindings, b.Source)
			}
			for _, b := range p.Bind {
				if _, ok := st.Bindings[b.Source]; ok {
					t.Fatalf("seed %d: bind of bound source %s", seed, b.Source)
				}
				st.Bindings[b.Source] = b
			}
		}
		if p := Plan(st); len(p.Bind)+len(p.Unbind) != 0 {
			t.Fatalf("seed %d: plan not stable after applying: %+v", seed, p)
		}
		used := map[string]bool{}
		liveWorkers := 0
		for _, a := range alive {
			if a {
				liveWorkers++
			}
		}
		for s, b := range st.Bindings {
			if _, ok := st.Sources[s]; !ok {
				t.Fatalf("seed %d: binding of removed source %s", seed, s)
			}
			if !alive[b.Worker] {
				t.Fatalf("seed %d: %s bound to dead worker %s", seed, s, b.Worker)
			}
			if used[b.Worker] {
				t.Fatalf("seed %d: worker %s holds two sources", seed, b.Worker)
			}
			used[b.Worker] = true
		}
		if want := min(len(sources), liveWorkers); len(st.Bindings) != want {
			t.Fatalf("seed %d: %d sources bound, want %d", seed, len(st.Bindings), want)
		}
	}
}
