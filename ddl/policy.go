package ddl

import (
	"fmt"
	"strings"
)

// The DDL safety table: for every kind of DDL the parser yields, what reaches the downstream when the
// table or schema it names is (a) unsharded, (b) one shard of a merged target, or (c) in a schema that
// routes onto a merged schema. It is the only place this is decided (invariant 9: no upstream
// statement makes the system destroy rows it did not write). docs/ddl.md's table is generated from it
// (TestPolicyTableInDocs keeps them equal).

// Scope is how the table or schema a DDL part names takes part in the merge.
type Scope uint8

const (
	// Unsharded: routed one to one; its target holds its rows only.
	Unsharded Scope = iota
	// Shard: one shard table of a merged target (a wildcard table route).
	Shard
	// MergedSchema: a schema whose target schema also receives other upstream schemas (or holds shard
	// tables), or a table in such a schema that is not a shard.
	MergedSchema
)

var scopeNames = [...]string{"unsharded", "shard of a merged table", "in a merged schema"}

func (s Scope) String() string { return scopeNames[s] }

// Action is what a DDL part does.
type Action uint8

const (
	// Run executes the statement downstream with its names routed.
	Run Action = iota
	// RunIfNotExists executes it as CREATE ... IF NOT EXISTS: the target may exist already.
	RunIfNotExists
	// Lock coordinates it through the shard group and the pessimistic lock: it runs downstream once,
	// when every shard of every source has reached it.
	Lock
	// JoinGroup adds the new shard to its group; its target is created from it if missing.
	JoinGroup
	// FollowRename keeps the shard in its group under its new name (a rename to a name that routes to
	// the same target); nothing runs downstream.
	FollowRename
	// LeaveGroup takes the shard (for a schema: each of its shards) out of its group; nothing runs
	// downstream.
	LeaveGroup
	// DropTablesOnly drops, downstream, the tables replicated from the dropped schema, not the
	// downstream database, which may hold tables the task did not create.
	DropTablesOnly
	// Ignore runs nothing downstream (the statement is logged).
	Ignore
	// Refuse stops the subtask with an error naming the statement and the ways on.
	Refuse
)

var actionNames = [...]string{"run", "run with IF NOT EXISTS", "shard lock", "shard joins its group",
	"shard keeps its group under the new name", "shard leaves its group", "drop its replicated tables only", "ignored", "refused (task pauses)"}

func (a Action) String() string { return actionNames[a] }

// Decision is an action and why.
type Decision struct {
	Action Action
	Why    string
}

// Kinds beyond the plain statement types, which the safety table tells apart.
const (
	KindCreateTableLike   Kind = "CREATE TABLE LIKE"
	KindAlterTableRename  Kind = "ALTER TABLE RENAME"
	KindDropPartition     Kind = "ALTER TABLE DROP/TRUNCATE PARTITION"
	KindExchangePartition Kind = "ALTER TABLE EXCHANGE PARTITION"
	KindView              Kind = "CREATE/ALTER/DROP VIEW"
	KindSequence          Kind = "CREATE/ALTER/DROP SEQUENCE"
	KindStoredProgram     Kind = "CREATE/ALTER/DROP TRIGGER, PROCEDURE, FUNCTION, EVENT"
	KindUnknown           Kind = "any other DDL"
)

// PolicyRow is one row of the safety table: a kind and its decision per scope.
type PolicyRow struct {
	Kind      Kind
	Unsharded Decision
	Shard     Decision
	Merged    Decision
}

var (
	run     = Decision{Run, ""}
	ifNot   = Decision{RunIfNotExists, "the merged target may exist already"}
	lock    = Decision{Lock, "every shard must reach it first; it runs once"}
	destroy = Decision{Ignore, "it would destroy rows other shards wrote to the merged target"}
	rename  = Decision{Refuse, "it would rename a table other shards write to"}
	follow  = Decision{FollowRename, "when the new name routes to the same target; nothing runs downstream. A rename to another target or out of the task, " +
		"one that brings a table into a group (its rows were never replicated there), or one onto a name whose rows wait behind the pending lock is refused (the task pauses)"}
	views = Decision{Ignore, "views are not replicated: their definition names upstream tables and definers"}
)

// Policy is the safety table, in docs/ddl.md's order.
var Policy = []PolicyRow{
	{KindCreateDatabase, Decision{RunIfNotExists, ""}, ifNot, ifNot},
	{KindAlterDatabase, run, Decision{Ignore, "the merged schema's defaults are shared by every shard"}, Decision{Ignore, "the merged schema's defaults are shared by every shard"}},
	{KindDropDatabase, Decision{DropTablesOnly, "the downstream database may hold tables the task did not create"},
		Decision{LeaveGroup, "its shard tables leave their groups; the merged schema and its rows stay"},
		Decision{LeaveGroup, "its shard tables leave their groups; the merged schema and its rows stay"}},
	{KindCreateTable, run, Decision{JoinGroup, "a new shard of the merged table"}, ifNot},
	{KindCreateTableLike, run, Decision{JoinGroup, "a new shard of the merged table"}, ifNot},
	{KindAlterTable, run, lock, Decision{Run, "a table that is not a shard: its own DDL"}},
	{KindCreateIndex, run, lock, Decision{Run, "a table that is not a shard: its own DDL"}},
	{KindDropIndex, run, lock, Decision{Run, "a table that is not a shard: its own DDL"}},
	{KindAlterTableRename, run, follow, rename},
	{KindRenameTable, run, follow, rename},
	{KindDropTable, run, Decision{LeaveGroup, "other shards' rows live in the merged table"}, destroy},
	{KindTruncateTable, run, destroy, destroy},
	{KindDropPartition, run, Decision{Lock, "every shard must run the same statement first (the group's retention); it runs once. One shard's alone never runs: the lock waits for the others"}, destroy},
	{KindExchangePartition, run, Decision{Refuse, "it would move rows of the merged table"}, Decision{Refuse, "it would move rows of a table other schemas write to"}},
	{KindView, views, views, views},
	{KindSequence, Decision{Ignore, "sequences are not replicated"}, Decision{Ignore, "sequences are not replicated"}, Decision{Ignore, "sequences are not replicated"}},
	{KindStoredProgram, Decision{Ignore, "stored programs are not replicated (their effects are, as rows)"}, Decision{Ignore, "stored programs are not replicated (their effects are, as rows)"}, Decision{Ignore, "stored programs are not replicated (their effects are, as rows)"}},
	{KindUnknown, Decision{Refuse, "not a DDL Tributary knows how to replicate"}, Decision{Refuse, "not a DDL Tributary knows how to replicate"}, Decision{Refuse, "not a DDL Tributary knows how to replicate"}},
}

// Decide returns the decision for a DDL part of kind on a table or schema of scope.
func Decide(kind Kind, scope Scope) Decision {
	for _, r := range Policy {
		if r.Kind == kind {
			switch scope {
			case Shard:
				return r.Shard
			case MergedSchema:
				return r.Merged
			default:
				return r.Unsharded
			}
		}
	}
	return Decide(KindUnknown, scope)
}

// FilterEvents are the names DM's binlog event filters give a DDL part of kind, most specific last.
func FilterEvents(kind Kind) []string {
	switch kind {
	case KindCreateDatabase:
		return []string{"create database"}
	case KindDropDatabase:
		return []string{"drop database"}
	case KindAlterDatabase:
		return []string{"alter database"}
	case KindCreateTable, KindCreateTableLike:
		return []string{"create table"}
	case KindAlterTable:
		return []string{"alter table"}
	case KindAlterTableRename:
		return []string{"alter table", "rename table"}
	case KindDropPartition:
		return []string{"alter table", "truncate table partition", "drop table partition"}
	case KindExchangePartition:
		return []string{"alter table", "exchange table partition"}
	case KindDropTable:
		return []string{"drop table"}
	case KindTruncateTable:
		return []string{"truncate table"}
	case KindRenameTable:
		return []string{"rename table"}
	case KindCreateIndex:
		return []string{"create index"}
	case KindDropIndex:
		return []string{"drop index"}
	case KindView:
		return []string{"create view", "drop view", "alter view"}
	}
	return nil
}

// PolicyMarkdown renders the safety table for docs/ddl.md.
func PolicyMarkdown() string {
	cell := func(d Decision) string {
		if d.Why == "" {
			return d.Action.String()
		}
		return "**" + d.Action.String() + "**: " + d.Why
	}
	var sb strings.Builder
	sb.WriteString("| DDL | (a) unsharded table or schema | (b) shard of a merged table | (c) in a schema routed onto a merged schema |\n")
	sb.WriteString("|---|---|---|---|\n")
	for _, r := range Policy {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", r.Kind, cell(r.Unsharded), cell(r.Shard), cell(r.Merged))
	}
	return sb.String()
}
