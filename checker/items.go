package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
)

// ItemRun says whether a precheck item runs for a task, and why not when it does not.
type ItemRun struct {
	Item string
	Ran  bool
	Why  string // why it does not run
}

// Items lists the precheck items check-task and start-task run for task (the master's
// one_task_per_target included), in the order they run, with why an item does not run: ignored by
// ignore-checking-items, or not for the task's mode or number of sources. An item that runs checks
// every source it applies to; the schema items (schema_of_shard_tables, table_schema,
// auto_increment_ID) skip a source that resumes from its checkpoint without a load.
func Items(task *config.Task) []ItemRun {
	ignored := map[string]bool{}
	for _, it := range task.IgnoreCheckingItems {
		ignored[it] = true
	}
	all := ignored["all"]
	var out []ItemRun
	add := func(item string, applies bool, notApplicable string) {
		essential := item == ItemConnection || item == ItemMetaSchema || item == ItemOneTaskPerTarget
		switch {
		case essential:
			out = append(out, ItemRun{Item: item, Ran: true})
		case all || ignored[item]:
			out = append(out, ItemRun{Item: item, Why: "ignore-checking-items"})
		case !applies:
			out = append(out, ItemRun{Item: item, Why: notApplicable})
		default:
			out = append(out, ItemRun{Item: item, Ran: true})
		}
	}
	mode := "task-mode " + task.TaskMode
	add(ItemConnection, true, "")
	add(ItemMetaSchema, true, "")
	add(ItemBinlogEnable, true, "")
	add(ItemBinlogFormat, task.Syncs(), mode+" reads no binlog")
	add(ItemBinlogRowImage, task.Syncs(), mode+" reads no binlog")
	add(ItemReplPrivilege, task.Syncs(), mode+" reads no binlog")
	add(ItemGTIDMode, task.Syncs(), mode+" reads no binlog")
	add(ItemMetaPosition, task.TaskMode == "incremental", mode+" loads first and starts the binlog where its snapshot was taken")
	add(ItemUnmatchedRules, true, "")
	add(ItemShardSchema, true, "")
	add(ItemDumpPrivilege, task.Dumps(), mode+" loads nothing")
	add(ItemLoadSize, task.Dumps(), mode+" loads nothing")
	add(ItemTargetPrivilege, true, "")
	add(ItemShardGroups, len(task.MySQLInstances) > 1, "the task has one source")
	add(ItemTableSchema, true, "")
	add(ItemAutoIncrement, true, "")
	add(ItemTableEmpty, task.Dumps(), mode+" loads nothing")
	add(ItemOneTaskPerTarget, true, "")
	return out
}

// ItemsLine says which items ran and which did not, and why: one line for check-task's and
// start-task's answers.
func ItemsLine(items []ItemRun) string {
	var ran, not []string
	for _, it := range items {
		if it.Ran {
			ran = append(ran, it.Item)
		} else {
			not = append(not, fmt.Sprintf("%s (%s)", it.Item, it.Why))
		}
	}
	line := "checked: " + strings.Join(ran, ", ")
	if len(not) > 0 {
		line += "; not run: " + strings.Join(not, ", ")
	}
	return line
}

// Ran lists the items of items that ran.
func Ran(items []ItemRun) []string {
	var out []string
	for _, it := range items {
		if it.Ran {
			out = append(out, it.Item)
		}
	}
	return slices.Clip(out)
}
