package master

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
)

// A lock that waits for a paused or stopped source says which and what brings it back; a source
// that runs, and a stopped task's lock, say nothing.
func TestWaitNotesNameThePausedAndStoppedSources(t *testing.T) {
	task := ha.Task{Name: "t", Stage: ha.StageRunning, Config: "name: t\ntask-mode: incremental\ntarget-database:\n  host: h\n  port: 3306\n  user: u\n" +
		"mysql-instances:\n  - source-id: s1\n  - source-id: s2\n  - source-id: s3\n"}
	task, _, _ = task.Operate("pause", []string{"s1"})
	task, _, _ = task.Operate("stop", []string{"s2"})
	st := ha.State{Tasks: map[string]ha.Task{"t": task}}
	locks := []pessimist.Lock{{ID: "t-`db`.`t`", Task: "t", Unsynced: []string{"s1", "s2", "s3"}},
		{ID: "gone-`db`.`t`", Task: "gone", Unsynced: []string{"s1"}}}
	got := strings.Join(waitNotes(st, locks, ""), "\n")
	want := "lock t-`db`.`t` waits for source s1, whose subtask of task t is paused: resume-task t -s s1\n" +
		"lock t-`db`.`t` waits for source s2, which stop-task -s removed from task t: start-task t -s s2 starts it again, or shard-ddl-lock unlock t-`db`.`t` resolves the lock without it"
	if got != want {
		t.Fatalf("notes:\n%s\nwant:\n%s", got, want)
	}
	if n := waitNotes(st, locks, "other"); len(n) != 0 {
		t.Fatalf("notes of another task: %v", n)
	}
}
