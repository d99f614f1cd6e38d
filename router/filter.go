package router

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

// Filter applies DM's binlog event filters (task filters, chosen per source by filter-rules): an
// event of a matching table that a rule lists, or a statement that matches its sql-pattern, is
// ignored (action Ignore), is the only kind replicated (Do), or stops the task (Error). A schema-level
// event (CREATE/DROP/ALTER DATABASE) is matched only by rules without a table-pattern, as in DM.
type Filter struct {
	rules []filterRule
}

type filterRule struct {
	rule          config.FilterRule
	schema, table *regexp.Regexp // table nil: every table of the schema
	events        []string
	sql           []*regexp.Regexp
	action        string // ignore, do, error
}

// FilterAction is what a filter decides for one event.
type FilterAction int

// Filter decisions.
const (
	Replicate FilterAction = iota
	IgnoreEvent
	FailEvent
)

// NewFilter compiles filter rules (none: a filter that lets everything through). Errors name the rule.
func NewFilter(rules []config.FilterRule) (*Filter, error) {
	f := &Filter{}
	for _, r := range rules {
		c := filterRule{rule: r, action: strings.ToLower(r.Action)}
		var err error
		if c.schema, err = compilePattern(r.SchemaPattern); err != nil {
			return nil, fmt.Errorf("filters %s: schema-pattern %q: %w", r.Name, r.SchemaPattern, err)
		}
		if r.TablePattern != "" {
			if c.table, err = compilePattern(r.TablePattern); err != nil {
				return nil, fmt.Errorf("filters %s: table-pattern %q: %w", r.Name, r.TablePattern, err)
			}
		}
		for _, e := range r.Events {
			c.events = append(c.events, strings.ToLower(strings.TrimSpace(e)))
		}
		for _, p := range r.SQLPattern {
			re, err := regexp.Compile("(?i)" + p)
			if err != nil {
				return nil, fmt.Errorf("filters %s: sql-pattern %q: %w", r.Name, p, err)
			}
			c.sql = append(c.sql, re)
		}
		switch c.action {
		case "ignore", "do", "error":
		default:
			return nil, fmt.Errorf("filters %s: action %q must be Ignore, Do or Error", r.Name, r.Action)
		}
		f.rules = append(f.rules, c)
	}
	return f, nil
}

// Empty reports whether the filter has no rules.
func (f *Filter) Empty() bool { return f == nil || len(f.rules) == 0 }

var dmlEvents = []string{"insert", "update", "delete"}

func (c *filterRule) lists(events []string, dml bool) bool {
	for _, e := range c.events {
		switch {
		case e == "all", e == "all dml" && dml, e == "all ddl" && !dml:
			return true
		case slices.Contains(events, e):
			return true
		}
	}
	return false
}

func (c *filterRule) matchesSQL(sql string) bool {
	for _, re := range c.sql {
		if sql != "" && re.MatchString(sql) {
			return true
		}
	}
	return false
}

func (c *filterRule) matchesTable(t vocab.TableName) bool {
	if !c.schema.MatchString(t.Schema) {
		return false
	}
	if t.Name == "" {
		return c.table == nil
	}
	return c.table == nil || c.table.MatchString(t.Name)
}

// Decide says what to do with an event of table t (schema-level: empty Name). events are the DM
// names the event goes by (a DDL may have several: "alter table" and "rename table"); sql is the
// statement for a DDL, empty for row events. The rule that decides is returned for messages.
func (f *Filter) Decide(t vocab.TableName, events []string, sql string) (FilterAction, string) {
	if f.Empty() {
		return Replicate, ""
	}
	dml := sql == "" && len(events) == 1 && slices.Contains(dmlEvents, events[0])
	doRules, doHit := "", false
	for i := range f.rules {
		c := &f.rules[i]
		if !c.matchesTable(t) {
			continue
		}
		hit := c.lists(events, dml) || c.matchesSQL(sql)
		switch c.action {
		case "error":
			if hit {
				return FailEvent, c.rule.Name
			}
		case "ignore":
			if hit {
				return IgnoreEvent, c.rule.Name
			}
		case "do":
			doRules = c.rule.Name
			doHit = doHit || hit
		}
	}
	if doRules != "" && !doHit {
		return IgnoreEvent, doRules // Do rules match the table, and none lists this event
	}
	return Replicate, ""
}

// Statement decides for a statement the parser cannot read (CREATE OR REPLACE TABLE, ...), whose
// tables are unknown, by the sql-pattern of the rules without a table-pattern whose schema-pattern
// matches the database it ran in (an empty one when it ran without USE).
func (f *Filter) Statement(schema, sql string) (FilterAction, string) {
	if f.Empty() {
		return Replicate, ""
	}
	for i := range f.rules {
		c := &f.rules[i]
		if c.table != nil || !c.schema.MatchString(schema) || !c.matchesSQL(sql) {
			continue
		}
		switch c.action {
		case "error":
			return FailEvent, c.rule.Name
		case "ignore":
			return IgnoreEvent, c.rule.Name
		}
	}
	return Replicate, ""
}
