// Package house holds the import rules of the repository's packages (docs/design.md, "Layout") as a
// test: what a package may import is checked on every `make unit`, so a change that breaks the map
// fails here rather than in a review.
package house

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tributary-db/tributary/"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// packages lists the module's packages with their imports and dependencies (go list, no build).
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		all[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	if len(all) < 20 {
		t.Fatalf("go list found %d packages", len(all))
	}
	return all
}

func ours(list []string) []string {
	var out []string
	for _, i := range list {
		if strings.HasPrefix(i, module) {
			out = append(out, strings.TrimPrefix(i, module))
		}
	}
	return out
}

func TestImportRules(t *testing.T) {
	all := packages(t)
	for name, p := range all {
		imports, deps := ours(p.Imports), p.Deps
		// The test frameworks and tests are for tests: no package of the product imports them.
		if !strings.HasPrefix(name, "tests/") && name != "demo" {
			for _, i := range imports {
				if strings.HasPrefix(i, "tests/") {
					t.Errorf("%s imports the test framework %s", name, i)
				}
			}
		}
		for _, rule := range []struct {
			who   []string
			never []string
			why   string
		}{
			{[]string{"vocab"}, []string{""}, "the shared names import nothing of the project"},
			{[]string{"shardgroup"}, []string{"ddl", "syncer", "sink", "worker", "meta"}, "the shard group is pure and parser-free"},
			{[]string{"sink"}, []string{"syncer", "worker", "master"}, "the writer is below the sync unit"},
			{[]string{"syncer"}, []string{"worker", "master", "checker"}, "the sync unit is below the dm-worker server"},
			{[]string{"master", "checker"}, []string{"syncer", "worker", "sink"}, "the master side never links the worker side"},
			{[]string{"pessimist", "eventclass", "session", "config", "router", "meta", "dbutil"}, []string{"syncer", "worker", "master", "sink", "loader", "ddl"}, "lower floors do not import upper ones"},
			{[]string{"starttime"}, []string{"syncer", "worker", "master", "sink", "loader", "checker", "ha", "pessimist"}, "finding a time's binlog position stands on the database helpers only"},
		} {
			for _, w := range rule.who {
				if w != name {
					continue
				}
				for _, i := range imports {
					for _, n := range rule.never {
						if n == "" || i == n || strings.HasPrefix(i, n+"/") {
							t.Errorf("%s imports %s: %s", name, i, rule.why)
						}
					}
				}
			}
		}
		// Naming a table does not pull in the DDL parser.
		switch name {
		case "vocab", "router", "meta", "dbutil", "shardgroup", "config":
			for _, d := range deps {
				if strings.HasPrefix(d, "github.com/pingcap/tidb/") {
					t.Errorf("%s depends on the TiDB parser (%s)", name, d)
					break
				}
			}
		}
	}
}
