package worker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
)

// TestPausedUnitIsTheOneThatStopped: a task-mode all subtask paused on an error shows the unit the
// error came from: Load while its load has not finished, Sync once it has (the chaos soak saw a sync
// error shown under unit Load); a full task that finished shows Load.
func TestPausedUnitIsTheOneThatStopped(t *testing.T) {
	for _, c := range []struct {
		mode   string
		stage  string
		loaded bool
		want   string
	}{
		{"all", ha.StagePaused, false, "Load"},
		{"all", ha.StagePaused, true, "Sync"},
		{"full", ha.StageFinished, true, "Load"},
		{"incremental", ha.StagePaused, false, "Sync"},
	} {
		st := &subtask{spec: spec{task: &config.Task{Name: "t", TaskMode: c.mode}}, stage: c.stage, lastErr: errors.New("refused"), loaded: c.loaded}
		if got := st.status(context.Background()).Unit; got != c.want {
			t.Errorf("task-mode %s, %s, loaded %v: unit %s, want %s", c.mode, c.stage, c.loaded, got, c.want)
		}
	}
}

// TestTermBackoff: the wait before the next etcd session grows over sessions that could not be set
// up in a row and starts again after one in which the worker was up.
func TestTermBackoff(t *testing.T) {
	var b termBackoff
	var got []time.Duration
	for _, alive := range []bool{true, false, false, false, false, false, false, false, false, false, false, false, true, false} {
		got = append(got, b.next(alive))
	}
	ms := time.Millisecond
	want := []time.Duration{500 * ms, 1000 * ms, 1500 * ms, 2000 * ms, 2500 * ms, 3000 * ms, 3500 * ms, 4000 * ms, 4500 * ms, 5000 * ms, 5000 * ms, 5000 * ms, 500 * ms, 1000 * ms}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

// TestResumeBackoff: 2 s doubling to 30 s over errors in a row; a run of resumeRollback without an
// error starts again at 2 s.
func TestResumeBackoff(t *testing.T) {
	var b resumeBackoff
	s := time.Second
	var got []time.Duration
	for _, ran := range []time.Duration{s, s, s, s, s, s, 4 * time.Minute, resumeRollback, s, resumeRollback + s} {
		got = append(got, b.next(ran))
	}
	want := []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 2 * s, 4 * s, 2 * s}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}
