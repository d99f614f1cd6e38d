package ddl

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/tributary-db/tributary/vocab"
)

// DMLTables returns the tables a statement-format DML statement (INSERT, REPLACE, UPDATE, DELETE,
// LOAD DATA) may write, qualified with defaultSchema. For a statement it cannot read, or one that is
// not such DML, it returns an error: the caller must assume any table.
func DMLTables(sql, defaultSchema string) (tables []vocab.TableName, err error) {
	defer func() {
		if r := recover(); r != nil {
			tables, err = nil, fmt.Errorf("parse %q: parser panic: %v", truncate(sql), r)
		}
	}()
	stmts, err := parse(sql)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", truncate(sql), err)
	}
	add := func(tn *ast.TableName) error {
		t, err := qualify(tn, defaultSchema)
		if err != nil {
			return err
		}
		tables = append(tables, t)
		return nil
	}
	for _, stmt := range stmts {
		var refs *ast.TableRefsClause
		switch s := stmt.(type) {
		case *ast.InsertStmt:
			refs = s.Table
		case *ast.UpdateStmt:
			refs = s.TableRefs
		case *ast.DeleteStmt:
			if s.IsMultiTable && s.Tables != nil {
				for _, tn := range s.Tables.Tables {
					if err := add(tn); err != nil {
						return nil, err
					}
				}
			}
			refs = s.TableRefs // with a multi-table DELETE's join too: its targets may be aliases
		case *ast.LoadDataStmt:
			if err := add(s.Table); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, fmt.Errorf("%q is not INSERT, REPLACE, UPDATE, DELETE or LOAD DATA", truncate(sql))
		}
		if refs == nil || refs.TableRefs == nil {
			return nil, fmt.Errorf("%q names no table", truncate(sql))
		}
		c := &dmlJoin{}
		refs.TableRefs.Accept(c)
		for _, tn := range c.names {
			if err := add(tn); err != nil {
				return nil, err
			}
		}
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("%q names no table", truncate(sql))
	}
	return tables, nil
}

// dmlJoin collects the table names of a join (every table an UPDATE's join may write).
type dmlJoin struct{ names []*ast.TableName }

func (c *dmlJoin) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		c.names = append(c.names, tn)
	}
	return n, false
}

func (c *dmlJoin) Leave(n ast.Node) (ast.Node, bool) { return n, true }
