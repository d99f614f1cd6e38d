package loader

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/meta"
)

// LoadTarget is where a load writes one target: under Hidden until the cut-over renames it into
// place, or in place (Hidden "") when the target existed before the load.
type LoadTarget struct {
	Target TableName
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
	heads, err := meta.NewStore(down, metaSchema, task, "").LoadHeaders(ctx)
	var me *mysql.MySQLError
	// 1146 no such table, 1049 no such database; 1054: a checkpoint table of the layout before
	// id_hash, which no load has written (a load's Store.Init migrates it first).
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049 || me.Number == 1054) {
		return map[string]LoadState{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]LoadState, len(heads))
	for src, r := range heads {
		var h header
		if err := json.Unmarshal([]byte(r.Data), &h); err != nil {
			return nil, fmt.Errorf("load state of source %s of task %s: %w", src, task, err)
		}
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
// source's load header of the task names as a hidden table, in its target's schema, and whose name
// starts with HiddenPrefix, is dropped; nothing else is touched. A target already renamed into place
// is not: its hidden name no longer exists. It returns the tables it dropped.
func DropHidden(ctx context.Context, down *sql.DB, metaSchema, task string) ([]TableName, error) {
	loads, err := Loads(ctx, down, metaSchema, task)
	if err != nil {
		return nil, err
	}
	set := map[TableName]bool{}
	for _, st := range loads {
		for _, t := range st.Targets {
			if t.Hidden == "" || !strings.HasPrefix(t.Hidden, HiddenPrefix) || t.Target.Schema == "" {
				continue
			}
			set[TableName{Schema: t.Target.Schema, Name: t.Hidden}] = true
		}
	}
	hidden := make([]TableName, 0, len(set))
	for t := range set {
		hidden = append(hidden, t)
	}
	sort.Slice(hidden, func(i, j int) bool { return hidden[i].Less(hidden[j]) })
	var dropped []TableName
	for _, t := range hidden {
		exists, err := tableExists(ctx, down, t)
		if err != nil {
			return dropped, err
		}
		if !exists {
			continue
		}
		if _, err := down.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.String()); err != nil {
			return dropped, fmt.Errorf("drop %s, a table of an earlier load of task %s: %w", t, task, err)
		}
		dropped = append(dropped, t)
	}
	return dropped, nil
}
