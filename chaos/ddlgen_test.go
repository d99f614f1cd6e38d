package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestDDLGeneratorKeepsItsColumnsTrue: over many draws, each DDL is one the shard's columns allow as
// the generator tracks them (no drop or change of an indexed column, no index on a missing column, at
// most 4 added columns), and the same seed draws the same DDLs.
func TestDDLGeneratorKeepsItsColumnsTrue(t *testing.T) {
	draw := func(seed uint64) []string {
		r := &ddlRunner{rng: rand.New(rand.NewPCG(seed, 1)), t: targets()[0], indexed: map[string]bool{}}
		var out []string
		for i := 0; i < 2000; i++ {
			cols := map[string]bool{}
			for _, c := range r.extra {
				cols[c.name] = true
			}
			indexed := map[string]bool{}
			for k := range r.indexed {
				indexed[k] = true
			}
			d, ok := r.next()
			if !ok {
				t.Fatalf("draw %d: no DDL with columns %v", i, r.extra)
			}
			f := strings.Fields(d.clause)
			switch f[0] + " " + f[1] {
			case "ADD COLUMN":
				if cols[f[2]] || len(cols) >= 4 {
					t.Fatalf("draw %d: %s with columns %v", i, d.clause, cols)
				}
			case "DROP COLUMN", "CHANGE COLUMN":
				if !cols[f[2]] || indexed[f[2]] {
					t.Fatalf("draw %d: %s with columns %v, indexed %v", i, d.clause, cols, indexed)
				}
			case "MODIFY COLUMN", "ADD INDEX":
				name := f[2]
				if f[1] == "INDEX" {
					name = strings.TrimPrefix(name, "ix_")
				}
				if !cols[name] || f[1] == "INDEX" && indexed[name] {
					t.Fatalf("draw %d: %s with columns %v, indexed %v", i, d.clause, cols, indexed)
				}
			case "DROP INDEX":
				if !indexed[strings.TrimPrefix(f[2], "ix_")] {
					t.Fatalf("draw %d: %s with indexed %v", i, d.clause, indexed)
				}
			default:
				t.Fatalf("draw %d: unknown DDL %s", i, d.clause)
			}
			out = append(out, d.clause)
		}
		return out
	}
	a, b := draw(7), draw(7)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different DDLs")
	}
	if slices.Equal(a, draw(8)) {
		t.Fatal("two seeds drew the same DDLs")
	}
}
