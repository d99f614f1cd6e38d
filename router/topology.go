package router

import (
	"maps"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

// Topology is where the tables of a task's sources meet downstream: the targets and target schemas
// that tables of two or more sources reach. One source's rules cannot tell: with no route at all (or
// one explicit rule listed by every source) each source sees a table routed one to one, while every
// upstream server holds the same shop.orders and they all write one downstream table. The master
// computes it at start-task from the tables every source holds (NewTopology) and stores it with the
// task, so every worker of the task decides from the same answer (Router.SetTopology).
type Topology struct {
	// Shards are targets that tables of two or more sources reach by a table rule, a schema rule
	// without a wildcard, or no rule: they are shard groups across sources, as DM's sharding groups
	// are keyed by the target table.
	Shards []vocab.TableName `json:"shards,omitempty"`
	// Shared are targets that tables of two or more sources reach in any way (wildcard schema routes
	// too): one source's DROP or TRUNCATE of such a table would destroy the others' rows.
	Shared []vocab.TableName `json:"shared,omitempty"`
	// Schemas are target schemas that tables of two or more sources reach.
	Schemas []string `json:"schemas,omitempty"`
	// Sources lists, for every target of Shards, the sources whose tables reach it (sorted), so a
	// check can tell a group that some of the task's sources do not take part in.
	Sources map[string][]string `json:"sources,omitempty"`
}

// SourceTables is one source's router and the upstream tables it holds.
type SourceTables struct {
	Source string
	Router *Router
	Tables []vocab.TableName
}

// NewTopology finds the targets that the tables of two or more of the given sources reach. A table
// routed by a schema rule with a wildcard schema-pattern makes its target shared but not a shard
// group: such tables keep the safety table's "in a merged schema" rule, as they do on one source.
func NewTopology(sources []SourceTables) *Topology {
	type reach struct {
		name  vocab.TableName
		shard map[string]bool // sources reaching it by a table rule, a literal schema rule or none
		all   map[string]bool
	}
	targets := map[string]*reach{}
	schemas := map[string]map[string]bool{}
	schemaName := map[string]string{}
	for _, s := range sources {
		for _, t := range s.Tables {
			if s.Router.Skip(t) {
				continue
			}
			target := s.Router.Route(t)
			k := key(target)
			r, ok := targets[k]
			if !ok {
				r = &reach{name: target, shard: map[string]bool{}, all: map[string]bool{}}
				targets[k] = r
			}
			r.all[s.Source] = true
			if !s.Router.wildcardSchemaRouted(t) {
				r.shard[s.Source] = true
			}
			sk := strings.ToLower(target.Schema)
			if schemas[sk] == nil {
				schemas[sk], schemaName[sk] = map[string]bool{}, target.Schema
			}
			schemas[sk][s.Source] = true
		}
	}
	tp := &Topology{}
	for _, k := range slices.Sorted(maps.Keys(targets)) {
		r := targets[k]
		if len(r.shard) > 1 {
			tp.Shards = append(tp.Shards, r.name)
			if tp.Sources == nil {
				tp.Sources = map[string][]string{}
			}
			tp.Sources[r.name.String()] = slices.Sorted(maps.Keys(r.shard))
		}
		if len(r.all) > 1 {
			tp.Shared = append(tp.Shared, r.name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(schemas)) {
		if len(schemas[k]) > 1 {
			tp.Schemas = append(tp.Schemas, schemaName[k])
		}
	}
	return tp
}

// key is a table's name as the routing compares it: case-insensitive, as DM with case-sensitive: false.
func key(t vocab.TableName) string {
	return strings.ToLower(t.Schema) + "\x00" + strings.ToLower(t.Name)
}

// topologySets is a Topology as sets, for the router's lookups.
type topologySets struct {
	shards, shared, schemas map[string]bool
}

// SetTopology makes the router decide with the task's other sources: a table whose target is one of
// tp's Shards is a shard (its DDL goes through the lock across sources), one whose target is Shared
// is a shared target, and a schema whose target schema is one of tp's Schemas is a merged schema. A
// nil Topology (a task stored by an earlier version) leaves the router deciding from its own rules.
func (r *Router) SetTopology(tp *Topology) {
	if tp == nil {
		r.topo = nil
		return
	}
	s := &topologySets{shards: map[string]bool{}, shared: map[string]bool{}, schemas: map[string]bool{}}
	for _, t := range tp.Shards {
		s.shards[key(t)] = true
	}
	for _, t := range tp.Shared {
		s.shared[key(t)] = true
	}
	for _, sc := range tp.Schemas {
		s.schemas[strings.ToLower(sc)] = true
	}
	r.topo = s
}

// wildcardSchemaRouted reports whether t is routed by a schema rule with a wildcard schema-pattern
// (no table rule matches it).
func (r *Router) wildcardSchemaRouted(t vocab.TableName) bool {
	for _, c := range r.tableRules {
		if c.schema.MatchString(t.Schema) && c.table.MatchString(t.Name) {
			return false
		}
	}
	for _, c := range r.schemaRules {
		if c.schema.MatchString(t.Schema) {
			return isPattern(c.rule.SchemaPattern)
		}
	}
	return false
}

// ForTask returns the router of inst, a source of task.
func ForTask(task *config.Task, inst config.Instance) (*Router, error) {
	ba, rules := task.Rules(inst)
	return NewRouter(ba, rules)
}
