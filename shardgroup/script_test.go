package shardgroup

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/script"
	"github.com/tributary-db/tributary/vocab"
)

// TestGroupScripts replays testdata/group/*.txt (golden output; TRIBUTARY_UPDATE_TESTDATA=1 rewrites
// it): a group of target db.t, its tables named by their table name in db_1, positions by offset in
// bin.000001. Each file starts with a fresh group. Commands:
//
//	add T... [at N]      AddTable each (resolved at N)
//	ddl T N DDL          TrySync of T's item at N with DDL (the item's one statement)
//	remove T N           RemoveTable (the table was dropped upstream at N)
//	rename T U N         RenameTable T to U at N
//	resolve              ResolveActive
//	blocked T N          whether T's DML at N is held back
//	status               Status, Unresolved and SyncedAt
func TestGroupScripts(t *testing.T) {
	var g *ShardingGroup
	file := ""
	tb := func(name string) vocab.TableName { return vocab.TableName{Schema: "db_1", Name: name} }
	pos := func(t *testing.T, s string) vocab.Position {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatalf("position %q: %v", s, err)
		}
		return vocab.Position{File: "bin.000001", Pos: uint32(n)}
	}
	script.Run(t, "testdata/group", func(t *testing.T, c script.Case) string {
		if f, _, _ := strings.Cut(c.Pos, ":"); f != file {
			file, g = f, NewShardingGroup(vocab.TableName{Schema: "db", Name: "t"})
		}
		w := strings.Fields(c.Args)
		switch c.Cmd {
		case "add":
			at := vocab.Position{}
			if n := len(w); n >= 2 && w[n-2] == "at" {
				at, w = pos(t, w[n-1]), w[:n-2]
			}
			for _, name := range w {
				if err := g.AddTable(tb(name), at); err != nil {
					return "error: " + err.Error()
				}
			}
			return "tables " + names(g.Tables())
		case "ddl":
			_, ddl, _ := strings.Cut(strings.SplitN(c.Args, " ", 2)[1], " ")
			res, err := g.TrySync(DDLItem{Source: tb(w[0]), Target: g.Target(), DDLs: []string{ddl}, Pos: pos(t, w[1])})
			if err != nil {
				return "error: " + err.Error()
			}
			return result(res)
		case "remove":
			return result(g.RemoveTable(tb(w[0]), pos(t, w[1])))
		case "rename":
			if err := g.RenameTable(tb(w[0]), tb(w[1]), pos(t, w[2]), vocab.Position{}); err != nil {
				return "error: " + err.Error()
			}
			return "tables " + names(g.Tables())
		case "resolve":
			r, err := g.ResolveActive()
			if err != nil {
				return "error: " + err.Error()
			}
			var at []string
			for _, t := range r.Tables {
				at = append(at, fmt.Sprintf("%s@%d", t.Name, r.Positions[t].Pos))
			}
			return fmt.Sprintf("resolved %q resync-from %d tables %s", r.DDLs, r.ResyncFrom.Pos, strings.Join(at, " "))
		case "blocked":
			return strconv.FormatBool(g.Blocked(tb(w[0]), pos(t, w[1])))
		case "status":
			out := result(g.Status())
			if u, ok := g.Unresolved(); ok {
				out += fmt.Sprintf("\nunresolved first-at %d synced [%s] unsynced [%s]", u.FirstPosition.Pos, names(u.Synced), names(u.Unsynced))
			}
			if at, ok := g.SyncedAt(); ok {
				out += fmt.Sprintf("\nsynced-at %d", at.Pos)
			}
			return out
		}
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
		return ""
	})
}

func names(ts []vocab.TableName) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return strings.Join(out, " ")
}

// result renders a SyncResult on one line.
func result(r SyncResult) string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Duplicate, "duplicate"}, {r.Resolved, "resolved"}, {r.Active, "active"}, {r.Synced, "synced"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if len(r.ActiveDDLs) > 0 {
		out = append(out, fmt.Sprintf("step %q", r.ActiveDDLs))
	}
	if len(r.Remaining) > 0 {
		out = append(out, "waiting for "+names(r.Remaining))
	}
	if len(out) == 0 {
		return "nothing pending"
	}
	return strings.Join(out, " ")
}
