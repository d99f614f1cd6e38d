package wait

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	if !Until(time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition true at its 5th check timed out")
	}
	start := time.Now()
	checks := 0
	if Until(100*time.Millisecond, func() bool { checks++; return false }) {
		t.Fatal("a false condition held")
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > time.Second {
		t.Errorf("a false condition returned after %v, want about 100ms", d)
	}
	if checks < 3 {
		t.Errorf("%d checks in 100ms", checks)
	}
	// An expensive check is not run back to back.
	checks = 0
	Until(200*time.Millisecond, func() bool { checks++; time.Sleep(40 * time.Millisecond); return false })
	if checks > 4 {
		t.Errorf("a 40ms check ran %d times in 200ms", checks)
	}
}

type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	for _, a := range args {
		if s, ok := a.(string); ok {
			f.msg += " " + s
		}
	}
}

func TestEventuallyReportsWhat(t *testing.T) {
	r := &fatalRecorder{TB: t}
	Eventually(r, 10*time.Millisecond, func() bool { return false }, func() string { return "the row" })
	if !strings.Contains(r.msg, "the row") {
		t.Errorf("failure message %q does not say what was waited for", r.msg)
	}
	r.msg = ""
	Eventually(r, time.Second, func() bool { return true }, func() string { return "never" })
	if r.msg != "" {
		t.Errorf("a true condition failed: %q", r.msg)
	}
}
