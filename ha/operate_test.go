package ha

import (
	"strings"
	"testing"
)

const threeSources = "name: t\ntask-mode: incremental\ntarget-database:\n  host: h\n  port: 3306\n  user: u\n" +
	"mysql-instances:\n  - source-id: s1\n  - source-id: s2\n  - source-id: s3\n"

func task() Task { return Task{Name: "t", Config: threeSources, Stage: StageRunning} }

func TestOperateOneSourceLeavesTheOthers(t *testing.T) {
	p, stopAll, err := task().Operate("pause", []string{"s1"})
	if err != nil || stopAll {
		t.Fatal(err, stopAll)
	}
	if p.StageOf("s1") != StagePaused || p.StageOf("s2") != StageRunning || p.Stage != StageRunning {
		t.Fatalf("after pause -s s1: %+v", p)
	}
	r, _, err := p.Operate("resume", []string{"s1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.StageOf("s1") != StageRunning || r.ResumedOf("s1") != 1 || r.ResumedOf("s2") != 0 {
		t.Fatalf("after resume -s s1: %+v", r)
	}
	// A resume of a source that runs still counts: it restarts a subtask stopped on an error.
	r2, _, _ := r.Operate("resume", []string{"s2"})
	if r2.ResumedOf("s2") != 1 || r2.ResumedOf("s1") != 1 {
		t.Fatalf("after resume -s s2: %+v", r2)
	}
	// A whole-task pause forgets the per-source stages; the input is not changed.
	w, _, _ := r2.Operate("pause", nil)
	if w.StageOf("s1") != StagePaused || w.SourceStages != nil || r2.SourceStages["s1"] != StageRunning {
		t.Fatalf("whole pause: %+v (input %+v)", w, r2)
	}
	// -s naming every source is the whole task.
	all, _, _ := w.Operate("resume", []string{"s3", "s1", "s2"})
	if all.Resumed != 1 || all.Stage != StageRunning || all.SourceStages != nil {
		t.Fatalf("resume of all: %+v", all)
	}
}

func TestOperateStopOneSource(t *testing.T) {
	p, _, _ := task().Operate("pause", []string{"s2"})
	s, stopAll, err := p.Operate("stop", []string{"s2"})
	if err != nil || stopAll {
		t.Fatal(err, stopAll)
	}
	if got := strings.Join(s.Sources(), ","); got != "s1,s3" || !s.IsStopped("s2") || len(s.SourceStages) != 0 {
		t.Fatalf("after stop -s s2: %s %+v", got, s)
	}
	// A stopped source is no longer the task's: naming it is refused, and says so.
	if _, _, err := s.Operate("resume", []string{"s2"}); err == nil || !strings.Contains(err.Error(), "stopped by stop-task -s: s2") {
		t.Fatalf("resume -s of a stopped source: %v", err)
	}
	// Stopping the remaining sources stops the task.
	if _, stopAll, err := s.Operate("stop", []string{"s1", "s3"}); err != nil || !stopAll {
		t.Fatal(err, stopAll)
	}
}

func TestOperateUnknownSourceChangesNothing(t *testing.T) {
	in := task()
	out, _, err := in.Operate("pause", []string{"s1", "nope"})
	if err == nil || err.Error() != "nope: not a source of task t (its sources: s1, s2, s3)" {
		t.Fatalf("err %v", err)
	}
	if out.SourceStages != nil || out.Stage != StageRunning {
		t.Fatalf("changed: %+v", out)
	}
}

func TestTransferRefusals(t *testing.T) {
	st := state([]string{"s1", "s2"}, map[string]bool{"w1": true, "w2": true, "w3": true, "w4": false}, map[string]string{"s1": "w1", "s2": "w2"})
	st.Tasks = map[string]Task{"t": {Name: "t", Config: strings.Replace(threeSources, "  - source-id: s3\n", "", 1), Stage: StageRunning}}
	for _, c := range []struct{ source, worker, want string }{
		{"nope", "w3", "source nope does not exist"},
		{"s1", "w9", "worker w9 is not registered"},
		{"s1", "w4", "worker w4 is offline"},
		{"s1", "w2", "worker w2 is bound to source s2"},
		{"s1", "w3", "source s1 has running subtasks of task t: pause them first (pause-task t -s s1)"},
	} {
		if _, _, err := Transfer(st, c.source, c.worker); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("transfer %s to %s: %v, want %q", c.source, c.worker, err, c.want)
		}
	}
	// A source no worker holds is bound at once, running or not.
	unbound := st
	unbound.Bindings = map[string]Binding{"s2": st.Bindings["s2"]}
	if b, changed, err := Transfer(unbound, "s1", "w3"); err != nil || !changed || b.Worker != "w3" {
		t.Fatalf("unbound source: %+v %v %v", b, changed, err)
	}
	if _, changed, err := Transfer(st, "s1", "w1"); err != nil || changed {
		t.Fatalf("to its own worker: %v %v", changed, err)
	}
	p, _, _ := st.Tasks["t"].Operate("pause", []string{"s1"})
	st.Tasks["t"] = p
	b, changed, err := Transfer(st, "s1", "w3")
	if err != nil || !changed || b.Worker != "w3" || b.Source != "s1" {
		t.Fatalf("paused: %+v %v %v", b, changed, err)
	}
	// A source stop-task -s removed from the task does not hold the transfer.
	s, _, _ := st.Tasks["t"].Operate("stop", []string{"s1"})
	s.SourceStages = nil
	st.Tasks["t"] = s
	if _, _, err := Transfer(st, "s1", "w3"); err != nil {
		t.Fatal(err)
	}
}
