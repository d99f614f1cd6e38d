package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"go.uber.org/zap"

	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/syncer"
	"github.com/tributary-db/tributary/vocab"
)

// HandleError applies dmctl binlog skip|replace|revert to this worker's subtask of a task (binlog
// list is the master's: it reads etcd). Skip and replace name the event by -b, or default to the
// statement the subtask is paused on; they are stored in etcd, where the subtask reads them (on any
// worker the source moves to), and a subtask paused on that statement resumes at once.
func (s *Server) HandleError(ctx context.Context, req *pb.HandleWorkerErrorRequest) (*pb.CommonWorkerResponse, error) {
	s.mu.Lock()
	sub := s.subtasks[req.Task]
	var ops *syncer.Operators
	if sub != nil {
		ops = sub.ops
	}
	s.mu.Unlock()
	fail := func(format string, args ...any) (*pb.CommonWorkerResponse, error) {
		return &pb.CommonWorkerResponse{Msg: fmt.Sprintf(format, args...)}, nil
	}
	if sub == nil {
		return fail("task %s has no subtask on this worker", req.Task)
	}
	sub.mu.Lock()
	lastErr := sub.lastErr
	sub.mu.Unlock()
	at, lock, paused := pausedAt(lastErr)
	pos := at
	if req.BinlogPos != "" {
		p, err := vocab.ParseBinlogPos(req.BinlogPos)
		if err != nil {
			return fail("-b: %v", err)
		}
		if p != at {
			lock = false // another event than the one the subtask is paused on
		}
		pos = p
	} else if !paused && req.PausedOnly {
		return &pb.CommonWorkerResponse{Result: true, Msg: fmt.Sprintf("task %s on source %s is not paused on a statement: nothing to %s there", req.Task, req.Source, strings.ToLower(req.Op.String()))}, nil
	} else if !paused {
		return fail("task %s on source %s is not paused on a statement; give the event's position with -b FILE:POS", req.Task, req.Source)
	}
	op := syncer.Operator{Pos: pos, Lock: lock}
	switch req.Op {
	case pb.ErrorOp_Revert:
		ok, err := ops.Revert(ctx, pos)
		if err != nil {
			return fail("binlog revert at %s: %v", pos.BinlogPos(), err)
		}
		if !ok {
			return fail("no binlog skip or replace waits at %s for task %s on source %s", pos.BinlogPos(), req.Task, req.Source)
		}
		sub.log.Info("binlog operation reverted", zap.String("pos", pos.BinlogPos()))
		return &pb.CommonWorkerResponse{Result: true, Msg: "reverted the operation at " + pos.BinlogPos()}, nil
	case pb.ErrorOp_Skip:
		op.Op = "skip"
	case pb.ErrorOp_Replace:
		op.Op = "replace"
		sqls, err := splitStatements(req.Sqls)
		if err != nil {
			return fail("binlog replace: %v", err)
		}
		op.SQLs = sqls
	default:
		return fail("unsupported binlog operation %s", req.Op)
	}
	if err := ops.Add(ctx, op); err != nil {
		return fail("binlog %s at %s: %v", op.Op, pos.BinlogPos(), err)
	}
	sub.log.Warn("binlog operation added", zap.String("op", op.Op), zap.String("pos", pos.BinlogPos()), zap.Bool("lock", lock), zap.Strings("sqls", op.SQLs))
	msg := op.String()
	if paused && pos == at {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
		msg += "; the subtask resumes"
	} else {
		msg += "; it applies when the subtask reads that event"
	}
	return &pb.CommonWorkerResponse{Result: true, Msg: msg}, nil
}

// pausedAt is the event a subtask's error names, and whether the error is about a lock's DDLs this
// source ran as owner.
func pausedAt(err error) (pos vocab.Position, lock, ok bool) {
	pos, _, lock, ok = syncer.StoppedAt(err)
	return pos, lock, ok
}

// splitStatements splits the statements of binlog replace (each argument may hold several,
// separated by semicolons) with the parser, so a semicolon inside a string stays in it.
func splitStatements(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		stmts, _, err := parser.New().ParseSQL(a)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", a, err)
		}
		for _, st := range stmts {
			if q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(st.Text()), ";")); q != "" {
				out = append(out, q)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no statement given")
	}
	return out, nil
}

// processError is an error as query-status shows it (DM's fields).
func processError(err error) *pb.ProcessError {
	if sink.IsPermanent(err) {
		pe := &pb.ProcessError{ErrCode: 36067, ErrClass: "sync-unit", ErrScope: "downstream", ErrLevel: "high",
			Message:    "the subtask is paused on a statement a retry cannot fix; it waits for the user",
			RawCause:   err.Error(),
			Workaround: "fix the cause and run resume-task, or binlog skip / binlog replace the statement (see the error for the command)"}
		var rd *syncer.ReadError
		if errors.As(err, &rd) {
			pe.ErrScope, pe.Message = "upstream", "the subtask is paused: the source's binlog cannot be read from where it resumes, and a retry cannot fix that"
			pe.Workaround = "see the error for the ways out; then resume-task (or start-task --remove-meta with a new meta)"
			return pe
		}
		if _, scope, _, ok := syncer.StoppedAt(err); ok {
			pe.ErrScope = scope
		}
		return pe
	}
	return &pb.ProcessError{ErrCode: 36069, ErrClass: "sync-unit", ErrScope: "internal", ErrLevel: "high",
		Message: "the subtask stopped on an error and resumes automatically; resume-task retries at once", RawCause: err.Error()}
}
