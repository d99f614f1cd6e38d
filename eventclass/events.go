package eventclass

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
)

// Outcome is what the sync unit does with an event or a statement.
type Outcome uint8

const (
	// Replicate: its rows or its DDL reach the downstream (through the DDL path's safety table and
	// the shard locks), or it frames a transaction whose rows do (BEGIN, COMMIT, XA, savepoints).
	Replicate Outcome = iota
	// Track: the reader's own bookkeeping (positions, GTIDs, table maps, annotations, heartbeats);
	// nothing reaches the downstream and nothing is logged: every transaction carries some.
	Track
	// Skip: it has no meaning downstream; it is logged at info level (class, position) and passed.
	Skip
	// Stop: the subtask pauses before it, naming the event, its position, why, and the ways on
	// (binlog skip, a filter).
	Stop
)

var outcomeNames = [...]string{"replicate", "track", "skip (logged)", "stop (the subtask pauses)"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Rule is the decision for one event type or one statement class.
type Rule struct {
	Name    string
	Outcome Outcome
	Why     string
}

// Special handling the sync unit gives some event types besides their outcome.
const (
	// XAPrepareEvent (XA_PREPARE_LOG_EVENT, 38) ends the first half of an XA transaction.
	XAPrepareEvent = replication.XA_PREPARE_LOG_EVENT
)

var rowsWhy = "the row changes of a replicated table, routed and written downstream in a transaction with the checkpoint"

// eventRules is the decision for every event type go-mysql names (MySQL 5.x-8.4, MariaDB 10.x-11.x).
var eventRules = map[replication.EventType]Rule{
	replication.QUERY_EVENT:                             {"QUERY_EVENT", Replicate, "decided by the class of its statement (the statement table below)"},
	replication.MARIADB_QUERY_COMPRESSED_EVENT:          {"QUERY_COMPRESSED_EVENT (MariaDB)", Replicate, "a query event MariaDB compressed (log_bin_compress): decompressed, then as QUERY_EVENT"},
	replication.WRITE_ROWS_EVENTv0:                      {"WRITE_ROWS_EVENT v0", Replicate, rowsWhy},
	replication.UPDATE_ROWS_EVENTv0:                     {"UPDATE_ROWS_EVENT v0", Replicate, rowsWhy},
	replication.DELETE_ROWS_EVENTv0:                     {"DELETE_ROWS_EVENT v0", Replicate, rowsWhy},
	replication.WRITE_ROWS_EVENTv1:                      {"WRITE_ROWS_EVENT v1", Replicate, rowsWhy + " (MariaDB writes v1)"},
	replication.UPDATE_ROWS_EVENTv1:                     {"UPDATE_ROWS_EVENT v1", Replicate, rowsWhy},
	replication.DELETE_ROWS_EVENTv1:                     {"DELETE_ROWS_EVENT v1", Replicate, rowsWhy},
	replication.WRITE_ROWS_EVENTv2:                      {"WRITE_ROWS_EVENT v2", Replicate, rowsWhy + " (MySQL writes v2)"},
	replication.UPDATE_ROWS_EVENTv2:                     {"UPDATE_ROWS_EVENT v2", Replicate, rowsWhy},
	replication.DELETE_ROWS_EVENTv2:                     {"DELETE_ROWS_EVENT v2", Replicate, rowsWhy},
	replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:  {"WRITE_ROWS_COMPRESSED_EVENT_V1 (MariaDB)", Replicate, rowsWhy + ", decompressed"},
	replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1: {"UPDATE_ROWS_COMPRESSED_EVENT_V1 (MariaDB)", Replicate, rowsWhy + ", decompressed"},
	replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1: {"DELETE_ROWS_COMPRESSED_EVENT_V1 (MariaDB)", Replicate, rowsWhy + ", decompressed"},
	replication.XID_EVENT:                               {"XID_EVENT", Replicate, "the commit of a transaction: its end is a resume point, and a full batch is flushed there"},
	replication.XA_PREPARE_LOG_EVENT: {"XA_PREPARE_LOG_EVENT", Replicate,
		"ends the first half of an XA transaction: its rows are held (not written) until the XA COMMIT that applies them or the XA ROLLBACK that drops them"},
	replication.TRANSACTION_PAYLOAD_EVENT: {"TRANSACTION_PAYLOAD_EVENT (MySQL 8.0.20+)", Replicate,
		"a compressed transaction (binlog_transaction_compression=ON): expanded, and each event inside decided as if it had arrived alone; the transaction is written as one"},

	replication.ROTATE_EVENT:                    {"ROTATE_EVENT", Track, "the next binlog file: the reader's position"},
	replication.FORMAT_DESCRIPTION_EVENT:        {"FORMAT_DESCRIPTION_EVENT", Track, "how the file's events are encoded, and the server version that executable comments are read against"},
	replication.TABLE_MAP_EVENT:                 {"TABLE_MAP_EVENT", Track, "the table and column types of the rows events that follow"},
	replication.GTID_EVENT:                      {"GTID_EVENT", Track, "starts a transaction (MySQL): its GTID"},
	replication.ANONYMOUS_GTID_EVENT:            {"ANONYMOUS_GTID_EVENT", Track, "starts a transaction (MySQL, gtid_mode OFF)"},
	replication.GTID_TAGGED_LOG_EVENT:           {"GTID_TAGGED_LOG_EVENT (MySQL 8.3+)", Track, "starts a transaction with a tagged GTID"},
	replication.MARIADB_GTID_EVENT:              {"GTID_EVENT (MariaDB)", Track, "starts a transaction: its GTID; the prepared-XA flag starts holding its rows"},
	replication.PREVIOUS_GTIDS_EVENT:            {"PREVIOUS_GTIDS_EVENT", Track, "the GTID set before the file (MySQL)"},
	replication.MARIADB_GTID_LIST_EVENT:         {"GTID_LIST_EVENT (MariaDB)", Track, "the GTID state at the start of the file"},
	replication.MARIADB_BINLOG_CHECKPOINT_EVENT: {"BINLOG_CHECKPOINT_EVENT (MariaDB)", Track, "crash recovery of the source's own binlog"},
	replication.MARIADB_ANNOTATE_ROWS_EVENT:     {"ANNOTATE_ROWS_EVENT (MariaDB)", Track, "the statement text of the rows events that follow (binlog_annotate_row_events); the rows decide"},
	replication.ROWS_QUERY_EVENT:                {"ROWS_QUERY_EVENT (MySQL)", Track, "the statement text of the rows events that follow (binlog_rows_query_log_events); the rows decide"},
	replication.HEARTBEAT_EVENT:                 {"HEARTBEAT_EVENT", Track, "the source is alive and has nothing new"},
	replication.HEARTBEAT_LOG_EVENT_V2:          {"HEARTBEAT_LOG_EVENT_V2 (MySQL 8)", Track, "the source is alive and has nothing new"},
	replication.IGNORABLE_EVENT:                 {"IGNORABLE_EVENT", Track, "marked ignorable by the server: a replica may pass it"},
	replication.MARIADB_START_ENCRYPTION_EVENT:  {"START_ENCRYPTION_EVENT (MariaDB)", Track, "binlog encryption starts; the server decrypts the events it sends"},

	replication.STOP_EVENT:                {"STOP_EVENT", Skip, "the source shut down; the next file continues the binlog"},
	replication.INTVAR_EVENT:              {"INTVAR_EVENT", Skip, "LAST_INSERT_ID / INSERT_ID of the statement-format query that follows; that query decides"},
	replication.RAND_EVENT:                {"RAND_EVENT", Skip, "RAND() seeds of the statement-format query that follows; that query decides"},
	replication.USER_VAR_EVENT:            {"USER_VAR_EVENT", Skip, "a user variable of the statement-format query that follows; that query decides"},
	replication.TRANSACTION_CONTEXT_EVENT: {"TRANSACTION_CONTEXT_EVENT", Skip, "group replication's certification data; no change of data"},
	replication.VIEW_CHANGE_EVENT:         {"VIEW_CHANGE_EVENT", Skip, "group replication's membership change; no change of data"},

	replication.UNKNOWN_EVENT:            {"UNKNOWN_EVENT", Stop, "the source wrote an event it does not know itself"},
	replication.START_EVENT_V3:           {"START_EVENT_V3", Stop, "a binlog of MySQL before 5.0; not supported"},
	replication.LOAD_EVENT:               {"LOAD_EVENT", Stop, "LOAD DATA in statement format (MySQL before 5.0): its rows cannot be known"},
	replication.SLAVE_EVENT:              {"SLAVE_EVENT", Stop, "never written by a server; its meaning is unknown"},
	replication.CREATE_FILE_EVENT:        {"CREATE_FILE_EVENT", Stop, "LOAD DATA in statement format (MySQL before 5.0): its rows cannot be known"},
	replication.APPEND_BLOCK_EVENT:       {"APPEND_BLOCK_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.EXEC_LOAD_EVENT:          {"EXEC_LOAD_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.DELETE_FILE_EVENT:        {"DELETE_FILE_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.NEW_LOAD_EVENT:           {"NEW_LOAD_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.BEGIN_LOAD_QUERY_EVENT:   {"BEGIN_LOAD_QUERY_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.EXECUTE_LOAD_QUERY_EVENT: {"EXECUTE_LOAD_QUERY_EVENT", Stop, "LOAD DATA in statement format: its rows cannot be known (set binlog_format=ROW)"},
	replication.INCIDENT_EVENT:           {"INCIDENT_EVENT", Stop, "the source says its binlog lost changes here (a replica of MySQL stops too)"},
	replication.PARTIAL_UPDATE_ROWS_EVENT: {"PARTIAL_UPDATE_ROWS_EVENT (MySQL 8)", Stop,
		"binlog_row_value_options=PARTIAL_JSON writes only the changed part of a JSON value: the row cannot be written whole; set it to ''"},
}

// Event returns the decision for an event type. A type not in the table stops the subtask.
func Event(t replication.EventType) Rule {
	if r, ok := eventRules[t]; ok {
		return r
	}
	return Rule{Name: fmt.Sprintf("%s (type %d)", t, byte(t)), Outcome: Stop,
		Why: "an event type Tributary has no decision for; its meaning for the downstream is unknown"}
}

// EventRules lists the event table, in type order (for docs/ddl.md and tests).
func EventRules() []Rule {
	types := make([]int, 0, len(eventRules))
	for t := range eventRules {
		types = append(types, int(t))
	}
	sort.Ints(types)
	out := make([]Rule, 0, len(types))
	for _, t := range types {
		out = append(out, eventRules[replication.EventType(t)])
	}
	return out
}

// Markdown is docs/ddl.md's event table: the event types, then the statement classes.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| binlog event | what Tributary does | why |\n|---|---|---|\n")
	for _, o := range []Outcome{Replicate, Track, Skip, Stop} {
		for _, r := range EventRules() {
			if r.Outcome == o {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Name, o, r.Why)
			}
		}
	}
	b.WriteString("| any other type | stop (the subtask pauses) | an event type Tributary has no decision for |\n")
	b.WriteString("\n| statement in a query event | what Tributary does | why |\n|---|---|---|\n")
	for _, c := range classOrder {
		r := classRules[c]
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Name, r.Outcome, r.Why)
	}
	return b.String()
}
