package sink

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the sync unit, with DM's names where DM has the metric (dm/syncer/metrics). Counters and
// histograms are updated by the sink as it commits; the gauges are read from the subtasks' status at
// each scrape (Collector).
var (
	finishedJobs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "dm", Subsystem: "syncer", Name: "finished_jobs_total",
		Help: "rows applied downstream, by type (insert, update, delete)",
	}, []string{"type", "task", "source_id"})
	finishedTxns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "dm", Subsystem: "syncer", Name: "finished_transaction_total",
		Help: "downstream transactions committed (row batches and checkpoint-only flushes)",
	}, []string{"task", "source_id"})
	txnDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "dm", Subsystem: "syncer", Name: "txn_duration_time",
		Help:    "Bucketed histogram of the time (s) to commit one downstream batch (rows and checkpoint in one transaction, retries included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	}, []string{"task", "source_id"})
	txnBatch = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "dm", Subsystem: "syncer", Name: "replication_transaction_batch",
		Help:    "number of rows in a downstream transaction",
		Buckets: prometheus.LinearBuckets(1, 50, 21),
	}, []string{"task", "source_id"})
	checkpointFlush = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "dm", Subsystem: "syncer", Name: "checkpoint_flush_duration_seconds",
		Help:    "time (s) to commit a checkpoint-only flush (no rows: idle progress, schema or DDL checkpoints)",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	}, []string{"task", "source_id"})
)

// lastEvent is, per task and source, the timestamp of the last binlog event read and of the last
// one whose changes were committed downstream (the replication lag's base).
var lastEvent sync.Map // "task\x00source" -> *eventTimes

type eventTimes struct {
	mu            sync.Mutex
	read, applied uint32
	rows          int64 // rows committed downstream by this process (query-status's totalRows)
}

// AppliedRows is how many rows the syncers of task and source have committed downstream in this process.
func AppliedRows(task, source string) int64 {
	e := eventsOf(task, source)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rows
}

// ReplicationLag is the seconds since the timestamp of the last event of task and source committed
// downstream, when the committed position is behind the source's (behind); 0 otherwise.
func ReplicationLag(task, source string, behind bool) float64 {
	if !behind {
		return 0
	}
	e := eventsOf(task, source)
	e.mu.Lock()
	applied := e.applied
	e.mu.Unlock()
	if applied == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(int64(applied), 0)).Seconds())
}

func eventsOf(task, source string) *eventTimes {
	v, _ := lastEvent.LoadOrStore(task+"\x00"+source, &eventTimes{})
	return v.(*eventTimes)
}

// NoteEvent records the timestamp of a binlog event the syncer of task and source read.
func NoteEvent(task, source string, ts uint32) {
	if ts == 0 {
		return // artificial events
	}
	e := eventsOf(task, source)
	e.mu.Lock()
	e.read = ts
	e.mu.Unlock()
}

// observeFlush records one Flush of the sink that started at start, of changes changes (kinds of
// them of each kind); err is its result.
func (s *Sink) observeFlush(start time.Time, changes int, kinds *changeKinds, err *error) {
	if *err != nil {
		return
	}
	task, source := s.meta.Task(), s.meta.Source()
	d := time.Since(start).Seconds()
	finishedTxns.WithLabelValues(task, source).Inc()
	e := eventsOf(task, source)
	e.mu.Lock()
	e.applied = e.read // a flush commits everything read before it (held-back DML aside)
	e.rows += int64(changes)
	e.mu.Unlock()
	if changes == 0 {
		checkpointFlush.WithLabelValues(task, source).Observe(d)
		return
	}
	txnDuration.WithLabelValues(task, source).Observe(d)
	txnBatch.WithLabelValues(task, source).Observe(float64(changes))
	for k, name := range []string{"insert", "update", "delete"} { // statements of binlog replace (Raw) are not counted
		if kinds[k] > 0 {
			finishedJobs.WithLabelValues(name, task, source).Add(float64(kinds[k]))
		}
	}
}

// Collectors are the sink's counters and histograms, which the dm-worker's collector serves.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{finishedJobs, finishedTxns, txnDuration, txnBatch, checkpointFlush}
}
