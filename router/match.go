package router

import (
	"fmt"

	"github.com/tributary-db/tributary/vocab"
)

// Matching returns the tables of tables (in their order) that a pair of DM patterns matches: the
// schema pattern, and the table pattern ("" for every table of a matching schema). It is how a route
// rule, a binlog event filter rule and a block-allow-list entry match a table, so a check can tell a
// rule that matches nothing a source holds.
func Matching(schemaPattern, tablePattern string, tables []vocab.TableName) ([]vocab.TableName, error) {
	schema, err := compilePattern(schemaPattern)
	if err != nil {
		return nil, fmt.Errorf("schema pattern %q: %w", schemaPattern, err)
	}
	var table = schema
	if tablePattern != "" {
		if table, err = compilePattern(tablePattern); err != nil {
			return nil, fmt.Errorf("table pattern %q: %w", tablePattern, err)
		}
	}
	var out []vocab.TableName
	for _, t := range tables {
		if schema.MatchString(t.Schema) && (tablePattern == "" || table.MatchString(t.Name)) {
			out = append(out, t)
		}
	}
	return out, nil
}

// RuleOf returns the index (in the rules given to NewRouter) of the route rule that routes table t,
// or -1 when no rule does (it keeps its name). A table rule wins over a schema rule, and the first of
// each kind that matches applies, as in Route.
func (r *Router) RuleOf(t vocab.TableName) int {
	if t.Name != "" {
		for _, c := range r.tableRules {
			if c.schema.MatchString(t.Schema) && c.table.MatchString(t.Name) {
				return c.index
			}
		}
	}
	for _, c := range r.schemaRules {
		if c.schema.MatchString(t.Schema) {
			return c.index
		}
	}
	return -1
}
