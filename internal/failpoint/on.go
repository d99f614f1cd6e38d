//go:build failpoints

// Package failpoint holds the fault-injection points of the fault-matrix tests. Built with
// -tags failpoints, a process pauses at a point named in TRIBUTARY_FAILPOINTS (comma-separated): it
// creates TRIBUTARY_FAILPOINT_DIR/<name>.reached and waits until <name>.release exists there. Each
// point pauses once per directory (a restarted process passes it), so a test can kill any process
// while one is held at an exact step and then let it go on.
package failpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Enabled reports whether the build honours failpoints.
const Enabled = true

var (
	names = strings.Split(os.Getenv("TRIBUTARY_FAILPOINTS"), ",")
	dir   = os.Getenv("TRIBUTARY_FAILPOINT_DIR")
)

// Active reports whether name is in TRIBUTARY_FAILPOINTS: a switch rather than a pause (for example
// "agent-coordinated", which leaves every exec to the coordinator).
func Active(name string) bool { return slices.Contains(names, name) }

// Inject pauses here if name is enabled and was not reached before.
func Inject(name string) {
	if dir == "" || !slices.Contains(names, name) {
		return
	}
	reached := filepath.Join(dir, name+".reached")
	f, err := os.OpenFile(reached, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // reached before (or unwritable): pass
	}
	f.WriteString(os.Args[0])
	f.Close()
	for {
		if _, err := os.Stat(filepath.Join(dir, name+".release")); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
