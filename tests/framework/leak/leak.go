// Package leak checks that a package's tests leave no goroutine of ours behind (go.uber.org/goleak).
// A package whose code starts goroutines calls VerifyTestMain from its TestMain: the tests run, then
// the package's cleanup (the embedded etcd's Stop, the MariaDB template's removal), then goleak looks
// for goroutines still running (retrying for a while, so that one on its way out is not counted), and
// a passing run with one fails, printing its stack.
//
// Only goroutines that are not ours and live for the process may be ignored (goleak.IgnoreTopFunction,
// IgnoreAnyFunction), each with a comment saying why; none is so far: the embedded etcd is stopped
// before the check, and every pool and client the tests open is closed. A goroutine of ours that
// outlives its test is a bug to fix (close what the test opened, cancel what it started), not an
// exception.
package leak

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain runs m, then cleanup (nil for none), then the leak check, and exits with the tests'
// code (1 if they passed but left goroutines). ignore are the package's exceptions.
func VerifyTestMain(m *testing.M, cleanup func(), ignore ...goleak.Option) {
	goleak.VerifyTestMain(thenCleanup{m, cleanup}, ignore...)
}

type thenCleanup struct {
	m       *testing.M
	cleanup func()
}

func (r thenCleanup) Run() int {
	code := r.m.Run()
	if r.cleanup != nil {
		r.cleanup()
	}
	return code
}
