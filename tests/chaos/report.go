package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a soak run saw; it passed when Failures is empty.
type Report struct {
	Seed     uint64
	Duration time.Duration
	// Faults by kind; LongestFault the longest one kept its process down.
	Faults       map[string]int
	LongestFault time.Duration
	// Locks: rounds resolved (from the etcd history), exec and skip operations written, the longest a
	// lock round stayed pending and which; DDLSteps the shard DDLs applied to every shard of a target,
	// Renames the shard renames within their groups.
	Locks, Execs, Skips int
	LongestLock         time.Duration
	LongestLockID       string
	DDLSteps, Renames   int
	// Workload: operations, rows written, statements that failed under a fault, 50k-row transactions.
	Ops, Rows, WriteErrors, BigTxns int64
	// LongestPaused is the longest a subtask stayed Paused, and which.
	LongestPaused      time.Duration
	LongestPausedWhich string
	// LoadedAfter is how long both tasks' full loads took (shard DDL starts then); 0: not within the run.
	LoadedAfter time.Duration
	Failures    []string
}

func (r *Report) fill(s *Soak) {
	if s.faults != nil {
		s.faults.mu.Lock()
		r.Faults = maps.Clone(s.faults.counts)
		r.LongestFault = s.faults.Longest
		s.faults.mu.Unlock()
	}
	s.histMu.Lock()
	r.Locks, r.Execs, r.Skips = s.history.Resolved, s.history.Execs, s.history.Skips
	r.LongestLock, r.LongestLockID = s.history.LongestPending, s.history.LongestPendingLock
	s.histMu.Unlock()
	for _, d := range s.runners {
		r.DDLSteps += len(d.Steps)
		r.Renames += d.renames
	}
	r.Ops, r.Rows, r.WriteErrors, r.BigTxns = s.stats.ops.Load(), s.stats.rows.Load(), s.stats.errors.Load(), s.stats.bigTxns.Load()
	r.LoadedAfter = time.Duration(s.loadedAfter.Load())
	if s.status != nil {
		s.status.mu.Lock()
		r.LongestPaused, r.LongestPausedWhich = s.status.Longest, s.status.Which
		s.status.mu.Unlock()
	}
}

// String is the report as the soak prints it.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if len(r.Failures) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "chaos soak %s: seed %d, %s\n", verdict, r.Seed, r.Duration)
	total := 0
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		fmt.Fprintf(&b, "  fault %-40s %d\n", k, r.Faults[k])
		total += r.Faults[k]
	}
	fmt.Fprintf(&b, "  loads done after %s (shard DDL from then on)\n", r.LoadedAfter.Round(time.Millisecond))
	fmt.Fprintf(&b, "  faults: %d, the longest held %s\n", total, r.LongestFault.Round(time.Millisecond))
	fmt.Fprintf(&b, "  locks resolved: %d (exec operations %d, skips of their own %d), DDL steps %d, shard renames %d\n", r.Locks, r.Execs, r.Skips, r.DDLSteps, r.Renames)
	fmt.Fprintf(&b, "  longest lock pending: %s (%s)\n", r.LongestLock.Round(time.Millisecond), r.LongestLockID)
	fmt.Fprintf(&b, "  workload: %d operations, %d rows written, %d 50k-row transactions, %d statements failed (under a fault, or on a shard renamed under them)\n", r.Ops, r.Rows, r.BigTxns, r.WriteErrors)
	fmt.Fprintf(&b, "  longest subtask Paused: %s (%s)\n", r.LongestPaused.Round(time.Millisecond), r.LongestPausedWhich)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAILURE: %s\n", f)
	}
	return b.String()
}
