package checker

import (
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
)

// ItemUnmatchedRules warns of a source's route, block-allow-list or binlog event filter rule that
// matches none of the source's tables: a typo in a pattern (a route's table-pattern evnts_* while the
// tables are events_*) makes the shards land one to one under their own names instead of merged. Not
// a DM item; a warning only, as a rule may be meant for tables created later.
const ItemUnmatchedRules = "unmatched_rules"

// showTables is how many table names a message lists.
const showTables = 5

func tableList(ts []vocab.TableName) string {
	names := make([]string, 0, min(len(ts), showTables))
	for _, t := range ts[:min(len(ts), showTables)] {
		names = append(names, t.String())
	}
	s := strings.Join(names, ", ")
	if len(ts) > showTables {
		s += fmt.Sprintf(" and %d more", len(ts)-showTables)
	}
	return s
}

// unmatchedRules returns the warnings of inst's rules against all, every table the source holds
// (system schemas excluded): a block-allow-list entry that matches nothing or a list that lets no
// table through, a route rule that routes no table (none matches it, only tables the block-allow-list
// drops do, or, for a table rule, an earlier table rule takes every table it matches; a schema rule
// routes its schema too), and a filter rule that matches no
// replicated table. A route with a wildcard or a target-table that matches nothing says which tables
// of its schemas then go one to one instead of merged.
func unmatchedRules(task *config.Task, inst config.Instance, all []vocab.TableName) ([]string, error) {
	var out []string
	warn := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	ba, routes := task.Rules(inst)
	var routeNames []string
	for _, name := range inst.RouteRules {
		if _, ok := task.Routes[name]; ok {
			routeNames = append(routeNames, name)
		}
	}
	rt, err := router.NewRouter(ba, routes)
	if err != nil {
		return nil, err
	}
	var replicated []vocab.TableName
	for _, t := range all {
		if !rt.Skip(t) {
			replicated = append(replicated, t)
		}
	}
	if ba != nil {
		bal := inst.BlockAllowList
		for _, p := range ba.DoDBs {
			if m, err := router.Matching(p, "", all); err != nil {
				return nil, err
			} else if len(m) == 0 {
				warn("block-allow-list %s: do-dbs %q matches no schema of the source that holds a table", bal, p)
			}
		}
		for _, p := range ba.IgnoreDBs {
			if m, err := router.Matching(p, "", all); err != nil {
				return nil, err
			} else if len(m) == 0 {
				warn("block-allow-list %s: ignore-dbs %q matches no schema of the source that holds a table: it drops nothing", bal, p)
			}
		}
		for _, tr := range ba.DoTables {
			if m, err := router.Matching(tr.DBName, tr.TblName, all); err != nil {
				return nil, err
			} else if len(m) == 0 {
				warn("block-allow-list %s: do-tables {db-name: %q, tbl-name: %q} matches no table of the source", bal, tr.DBName, tr.TblName)
			}
		}
		for _, tr := range ba.IgnoreTables {
			if m, err := router.Matching(tr.DBName, tr.TblName, all); err != nil {
				return nil, err
			} else if len(m) == 0 {
				warn("block-allow-list %s: ignore-tables {db-name: %q, tbl-name: %q} matches no table of the source: it drops nothing", bal, tr.DBName, tr.TblName)
			}
		}
		if len(replicated) == 0 && len(all) > 0 {
			warn("block-allow-list %s lets none of the source's %d tables through: the task replicates nothing of this source", bal, len(all))
		}
	}
	for i, rule := range routes {
		name := routeNames[i]
		desc := fmt.Sprintf("route rule %s (schema-pattern %q", name, rule.SchemaPattern)
		if rule.TablePattern != "" {
			desc += fmt.Sprintf(", table-pattern %q", rule.TablePattern)
		}
		desc += ")"
		matched, err := router.Matching(rule.SchemaPattern, rule.TablePattern, replicated)
		if err != nil {
			return nil, err
		}
		// A schema rule (no table-pattern) routes the schema itself too (CREATE DATABASE and the
		// like), even where table rules take every table of it.
		if len(matched) > 0 && rule.TablePattern == "" {
			continue
		}
		if len(matched) > 0 {
			var routed []vocab.TableName
			for _, t := range matched {
				if rt.RuleOf(t) == i {
					routed = append(routed, t)
				}
			}
			if len(routed) == 0 {
				warn("%s routes no table of the source: an earlier rule routes every table it matches (%s)", desc, tableList(matched))
			}
			continue
		}
		dropped, err := router.Matching(rule.SchemaPattern, rule.TablePattern, all)
		if err != nil {
			return nil, err
		}
		if len(dropped) > 0 {
			warn("%s matches only tables the block-allow-list drops (%s): it routes nothing", desc, tableList(dropped))
			continue
		}
		target := rule.TargetSchema
		if rule.TargetTable != "" {
			target = vocab.TableName{Schema: rule.TargetSchema, Name: rule.TargetTable}.String()
		}
		merging := rule.TablePattern != "" && (rule.TargetTable != "" || strings.ContainsAny(rule.SchemaPattern+rule.TablePattern, "*?~"))
		inSchema, err := router.Matching(rule.SchemaPattern, "", replicated)
		if err != nil {
			return nil, err
		}
		if merging && len(inSchema) > 0 {
			// The tables of its schemas that no other rule merges land one to one.
			var alone, merged []vocab.TableName
			for _, t := range inSchema {
				if rt.Sharded(t) {
					merged = append(merged, t)
				} else {
					alone = append(alone, t)
				}
			}
			if len(alone) > 0 {
				warn("%s matches no table of the source: nothing is merged into %s, and the tables of its schemas that no rule merges are copied one to one instead (%s); check table-pattern against the tables",
					desc, target, landing(rt, alone))
			} else {
				warn("%s matches no table of the source: nothing is merged into %s (the tables of its schemas go where other rules send them: %s); check table-pattern against the tables",
					desc, target, landing(rt, merged))
			}
			continue
		}
		warn("%s matches no table of the source: nothing is routed to %s", desc, target)
	}
	for _, f := range task.FilterRulesOf(inst) {
		matched, err := router.Matching(f.SchemaPattern, f.TablePattern, replicated)
		if err != nil {
			return nil, err
		}
		if len(matched) > 0 {
			continue
		}
		desc := fmt.Sprintf("binlog event filter %s (schema-pattern %q", f.Name, f.SchemaPattern)
		if f.TablePattern != "" {
			desc += fmt.Sprintf(", table-pattern %q", f.TablePattern)
		}
		warn("%s) matches no table the task replicates from the source: it filters nothing", desc)
	}
	return out, nil
}

// landing lists where tables go: "a to b, ...".
func landing(rt *router.Router, ts []vocab.TableName) string {
	var lands []string
	for _, t := range ts[:min(len(ts), showTables)] {
		lands = append(lands, fmt.Sprintf("%s to %s", t, rt.Route(t)))
	}
	s := strings.Join(lands, ", ")
	if len(ts) > showTables {
		s += fmt.Sprintf(" and %d more", len(ts)-showTables)
	}
	return s
}
