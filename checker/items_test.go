package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/config"
)

func TestItems(t *testing.T) {
	incremental := &config.Task{TaskMode: "incremental", MySQLInstances: []config.Instance{{SourceID: "s1"}}, IgnoreCheckingItems: []string{ItemAutoIncrement, ItemMetaSchema}}
	items := Items(incremental)
	ran := Ran(items)
	for _, want := range []string{ItemConnection, ItemMetaSchema, ItemBinlogFormat, ItemMetaPosition, ItemUnmatchedRules, ItemOneTaskPerTarget, ItemTableSchema} {
		if !slices.Contains(ran, want) {
			t.Errorf("%s does not run: %v", want, ran)
		}
	}
	line := ItemsLine(items)
	for _, want := range []string{"auto_increment_ID (ignore-checking-items)", "dump_privilege (task-mode incremental loads nothing)", "shard_groups (the task has one source)", "table_empty (task-mode incremental loads nothing)"} {
		if !strings.Contains(line, "; not run: ") || !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}

	full := &config.Task{TaskMode: "full", MySQLInstances: []config.Instance{{SourceID: "s1"}, {SourceID: "s2"}}}
	ran = Ran(Items(full))
	for _, want := range []string{ItemDumpPrivilege, ItemTableEmpty, ItemShardGroups, ItemAutoIncrement, ItemBinlogEnable} {
		if !slices.Contains(ran, want) {
			t.Errorf("task-mode full: %s does not run: %v", want, ran)
		}
	}
	for _, not := range []string{ItemBinlogFormat, ItemReplPrivilege, ItemMetaPosition} {
		if slices.Contains(ran, not) {
			t.Errorf("task-mode full runs %s", not)
		}
	}

	// "all" leaves the items a task cannot run without.
	all := &config.Task{TaskMode: "all", MySQLInstances: []config.Instance{{SourceID: "s1"}}, IgnoreCheckingItems: []string{"all"}}
	if ran := Ran(Items(all)); !slices.Equal(ran, []string{ItemConnection, ItemMetaSchema, ItemOneTaskPerTarget}) {
		t.Errorf("ignore all runs %v", ran)
	}
}
