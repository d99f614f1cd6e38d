package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

// masterLogLines returns the master's JSON log lines whose msg is msg.
func (c *e2eCluster) masterLogLines(msg string) []map[string]any {
	data, err := os.ReadFile(c.Master.LogFile)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// Shard tables of two sources whose AUTO_INCREMENT ids overlap, and a route whose table-pattern has a
// typo: check-task warns of both, naming the tables, the rule and the sources, and passes (warnings
// do not fail it, nor start-task). A failing item makes dmctl check-task exit non-zero.
func TestE2ECheckTaskWarnsOfAutoIncrementAndUnmatchedRoutes(t *testing.T) {
	c := startCluster(t, 2, false)
	c.up(0, "ALTER TABLE db_1.t_1 MODIFY id INT NOT NULL AUTO_INCREMENT", "INSERT INTO db_1.t_1 (v) VALUES ('a'), ('b'), ('c')")
	c.up(1, "ALTER TABLE db_2.t_1 MODIFY id INT NOT NULL AUTO_INCREMENT", "INSERT INTO db_2.t_1 (v) VALUES ('x')")
	good, err := c.TaskFile(c.task)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	task := strings.Replace(string(body), "routes:\n", "routes:\n  route-typo:\n    schema-pattern: \"db_*\"\n    table-pattern: \"evnts_*\"\n    target-schema: db\n    target-table: events\n", 1)
	task = strings.ReplaceAll(task, "route-rules: [route-table, route-schema]", "route-rules: [route-typo, route-table, route-schema]")
	f := c.writeFile("typo.yaml", task)

	r := c.ok("check-task", f)
	msg := r.Str("msg")
	contains(t, msg, "pre-check is passed",
		"[auto_increment_ID warning]", "`db_1`.`t_1` on source "+s1, "`db_2`.`t_1` on source "+s2, "merged into `db`.`t`", "id 1 to 3", "id 1 to 1",
		"auto_increment_offset", "composite",
		"[unmatched_rules warning] source "+s1+": route rule route-typo", "[unmatched_rules warning] source "+s2+": route rule route-typo",
		`table-pattern "evnts_*"`, "`db`.`events`",
		"checked: connection, meta_schema,", "unmatched_rules", "auto_increment_ID", "not run: ")
	// The plain shards (no AUTO_INCREMENT) are not named.
	if strings.Contains(msg, "`db_1`.`t_2` on source") {
		t.Fatalf("a shard without AUTO_INCREMENT is named:\n%s", msg)
	}

	// The master logged each warning once, with the item and source as fields.
	var autoInc, typo int
	wait.Eventually(t, 10*time.Second, func() bool { return len(c.masterLogLines("precheck done")) > 0 }, func() string { return "no precheck done line in the master's log" })
	for _, l := range c.masterLogLines("precheck item") {
		switch {
		case l["item"] == "auto_increment_ID" && l["command"] == "check-task":
			autoInc++
		case l["item"] == "unmatched_rules" && l["source"] == s1 && strings.Contains(l["message"].(string), "route-typo"):
			typo++
		}
	}
	if autoInc != 1 || typo != 1 {
		t.Fatalf("the master logged the auto_increment_ID warning %d times and the route's %d times, want once each", autoInc, typo)
	}

	// A failing item: dmctl check-task exits 1, and the warnings are still listed.
	c.up(1, "SET GLOBAL binlog_format = 'STATEMENT'")
	cmd := exec.Command(filepath.Join(c.Bin, "dmctl"), "--master-addr", c.Master.Addr, "check-task", f)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("dmctl check-task of a failing precheck: %v, want exit status 1:\n%s", err, out)
	}
	contains(t, string(out), `"result": false`, "precheck failed", "[binlog_format] source "+s2, "[auto_increment_ID warning]")
	c.up(1, "SET GLOBAL binlog_format = 'ROW'")

	// Warnings alone do not stop start-task either.
	r = c.ok("start-task", f)
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	contains(t, r.Str("checkResult"), "[auto_increment_ID warning]", "route rule route-typo")
	c.waitStage("Running")
	c.logsHaveNoDuplicateKeys()
}
