package syncer

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

// The tracked schema of a table, as binlog-schema list|update|delete (DM's operate-schema) read and
// change it. The tracker keeps a table's columns by binlog position (schemaVersion), saved with the
// checkpoint; a subtask resumes at the checkpoint's Global position, so that is the point these
// functions read and write at. They run while the subtask is not running (its worker makes sure), so
// the checkpoint they change is the one the next run loads.

// ErrNoCheckpoint means the subtask has not written a checkpoint yet: there is no tracked schema to
// read or change (the first start reads the upstream's tables).
var ErrNoCheckpoint = errors.New("the subtask has no checkpoint yet: its tracked schemas are read from the upstream when it first starts")

// TrackedSchema is a table's tracked columns at a subtask's resume position.
type TrackedSchema struct {
	Table vocab.TableName
	At    vocab.Position // the checkpoint's resume position
	Cols  []vocab.Column // nil: the table does not exist there, as the tracker says
}

// ReadTrackedSchema reads t's tracked columns at the source's checkpoint. ok is false when nothing is
// tracked for t.
func ReadTrackedSchema(ctx context.Context, store *meta.Store, t vocab.TableName) (TrackedSchema, bool, error) {
	cp, err := loadCheckpoint(ctx, store)
	if err != nil {
		return TrackedSchema{}, false, err
	}
	ts := TrackedSchema{Table: t, At: cp.Global}
	vs, ok, err := versionsOf(cp, t)
	if err != nil || !ok {
		return ts, false, err
	}
	v, ok := versionAt(vs, cp.Global)
	if !ok {
		return ts, false, nil
	}
	ts.Cols = v.Cols
	return ts, true, nil
}

// WriteTrackedSchema makes cols t's tracked columns from the source's checkpoint on: versions from
// there on are replaced (the binlog read from the checkpoint brings its DDLs again), earlier ones are
// kept (a re-read of earlier events still needs them). The change commits in one downstream
// transaction that checks the binding epoch, so a worker the source has moved away from cannot write
// it.
func WriteTrackedSchema(ctx context.Context, db *sql.DB, store *meta.Store, t vocab.TableName, cols []vocab.Column) (TrackedSchema, error) {
	if len(cols) == 0 {
		return TrackedSchema{}, fmt.Errorf("a tracked schema of %s needs at least one column", t)
	}
	cp, err := loadCheckpoint(ctx, store)
	if err != nil {
		return TrackedSchema{}, err
	}
	vs, _, err := versionsOf(cp, t)
	if err != nil {
		return TrackedSchema{}, err
	}
	vs = replaceFrom(vs, cp.Global, cols)
	js, err := json.Marshal(vs)
	if err != nil {
		return TrackedSchema{}, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return TrackedSchema{}, err
	}
	defer tx.Rollback()
	if err := store.CheckEpoch(ctx, tx, true); err != nil {
		return TrackedSchema{}, err
	}
	if err := store.Write(ctx, tx, meta.CheckpointUpdate{Schemas: map[vocab.TableName]string{t: string(js)}}); err != nil {
		return TrackedSchema{}, err
	}
	if err := tx.Commit(); err != nil {
		return TrackedSchema{}, fmt.Errorf("write tracked schema of %s: %w", t, err)
	}
	return TrackedSchema{Table: t, At: cp.Global, Cols: cols}, nil
}

// replaceFrom drops the versions that start at or after at and adds cols from at on.
func replaceFrom(vs []schemaVersion, at vocab.Position, cols []vocab.Column) []schemaVersion {
	out := make([]schemaVersion, 0, len(vs)+1)
	for _, v := range vs {
		if !v.From.IsZero() && v.From.Compare(at) >= 0 {
			continue
		}
		out = append(out, v)
	}
	return append(out, schemaVersion{From: at, Cols: cols})
}

// versionAt is the version a read resuming at pos starts with: as schemaTracker.existsAt, the last
// one from pos or before (or from the zero position, a first start's).
func versionAt(vs []schemaVersion, pos vocab.Position) (schemaVersion, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].From.IsZero() || vs[i].From.Compare(pos) <= 0 {
			return vs[i], true
		}
	}
	return schemaVersion{}, false
}

func loadCheckpoint(ctx context.Context, store *meta.Store) (meta.Checkpoint, error) {
	cp, err := store.Load(ctx)
	if dbutil.IsNoSuchTable(err) {
		return cp, ErrNoCheckpoint
	}
	if err != nil {
		return cp, err
	}
	if cp.Global.IsZero() {
		return cp, ErrNoCheckpoint
	}
	return cp, nil
}

// versionsOf finds t's versions in the checkpoint.
func versionsOf(cp meta.Checkpoint, t vocab.TableName) ([]schemaVersion, bool, error) {
	js, ok := cp.Schemas[t]
	if !ok {
		return nil, false, nil
	}
	var vs []schemaVersion
	if err := json.Unmarshal([]byte(js), &vs); err != nil {
		return nil, false, fmt.Errorf("tracked schema of %s: %w", t, err)
	}
	return vs, true, nil
}

// CreateTableSQL writes tracked columns as a CREATE TABLE statement (what binlog-schema list shows
// and binlog-schema update reads back). The tracker keeps what decoding rows needs (names, types,
// which are generated or unsigned), not keys or defaults; a generated column's expression is not
// kept, so it is written as a placeholder that reads back as generated.
func CreateTableSQL(t vocab.TableName, cols []vocab.Column) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE " + t.String() + " (\n")
	for i, c := range cols {
		typ := c.Type
		if typ == "" {
			typ = "longblob /* type not tracked */"
			if c.Unsigned {
				typ = "bigint unsigned /* type not tracked */"
			}
		}
		b.WriteString("  " + vocab.Quote(c.Name) + " " + typ)
		if c.Generated {
			b.WriteString(" AS (NULL) VIRTUAL /* generated: expression not tracked */")
		}
		if i < len(cols)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(") /* tracked by Tributary: the columns rows are decoded with, without keys or defaults */")
	return b.String()
}
