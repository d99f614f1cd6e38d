package loader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// LoadTarget is where a load writes one target: under Hidden until the cut-over renames it into
// place, or in place (Hidden "") when the target existed before the load.
type LoadTarget struct {
	Target vocab.TableName
	Hidden string
}

// LoadState is what the load header of one source of a task records.
type LoadState struct {
	State   string // loading, loaded (waiting for the cut-over) or switched (handed over to the sync unit)
	Targets []LoadTarget
}

// Switched reports whether the load is over: the sync unit's checkpoint is written and a start does
// not load again.
func (s LoadState) Switched() bool { return s.State == stateSwitched }

// Loads reads the load header of every source of a task from the task's checkpoint table, by source.
// A task without a checkpoint table (or meta schema) has no load: the result is empty.
func Loads(ctx context.Context, down *sql.DB, metaSchema, task string) (map[string]LoadState, error) {
	heads, err := taskHeaders(ctx, down, metaSchema, task)
	if err != nil {
		return nil, err
	}
	out := make(map[string]LoadState, len(heads))
	for src, h := range heads {
		st := LoadState{State: h.State}
		for _, m := range h.Targets {
			st.Targets = append(st.Targets, LoadTarget{Target: m.Target, Hidden: m.Hidden})
		}
		out[src] = st
	}
	return out, nil
}

// DropHidden drops the tables that the task's loads fill under a hidden name (start-task
// --remove-meta, before the meta tables go, so that a new load starts clean). Only a table that a
// source's load header of the task names as a hidden table, in its target's schema, whose name starts
// with HiddenPrefix, and that carries the mark of that load (or, named by a header of an older
// version, no mark), is dropped. When a table a header names is not the load's, nothing is dropped. A
// target already renamed into place is not: its hidden name no longer exists. It returns the tables it
// dropped.
func DropHidden(ctx context.Context, down *sql.DB, metaSchema, task string) ([]vocab.TableName, error) {
	heads, err := taskHeaders(ctx, down, metaSchema, task)
	if err != nil {
		return nil, err
	}
	set := map[vocab.TableName]vocab.TableName{} // hidden table: its target
	for _, h := range heads {
		for _, m := range h.Targets {
			if m.Hidden == "" || !strings.HasPrefix(m.Hidden, HiddenPrefix) || m.Target.Schema == "" {
				continue
			}
			set[m.dest()] = m.Target
		}
	}
	hidden := make([]vocab.TableName, 0, len(set))
	for t := range set {
		hidden = append(hidden, t)
	}
	vocab.SortTables(hidden)
	var drop []vocab.TableName
	var errs []error
	for _, t := range hidden {
		ht, err := inspectHidden(ctx, down, task, t, heads)
		switch {
		case err != nil:
			return nil, err
		case ht.owner == hiddenOurs:
			drop = append(drop, t)
		case ht.owner != hiddenAbsent:
			errs = append(errs, refusal(task, set[t], t, ht, "start-task --remove-meta again"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nothing dropped, and the task's meta is kept: %w", err)
	}
	var dropped []vocab.TableName
	for _, t := range drop {
		if _, err := down.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.String()); err != nil {
			return dropped, fmt.Errorf("drop %s, a table of an earlier load of task %s: %w", t, task, err)
		}
		dropped = append(dropped, t)
	}
	return dropped, nil
}
