package worker

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/meta"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/syncer"
	"github.com/tributary-db/tributary/vocab"
)

// OperateSchema answers dmctl binlog-schema list|update|delete for this worker's subtask of a task.
// The tracked schema lives in the checkpoint, versioned by binlog position; list reads it at the
// resume position at any time, update and delete change it there, and only while the subtask does not
// run (paused by pause-task, or waiting on an error a retry cannot fix), as DM: a running syncer
// holds its own copy and would write over it. The server's schemaOp lock keeps a subtask from starting
// while a change is written; the next run loads the changed schema.
func (s *Server) OperateSchema(ctx context.Context, req *pb.OperateWorkerSchemaRequest) (*pb.CommonWorkerResponse, error) {
	fail := func(format string, args ...any) (*pb.CommonWorkerResponse, error) {
		return &pb.CommonWorkerResponse{Source: req.Source, Worker: s.cfg.Name, Msg: fmt.Sprintf(format, args...)}, nil
	}
	t := vocab.TableName{Schema: req.Database, Name: req.Table}
	if t.Schema == "" || t.Name == "" {
		return fail("binlog-schema needs the upstream database and table")
	}
	if req.Op == pb.SchemaOp_SetSchema || req.Op == pb.SchemaOp_RemoveSchema {
		s.schemaOp.Lock()
		defer s.schemaOp.Unlock()
	}
	s.mu.Lock()
	sub := s.subtasks[req.Task]
	s.mu.Unlock()
	if sub == nil {
		return fail("task %s has no subtask on worker %s (is source %s bound here?)", req.Task, s.cfg.Name, req.Source)
	}
	sp := sub.spec
	if req.Source != "" && req.Source != sp.inst.SourceID {
		return fail("worker %s runs source %s of task %s, not %s", s.cfg.Name, sp.inst.SourceID, req.Task, req.Source)
	}
	if req.Op == pb.SchemaOp_SetSchema || req.Op == pb.SchemaOp_RemoveSchema {
		if stage, running := sub.running(); running {
			return fail("task %s on source %s is %s: binlog-schema %s needs the subtask paused (pause-task %s -s %s first, then resume-task after it)",
				req.Task, sp.inst.SourceID, stage, opWord(req.Op), req.Task, sp.inst.SourceID)
		}
	}
	ba, rules := sp.task.Rules(sp.inst)
	r, err := router.NewRouter(ba, rules)
	if err != nil {
		return fail("task %s: %v", req.Task, err)
	}
	r.SetTopology(sp.topo)
	if r.Skip(t) {
		return fail("table %s is not replicated by task %s from source %s (its block-allow list or filters leave it out)", t, req.Task, sp.inst.SourceID)
	}
	down, err := dbutil.OpenDB(sp.task.TargetDatabase)
	if err != nil {
		return fail("downstream: %v", err)
	}
	defer down.Close()
	store := meta.NewStore(down, sp.task.MetaSchema, sp.task.Name, sp.inst.SourceID)
	store.SetEpoch(sp.epoch)

	if req.Op == pb.SchemaOp_GetSchema {
		ts, ok, err := syncer.ReadTrackedSchema(ctx, store, t)
		switch {
		case err != nil:
			return fail("task %s, source %s: %v", req.Task, sp.inst.SourceID, err)
		case !ok:
			return fail("task %s on source %s tracks no schema for %s at its checkpoint %s (a table is tracked from the subtask's first start, or from its CREATE TABLE in the binlog)",
				req.Task, sp.inst.SourceID, t, ts.At.BinlogPos())
		case ts.Cols == nil:
			return fail("task %s on source %s: %s does not exist at the checkpoint %s, as the tracked schema says (it was dropped or renamed)",
				req.Task, sp.inst.SourceID, t, ts.At.BinlogPos())
		}
		return &pb.CommonWorkerResponse{Result: true, Source: sp.inst.SourceID, Worker: s.cfg.Name, Msg: syncer.CreateTableSQL(t, ts.Cols)}, nil
	}

	var cols []vocab.Column
	from := ""
	switch {
	case req.Op == pb.SchemaOp_RemoveSchema, req.FromSource:
		// delete: the tracker reads the upstream again, as a first start does.
		if cols, err = upstreamColumns(ctx, sp.source, t); err != nil {
			return fail("%v", err)
		}
		from = "the upstream's definition"
	case req.FromTarget:
		target := r.Route(t)
		if cols, err = dbutil.Columns(ctx, down, target); err != nil {
			return fail("read %s downstream: %v", target, err)
		}
		if len(cols) == 0 {
			return fail("the target table %s of %s does not exist downstream", target, t)
		}
		from = "the target table " + target.String() + "'s definition"
	case req.Schema != "":
		if cols, err = ddl.CreateTableColumns(req.Schema); err != nil {
			return fail("the schema file of binlog-schema update: %v", err)
		}
		from = "the given CREATE TABLE"
	default:
		return fail("binlog-schema update needs a schema file, --from-source or --from-target")
	}
	ts, err := syncer.WriteTrackedSchema(ctx, down, store, t, cols)
	if err != nil {
		if errors.Is(err, meta.ErrFenced) {
			return fail("source %s moved to another worker meanwhile: %v", sp.inst.SourceID, err)
		}
		return fail("task %s, source %s: %v", req.Task, sp.inst.SourceID, err)
	}
	sub.log.Info("tracked schema changed by binlog-schema", zap.String("op", opWord(req.Op)), zap.Stringer("table", t),
		zap.String("from", from), zap.Stringer("checkpoint", ts.At), zap.Strings("columns", vocab.ColumnNames(cols)))
	msg := fmt.Sprintf("the tracked schema of %s is now %s (%d columns) from the checkpoint %s on, written to the checkpoint; resume-task %s to go on",
		t, from, len(cols), ts.At.BinlogPos(), req.Task)
	if req.Sync {
		// DM's --sync sends the schema to an optimistic shard group; a pessimistic lock keeps no
		// table schemas, so there is nothing to send.
		msg += " (--sync: nothing to send in shard-mode pessimistic)"
	}
	return &pb.CommonWorkerResponse{Result: true, Source: sp.inst.SourceID, Worker: s.cfg.Name, Msg: msg}, nil
}

// upstreamColumns reads t's current columns on the source.
func upstreamColumns(ctx context.Context, src *config.Source, t vocab.TableName) ([]vocab.Column, error) {
	db, err := dbutil.OpenDB(src.From)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.SourceID, err)
	}
	defer db.Close()
	cols, err := dbutil.Columns(ctx, db, t)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.SourceID, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s does not exist on source %s now: give its CREATE TABLE in a file instead", t, src.SourceID)
	}
	return cols, nil
}

func opWord(op pb.SchemaOp) string {
	switch op {
	case pb.SchemaOp_GetSchema:
		return "list"
	case pb.SchemaOp_SetSchema:
		return "update"
	case pb.SchemaOp_RemoveSchema:
		return "delete"
	}
	return op.String()
}
