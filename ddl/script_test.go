package ddl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/script"
)

// TestSplitScripts replays testdata/split/*.txt (golden output; TRIBUTARY_UPDATE_TESTDATA=1 rewrites
// it). The route is routeShards: db_*.t_* to db.t, other tables of db_* to db. Commands, each with
// its statement on the lines under it:
//
//	split [SCHEMA]     Split in default database SCHEMA: one line per part, "kind source -> target:
//	                   SQL", with "renamed-to" and "also-alters" where set; or the error
//	tables [SCHEMA]    TablesOf the statement
//	effects            Effects of the statement, or "none"
func TestSplitScripts(t *testing.T) {
	script.Run(t, "testdata/split", func(t *testing.T, c script.Case) string {
		switch c.Cmd {
		case "split":
			parts, err := Split(c.Input, c.Args, routeShards)
			if err != nil {
				return "error: " + err.Error()
			}
			var out []string
			for _, p := range parts {
				line := fmt.Sprintf("%s %s -> %s: %s", p.Kind, p.Source, p.Target, p.SQL)
				if p.RenamedTo != (Part{}).RenamedTo {
					line += " renamed-to " + p.RenamedTo.String()
				}
				if p.AlsoAlters {
					line += " also-alters"
				}
				out = append(out, line)
			}
			return strings.Join(out, "\n")
		case "tables":
			ts, err := TablesOf(c.Input, c.Args)
			if err != nil {
				return "error: " + err.Error()
			}
			var out []string
			for _, tb := range ts {
				out = append(out, tb.String())
			}
			return strings.Join(out, " ")
		case "effects":
			effects, ok := Effects(c.Input)
			if !ok {
				return "none"
			}
			var out []string
			for _, e := range effects {
				what := "column"
				if e.Index {
					what = "index"
				}
				state := "absent"
				if e.Present {
					state = "present"
				}
				out = append(out, fmt.Sprintf("%s %s %s", what, e.Name, state))
			}
			return strings.Join(out, "\n")
		}
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
		return ""
	})
}
