// What the sync unit finds at its start: the tables it replicates, their shard groups, the downstream
// tables it creates, and the operations finished before a restart.

package syncer

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

// listTables lists the upstream's base tables the task replicates. information_schema.TABLES is not
// read in one snapshot: a RENAME that swaps two tables while it is read can hide both names, so the
// list is read until two reads agree.
func (s *Syncer) listTables(ctx context.Context) ([]vocab.TableName, error) {
	var prev []vocab.TableName
	for attempt := 0; ; attempt++ {
		tables, err := s.listTablesOnce(ctx)
		if err != nil {
			return nil, err
		}
		if (attempt > 0 && slices.Equal(tables, prev)) || attempt == 9 {
			return tables, nil
		}
		prev = tables
	}
}

func (s *Syncer) listTablesOnce(ctx context.Context) ([]vocab.TableName, error) {
	rows, err := s.upstream.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
	if err != nil {
		return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
	}
	defer rows.Close()
	var tables []vocab.TableName
	for rows.Next() {
		var t vocab.TableName
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
		}
		if !s.cfg.Router.Skip(t) {
			tables = append(tables, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables of source %s: %w", s.cfg.Source, err)
	}
	return tables, nil
}

// tablesAtResume is the set of replicated tables that existed at the resume position, as the tracked
// schemas say. A tracked table that did not exist there is left out even if it exists now: its
// CREATE TABLE is ahead in the binlog.
func (s *Syncer) tablesAtResume() []vocab.TableName {
	var out []vocab.TableName
	for t := range s.rows.schemas.tables {
		if s.rows.schemas.existsAt(t, s.ckpt.Global) && !s.cfg.Router.Skip(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (s *Syncer) masterPosition(ctx context.Context) (vocab.Position, error) {
	pos, _, err := dbutil.SourcePosition(ctx, s.upstream)
	if err != nil {
		return vocab.Position{}, fmt.Errorf("read binlog position of source %s (is log_bin on?): %w", s.cfg.Source, err)
	}
	return pos, nil
}

// discover adds every upstream shard table to its target's group and creates missing downstream
// tables from the upstream's definition. On a task's first start the tables are the upstream's
// current ones. On a restart they are the tables that existed at the resume position, as the tracked
// schemas say: the binlog read from there brings every later CREATE, DROP and RENAME, while the
// upstream's current tables may already be past them (a table an online schema change tool has just
// swapped, one dropped since) and a group built from those would miss a member or count one twice.
func (s *Syncer) discover(ctx context.Context) error {
	var tables []vocab.TableName
	if !s.fresh && len(s.rows.schemas.tables) > 0 {
		tables = s.tablesAtResume()
	} else {
		// A first start, or a checkpoint written before tables were tracked: the upstream's tables.
		var err error
		if tables, err = s.listTables(ctx); err != nil {
			return err
		}
	}
	created := map[vocab.TableName]bool{}
	for _, t := range tables {
		if err := s.rows.schemas.initFromUpstream(ctx, s.upstream, t); err != nil {
			return err
		}
		target := s.cfg.Router.Route(t)
		if s.cfg.Router.Sharded(t) {
			if err := s.ddl.shard.group(target).AddTable(t, s.ckpt.Resolved[t]); err != nil {
				return err
			}
		}
		if created[target] {
			continue
		}
		created[target] = true
		if s.fresh {
			if err := s.checkExisting(ctx, t, target); err != nil {
				return err
			}
		}
		var name, create string
		if err := s.upstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.String()).Scan(&name, &create); err != nil {
			if !s.fresh && dbutil.IsNoSuchTable(err) {
				created[target] = false // gone upstream since the resume position: another member may say
				continue
			}
			return fmt.Errorf("read definition of %s on source %s: %w", t, s.cfg.Source, err)
		}
		stmt, err := ddl.TargetDefinition(create, t, target, s.cfg.Router.Route)
		if err != nil {
			return fmt.Errorf("definition of %s on source %s: %w", t, s.cfg.Source, err)
		}
		// Run as they are (a definition the parser cannot read is the server's own text): without a
		// marker, the executor reads nothing off them.
		ddls := []ddl.Statement{{SQL: "CREATE DATABASE IF NOT EXISTS " + vocab.TableName{Schema: target.Schema}.String()}, {SQL: stmt}}
		if err := s.exec.ExecDDL(ctx, ddls, nil, meta.CheckpointUpdate{}); err != nil {
			return err
		}
	}
	return nil
}

// checkExisting compares a downstream table that exists before the task's first start with the
// upstream shard routed to it. A different schema is reported with both definitions; the downstream
// table is never dropped or altered by the tool.
func (s *Syncer) checkExisting(ctx context.Context, up, target vocab.TableName) error {
	down, err := signature(ctx, s.cfg.Downstream, target)
	if err != nil || len(down) == 0 {
		return err // missing: it is created
	}
	upCols, err := signature(ctx, s.upstream, up)
	if err != nil {
		return err
	}
	if slices.Equal(down, upCols) {
		return nil
	}
	var name, upDef, downDef string
	_ = s.upstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+up.String()).Scan(&name, &upDef)
	_ = s.cfg.Downstream.QueryRowContext(ctx, "SHOW CREATE TABLE "+target.String()).Scan(&name, &downDef)
	return fmt.Errorf("source %s: downstream table %s already exists with a schema that does not match upstream %s; it is left untouched.\ndownstream: %s\nupstream:   %s",
		s.cfg.Source, target, up, downDef, upDef)
}

// signature is a table's columns as "name type", lower case, for comparing definitions.
func signature(ctx context.Context, db *sql.DB, t vocab.TableName) ([]string, error) {
	defs, err := tableColumns(ctx, db, t)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = strings.ToLower(d.name) + " " + dbutil.ComparableType(d.typ)
	}
	return out, nil
}

// recoverOperations finishes operations whose effect the downstream checkpoint already shows (the
// worker stopped between its checkpoint and its done).
func (s *Syncer) recoverOperations(ctx context.Context) error {
	ops, err := s.cfg.Agent.Operations(ctx)
	if err != nil {
		return fmt.Errorf("list operations of source %s: %w", s.cfg.Source, err)
	}
	for _, op := range ops {
		for target, ddls := range s.ckpt.ResolvedDDLs {
			if target.String() != op.Target || !slices.Equal(ddls, op.DDLs) {
				continue
			}
			if err := finishOperation(ctx, s.cfg.Agent, op); err != nil {
				return err
			}
			s.log.Info("finished an operation applied before a restart", zap.String("lock", op.LockID()))
		}
	}
	return nil
}
