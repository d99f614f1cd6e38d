// Package router filters and routes upstream tables (block-allow-list and route rules) with DM's
// semantics. The worker and the prechecks use it.
package router

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

// Router filters and routes upstream tables with DM's semantics. Patterns use * and ? wildcards (or a
// regular expression after ~) and, as DM with case-sensitive: false, ignore case.
type Router struct {
	doDBs, ignoreDBs       []*regexp.Regexp
	doTables, ignoreTables []tablePattern
	tableRules             []compiledRule
	schemaRules            []compiledRule
	tool                   func(vocab.TableName) bool // ghost and trash tables of online DDL tools
	topo                   *topologySets              // what the task's other sources share (SetTopology)
}

// SkipToolTables makes Skip true for the tables tool reports (the ghost and trash tables of online
// schema change tools, task online-ddl): their rows and DDL never go downstream as such.
func (r *Router) SkipToolTables(tool func(vocab.TableName) bool) { r.tool = tool }

type tablePattern struct{ db, tbl *regexp.Regexp }

type compiledRule struct {
	rule          config.RouteRule
	index         int // in the rules given to NewRouter
	schema, table *regexp.Regexp
}

// compilePattern turns a DM pattern into an anchored, case-insensitive regexp.
func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := strings.CutPrefix(p, "~"); ok {
		return regexp.Compile("(?i)" + re)
	}
	var sb strings.Builder
	sb.WriteString("(?i)^")
	for _, r := range p {
		switch r {
		case '*':
			sb.WriteString(".*")
		case '?':
			sb.WriteString(".")
		default:
			sb.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	sb.WriteString("$")
	return regexp.Compile(sb.String())
}

// NewRouter compiles a block-allow-list (nil: everything) and route rules. Errors name the rule.
func NewRouter(ba *config.BAList, rules []config.RouteRule) (*Router, error) {
	r := &Router{}
	if ba != nil {
		var err error
		if r.doDBs, err = compileAll("do-dbs", ba.DoDBs); err != nil {
			return nil, err
		}
		if r.ignoreDBs, err = compileAll("ignore-dbs", ba.IgnoreDBs); err != nil {
			return nil, err
		}
		if r.doTables, err = compileTables("do-tables", ba.DoTables); err != nil {
			return nil, err
		}
		if r.ignoreTables, err = compileTables("ignore-tables", ba.IgnoreTables); err != nil {
			return nil, err
		}
	}
	for i, rule := range rules {
		if rule.SchemaPattern == "" {
			return nil, fmt.Errorf("route rule %d: schema-pattern is empty", i+1)
		}
		if rule.TargetSchema == "" {
			return nil, fmt.Errorf("route rule %d (%s): target-schema is empty", i+1, rule.SchemaPattern)
		}
		c := compiledRule{rule: rule, index: i}
		var err error
		if c.schema, err = compilePattern(rule.SchemaPattern); err != nil {
			return nil, fmt.Errorf("route rule %d: schema-pattern %q: %w", i+1, rule.SchemaPattern, err)
		}
		if rule.TablePattern == "" {
			if rule.TargetTable != "" {
				return nil, fmt.Errorf("route rule %d (%s): target-table needs a table-pattern", i+1, rule.SchemaPattern)
			}
			r.schemaRules = append(r.schemaRules, c)
			continue
		}
		if c.table, err = compilePattern(rule.TablePattern); err != nil {
			return nil, fmt.Errorf("route rule %d: table-pattern %q: %w", i+1, rule.TablePattern, err)
		}
		r.tableRules = append(r.tableRules, c)
	}
	return r, nil
}

func compileAll(field string, ps []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(ps))
	for _, p := range ps {
		re, err := compilePattern(p)
		if err != nil {
			return nil, fmt.Errorf("block-allow-list %s: %q: %w", field, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func compileTables(field string, ts []config.TableRef) ([]tablePattern, error) {
	out := make([]tablePattern, 0, len(ts))
	for _, t := range ts {
		db, err := compilePattern(t.DBName)
		if err != nil {
			return nil, fmt.Errorf("block-allow-list %s: db-name %q: %w", field, t.DBName, err)
		}
		tbl, err := compilePattern(t.TblName)
		if err != nil {
			return nil, fmt.Errorf("block-allow-list %s: tbl-name %q: %w", field, t.TblName, err)
		}
		out = append(out, tablePattern{db, tbl})
	}
	return out, nil
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func matchTables(ps []tablePattern, t vocab.TableName) bool {
	for _, p := range ps {
		if p.db.MatchString(t.Schema) && p.tbl.MatchString(t.Name) {
			return true
		}
	}
	return false
}

// Skip reports whether a table (or a schema, with an empty Name) is filtered out. System schemas are
// always skipped.
func (r *Router) Skip(t vocab.TableName) bool {
	switch strings.ToLower(t.Schema) {
	case "mysql", "information_schema", "performance_schema", "sys":
		return true
	}
	if len(r.doDBs) > 0 && !matchAny(r.doDBs, t.Schema) && !r.doTableInSchema(t.Schema) {
		return true
	}
	if matchAny(r.ignoreDBs, t.Schema) {
		return true
	}
	if t.Name == "" {
		return false
	}
	if r.tool != nil && r.tool(t) {
		return true
	}
	if len(r.doTables) > 0 && !matchTables(r.doTables, t) {
		return true
	}
	return matchTables(r.ignoreTables, t)
}

// doTableInSchema: a do-tables entry for the schema lets it through do-dbs, as in DM.
func (r *Router) doTableInSchema(schema string) bool {
	for _, p := range r.doTables {
		if p.db.MatchString(schema) {
			return true
		}
	}
	return false
}

// Route returns the downstream name of an upstream table (or schema). Table rules win over schema
// rules; the first matching rule of each kind applies.
func (r *Router) Route(t vocab.TableName) vocab.TableName {
	if t.Name != "" {
		for _, c := range r.tableRules {
			if c.schema.MatchString(t.Schema) && c.table.MatchString(t.Name) {
				out := vocab.TableName{Schema: c.rule.TargetSchema, Name: c.rule.TargetTable}
				if out.Name == "" {
					out.Name = t.Name
				}
				return out
			}
		}
	}
	for _, c := range r.schemaRules {
		if c.schema.MatchString(t.Schema) {
			return vocab.TableName{Schema: c.rule.TargetSchema, Name: t.Name}
		}
	}
	return t
}

// Sharded reports whether more than one upstream table can route to t's target: the table is matched
// by a table rule with a wildcard, or another table rule routes to the same target, or (SetTopology)
// tables of other sources of the task reach the same target, so its DDL must be coordinated.
func (r *Router) Sharded(t vocab.TableName) bool {
	if r.topo != nil && r.topo.shards[key(r.Route(t))] && !r.wildcardSchemaRouted(t) {
		return true
	}
	for i, c := range r.tableRules {
		if c.schema.MatchString(t.Schema) && c.table.MatchString(t.Name) {
			if isPattern(c.rule.SchemaPattern + c.rule.TablePattern) {
				return true
			}
			// Explicit rules of several tables onto one target (db_1.a -> db.t, db_1.b -> db.t) merge
			// them just the same.
			target := r.Route(t)
			for j, o := range r.tableRules {
				if j != i && strings.EqualFold(o.rule.TargetSchema, target.Schema) && strings.EqualFold(o.rule.TargetTable, target.Name) && o.rule.TargetTable != "" {
					return true
				}
			}
			return false
		}
	}
	return false
}

// MergedSchema reports whether schema's target schema also receives tables of other upstream
// schemas, so that a statement on the whole schema (DROP DATABASE, ALTER DATABASE), or on one of its
// tables that is not a shard, could touch what other schemas replicate: a rule matching schema with a
// wildcard schema-pattern, a rule routing another schema to the same target, or a shard table route
// (a wildcard table rule) matching the schema; or (SetTopology) tables of other sources of the task
// reach the same target schema.
func (r *Router) MergedSchema(schema string) bool {
	if r.topo != nil && r.topo.schemas[strings.ToLower(r.Route(vocab.TableName{Schema: schema}).Schema)] {
		return true
	}
	for _, rules := range [][]compiledRule{r.tableRules, r.schemaRules} {
		for _, c := range rules {
			if c.schema.MatchString(schema) && (isPattern(c.rule.SchemaPattern) || isPattern(c.rule.TablePattern)) {
				return true
			}
		}
	}
	return r.othersRouteOnto(schema, r.Route(vocab.TableName{Schema: schema}).Schema)
}

// othersRouteOnto reports whether a rule that does not match schema routes onto target.
func (r *Router) othersRouteOnto(schema, target string) bool {
	for _, rules := range [][]compiledRule{r.tableRules, r.schemaRules} {
		for _, c := range rules {
			if !c.schema.MatchString(schema) && strings.EqualFold(c.rule.TargetSchema, target) {
				return true
			}
		}
	}
	return false
}

func isPattern(p string) bool { return strings.ContainsAny(p, "*?~") }

// SharedTarget reports whether table t, which is not a shard, routes to a target that other upstream
// tables may route to as well: its rule has a wildcard schema-pattern, or another schema is routed onto
// its target schema, or (SetTopology) tables of other sources of the task reach its target. Such a
// table's DROP or TRUNCATE could destroy what other schemas or sources replicate.
func (r *Router) SharedTarget(t vocab.TableName) bool {
	target := r.Route(t)
	if r.topo != nil && r.topo.shared[key(target)] {
		return true
	}
	for _, c := range r.tableRules {
		if c.schema.MatchString(t.Schema) && c.table.MatchString(t.Name) {
			if isPattern(c.rule.SchemaPattern) {
				return true
			}
			break
		}
	}
	for _, c := range r.schemaRules {
		if c.schema.MatchString(t.Schema) {
			if isPattern(c.rule.SchemaPattern) {
				return true
			}
			break
		}
	}
	return r.othersRouteOnto(t.Schema, target.Schema)
}
