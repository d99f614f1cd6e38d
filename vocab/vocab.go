// Package vocab is the vocabulary every part of Tributary shares: a table's name, a binlog position and
// what a replicator knows of a column. It imports nothing of the project and no parser, so a package can
// name a table without pulling in the DDL toolkit.
package vocab

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TableName names an upstream or downstream table. A schema-level name has an empty Name.
type TableName struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// String quotes the name as MySQL does: `db`.`tbl`, or `db` for a schema.
func (t TableName) String() string {
	if t.Name == "" {
		return Quote(t.Schema)
	}
	return Quote(t.Schema) + "." + Quote(t.Name)
}

// Quote quotes one identifier as MySQL does: `a“b`.
func Quote(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// Less orders table names by schema, then name.
func (t TableName) Less(o TableName) bool {
	if t.Schema != o.Schema {
		return t.Schema < o.Schema
	}
	return t.Name < o.Name
}

// Position is a binlog position: file name and offset.
type Position struct {
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
}

// IsZero reports whether p is the zero position.
func (p Position) IsZero() bool { return p.File == "" && p.Pos == 0 }

func (p Position) String() string { return fmt.Sprintf("(%s, %d)", p.File, p.Pos) }

// BinlogPos is p as dmctl's -b takes it: "mysql-bin.000001:1234".
func (p Position) BinlogPos() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// ParseBinlogPos reads "file:pos".
func ParseBinlogPos(s string) (Position, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return Position{}, fmt.Errorf("binlog position %q is not FILE:POS (like mysql-bin.000001:1234)", s)
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("binlog position %q: %q is not a number", s, s[i+1:])
	}
	return Position{File: s[:i], Pos: uint32(n)}, nil
}

// Compare returns -1, 0 or 1. Files compare by their numeric suffix (mysql-bin.000010 is after
// mysql-bin.000009) when both have one and the same base name, else as strings.
func (p Position) Compare(o Position) int {
	if c := compareFile(p.File, o.File); c != 0 {
		return c
	}
	switch {
	case p.Pos < o.Pos:
		return -1
	case p.Pos > o.Pos:
		return 1
	}
	return 0
}

func compareFile(a, b string) int {
	if a == b {
		return 0
	}
	ab, as, aok := splitFile(a)
	bb, bs, bok := splitFile(b)
	if aok && bok && ab == bb {
		switch {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

func splitFile(f string) (base string, seq uint64, ok bool) {
	i := strings.LastIndexByte(f, '.')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(f[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return f[:i], n, true
}

// SortTables sorts ts by schema, then name (Less).
func SortTables(ts []TableName) {
	slices.SortFunc(ts, func(a, b TableName) int {
		switch {
		case a.Less(b):
			return -1
		case b.Less(a):
			return 1
		}
		return 0
	})
}
