package ddl

import "github.com/pingcap/tidb/pkg/parser/ast"

// Effect is something a DDL leaves on its table that can be read off the table afterwards: a column
// or an index (the primary key is the index "PRIMARY") that its run makes present or absent.
type Effect struct {
	Index   bool   // an index (else a column)
	Name    string // as the DDL writes it; MySQL compares these names case-insensitively
	Present bool   // the run leaves it present (ADD) or absent (DROP)
}

// Effects returns what sql leaves on its table, when whether it ran can be told from the table alone
// and running it a second time is harmless. ok is true for one ALTER TABLE whose every clause is one
// of:
//   - ADD COLUMN, DROP COLUMN, ADD of a named KEY, INDEX, UNIQUE or FULLTEXT index, DROP INDEX, DROP
//     PRIMARY KEY: each leaves an Effect, and a second run fails with an "already applied" error (a
//     duplicate column or key name, a column or key that cannot be dropped: MySQL errors 1060, 1061
//     and 1091);
//   - MODIFY COLUMN, ALTER COLUMN ... SET/DROP DEFAULT: a second run sets the same definition again;
//   - ALGORITHM= and LOCK=;
//
// with at least one Effect. An ALTER TABLE runs whole or not at all, so its table, compared with what
// it makes (CompareWithDownstream), tells whether it ran. Left out: IF [NOT] EXISTS (no error to tell by, and beside other clauses a
// second run is not harmless: DROP COLUMN IF EXISTS a, ADD COLUMN a drops the column's values again);
// an index without a name (a second run adds a second index); renames and CHANGE; a primary key,
// foreign key or check constraint added (a second run's error is not "already applied" on every
// server: MySQL 8 has 3822 for a check's name); partitions and table options.
func Effects(sql string) (effects []Effect, ok bool) {
	stmts, err := parse(sql)
	if err != nil || len(stmts) != 1 {
		return nil, false
	}
	return effectsOf(stmts[0])
}

func effectsOf(node ast.StmtNode) (effects []Effect, ok bool) {
	alter, ok := node.(*ast.AlterTableStmt)
	if !ok {
		return nil, false
	}
	for _, spec := range alter.Specs {
		if spec.IfExists || spec.IfNotExists {
			return nil, false
		}
		switch spec.Tp {
		case ast.AlterTableAddColumns:
			if len(spec.NewConstraints) > 0 || len(spec.NewColumns) == 0 {
				return nil, false
			}
			for _, c := range spec.NewColumns {
				effects = append(effects, Effect{Name: c.Name.Name.O, Present: true})
			}
		case ast.AlterTableDropColumn:
			effects = append(effects, Effect{Name: spec.OldColumnName.Name.O})
		case ast.AlterTableAddConstraint:
			c := spec.Constraint
			if c == nil || c.Name == "" || c.IfNotExists {
				return nil, false
			}
			switch c.Tp {
			case ast.ConstraintKey, ast.ConstraintIndex, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex, ast.ConstraintFulltext:
			default:
				return nil, false
			}
			effects = append(effects, Effect{Index: true, Name: c.Name, Present: true})
		case ast.AlterTableDropIndex:
			effects = append(effects, Effect{Index: true, Name: spec.Name})
		case ast.AlterTableDropPrimaryKey:
			effects = append(effects, Effect{Index: true, Name: "PRIMARY"})
		case ast.AlterTableModifyColumn, ast.AlterTableAlterColumn, ast.AlterTableAlgorithm, ast.AlterTableLock:
		default:
			return nil, false
		}
	}
	return effects, len(effects) > 0
}
