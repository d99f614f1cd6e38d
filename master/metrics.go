package master

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
)

// DM's names for the lock states of dm_master_ddl_state_number (Tributary adds Conflict).
const (
	DDLStateUnsynced = "Un-synced" // waiting for sources that have not reached the DDLs
	DDLStateSynced   = "Synced"    // every source is in: executing, skipping, or unlocked
	DDLStateConflict = "Conflict"  // sources sent different DDLs: waits for the user
)

// ddlState maps a lock's stage to DM's state names.
func ddlState(stage string) string {
	switch stage {
	case "waiting":
		return DDLStateUnsynced
	case "conflict":
		return DDLStateConflict
	default:
		return DDLStateSynced
	}
}

// shardDDLErrors is DM's dm_master_shard_ddl_error: errors about shard DDL locks, by task and type
// (Conflict: a lock's sources sent different DDLs; Unlock: a user's unlock was refused or failed).
var shardDDLErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "dm", Subsystem: "master", Name: "shard_ddl_error",
	Help: "number of shard DDL lock errors: Conflict (sources sent different DDLs), Unlock (a refused or failed unlock)",
}, []string{"task", "type"})

// lockTracker remembers when this master first saw each lock (its age) and whether its conflict was
// counted. Ages count from the first time this process saw the lock: after a leader change, from
// the new leader's first look.
type lockTracker struct {
	mu       sync.Mutex
	first    map[string]time.Time
	firstOf  map[string]time.Time
	conflict map[string]bool
	onGone   func(id string, age time.Duration) // a lock left the leader's coordinator
}

var locksSeen = &lockTracker{first: map[string]time.Time{}, firstOf: map[string]time.Time{}, conflict: map[string]bool{}}

// lockKey is what the tracker needs of a lock.
type lockKey struct{ ID, Task, Stage string }

func keysOf(locks []pessimist.Lock) []lockKey {
	out := make([]lockKey, len(locks))
	for i, l := range locks {
		out[i] = lockKey{l.ID, l.Task, l.Stage}
	}
	return out
}

// observe records the locks seen now and returns each one's first sighting. A complete list (every
// lock of every task, as the leader's coordinator has it) also forgets the locks that are gone.
func (t *lockTracker) observe(locks []lockKey, complete bool) map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	seen := map[string]time.Time{}
	for _, l := range locks {
		f, ok := t.first[l.ID]
		if !ok {
			f = now
			t.first[l.ID] = f
		}
		seen[l.ID] = f
		if l.Stage == "conflict" && !t.conflict[l.ID] {
			t.conflict[l.ID] = true
			shardDDLErrors.WithLabelValues(l.Task, DDLStateConflict).Inc()
		}
		if l.Stage != "conflict" {
			delete(t.conflict, l.ID)
		}
	}
	if complete {
		for id := range t.first {
			if _, ok := seen[id]; !ok {
				delete(t.first, id)
				delete(t.conflict, id)
				if t.onGone != nil {
					t.onGone(id, now.Sub(t.firstOf[id]))
				}
			}
		}
	}
	for id, f := range seen {
		t.firstOf[id] = f
	}
	for id := range t.firstOf {
		if _, ok := t.first[id]; !ok {
			delete(t.firstOf, id)
		}
	}
	return seen
}

// TrackLocks refreshes the lock ages and conflict counts every interval while this master leads,
// so that a conflict between two scrapes is counted too. It returns when ctx ends.
// It also logs each lock's end on the leader ("shard DDL lock resolved", with its lock field), the
// last line of a lock's life in the logs.
func (s *Service) TrackLocks(ctx context.Context, interval time.Duration) {
	locksSeen.mu.Lock()
	locksSeen.onGone = func(id string, age time.Duration) {
		s.logger().Info("shard DDL lock resolved", zap.String("lock", id), zap.Duration("age", age))
	}
	locksSeen.mu.Unlock()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if l := s.lead.Load(); l != nil {
			if locks, err := l.coord.Locks(); err == nil {
				locksSeen.observe(keysOf(locks), true)
			}
		}
	}
}

var (
	descDDLState = prometheus.NewDesc("dm_master_ddl_state_number",
		"number of shard DDL locks in each state: Un-synced (waiting for sources), Synced (all sources in, executing or skipping), Conflict (different DDLs)",
		[]string{"task", "type"}, nil)
	descLockAge = prometheus.NewDesc("dm_master_ddl_lock_age_seconds",
		"seconds since this master first saw the shard DDL lock", []string{"task", "lock", "stage"}, nil)
	descLockUnsynced = prometheus.NewDesc("dm_master_ddl_lock_unsynced_sources",
		"sources of the task that have not reached the lock's DDLs", []string{"task", "lock"}, nil)
	descLockSynced = prometheus.NewDesc("dm_master_ddl_lock_synced_sources",
		"sources of the task that have reached the lock's DDLs", []string{"task", "lock"}, nil)
	descWorkerState = prometheus.NewDesc("dm_master_worker_state",
		"state of worker, 0 - offline, 1 - free, 2 - bound", []string{"worker"}, nil)
	descLeader = prometheus.NewDesc("dm_master_leader",
		"1 when this master is the leader (lock and worker metrics come from the leader only)", nil, nil)
)

// Collector returns the master's Prometheus collector: lock and worker metrics read from the
// coordinator and etcd at each scrape (on the leader; a follower reports only dm_master_leader 0),
// and the shard DDL error counter.
func (s *Service) Collector() prometheus.Collector { return masterCollector{s} }

type masterCollector struct{ s *Service }

var errNoClient = errors.New("no etcd client")

func (c masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDDLState, descLockAge, descLockUnsynced, descLockSynced, descWorkerState, descLeader} {
		ch <- d
	}
	shardDDLErrors.Describe(ch)
}

func (c masterCollector) Collect(ch chan<- prometheus.Metric) {
	shardDDLErrors.Collect(ch)
	l := c.s.lead.Load()
	if l == nil {
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 1)
	var st ha.State
	var stErr error = errNoClient
	if c.s.Client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, stErr = ha.Load(ctx, c.s.Client)
		cancel()
	}
	if locks, err := l.coord.Locks(); err == nil {
		first := locksSeen.observe(keysOf(locks), true)
		counts := map[string]map[string]int{}
		for name := range st.Tasks { // every task has its three states, 0 when no lock is in them
			counts[name] = map[string]int{}
		}
		now := time.Now()
		for _, lk := range locks {
			if counts[lk.Task] == nil {
				counts[lk.Task] = map[string]int{}
			}
			counts[lk.Task][ddlState(lk.Stage)]++
			ch <- prometheus.MustNewConstMetric(descLockAge, prometheus.GaugeValue, now.Sub(first[lk.ID]).Seconds(), lk.Task, lk.ID, lk.Stage)
			ch <- prometheus.MustNewConstMetric(descLockUnsynced, prometheus.GaugeValue, float64(len(lk.Unsynced)), lk.Task, lk.ID)
			ch <- prometheus.MustNewConstMetric(descLockSynced, prometheus.GaugeValue, float64(len(lk.Synced)), lk.Task, lk.ID)
		}
		for task, byState := range counts {
			for _, state := range []string{DDLStateUnsynced, DDLStateSynced, DDLStateConflict} {
				ch <- prometheus.MustNewConstMetric(descDDLState, prometheus.GaugeValue, float64(byState[state]), task, state)
			}
		}
	}
	if stErr != nil {
		return
	}
	for name := range st.Workers {
		v := 0.0
		if st.Alive[name] {
			v = 1
			if _, ok := st.BoundTo(name); ok {
				v = 2
			}
		}
		ch <- prometheus.MustNewConstMetric(descWorkerState, prometheus.GaugeValue, v, name)
	}
}
