package master

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tributary-db/tributary/checker"
	"github.com/tributary-db/tributary/config"
)

func TestPrecheckIsLoggedAndAnswered(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := &Service{Log: zap.New(core)}
	task := &config.Task{Name: "shard", TaskMode: "incremental", MySQLInstances: []config.Instance{{SourceID: "s1"}}}
	fs := []checker.Failure{
		{Item: checker.ItemAutoIncrement, Level: checker.Warning, Message: "shards collide"},
		{Item: checker.ItemUnmatchedRules, Source: "s1", Level: checker.Warning, Message: "route rule typo matches no table"},
		{Item: checker.ItemLoadSize, Source: "s1", Level: checker.Info, Message: "information"},
	}
	items := checker.Items(task)
	s.logPrecheck("check-task", task.Name, fs, items)
	if n := logs.FilterMessage("precheck item").Len(); n != 2 {
		t.Errorf("%d precheck item lines, want one per warning: %v", n, logs.All())
	}
	item := logs.FilterMessage("precheck item").FilterField(zap.String("item", checker.ItemUnmatchedRules)).All()
	if len(item) != 1 || item[0].ContextMap()["source"] != "s1" || item[0].ContextMap()["state"] != "warning" || item[0].ContextMap()["task"] != "shard" {
		t.Errorf("the unmatched_rules line: %v", item)
	}
	done := logs.FilterMessage("precheck done").All()
	if len(done) != 1 || done[0].ContextMap()["passed"] != true || done[0].ContextMap()["warnings"] != int64(2) || done[0].ContextMap()["errors"] != int64(0) {
		t.Fatalf("precheck done: %v", done)
	}
	for _, e := range logs.All() {
		// zap's own keys count too: a JSON line holds level, ts, caller and msg.
		seen := map[string]bool{"level": true, "ts": true, "caller": true, "msg": true, "logger": true}
		for _, f := range e.Context {
			if seen[f.Key] {
				t.Errorf("%q logs %s twice", e.Message, f.Key)
			}
			seen[f.Key] = true
		}
	}

	answer := precheckResult(fs, items)
	lines := strings.Split(answer, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "[auto_increment_ID warning]") || !strings.HasPrefix(lines[3], "checked: connection, meta_schema,") ||
		!strings.Contains(lines[3], "not run: ") || !strings.Contains(lines[3], "dump_privilege (task-mode incremental loads nothing)") {
		t.Errorf("answer:\n%s", answer)
	}
	if got := precheckResult(nil, items); strings.Contains(got, "\n") || !strings.HasPrefix(got, "checked: ") {
		t.Errorf("answer without results: %q", got)
	}
}
