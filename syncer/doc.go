// Package syncer is the sync unit: one Syncer per task and source reads the source's binlog, routes
// and filters its rows, carries its DDL through the shard group and the pessimist lock, and hands row
// changes and DDL to package sink, which writes them downstream with the checkpoint.
//
// The Syncer is a loop over stages that each own their state and are tested alone:
//
//   - events (events.go): carries out package eventclass's decision for every event and statement
//     (XA and savepoint rows held until their outcome, compressed transactions expanded, the rest
//     replicated, skipped with a log line, or stopped with the reason).
//   - reader (cursor; reader.go, readerr.go, gtid.go): the go-mysql stream, reconnects, event groups,
//     file/pos and GTID positions, resume points, the rewind for a re-read.
//   - rows (rowDecoder; rows.go, values.go, fastrows.go, zerodate.go, schema.go): a rows event to row
//     changes, with row shapes from the table map and the tracked schema.
//   - DDL path (ddlPath; ddlpath.go, rename.go, lock.go): decides without I/O what a DDL does (split,
//     filters, the safety table, shard groups) and what a lock's operation does (resolve).
//   - applier (applier; apply.go, lanes.go): partitions, key lanes, batching, the flush pipeline,
//     safe mode, the committed and persisted positions.
//   - status (statusBoard; status.go, trace.go): the snapshot query-status reads, the rates, a lock's
//     trace.
//
// RunLoad is the hand-over of a task-mode all or full subtask from the load unit (package loader) to
// this unit: the checkpoint at the snapshot, through the load's cut-over lock.
package syncer
