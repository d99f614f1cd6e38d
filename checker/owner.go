package checker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
)

// ItemOneTaskPerTarget: no other task of the cluster writes a table this task writes (DM's "one task
// per sharding group"): two tasks would each lock, load and cut over the target as if it were theirs
// alone. It cannot be ignored. Not a DM item name (DM refuses it in its own way).
const ItemOneTaskPerTarget = "one_task_per_target"

// targetLister computes the targets of tasks, listing each source's tables once.
type targetLister struct {
	sources map[string]*config.Source
	tables  map[string][]vocab.TableName // by source ID
	errs    map[string]error
}

// list returns the tables of a source (cached).
func (l *targetLister) list(ctx context.Context, id string) ([]vocab.TableName, error) {
	if ts, ok := l.tables[id]; ok || l.errs[id] != nil {
		return ts, l.errs[id]
	}
	ts, err := func() ([]vocab.TableName, error) {
		src, ok := l.sources[id]
		if !ok {
			return nil, fmt.Errorf("source %s is not created", id)
		}
		db, err := dbutil.OpenDB(src.From)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		es, err := dbutil.TableEstimates(ctx, db)
		if err != nil {
			return nil, err
		}
		out := make([]vocab.TableName, len(es))
		for i, e := range es {
			out[i] = e.Table
		}
		return out, nil
	}()
	l.tables[id], l.errs[id] = ts, err
	return ts, err
}

// targets returns the tables task writes, each with the sources whose tables route there, and the
// instances whose source could not be listed (with why).
func (l *targetLister) targets(ctx context.Context, task *config.Task) (map[vocab.TableName][]string, map[int]error) {
	out := map[vocab.TableName][]string{}
	failed := map[int]error{}
	for i, inst := range task.MySQLInstances {
		ba, rules := task.Rules(inst)
		rt, err := router.NewRouter(ba, rules)
		if err != nil {
			failed[i] = err
			continue
		}
		tables, err := l.list(ctx, inst.SourceID)
		if err != nil {
			failed[i] = err
			continue
		}
		for _, t := range tables {
			if rt.Skip(t) {
				continue
			}
			target := rt.Route(t)
			if !slices.Contains(out[target], inst.SourceID) {
				out[target] = append(out[target], inst.SourceID)
			}
		}
	}
	return out, failed
}

// sameDownstream reports whether two tasks write into one server (as their target-database names it).
func sameDownstream(a, b config.Database) bool {
	return strings.EqualFold(a.Host, b.Host) && a.Port == b.Port
}

// OtherTasks checks that no task of others (the cluster's other stored tasks, in any stage) writes a
// table that task writes on the same downstream: each task's targets are its sources' tables (of
// sources, the cluster's sources by ID) routed by its rules. When a source of another task cannot be
// listed, that task's route rules naming one of this task's targets are a conflict too; failing that,
// a warning says what could not be compared. A task is never compared with itself (start-task of a
// stopped task). The results are errors of ItemOneTaskPerTarget, or warnings.
func OtherTasks(ctx context.Context, task *config.Task, others []*config.Task, sources map[string]*config.Source) []Failure {
	l := &targetLister{sources: sources, tables: map[string][]vocab.TableName{}, errs: map[string]error{}}
	var out []Failure
	var mine map[vocab.TableName][]string
	for _, other := range others {
		if other.Name == task.Name || !sameDownstream(task.TargetDatabase, other.TargetDatabase) {
			continue
		}
		if mine == nil {
			var failed map[int]error
			mine, failed = l.targets(ctx, task)
			for i, err := range failed {
				// Its own sources are checked by ItemConnection; without their tables nothing is compared.
				out = append(out, Failure{Item: ItemOneTaskPerTarget, Source: task.MySQLInstances[i].SourceID, Level: Warning,
					Message: fmt.Sprintf("cannot list the tables of the source to compare task %s's targets with the other tasks': %v", task.Name, err)})
			}
		}
		theirs, failed := l.targets(ctx, other)
		for _, target := range slices.SortedFunc(maps.Keys(mine), func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) }) {
			if srcs, ok := theirs[target]; ok {
				out = append(out, Failure{Item: ItemOneTaskPerTarget, Message: fmt.Sprintf(
					"target %s: task %s writes it (from %s) and so does task %s (from %s); two tasks never write one target (DM: one task per sharding group): "+
						"stop-task %s first, or route task %s's tables to other targets",
					target, task.Name, strings.Join(mine[target], ", "), other.Name, strings.Join(srcs, ", "), other.Name, task.Name)})
				continue
			}
			for _, i := range slices.Sorted(maps.Keys(failed)) {
				inst, err := other.MySQLInstances[i], failed[i]
				_, rules := other.Rules(inst)
				if slices.ContainsFunc(rules, func(r config.RouteRule) bool {
					return r.TargetSchema == target.Schema && r.TargetTable == target.Name
				}) {
					out = append(out, Failure{Item: ItemOneTaskPerTarget, Message: fmt.Sprintf(
						"target %s: task %s writes it (from %s), and a route rule of task %s on source %s sends tables there (its tables cannot be listed: %v); "+
							"two tasks never write one target (DM: one task per sharding group): stop-task %s first, or route task %s's tables to other targets",
						target, task.Name, strings.Join(mine[target], ", "), other.Name, inst.SourceID, err, other.Name, task.Name)})
					break
				}
			}
		}
		for i, err := range failed {
			out = append(out, Failure{Item: ItemOneTaskPerTarget, Source: other.MySQLInstances[i].SourceID, Level: Warning, Message: fmt.Sprintf(
				"cannot list the tables of source %s of task %s (%v): its targets there were compared by its route rules only", other.MySQLInstances[i].SourceID, other.Name, err)})
		}
	}
	return out
}
