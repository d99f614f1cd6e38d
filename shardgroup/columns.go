package shardgroup

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Column is what a replicator needs to know of a column beyond what every binlog carries: its name
// (binlogs without binlog_row_metadata=FULL have none), whether it is generated (its value is computed
// by the server and must never be written), and whether an integer column is unsigned (the binlog's
// integers are signed, and only the optional metadata says otherwise).
type Column struct {
	Name      string `json:"name"`
	Generated bool   `json:"gen,omitempty"`
	Unsigned  bool   `json:"unsigned,omitempty"`
	// BinaryLen is n for a BINARY(n) column: the binlog strips its trailing zero bytes, which the
	// server pads back on insert but not in a comparison.
	BinaryLen int `json:"binlen,omitempty"`
}

// UnmarshalJSON also reads a plain column name, as checkpoints written before flags were tracked hold.
func (c *Column) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*c = Column{}
		return json.Unmarshal(b, &c.Name)
	}
	type plain Column
	return json.Unmarshal(b, (*plain)(c))
}

// ColumnNames returns the names of cols.
func ColumnNames(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// columnOf describes a column definition of a DDL.
func columnOf(def *ast.ColumnDef) Column {
	c := Column{Name: def.Name.Name.O}
	if def.Tp != nil && mysql.HasUnsignedFlag(def.Tp.GetFlag()) {
		c.Unsigned = true
	}
	if def.Tp != nil && def.Tp.GetType() == mysql.TypeString && strings.EqualFold(def.Tp.GetCharset(), "binary") && def.Tp.GetFlen() > 0 {
		c.BinaryLen = def.Tp.GetFlen()
	}
	for _, o := range def.Options {
		if o.Tp == ast.ColumnOptionGenerated {
			c.Generated = true
		}
	}
	return c
}

// TrackColumns applies one DDL statement, with upstream names, to the columns of the tables it
// touches. lookup gives a table's current columns. The result maps each changed table to its new
// columns; a nil list means the table is gone. Statements that change no column give an empty map.
func TrackColumns(sql, defaultSchema string, lookup func(TableName) ([]Column, bool)) (map[TableName][]Column, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, fmt.Errorf("track columns of %q: %w", truncate(sql), err)
	}
	changes := map[TableName][]Column{}
	current := func(t TableName) ([]Column, bool) {
		if c, ok := changes[t]; ok {
			return c, c != nil
		}
		return lookup(t)
	}
	name := func(tn *ast.TableName) (TableName, error) { return qualify(tn, defaultSchema) }
	for _, stmt := range stmts {
		switch s := stmt.(type) {
		case *ast.CreateTableStmt:
			t, err := name(s.Table)
			if err != nil {
				return nil, err
			}
			if s.ReferTable != nil {
				ref, err := name(s.ReferTable)
				if err != nil {
					return nil, err
				}
				cols, ok := current(ref)
				if !ok {
					return nil, fmt.Errorf("CREATE TABLE %s LIKE %s: columns of %s are unknown", t, ref, ref)
				}
				changes[t] = slices.Clone(cols)
				continue
			}
			var cols []Column
			for _, c := range s.Cols {
				cols = append(cols, columnOf(c))
			}
			changes[t] = cols
		case *ast.DropTableStmt:
			for _, tn := range s.Tables {
				t, err := name(tn)
				if err != nil {
					return nil, err
				}
				changes[t] = nil
			}
		case *ast.RenameTableStmt:
			for _, tt := range s.TableToTables {
				from, err := name(tt.OldTable)
				if err != nil {
					return nil, err
				}
				to, err := name(tt.NewTable)
				if err != nil {
					return nil, err
				}
				cols, _ := current(from)
				changes[from], changes[to] = nil, slices.Clone(cols)
			}
		case *ast.AlterTableStmt:
			t, err := name(s.Table)
			if err != nil {
				return nil, err
			}
			cols, ok := current(t)
			if !ok {
				return nil, fmt.Errorf("ALTER TABLE %s: columns of %s are unknown", t, t)
			}
			cols = slices.Clone(cols)
			for _, spec := range s.Specs {
				if cols, err = alterColumns(cols, spec); err != nil {
					return nil, fmt.Errorf("ALTER TABLE %s: %w", t, err)
				}
				if spec.Tp == ast.AlterTableRenameTable {
					to, err := name(spec.NewTable)
					if err != nil {
						return nil, err
					}
					changes[t] = nil
					t = to
				}
			}
			changes[t] = cols
		}
	}
	return changes, nil
}

func indexOf(cols []Column, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// place inserts col at the spec's position (end when none).
func place(cols []Column, col Column, pos *ast.ColumnPosition) ([]Column, error) {
	if pos == nil || pos.Tp == ast.ColumnPositionNone {
		return append(cols, col), nil
	}
	if pos.Tp == ast.ColumnPositionFirst {
		return slices.Insert(cols, 0, col), nil
	}
	i := indexOf(cols, pos.RelativeColumn.Name.O)
	if i < 0 {
		return nil, fmt.Errorf("no column %q to place %q after", pos.RelativeColumn.Name.O, col.Name)
	}
	return slices.Insert(cols, i+1, col), nil
}

func alterColumns(cols []Column, spec *ast.AlterTableSpec) ([]Column, error) {
	var err error
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		for _, c := range spec.NewColumns {
			if cols, err = place(cols, columnOf(c), spec.Position); err != nil {
				return nil, err
			}
		}
	case ast.AlterTableDropColumn:
		if i := indexOf(cols, spec.OldColumnName.Name.O); i >= 0 {
			cols = slices.Delete(cols, i, i+1)
		}
	case ast.AlterTableChangeColumn, ast.AlterTableModifyColumn:
		old := spec.NewColumns[0].Name.Name.O
		if spec.Tp == ast.AlterTableChangeColumn {
			old = spec.OldColumnName.Name.O
		}
		i := indexOf(cols, old)
		if i < 0 {
			return nil, fmt.Errorf("no column %q to change", old)
		}
		cols = slices.Delete(cols, i, i+1)
		if spec.Position == nil || spec.Position.Tp == ast.ColumnPositionNone {
			cols = slices.Insert(cols, i, columnOf(spec.NewColumns[0]))
		} else if cols, err = place(cols, columnOf(spec.NewColumns[0]), spec.Position); err != nil {
			return nil, err
		}
	case ast.AlterTableRenameColumn:
		i := indexOf(cols, spec.OldColumnName.Name.O)
		if i < 0 {
			return nil, fmt.Errorf("no column %q to rename", spec.OldColumnName.Name.O)
		}
		cols[i].Name = spec.NewColumnName.Name.O
	}
	return cols, nil
}
