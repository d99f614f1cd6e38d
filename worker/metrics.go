package worker

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/tributary-db/tributary/proto"
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

// appliedRows is how many rows the syncers of task and source have committed downstream in this process.
func appliedRows(task, source string) int64 {
	e := eventsOf(task, source)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rows
}

// replicationLag is the seconds since the timestamp of the last event of task and source committed
// downstream, when the committed position is behind the source's (behind); 0 otherwise.
func replicationLag(task, source string, behind bool) float64 {
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

// noteEvent records the timestamp of a binlog event the syncer of task and source read.
func noteEvent(task, source string, ts uint32) {
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

var (
	descTaskState = prometheus.NewDesc("dm_worker_task_state",
		"state of task, 0 - invalidStage, 1 - New, 2 - Running, 3 - Paused, 4 - Stopped, 5 - Finished",
		[]string{"task", "source_id", "worker"}, nil)
	descBinlogFile = prometheus.NewDesc("dm_syncer_binlog_file",
		"current binlog file index (node master: the source's, node syncer: the committed resume position's)",
		[]string{"node", "task", "source_id"}, nil)
	descBinlogPos = prometheus.NewDesc("dm_syncer_binlog_pos",
		"current binlog pos (node master: the source's, node syncer: the committed resume position's)",
		[]string{"node", "task", "source_id"}, nil)
	descLag = prometheus.NewDesc("dm_syncer_replication_lag_gauge",
		"replication lag gauge in second between mysql and syncer: 0 when the committed position is the source's, else now minus the timestamp of the last event committed downstream",
		[]string{"task", "source_id", "worker"}, nil)
	descLockResolving = prometheus.NewDesc("dm_syncer_shard_lock_resolving",
		"waiting shard DDL lock to be resolved", []string{"task", "source_id"}, nil)
	descUnsyncedTables = prometheus.NewDesc("dm_syncer_unsynced_table_number",
		"number of unsynced tables in the subtask's shard group of a target table", []string{"task", "table", "source_id"}, nil)
)

// stageNumbers are DM's values of dm_worker_task_state.
var stageNumbers = map[string]float64{"New": 1, "Running": 2, "Paused": 3, "Stopped": 4, "Finished": 5}

// Collector returns the worker's Prometheus collector: its subtasks' stage, binlog positions, lag
// and shard groups, read from their status at each scrape, and the sink's counters.
func (s *Server) Collector() prometheus.Collector { return workerCollector{s} }

type workerCollector struct{ s *Server }

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTaskState, descBinlogFile, descBinlogPos, descLag, descLockResolving, descUnsyncedTables} {
		ch <- d
	}
	for _, v := range []prometheus.Collector{finishedJobs, finishedTxns, txnDuration, txnBatch, checkpointFlush} {
		v.Describe(ch)
	}
}

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range []prometheus.Collector{finishedJobs, finishedTxns, txnDuration, txnBatch, checkpointFlush} {
		v.Collect(ch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.s.QueryStatus(ctx, &pb.QueryStatusRequest{})
	if err != nil || resp.SourceStatus == nil {
		return
	}
	source, worker := resp.SourceStatus.Source, resp.SourceStatus.Worker
	for _, st := range resp.SubTaskStatus {
		ch <- prometheus.MustNewConstMetric(descTaskState, prometheus.GaugeValue, stageNumbers[st.Stage], st.Name, source, worker)
		resolving := 0.0
		if st.UnresolvedDDLLockID != "" {
			resolving = 1
		}
		ch <- prometheus.MustNewConstMetric(descLockResolving, prometheus.GaugeValue, resolving, st.Name, source)
		sy := st.Sync
		if sy == nil {
			continue
		}
		for node, pos := range map[string]string{"master": sy.MasterBinlog, "syncer": sy.SyncerBinlog} {
			if file, p, ok := parseBinlog(pos); ok {
				ch <- prometheus.MustNewConstMetric(descBinlogFile, prometheus.GaugeValue, float64(file), node, st.Name, source)
				ch <- prometheus.MustNewConstMetric(descBinlogPos, prometheus.GaugeValue, float64(p), node, st.Name, source)
			}
		}
		if sy.MasterBinlog != "" {
			lag := replicationLag(st.Name, source, sy.MasterBinlog != sy.SyncerBinlog)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag, st.Name, source, worker)
		}
		for _, g := range sy.UnresolvedGroups {
			ch <- prometheus.MustNewConstMetric(descUnsyncedTables, prometheus.GaugeValue, float64(len(g.Unsynced)), st.Name, g.Target, source)
		}
	}
}

// binlogRE reads a position as Position.String writes it: "(mysql-bin.000003, 1234)".
var binlogRE = regexp.MustCompile(`^\((.*?)(\d+), (\d+)\)$`)

// parseBinlog returns the index of the file (the number at the end of its name) and the offset.
func parseBinlog(s string) (file, pos int64, ok bool) {
	m := binlogRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	file, err1 := strconv.ParseInt(m[2], 10, 64)
	pos, err2 := strconv.ParseInt(m[3], 10, 64)
	return file, pos, err1 == nil && err2 == nil
}
