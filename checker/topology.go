package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
)

// ItemShardGroups reports the shard groups that span sources: targets that tables of two or more
// sources of the task reach (router.Topology), with a warning for a group that some of the task's
// sources have no table of (its DDL lock waits for every source of the task, as DM's does).
const ItemShardGroups = "shard_groups"

// Topology lists the tables of every source of the task and finds where they meet downstream
// (router.NewTopology). The master stores it with the task at start-task, so that every worker
// decides whether a target is merged from the whole task, not from its own source's rules. A source
// that cannot be read is an error naming it: deciding without it could take a shard for a table of
// its own.
func Topology(ctx context.Context, task *config.Task, sources map[string]*config.Source) (*router.Topology, error) {
	var all []router.SourceTables
	for _, inst := range task.MySQLInstances {
		src, ok := sources[inst.SourceID]
		if !ok {
			return nil, fmt.Errorf("source %s of task %s is not created (dmctl operate-source create)", inst.SourceID, task.Name)
		}
		rt, err := router.ForTask(task, inst)
		if err != nil {
			return nil, fmt.Errorf("source %s of task %s: %w", inst.SourceID, task.Name, err)
		}
		tables, err := sourceTables(ctx, src, rt)
		if err != nil {
			return nil, fmt.Errorf("list the tables of source %s (task %s) to find its shard groups: %w", inst.SourceID, task.Name, err)
		}
		all = append(all, router.SourceTables{Source: inst.SourceID, Router: rt, Tables: tables})
	}
	return router.NewTopology(all), nil
}

func sourceTables(ctx context.Context, src *config.Source, rt *router.Router) ([]vocab.TableName, error) {
	db, err := dbutil.OpenDB(src.From)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	listed, err := listTables(ctx, db, rt)
	if err != nil {
		return nil, err
	}
	out := make([]vocab.TableName, len(listed))
	for i, t := range listed {
		out[i] = t.table
	}
	return out, nil
}

// checkTopology reports the shard groups across sources (information) and those that some of the
// task's sources take no part in (a warning: a DDL of the group waits for every source).
func checkTopology(r report, task *config.Task, tp *router.Topology) {
	all := task.SourceIDs()
	for _, target := range tp.Shards {
		srcs := tp.Sources[target.String()]
		r.info(ItemShardGroups, "", "%s is written by tables of sources %s: one shard group across them; its DDL is coordinated by a shard DDL lock, and one source's TRUNCATE, DROP TABLE or DROP DATABASE does not reach it",
			target, strings.Join(srcs, ", "))
		if missing := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(srcs, s) }); len(missing) > 0 {
			r.warn(ItemShardGroups, "", "%s is written by tables of sources %s but not of %s: a DDL of its group waits for every source of the task (as DM's pessimistic lock does) and would wait for %s until shard-ddl-lock unlock; run the sources that share it as a task of their own, or route it apart on each source",
				target, strings.Join(srcs, ", "), strings.Join(missing, ", "), strings.Join(missing, ", "))
		}
	}
}
