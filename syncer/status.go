// The sync unit's status: the snapshot query-status reads, refreshed every flush interval, and its rates.

package syncer

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

// Status is a snapshot of a syncer for query-status, refreshed every flush interval.
type Status struct {
	SyncerBinlog vocab.Position // committed resume position
	SyncerGTID   string
	TotalEvents  int64
	BlockingDDLs []string // DDLs of the locks this source has put its info for and waits on
	LockIDs      []string
	Unresolved   []shardgroup.Unresolved
	PreparedXA   []PreparedXA // XA transactions waiting for their outcome (events.go)

	// TotalRows are the rows committed downstream since the syncer started; the rates are per second
	// since then (Total) and over the last 30 seconds (Recent), of rows and of binlog events (Tps, DM's
	// name).
	TotalRows                                int64
	TotalRps, RecentRps, TotalTps, RecentTps int64

	// ReadErr is the binlog read failure being retried (nil: none), ReadAttempt the attempts since
	// the binlog last moved, ReadErrAt when it failed last.
	ReadErr     error
	ReadAttempt int
	ReadErrAt   time.Time
}

// Started is closed once the syncer has saved where it starts (a first start's position is fixed from
// then on) and begins to read the binlog.
func (s *Syncer) Started() <-chan struct{} { return s.board.started }

// Status returns the last snapshot.
func (s *Syncer) Status() Status {
	s.board.statusMu.Lock()
	defer s.board.statusMu.Unlock()
	st := s.board.status
	st.TotalEvents = s.board.events.Load()
	st.TotalRows, st.TotalRps, st.RecentRps, st.TotalTps, st.RecentTps = s.board.rates.rates(time.Now(), sink.AppliedRows(s.cfg.Task, s.cfg.Source), st.TotalEvents)
	if attempt, err, at, ok := s.cur.retry.failing(); ok {
		st.ReadErr, st.ReadAttempt, st.ReadErrAt = err, attempt, at
	}
	return st
}

// rateWindow turns cumulative counts of rows and events into rates: since the first sample and over
// the last 30 seconds. It keeps a sample a second at most.
type rateWindow struct {
	mu      sync.Mutex
	samples []rateSample // oldest first; the first is the start
}

type rateSample struct {
	at           time.Time
	rows, events int64
}

const recentRateWindow = 30 * time.Second

// note records the counts at now.
func (w *rateWindow) note(now time.Time, rows, events int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.samples); n > 0 && now.Sub(w.samples[n-1].at) < time.Second {
		return
	}
	w.samples = append(w.samples, rateSample{now, rows, events})
	// Keep the start, and from the rest the samples of the window plus the one just before it.
	for len(w.samples) > 3 && now.Sub(w.samples[2].at) > recentRateWindow {
		w.samples = append(w.samples[:1], w.samples[2:]...)
	}
}

// rates are the rows since the start, and the rows and events per second since the start and over
// the last 30 seconds (rows and events are the cumulative counts now).
func (w *rateWindow) rates(now time.Time, rows, events int64) (totalRows, totalRps, recentRps, totalTps, recentTps int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) == 0 {
		return 0, 0, 0, 0, 0
	}
	per := func(d int64, since time.Time) int64 {
		if secs := now.Sub(since).Seconds(); secs >= 1 {
			return int64(float64(d) / secs)
		}
		return 0
	}
	start := w.samples[0]
	recent := start
	for _, s := range w.samples {
		if now.Sub(s.at) <= recentRateWindow {
			break
		}
		recent = s
	}
	totalRows = rows - start.rows
	return totalRows, per(totalRows, start.at), per(rows-recent.rows, recent.at), per(events-start.events, start.at), per(events-recent.events, recent.at)
}

func (s *Syncer) publishStatus() {
	st := Status{SyncerBinlog: s.apply.persisted, SyncerGTID: s.apply.persistedGTID, PreparedXA: s.xa.list()}
	targets := make([]vocab.TableName, 0, len(s.ddl.shard.groups))
	for t := range s.ddl.shard.groups {
		targets = append(targets, t)
	}
	slices.SortFunc(targets, func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) })
	for _, t := range targets {
		u, ok := s.ddl.shard.groups[t].Unresolved()
		if !ok {
			continue
		}
		st.Unresolved = append(st.Unresolved, u)
		if s.ddl.shard.pending[t] {
			st.BlockingDDLs = append(st.BlockingDDLs, u.DDLs...)
			st.LockIDs = append(st.LockIDs, pessimist.LockID(s.cfg.Task, t.String()))
		}
	}
	s.board.statusMu.Lock()
	s.board.status = st
	s.board.statusMu.Unlock()
	s.board.rates.note(time.Now(), sink.AppliedRows(s.cfg.Task, s.cfg.Source), s.board.events.Load())
}

// statusBoard is what query-status reads: the last snapshot and the counters and rates beside it.
type statusBoard struct {
	events   atomic.Int64
	rates    rateWindow // samples of rows and events, for the rates of Status
	started  chan struct{}
	statusMu sync.Mutex
	status   Status
}
