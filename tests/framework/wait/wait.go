// Package wait is the one way the tests (and the test frameworks) wait for something to become true:
// poll a condition until it holds or a timeout passes. It imports nothing of the project.
//
// The poll starts fast and backs off: the first checks come 1 ms apart (a condition that is nearly
// true costs nearly nothing), the gap doubles up to MaxInterval, and it is never shorter than the
// last check took, so that an expensive check (a dmctl process, a table comparison) runs at most
// half of the time.
package wait

import (
	"testing"
	"time"
)

// MaxInterval is the longest gap between two checks.
const MaxInterval = 50 * time.Millisecond

// Until checks cond until it holds (true) or timeout passes (false). cond runs at least once, and
// once more at the deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for gap := time.Millisecond; ; gap = min(2*gap, MaxInterval) {
		start := time.Now()
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(max(gap, time.Since(start)), left))
	}
}

// Eventually checks cond until it holds, or fails t (t.Fatal) with what() when timeout passes. what
// describes the state that was waited for; it runs only on failure, so it may report the last thing
// cond saw. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %v: %s", timeout, what())
	}
}
