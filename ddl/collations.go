package ddl

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Collations for a downstream that lacks some of the upstream's.
//
// MySQL 8's default collation, utf8mb4_0900_ai_ci, and its siblings are unknown to MariaDB before
// 11.4.5 (Error 1273): a table created or altered on a MySQL 8 upstream could not be created
// downstream. MariaDB 10.10+ has the same algorithm at a newer Unicode version (UCA 14.0.0,
// utf8mb4_uca1400_*), and 11.4.5+ maps the 0900 names to them itself; those are what they become
// here. On an older MariaDB the nearest is UCA 5.2.0 (utf8mb4_unicode_520_ci) for the
// accent-insensitive one; the others have none and are left to the downstream's error.

// MariaDBCollations are the 0900 collations as a MariaDB with the UCA 14.0 collations names them.
var MariaDBCollations = map[string]string{
	"utf8mb4_0900_ai_ci": "utf8mb4_uca1400_ai_ci",
	"utf8mb4_0900_as_ci": "utf8mb4_uca1400_as_ci",
	"utf8mb4_0900_as_cs": "utf8mb4_uca1400_as_cs",
	"utf8mb4_0900_bin":   "utf8mb4_bin",
}

// OldMariaDBCollations are the 0900 collations for a MariaDB before 10.10.
var OldMariaDBCollations = map[string]string{
	"utf8mb4_0900_ai_ci": "utf8mb4_unicode_520_ci",
	"utf8mb4_0900_bin":   "utf8mb4_bin",
}

// WithCollations returns s with the collations m maps (lower-case names) renamed wherever a
// definition names one: table, column and database options, a column's type, CONVERT TO, a COLLATE
// in an expression. It returns s itself when its text names none of them.
func (s Statement) WithCollations(m map[string]string) (Statement, error) {
	lower := strings.ToLower(s.SQL)
	named := false
	for from := range m {
		if strings.Contains(lower, from) {
			named = true
			break
		}
	}
	if !named {
		return s, nil
	}
	stmts, err := parse(s.SQL) // a tree of its own: s's is shared
	if err != nil || len(stmts) != 1 {
		// A statement the parser cannot read runs as it is (a MySQL 8 SHOW CREATE TABLE with
		// /*!80023 INVISIBLE */ columns): its collations are renamed in its text, outside strings
		// and quoted names.
		return Statement{SQL: renameInText(s.SQL, m)}, nil
	}
	node := stmts[0]
	rename := func(c string) string {
		if to, ok := m[strings.ToLower(c)]; ok {
			return to
		}
		return c
	}
	tableOptions := func(opts []*ast.TableOption) {
		for _, o := range opts {
			if o.Tp == ast.TableOptionCollate {
				o.StrValue = rename(o.StrValue)
			}
		}
	}
	switch n := node.(type) {
	case *ast.CreateTableStmt:
		tableOptions(n.Options)
	case *ast.AlterTableStmt:
		for _, spec := range n.Specs {
			tableOptions(spec.Options)
		}
	case *ast.CreateDatabaseStmt:
		for _, o := range n.Options {
			if o.Tp == ast.DatabaseOptionCollate {
				o.Value = rename(o.Value)
			}
		}
	case *ast.AlterDatabaseStmt:
		for _, o := range n.Options {
			if o.Tp == ast.DatabaseOptionCollate {
				o.Value = rename(o.Value)
			}
		}
	}
	node.Accept(collationVisitor{rename})
	out, err := restore(node)
	if err != nil {
		return s, fmt.Errorf("rename collations in %q: %w", truncate(s.SQL), err)
	}
	return Statement{SQL: out, node: node}, nil
}

// collationVisitor renames the collations of columns and expressions.
type collationVisitor struct{ rename func(string) string }

func (v collationVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ColumnDef:
		if x.Tp != nil && x.Tp.GetCollate() != "" {
			x.Tp.SetCollate(v.rename(x.Tp.GetCollate()))
		}
	case *ast.ColumnOption:
		if x.Tp == ast.ColumnOptionCollate {
			x.StrValue = v.rename(x.StrValue)
		}
	case *ast.SetCollationExpr:
		x.Collate = v.rename(x.Collate)
	}
	return n, false
}

func (v collationVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// renameInText renames the collations m maps where q names them as words, outside quoted strings
// and back-quoted names.
func renameInText(q string, m map[string]string) string {
	var b strings.Builder
	word := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(q); {
		c := q[i]
		if c == '\'' || c == '"' || c == '`' {
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // a doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(q))
			b.WriteString(q[i:j])
			i = j
			continue
		}
		if word(c) {
			j := i
			for j < len(q) && word(q[j]) {
				j++
			}
			w := q[i:j]
			if to, ok := m[strings.ToLower(w)]; ok {
				w = to
			}
			b.WriteString(w)
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}
