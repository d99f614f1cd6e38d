package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// A newcomer's run of README's walkthrough: examples/source1.yaml, source2.yaml and task.yaml as
// shipped, with only what the walkthrough says to edit changed (the servers' ports), against shards
// that hold rows before the task starts: every row of both sources reaches the downstream, and the
// rows written after follow.
func TestE2EExampleFilesLoseNothing(t *testing.T) {
	e2e.SkipShort(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	c, err := e2e.Start(e2e.Options{Root: root, Bin: binaries(t), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ec := &e2eCluster{Cluster: c, t: t, task: "shard-merge"}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(append([]*e2e.Proc{}, c.Masters...), c.Workers...) {
				t.Logf("--- %s log (last lines):\n%s", p.Name, e2e.Tail(p.LogFile, 40))
			}
		}
		c.Close()
	})
	for i := range c.Ups {
		db := fmt.Sprintf("db_%d", i+1)
		ec.up(i, "CREATE DATABASE "+db, "CREATE TABLE "+db+".t_1 (id INT PRIMARY KEY, v VARCHAR(32))",
			"CREATE TABLE "+db+".t_2 (id INT PRIMARY KEY, v VARCHAR(32))",
			insertRows(db+".t_1", i*1000, i*1000+100, ""), insertRows(db+".t_2", i*1000+500, i*1000+600, ""))
	}
	edit := func(example string, ports map[string]int) string {
		t.Helper()
		body, err := os.ReadFile(filepath.Join(root, "examples", example))
		if err != nil {
			t.Fatal(err)
		}
		s := string(body)
		for from, to := range ports {
			if !strings.Contains(s, from) {
				t.Fatalf("%s has no %q", example, from)
			}
			s = strings.ReplaceAll(s, from, "port: "+strconv.Itoa(to))
		}
		return ec.writeFile(example, s)
	}
	s1f := edit("source1.yaml", map[string]int{"port: 3307": c.Ups[0].Port})
	s2f := edit("source2.yaml", map[string]int{"port: 3308": c.Ups[1].Port})
	taskf := edit("task.yaml", map[string]int{"port: 3306": c.Down.Port})
	ec.ok("operate-source", "create", s1f, s2f)
	ec.startTask(taskf)
	if n := ec.converge("id, v"); n != 400 {
		t.Fatalf("%d rows downstream, want the 400 the shards held", n)
	}
	ec.up(0, insertRows("db_1.t_1", 5000, 5010, ""))
	ec.up(1, insertRows("db_2.t_2", 6000, 6010, ""))
	if n := ec.converge("id, v"); n != 420 {
		t.Fatalf("%d rows downstream, want 420", n)
	}
}
