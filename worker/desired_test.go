package worker

import (
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
)

// The subtask a worker wants for its source follows that source's stage and resume count: a
// resume-task -s of the source restarts it (its key changes) even when no stage changed, one of
// another source does not, and stop-task -s removes it.
func TestDesiredFollowsTheSourcesOwnStage(t *testing.T) {
	task := ha.Task{Name: "t", Stage: ha.StageRunning, Config: "name: t\ntask-mode: incremental\ntarget-database:\n  host: h\n  port: 3306\n  user: u\n" +
		"mysql-instances:\n  - source-id: s1\n  - source-id: s2\n"}
	st := ha.State{Sources: map[string]ha.Source{"s1": {Parsed: &config.Source{SourceID: "s1"}}},
		Bindings: map[string]ha.Binding{"s1": {Source: "s1", Worker: "w1", Epoch: 7}}, Tasks: map[string]ha.Task{"t": task}}
	s := NewServer(ServerConfig{Name: "w1"})
	want := func(tk ha.Task) (spec, bool) {
		st.Tasks["t"] = tk
		_, out := s.desired(st)
		sp, ok := out["t"]
		return sp, ok
	}
	running, _ := want(task)
	paused, _, _ := task.Operate("pause", []string{"s1"})
	if sp, _ := want(paused); sp.stage != ha.StagePaused || sp.key != running.key {
		t.Fatalf("pause -s s1: stage %s, key changed %v", sp.stage, sp.key != running.key)
	}
	other, _, _ := task.Operate("pause", []string{"s2"})
	if sp, _ := want(other); sp.stage != ha.StageRunning {
		t.Fatalf("pause -s s2 paused s1's subtask")
	}
	resumed, _, _ := task.Operate("resume", []string{"s1"})
	if sp, _ := want(resumed); sp.stage != ha.StageRunning || sp.key == running.key {
		t.Fatalf("resume -s s1 of a running subtask: stage %s, key changed %v", sp.stage, sp.key != running.key)
	}
	resumed2, _, _ := task.Operate("resume", []string{"s2"})
	if sp, _ := want(resumed2); sp.key != running.key {
		t.Fatal("resume -s s2 restarts s1's subtask")
	}
	stopped, _, _ := task.Operate("stop", []string{"s1"})
	if _, ok := want(stopped); ok {
		t.Fatal("stop-task -s s1 left the subtask")
	}
}
