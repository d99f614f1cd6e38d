package shardgroup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// TrackColumns applies one DDL statement, with upstream names, to the column lists of the tables it
// touches, for binlogs that carry no column names (binlog_row_metadata other than FULL). lookup gives
// a table's current columns. The result maps each changed table to its new columns; a nil list means
// the table is gone. Statements that change no column list give an empty map.
func TrackColumns(sql, defaultSchema string, lookup func(TableName) ([]string, bool)) (map[TableName][]string, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, fmt.Errorf("track columns of %q: %w", truncate(sql), err)
	}
	changes := map[TableName][]string{}
	current := func(t TableName) ([]string, bool) {
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
			var cols []string
			for _, c := range s.Cols {
				cols = append(cols, c.Name.Name.O)
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

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// place inserts col at the spec's position (end when none).
func place(cols []string, col string, pos *ast.ColumnPosition) ([]string, error) {
	if pos == nil || pos.Tp == ast.ColumnPositionNone {
		return append(cols, col), nil
	}
	if pos.Tp == ast.ColumnPositionFirst {
		return slices.Insert(cols, 0, col), nil
	}
	i := indexOf(cols, pos.RelativeColumn.Name.O)
	if i < 0 {
		return nil, fmt.Errorf("no column %q to place %q after", pos.RelativeColumn.Name.O, col)
	}
	return slices.Insert(cols, i+1, col), nil
}

func alterColumns(cols []string, spec *ast.AlterTableSpec) ([]string, error) {
	var err error
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		for _, c := range spec.NewColumns {
			if cols, err = place(cols, c.Name.Name.O, spec.Position); err != nil {
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
			cols = slices.Insert(cols, i, spec.NewColumns[0].Name.Name.O)
		} else if cols, err = place(cols, spec.NewColumns[0].Name.Name.O, spec.Position); err != nil {
			return nil, err
		}
	case ast.AlterTableRenameColumn:
		i := indexOf(cols, spec.OldColumnName.Name.O)
		if i < 0 {
			return nil, fmt.Errorf("no column %q to rename", spec.OldColumnName.Name.O)
		}
		cols[i] = spec.NewColumnName.Name.O
	}
	return cols, nil
}
