package syncer

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/vocab"
)

// schemaVersion is a table's column list from a binlog position on.
type schemaVersion struct {
	From vocab.Position `json:"from"`
	Cols []vocab.Column `json:"cols"` // nil: the table does not exist from here on
}

// schemaTracker keeps, per upstream table, its columns by binlog position: their names for binlogs
// without them, and which are generated or unsigned, which no binlog says reliably. Versions are kept
// back to the resume position, because a re-sync or a restart reads DML written before a later DDL
// again.
type schemaTracker struct {
	tables map[vocab.TableName][]schemaVersion
	dirty  map[vocab.TableName]bool
}

func newSchemaTracker() *schemaTracker {
	return &schemaTracker{tables: map[vocab.TableName][]schemaVersion{}, dirty: map[vocab.TableName]bool{}}
}

// at returns the columns of t for an event ending at pos.
func (s *schemaTracker) at(t vocab.TableName, pos vocab.Position) ([]vocab.Column, bool) {
	vs := s.tables[t]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].From.Compare(pos) < 0 {
			return vs[i].Cols, vs[i].Cols != nil
		}
	}
	return nil, false
}

// existsAt reports whether t exists once the event group ending at pos is applied (a resume position):
// versions from pos on apply, as do those from the zero position (the tables of a first start).
func (s *schemaTracker) existsAt(t vocab.TableName, pos vocab.Position) bool {
	vs := s.tables[t]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].From.IsZero() || vs[i].From.Compare(pos) <= 0 {
			return vs[i].Cols != nil
		}
	}
	return false
}

// set records t's columns from pos on; setting the same version again (a re-read DDL) changes nothing.
func (s *schemaTracker) set(t vocab.TableName, pos vocab.Position, cols []vocab.Column) {
	vs := s.tables[t]
	for _, v := range vs {
		if v.From.Compare(pos) == 0 {
			return
		}
	}
	vs = append(vs, schemaVersion{From: pos, Cols: cols})
	for i := len(vs) - 1; i > 0 && vs[i].From.Compare(vs[i-1].From) < 0; i-- {
		vs[i], vs[i-1] = vs[i-1], vs[i]
	}
	s.tables[t], s.dirty[t] = vs, true
}

// apply tracks a DDL event (upstream names, parsed) that ends at pos.
func (s *schemaTracker) apply(p *ddl.Parsed, schema string, pos vocab.Position) error {
	changes, err := p.TrackColumns(schema, func(t vocab.TableName) ([]vocab.Column, bool) { return s.at(t, pos) })
	if err != nil {
		return err
	}
	for t, cols := range changes {
		s.set(t, pos, cols)
	}
	return nil
}

// tablesIn lists the tables of schema that exist at pos.
func (s *schemaTracker) tablesIn(schema string, pos vocab.Position) []vocab.TableName {
	var out []vocab.TableName
	for t := range s.tables {
		if strings.EqualFold(t.Schema, schema) {
			if _, ok := s.at(t, pos); ok {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// dropSchema records that every table of schema is gone from pos on (DROP DATABASE).
func (s *schemaTracker) dropSchema(schema string, pos vocab.Position) {
	for _, t := range s.tablesIn(schema, pos) {
		s.set(t, pos, nil)
	}
}

// prune drops versions no read from resume or later can need.
func (s *schemaTracker) prune(resume vocab.Position) {
	for t, vs := range s.tables {
		keep := 0
		for i := range vs {
			if vs[i].From.Compare(resume) < 0 {
				keep = i // the newest version before resume still applies at resume
			}
		}
		if keep > 0 {
			s.tables[t], s.dirty[t] = vs[keep:], true
		}
	}
}

// takeDirty returns the changed tables' versions as JSON, for the checkpoint.
func (s *schemaTracker) takeDirty() map[vocab.TableName]string {
	if len(s.dirty) == 0 {
		return nil
	}
	out := map[vocab.TableName]string{}
	for t := range s.dirty {
		b, _ := json.Marshal(s.tables[t])
		out[t] = string(b)
	}
	s.dirty = map[vocab.TableName]bool{}
	return out
}

// load restores versions saved in the checkpoint.
func (s *schemaTracker) load(saved map[vocab.TableName]string) error {
	for t, js := range saved {
		var vs []schemaVersion
		if err := json.Unmarshal([]byte(js), &vs); err != nil {
			return fmt.Errorf("tracked schema of %s: %w", t, err)
		}
		s.tables[t] = vs
	}
	return nil
}

// initFromUpstream records the upstream's current columns of t for a task's first start (the binlog
// is read from the current position, so the current schema is the one at the start).
func (s *schemaTracker) initFromUpstream(ctx context.Context, db *sql.DB, t vocab.TableName) error {
	if _, ok := s.tables[t]; ok {
		return nil
	}
	cols, err := dbutil.Columns(ctx, db, t)
	if err != nil {
		return err
	}
	s.set(t, vocab.Position{}, cols)
	return nil
}

// columnDef is a column as information_schema describes it.
type columnDef struct{ name, typ string }

// tableColumns lists a table's columns in order (none if the table does not exist).
func tableColumns(ctx context.Context, db *sql.DB, t vocab.TableName) ([]columnDef, error) {
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", t, err)
	}
	defer rows.Close()
	var out []columnDef
	for rows.Next() {
		var c columnDef
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
