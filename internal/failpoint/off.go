//go:build !failpoints

// Package failpoint holds the fault-injection points of the fault-matrix tests. In a normal build
// Inject does nothing and reads nothing; only binaries built with -tags failpoints (the tests build
// them so) honour TRIBUTARY_FAILPOINTS.
package failpoint

// Inject marks a point where a test may pause the process.
func Inject(name string) {}

// Enabled reports whether the build honours failpoints.
const Enabled = false

// Active reports whether a switch is on: never in a normal build.
func Active(name string) bool { return false }
