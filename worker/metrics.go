package worker

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/sink"
)

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
	for _, v := range sink.Collectors() {
		v.Describe(ch)
	}
}

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range sink.Collectors() {
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
			lag := sink.ReplicationLag(st.Name, source, sy.MasterBinlog != sy.SyncerBinlog)
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
