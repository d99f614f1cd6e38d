// The fidelity tests' random DDL (fidelity_test.go).

package syncer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// ddl is a random ALTER TABLE of s: its specs (without the table) and the schema after it.
func (g *fgen) ddl(s *fschema) (string, *fschema) {
	n := s.clone()
	var specs []string
	added := map[string]bool{} // columns and indexes this ALTER adds: no other spec of it names them
	for len(specs) == 0 || g.chance(4) && len(specs) < 3 {
		if spec := g.alterSpec(n, added); spec != "" {
			specs = append(specs, spec)
		}
	}
	return strings.Join(specs, ", "), n
}

// position is a random column position clause for a new column of s (and where it puts it).
func (g *fgen) position(s *fschema, added map[string]bool) (string, int) {
	switch g.pick(4) {
	case 0:
		return " FIRST", 0
	case 1:
		if j := g.pick(len(s.cols)); !added[s.cols[j].name] {
			added[s.cols[j].name] = true // named here: no other spec of this ALTER renames it
			return " AFTER " + vocab.Quote(s.cols[j].name), j + 1
		}
	}
	return "", len(s.cols)
}

// alterSpec applies one random change to s and returns its ALTER TABLE spec ("" if none fits).
func (g *fgen) alterSpec(s *fschema, added map[string]bool) string {
	var free []*fcol // columns DDL may drop or change
	for _, c := range s.cols {
		if !s.pinned(c.name) && !added[c.name] {
			free = append(free, c)
		}
	}
	switch g.pick(9) {
	case 0, 1: // ADD COLUMN
		c := g.newBase(false)
		pos, at := g.position(s, added)
		s.cols = slices.Insert(s.cols, at, c)
		added[c.name] = true
		return "ADD COLUMN " + c.ddl() + pos
	case 2: // ADD a generated COLUMN
		c := g.newGenerated(s)
		if c == nil || added[c.base] {
			return ""
		}
		pos, at := g.position(s, added)
		s.cols = slices.Insert(s.cols, at, c)
		added[c.name] = true
		return "ADD COLUMN " + c.ddl() + pos
	case 3: // DROP COLUMN
		if len(free) == 0 || len(s.cols) < 3 {
			return ""
		}
		c := free[g.pick(len(free))]
		s.cols = slices.DeleteFunc(s.cols, func(x *fcol) bool { return x == c })
		return "DROP COLUMN " + vocab.Quote(c.name)
	case 4: // MODIFY COLUMN
		if len(free) == 0 {
			return ""
		}
		c := free[g.pick(len(free))]
		added[c.name] = true // no other spec of this ALTER names it
		if c.gen != "" {
			exprs := genExprs(s.col(c.base))
			e := exprs[g.pick(len(exprs))]
			c.gen, c.t = e.expr, e.t
			return "MODIFY COLUMN " + c.ddl()
		}
		if !g.widen(c) {
			return ""
		}
		return "MODIFY COLUMN " + c.ddl() + g.move(s, c, added)
	case 8: // RENAME COLUMN, or CHANGE COLUMN (a new name, maybe a wider type, maybe a new place)
		var bases []*fcol
		for _, c := range free {
			if c.gen == "" {
				bases = append(bases, c)
			}
		}
		if len(bases) == 0 {
			return ""
		}
		c := bases[g.pick(len(bases))]
		old := c.name
		c.name = g.newName("r_")
		added[old], added[c.name] = true, true
		if g.chance(2) || c.t.isSpatial() && !g.o.spatial {
			return "RENAME COLUMN " + vocab.Quote(old) + " TO " + vocab.Quote(c.name)
		}
		g.widen(c)
		return "CHANGE COLUMN " + vocab.Quote(old) + " " + c.ddl() + g.move(s, c, added)
	case 5, 6: // ADD INDEX
		ix, ok := g.newIndex(s)
		if !ok || len(s.indexes) > 6 {
			return ""
		}
		s.indexes = append(s.indexes, ix)
		added[ix.name] = true
		return "ADD " + ix.ddl()
	default: // DROP INDEX
		var plain []int
		for j, ix := range s.indexes {
			if !ix.unique && !added[ix.name] {
				plain = append(plain, j)
			}
		}
		if len(plain) == 0 {
			return ""
		}
		j := plain[g.pick(len(plain))]
		name := s.indexes[j].name
		s.indexes = slices.Delete(s.indexes, j, j+1)
		return "DROP INDEX " + vocab.Quote(name)
	}
}

// move sometimes places column c of s elsewhere: a position clause for its MODIFY or CHANGE.
func (g *fgen) move(s *fschema, c *fcol, added map[string]bool) string {
	if !g.chance(3) {
		return ""
	}
	s.cols = slices.DeleteFunc(s.cols, func(x *fcol) bool { return x == c })
	pos, at := g.position(s, added)
	if pos == "" {
		last := s.cols[len(s.cols)-1].name
		pos = " AFTER " + vocab.Quote(last)
		if added[last] {
			pos = " FIRST"
			at = 0
		}
		added[last] = true
	}
	s.cols = slices.Insert(s.cols, at, c)
	return pos
}

// widen changes c to a type that holds every value it holds, or drops NOT NULL.
func (g *fgen) widen(c *fcol) bool {
	t := &c.t
	if c.notNull && g.chance(3) {
		c.notNull, c.def = false, ""
		return true
	}
	switch {
	case t.isInt() && t.kind < kBigInt:
		t.kind += fkind(1 + g.pick(int(kBigInt-t.kind)))
	case t.kind == kDecimal && t.n < 65:
		grow := 1 + g.pick(65-t.n)
		t.n += grow
		t.scale = min(30, t.scale+g.pick(grow+1))
		if t.n-t.scale < t.n-grow-t.scale { // keep every integer digit
			return false
		}
	case t.kind == kFloat:
		t.kind = kDouble
	case (t.kind == kDatetime || t.kind == kTime || t.kind == kTimestamp) && t.n < 6:
		t.n += 1 + g.pick(6-t.n)
	case t.kind == kVarchar || t.kind == kVarbinary:
		t.n += 1 + g.pick(100)
	case t.kind == kChar && t.n < 255:
		t.n += 1 + g.pick(min(50, 255-t.n))
	case t.kind == kTinyText || t.kind == kText || t.kind == kMediumText:
		t.kind += fkind(1 + g.pick(int(kLongText-t.kind)))
	case t.kind == kTinyBlob || t.kind == kBlob || t.kind == kMediumBlob:
		t.kind += fkind(1 + g.pick(int(kLongBlob-t.kind)))
	case t.kind == kEnum && len(t.elems) < 20:
		t.elems = append(slices.Clone(t.elems), fmt.Sprintf("new%d", g.serial))
		g.serial++
	case t.kind == kSet && len(t.elems) < 64:
		t.elems = append(slices.Clone(t.elems), fmt.Sprintf("new%d", g.serial))
		g.serial++
	default:
		return false
	}
	if c.def != "" && t.kind == kDouble {
		// A FLOAT default is a float; as a double it would be another value than the rows hold.
		c.def = ""
		c.notNull = false
	}
	return true
}
