package worker

import (
	"context"
	"errors"
	"testing"

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
