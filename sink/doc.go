// Package sink writes to the downstream for the sync unit: row changes in transactions that carry the
// checkpoint of the events they came from (Sink), and the exactly-once DDL (DDLExecutor: markers in the
// meta tables, definition probes, the DDL's session settings), so that a restart applies nothing twice.
// It also classifies downstream errors (transient: retried; permanent: the subtask pauses) and keeps
// the counters a flush updates. The meta tables themselves are package meta's.
package sink
