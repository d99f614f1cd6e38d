package master

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/starttime"
	"github.com/tributary-db/tributary/vocab"
)

// --start-time is refused for a task that loads, and for a time that is none, saying nothing started.
func TestCheckStartTime(t *testing.T) {
	for _, c := range []struct {
		mode, text, want string
	}{
		{"all", "2026-12-06 17:00:00", "--start-time applies to task-mode incremental only: task t is task-mode all"},
		{"full", "2026-12-06 17:00:00", "task-mode full"},
		{"incremental", "17:00", `--start-time "17:00" is not a time`},
	} {
		_, err := checkStartTime(&config.Task{Name: "t", TaskMode: c.mode}, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "nothing started") {
			t.Errorf("%s %q: %v; want %q, nothing started", c.mode, c.text, err, c.want)
		}
	}
	if at, err := checkStartTime(&config.Task{Name: "t", TaskMode: "incremental"}, "2026-12-06T17:00:00"); err != nil || at.Text != "2026-12-06T17:00:00" {
		t.Errorf("incremental: %+v, %v", at, err)
	}
}

func TestTimeMsg(t *testing.T) {
	at, err := starttime.Parse("2026-12-06 17:00:00")
	if err != nil {
		t.Fatal(err)
	}
	msg := timeMsg(at, starttime.Point{Pos: vocab.Position{File: "mysql-bin.000002", Pos: 1234}, GTID: "0-1-57", Event: 1796576400})
	for _, want := range []string{"--start-time 2026-12-06 17:00:00: starts at (mysql-bin.000002, 1234), GTID set 0-1-57", "first event group at or after it", "2026-12-06T17:00:00Z"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	msg = timeMsg(at, starttime.Point{Pos: vocab.Position{File: "mysql-bin.000003", Pos: 99}, AtEnd: true})
	if !strings.Contains(msg, "no event group of the source begins at or after it: starts at the current position (mysql-bin.000003, 99)") || strings.Contains(msg, "GTID") {
		t.Errorf("at the end: %q", msg)
	}
}
