package ddl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/tributary-db/tributary/vocab"
)

// columnOf describes a column definition of a DDL.
func columnOf(def *ast.ColumnDef) vocab.Column {
	c := vocab.Column{Name: def.Name.Name.O}
	if def.Tp != nil {
		c.Type = strings.ToLower(def.Tp.InfoSchemaStr())
	}
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

// CreateTableColumns reads the columns of one CREATE TABLE statement (with its column definitions,
// not LIKE or SELECT), as binlog-schema update is given it. The statement's table name is not used.
func CreateTableColumns(sql string) ([]vocab.Column, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("want one CREATE TABLE statement, got %d statements", len(stmts))
	}
	ct, ok := stmts[0].(*ast.CreateTableStmt)
	switch {
	case !ok:
		return nil, fmt.Errorf("want a CREATE TABLE statement, got %q", truncate(sql))
	case ct.ReferTable != nil || ct.Select != nil:
		return nil, fmt.Errorf("want a CREATE TABLE statement with its column definitions, not LIKE or SELECT: %q", truncate(sql))
	case len(ct.Cols) == 0:
		return nil, fmt.Errorf("CREATE TABLE without columns: %q", truncate(sql))
	}
	cols := make([]vocab.Column, len(ct.Cols))
	for i, c := range ct.Cols {
		cols[i] = columnOf(c)
	}
	return cols, nil
}

// TrackColumns applies one DDL statement, with upstream names, to the columns of the tables it
// touches. lookup gives a table's current columns. The result maps each changed table to its new
// columns; a nil list means the table is gone. Statements that change no column give an empty map.
func TrackColumns(sql, defaultSchema string, lookup func(vocab.TableName) ([]vocab.Column, bool)) (map[vocab.TableName][]vocab.Column, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, fmt.Errorf("track columns of %q: %w", truncate(sql), err)
	}
	return trackColumns(stmts, defaultSchema, lookup)
}

// TrackColumns is TrackColumns of the parsed statements (before Split).
func (p *Parsed) TrackColumns(defaultSchema string, lookup func(vocab.TableName) ([]vocab.Column, bool)) (map[vocab.TableName][]vocab.Column, error) {
	if p.spent {
		return nil, errSpent
	}
	return trackColumns(p.stmts, defaultSchema, lookup)
}

func trackColumns(stmts []ast.StmtNode, defaultSchema string, lookup func(vocab.TableName) ([]vocab.Column, bool)) (map[vocab.TableName][]vocab.Column, error) {
	changes := map[vocab.TableName][]vocab.Column{}
	current := func(t vocab.TableName) ([]vocab.Column, bool) {
		if c, ok := changes[t]; ok {
			return c, c != nil
		}
		return lookup(t)
	}
	name := func(tn *ast.TableName) (vocab.TableName, error) { return qualify(tn, defaultSchema) }
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
			var cols []vocab.Column
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

func indexOf(cols []vocab.Column, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// place inserts col at the spec's position (end when none).
func place(cols []vocab.Column, col vocab.Column, pos *ast.ColumnPosition) ([]vocab.Column, error) {
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

func alterColumns(cols []vocab.Column, spec *ast.AlterTableSpec) ([]vocab.Column, error) {
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
