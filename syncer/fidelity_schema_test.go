// The fidelity tests' model of a shard schema (fidelity_test.go).

package syncer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

type fcol struct {
	name    string
	t       ftype
	notNull bool
	def     string // DEFAULT literal, "" for none
	gen     string // generation expression ("" for a base column)
	base    string // the column gen reads
	stored  string // "VIRTUAL", "STORED" or "PERSISTENT"
}

func (c *fcol) ddl() string {
	s := vocab.Quote(c.name) + " " + c.t.sql()
	if c.gen != "" {
		return s + " AS (" + c.gen + ") " + c.stored
	}
	if c.notNull {
		s += " NOT NULL"
	} else {
		s += " NULL"
	}
	if c.def != "" {
		s += " DEFAULT " + c.def
	}
	return s
}

type findex struct {
	name   string
	cols   []string
	prefix []int // 0: whole column
	unique bool
}

func (ix findex) ddl() string {
	parts := make([]string, len(ix.cols))
	for i, c := range ix.cols {
		parts[i] = vocab.Quote(c)
		if ix.prefix[i] > 0 {
			parts[i] += fmt.Sprintf("(%d)", ix.prefix[i])
		}
	}
	kw := "INDEX "
	if ix.unique {
		kw = "UNIQUE KEY "
	}
	return kw + vocab.Quote(ix.name) + " (" + strings.Join(parts, ", ") + ")"
}

type fschema struct {
	cols    []*fcol
	pk      []string
	indexes []findex
}

func (s *fschema) clone() *fschema {
	n := &fschema{pk: slices.Clone(s.pk), indexes: slices.Clone(s.indexes)}
	for _, c := range s.cols {
		cc := *c
		n.cols = append(n.cols, &cc)
	}
	return n
}

func (s *fschema) col(name string) *fcol {
	for _, c := range s.cols {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (s *fschema) create(table string) string {
	var defs []string
	for _, c := range s.cols {
		defs = append(defs, c.ddl())
	}
	if len(s.pk) > 0 {
		q := make([]string, len(s.pk))
		for i, c := range s.pk {
			q[i] = vocab.Quote(c)
		}
		defs = append(defs, "PRIMARY KEY ("+strings.Join(q, ", ")+")")
	}
	for _, ix := range s.indexes {
		defs = append(defs, ix.ddl())
	}
	return "CREATE TABLE " + table + " (\n  " + strings.Join(defs, ",\n  ") + "\n)"
}

func (s *fschema) baseCols() []*fcol {
	var out []*fcol
	for _, c := range s.cols {
		if c.gen == "" {
			out = append(out, c)
		}
	}
	return out
}

// keys are the primary key and the unique keys: column lists whose tuples must stay unique.
func (s *fschema) keys() []findex {
	var out []findex
	if len(s.pk) > 0 {
		out = append(out, findex{name: "PRIMARY", cols: s.pk, unique: true})
	}
	for _, ix := range s.indexes {
		if ix.unique {
			out = append(out, ix)
		}
	}
	return out
}

// pinned columns are in a key or an index, or read by a generated column: DDL leaves them alone.
func (s *fschema) pinned(name string) bool {
	if slices.Contains(s.pk, name) {
		return true
	}
	for _, ix := range s.indexes {
		if slices.Contains(ix.cols, name) {
			return true
		}
	}
	for _, c := range s.cols {
		if c.base == name {
			return true
		}
	}
	return false
}

func (s *fschema) keyCol(name string) bool {
	for _, k := range s.keys() {
		if slices.Contains(k.cols, name) {
			return true
		}
	}
	return false
}
