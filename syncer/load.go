package syncer

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
	"go.uber.org/zap"
)

// cutoverDDL is the "DDL" of a load's cut-over lock: every source of the task puts it once it has
// loaded, the lock's owner renames every hidden table of the task into place, the others skip.
var cutoverDDL = []string{"RENAME TABLE (every table the task loaded, from its hidden name into place, in one statement)"}

// CutoverTarget is the lock target of a task's load cut-over (shown by shard-ddl-lock while sources
// wait for the others to load).
func CutoverTarget(metaSchema string) vocab.TableName {
	return vocab.TableName{Schema: metaSchema, Name: "load_cutover"}
}

// cutover is the load barrier on the pessimist lock of CutoverTarget.
type cutover struct {
	agent  *pessimist.Agent
	target string
}

func (c *cutover) Arrive(ctx context.Context) (bool, func(context.Context) error, error) {
	info, err := c.agent.PutInfo(ctx, c.target, cutoverDDL)
	if err != nil {
		return false, nil, err
	}
	op, err := c.agent.WaitOperation(ctx, info)
	if err != nil {
		return false, nil, err
	}
	return op.Exec, func(ctx context.Context) error { return c.agent.DoneOperationDeleteInfo(ctx, op, info) }, nil
}

// upstreamForLoad is the source's endpoint with the load's session: UTC (TIMESTAMP values as stored)
// and results in the bytes the columns hold (no conversion to the connection's charset).
func upstreamForLoad(d config.Database) config.Database {
	s := map[string]any{}
	for k, v := range d.Session {
		s[k] = v
	}
	s["time_zone"] = "+00:00"
	s["character_set_results"] = "binary"
	d.Session = s
	return d
}

// LoadParams is what a load needs from its subtask.
type LoadParams struct {
	Task, Source, MetaSchema string
	Upstream                 config.Database
	Down                     *sql.DB
	Router                   *router.Router
	Epoch                    int64
	Agent                    *pessimist.Agent
	EnableGTID               bool
	Dump                     config.DumpConfig
	Load                     config.LoadConfig
	Log                      *zap.Logger
	AfterChunk               func(vocab.TableName) error // tests
	OnUnit                   func(*loader.Unit)          // told the unit once it exists (query-status reads its progress)
}

// RunLoad loads a source and writes the sync unit's checkpoint at the snapshot (once the cut-over is
// through, in the transaction that marks the load switched).
func RunLoad(ctx context.Context, p LoadParams) error {
	up, err := dbutil.OpenDB(upstreamForLoad(p.Upstream))
	if err != nil {
		return err
	}
	defer up.Close()
	store := meta.NewStore(p.Down, p.MetaSchema, p.Task, p.Source)
	store.SetEpoch(p.Epoch)
	target := CutoverTarget(p.MetaSchema)
	unit := loader.New(loader.Config{
		Task: p.Task, Source: p.Source, Upstream: up, Downstream: p.Down, Store: store, Router: p.Router,
		Threads: p.Dump.Threads, Rows: p.Dump.Rows, ChunkBytes: int64(p.Dump.ChunkFileSizeMB) << 20, PoolSize: p.Load.PoolSize,
		OnDuplicate: p.Load.OnDuplicate, Barrier: &cutover{agent: p.Agent, target: target.String()}, Log: p.Log, AfterChunk: p.AfterChunk,
	})
	if p.OnUnit != nil {
		p.OnUnit(unit)
	}
	res, err := unit.Run(ctx)
	if err != nil {
		return err
	}
	if res.Switched {
		// A crash may have come between the hand-over and the cut-over's done: finish it (a full task
		// has no sync unit to do so).
		return finishCutover(ctx, p.Agent, target.String())
	}
	tracker := newSchemaTracker()
	for tb, cols := range res.Columns {
		tracker.set(tb, vocab.Position{}, cols)
	}
	upd := meta.CheckpointUpdate{Global: res.Pos, Tables: res.From, Schemas: tracker.takeDirty(), ResolvedTarget: &target, ResolvedDDLs: cutoverDDL}
	if p.EnableGTID {
		upd.GlobalGTID = res.GTID
	}
	return unit.Finish(ctx, res, upd)
}

// finishCutover marks done this source's cut-over operation if one is left.
func finishCutover(ctx context.Context, agent *pessimist.Agent, target string) error {
	ops, err := agent.Operations(ctx)
	if err != nil {
		return fmt.Errorf("list operations: %w", err)
	}
	for _, op := range ops {
		if op.Target != target {
			continue
		}
		if err := finishOperation(ctx, agent, op); err != nil {
			return err
		}
	}
	return nil
}

// finishOperation marks done an operation that took effect before a restart, deleting its info.
func finishOperation(ctx context.Context, agent *pessimist.Agent, op pessimist.Operation) error {
	info, _, err := agent.Info(ctx, op.Target)
	if err != nil {
		return err
	}
	return agent.DoneOperationDeleteInfo(ctx, op, info)
}
