package worker

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/shardgroup"
)

// ChangeKind is the kind of a row change.
type ChangeKind int

// Row change kinds.
const (
	Insert ChangeKind = iota
	Update
	Delete
)

// Change is one row change routed to its target.
type Change struct {
	Kind    ChangeKind
	Source  TableName // upstream table
	Target  TableName
	Columns []string
	Row     []any // new values (Insert, Update)
	Old     []any // old values (Update, Delete)
}

// Checkpoint is what the downstream holds for one source: the position to resume reading from, and
// per upstream table the position up to which its changes are applied.
type Checkpoint struct {
	Global     shardgroup.Position
	GlobalGTID string // the GTID set at Global (GTID mode)
	Tables     map[TableName]shardgroup.Position
	// Resolved is, per upstream shard table, the position of its last sharding DDL resolved downstream
	// (executed or skipped). It is kept apart from Tables: a table's DML before that DDL may still be
	// waiting to be re-read.
	Resolved map[TableName]shardgroup.Position
	// ResolvedDDLs, per target, the DDLs of the last lock this source applied (exec or skip), so a
	// restarted worker can finish an operation whose done it did not write.
	ResolvedDDLs map[TableName][]string
	// Schemas, per upstream table, the tracked column versions (JSON) for binlogs without names.
	Schemas map[TableName]string
}

// Sink writes changes to the downstream. Every transaction commits the rows together with the
// checkpoint rows of the events they came from, so a restart applies nothing twice.
type Sink struct {
	db          *sql.DB
	source      string
	markerTable string // quoted `meta`.`task_ddl_marker`
	ckptTable   string // quoted `meta`.`task_checkpoint`
	metaSchema  string
	keys        map[TableName][]string
	maxRows     int
	epoch       int64 // binding epoch fencing the checkpoint (0: no fencing)
}

// ErrFenced means a newer binding of the source owns its checkpoint: this worker's binding was taken
// away, and nothing it writes may commit.
var ErrFenced = errors.New("the source is bound to another worker now (checkpoint fenced by a newer binding epoch)")

// epochID is the checkpoint row holding the epoch (in binlog_pos) of the binding that owns the
// source's checkpoint. Table rows have JSON ids, so it cannot collide.
const epochID = "epoch"

// SetEpoch makes every transaction of this sink check that the source's checkpoint belongs to the
// binding of this epoch (Init claims it).
func (s *Sink) SetEpoch(epoch int64) { s.epoch = epoch }

// claimEpoch records this sink's epoch as the owner of the checkpoint unless a newer one did; it waits
// for the transactions of an older owner in flight (they hold the row in share mode).
func (s *Sink) claimEpoch(ctx context.Context) error {
	if s.epoch == 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO "+s.ckptTable+" (source, id, binlog_pos) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE binlog_pos = GREATEST(binlog_pos, VALUES(binlog_pos))",
		s.source, epochID, s.epoch); err != nil {
		return fmt.Errorf("claim checkpoint of %s: %w", s.source, err)
	}
	return s.checkEpoch(ctx, s.db, "")
}

type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// checkEpoch fails with ErrFenced when a newer binding owns the checkpoint. lock is appended to the
// read ("LOCK IN SHARE MODE" inside a transaction: the newer owner's claim waits for it to end, and
// it sees a claim committed before it).
func (s *Sink) checkEpoch(ctx context.Context, q queryer, lock string) error {
	if s.epoch == 0 {
		return nil
	}
	var owner int64
	if err := q.QueryRowContext(ctx, "SELECT binlog_pos FROM "+s.ckptTable+" WHERE source = ? AND id = ? "+lock, s.source, epochID).Scan(&owner); err != nil {
		return fmt.Errorf("read checkpoint owner of %s: %w", s.source, err)
	}
	if owner > s.epoch {
		return fmt.Errorf("source %s, binding epoch %d (checkpoint owned by epoch %d): %w", s.source, s.epoch, owner, ErrFenced)
	}
	return nil
}

// NewSink returns the sink of one source of a task.
func NewSink(db *sql.DB, metaSchema, task, source string) *Sink {
	return &Sink{
		db: db, source: source, metaSchema: metaSchema,
		ckptTable:   CheckpointTable(metaSchema, task).String(),
		markerTable: MarkerTable(metaSchema, task).String(),
		keys:        map[TableName][]string{}, maxRows: 256,
	}
}

// Init creates the meta schema and the checkpoint table if they do not exist.
func (s *Sink) Init(ctx context.Context) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + TableName{Schema: s.metaSchema}.String(),
		"CREATE TABLE IF NOT EXISTS " + s.ckptTable + ` (
			source VARCHAR(128) NOT NULL,
			id VARCHAR(700) NOT NULL COMMENT 'upstream table (DML applied), resolved:<table> (last sharding DDL resolved), ddl:<target> (DDLs of the last lock), schema:<table> (tracked columns), empty (where to resume)',
			binlog_name VARCHAR(255) NOT NULL DEFAULT '',
			binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
			binlog_gtid TEXT NULL,
			ddls TEXT NULL,
			updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
			PRIMARY KEY (source, id))`,
		"CREATE TABLE IF NOT EXISTS " + s.markerTable + ` (
			lock_id VARCHAR(700) NOT NULL COMMENT 'the shard DDL lock (or source:<id> for DDL of unsharded tables)',
			ddl_hash CHAR(64) NOT NULL COMMENT 'SHA-256 of the DDL',
			ddl TEXT NOT NULL,
			state VARCHAR(16) NOT NULL COMMENT 'started: about to run; done: ran',
			before_def MEDIUMTEXT NULL COMMENT 'definition of the DDL''s tables before it ran',
			after_def MEDIUMTEXT NULL COMMENT 'and after',
			source VARCHAR(128) NOT NULL,
			updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
			PRIMARY KEY (lock_id, ddl_hash))`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create checkpoint table %s: %w", s.ckptTable, err)
		}
	}
	return s.claimEpoch(ctx)
}

// Load reads the source's checkpoint (zero positions when there is none).
func (s *Sink) Load(ctx context.Context) (Checkpoint, error) {
	cp := Checkpoint{Tables: map[TableName]shardgroup.Position{}, Resolved: map[TableName]shardgroup.Position{},
		ResolvedDDLs: map[TableName][]string{}, Schemas: map[TableName]string{}}
	rows, err := s.db.QueryContext(ctx, "SELECT id, binlog_name, binlog_pos, binlog_gtid, ddls FROM "+s.ckptTable+" WHERE source = ?", s.source)
	if err != nil {
		return cp, fmt.Errorf("load checkpoint of %s from %s: %w", s.source, s.ckptTable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		var pos uint32
		var gtid, ddls sql.NullString
		if err := rows.Scan(&id, &name, &pos, &gtid, &ddls); err != nil {
			return cp, err
		}
		p := shardgroup.Position{File: name, Pos: pos}
		switch {
		case id == epochID:
		case id == "":
			cp.Global, cp.GlobalGTID = p, gtid.String
		case strings.HasPrefix(id, "schema:"):
			var t TableName
			if err := json.Unmarshal([]byte(id[len("schema:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Schemas[t] = ddls.String
		case strings.HasPrefix(id, "resolved:"):
			var t TableName
			if err := json.Unmarshal([]byte(id[len("resolved:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Resolved[t] = p
		case strings.HasPrefix(id, "ddl:"):
			var t TableName
			var list []string
			if err := json.Unmarshal([]byte(id[4:]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			if err := json.Unmarshal([]byte(ddls.String), &list); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.ResolvedDDLs[t] = list
		default:
			var t TableName
			if err := json.Unmarshal([]byte(id), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Tables[t] = p
		}
	}
	return cp, rows.Err()
}

// CheckpointUpdate is the checkpoint part of one downstream transaction.
type CheckpointUpdate struct {
	Global     shardgroup.Position
	GlobalGTID string
	Tables     map[TableName]shardgroup.Position
	Resolved   map[TableName]shardgroup.Position
	Schemas    map[TableName]string // tracked column versions (JSON) of changed tables
	// ResolvedTarget records a lock's DDLs for its target (optional).
	ResolvedTarget *TableName
	ResolvedDDLs   []string
}

// Flush applies changes and the checkpoint update in one transaction.
func (s *Sink) Flush(ctx context.Context, changes []Change, up CheckpointUpdate) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.checkEpoch(ctx, tx, "LOCK IN SHARE MODE"); err != nil {
		return err
	}
	for i := 0; i < len(changes); {
		n, err := s.apply(ctx, tx, changes[i:])
		if err != nil {
			return err
		}
		i += n
	}
	if err := s.writeCheckpoint(ctx, tx, up); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Sink) writeCheckpoint(ctx context.Context, tx *sql.Tx, up CheckpointUpdate) error {
	const q = " (source, id, binlog_name, binlog_pos, binlog_gtid, ddls) VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE " +
		"binlog_name = VALUES(binlog_name), binlog_pos = VALUES(binlog_pos), binlog_gtid = VALUES(binlog_gtid), ddls = VALUES(ddls)"
	gtid := any(nil)
	putGTID := func(id string, p shardgroup.Position, g, ddls any) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+s.ckptTable+q, s.source, id, p.File, p.Pos, g, ddls)
		if err != nil {
			return fmt.Errorf("write checkpoint %s/%s: %w", s.source, id, err)
		}
		return nil
	}
	put := func(id string, p shardgroup.Position, ddls any) error { return putGTID(id, p, gtid, ddls) }
	for t, p := range up.Tables {
		id, _ := json.Marshal(t)
		if err := put(string(id), p, nil); err != nil {
			return err
		}
	}
	for t, js := range up.Schemas {
		id, _ := json.Marshal(t)
		if err := put("schema:"+string(id), shardgroup.Position{}, js); err != nil {
			return err
		}
	}
	for t, p := range up.Resolved {
		id, _ := json.Marshal(t)
		if err := put("resolved:"+string(id), p, nil); err != nil {
			return err
		}
	}
	if up.ResolvedTarget != nil {
		id, _ := json.Marshal(*up.ResolvedTarget)
		ddls, _ := json.Marshal(up.ResolvedDDLs)
		if err := put("ddl:"+string(id), shardgroup.Position{}, string(ddls)); err != nil {
			return err
		}
	}
	if !up.Global.IsZero() || up.GlobalGTID != "" {
		return putGTID("", up.Global, up.GlobalGTID, nil)
	}
	return nil
}

// apply writes a run of changes starting at cs[0] and returns how many it consumed: consecutive
// inserts of one target with the same columns become one multi-row INSERT.
func (s *Sink) apply(ctx context.Context, tx *sql.Tx, cs []Change) (int, error) {
	c := cs[0]
	switch c.Kind {
	case Insert:
		n := 1
		for n < len(cs) && n < s.maxRows && cs[n].Kind == Insert && cs[n].Target == c.Target && slices.Equal(cs[n].Columns, c.Columns) {
			n++
		}
		var sb strings.Builder
		args := make([]any, 0, n*len(c.Columns))
		sb.WriteString("INSERT INTO " + c.Target.String() + " (" + quoteCols(c.Columns) + ") VALUES ")
		row := "(" + strings.TrimSuffix(strings.Repeat("?,", len(c.Columns)), ",") + ")"
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(row)
			args = append(args, cs[i].Row...)
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return 0, fmt.Errorf("insert %d rows of %s into %s: %w", n, c.Source, c.Target, err)
		}
		return n, nil
	case Update, Delete:
		where, wargs, err := s.where(ctx, c)
		if err != nil {
			return 0, err
		}
		var q string
		var args []any
		if c.Kind == Update {
			sets := make([]string, len(c.Columns))
			for i, col := range c.Columns {
				sets[i] = quoteName(col) + " = ?"
			}
			q = "UPDATE " + c.Target.String() + " SET " + strings.Join(sets, ", ") + " WHERE " + where + " LIMIT 1"
			args = append(append(args, c.Row...), wargs...)
		} else {
			q = "DELETE FROM " + c.Target.String() + " WHERE " + where + " LIMIT 1"
			args = wargs
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return 0, fmt.Errorf("apply change of %s to %s: %w", c.Source, c.Target, err)
		}
		return 1, nil
	}
	return 0, fmt.Errorf("unknown change kind %d", c.Kind)
}

// where identifies the old row: by the target's primary key, else by every column (NULL-safe).
func (s *Sink) where(ctx context.Context, c Change) (string, []any, error) {
	keys, err := s.keyColumns(ctx, c.Target)
	if err != nil {
		return "", nil, err
	}
	idx := map[string]int{}
	for i, col := range c.Columns {
		idx[strings.ToLower(col)] = i
	}
	var conds []string
	var args []any
	use := keys
	for _, k := range keys {
		if _, ok := idx[strings.ToLower(k)]; !ok {
			use = nil // the key is not in the row image; fall back to all columns
		}
	}
	if len(use) == 0 {
		use = c.Columns
	}
	for _, k := range use {
		conds = append(conds, quoteName(k)+" <=> ?")
		args = append(args, c.Old[idx[strings.ToLower(k)]])
	}
	return strings.Join(conds, " AND "), args, nil
}

func (s *Sink) keyColumns(ctx context.Context, t TableName) ([]string, error) {
	if k, ok := s.keys[t]; ok {
		return k, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", t, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		keys = append(keys, c)
	}
	s.keys[t] = keys
	return keys, rows.Err()
}

// ForgetKeys drops cached key columns (after a DDL).
func (s *Sink) ForgetKeys() { s.keys = map[TableName][]string{} }

// alreadyApplied are the errors of a DDL that has already taken effect: duplicate column (1060), duplicate
// key name (1061), table exists (1050), can't drop a missing column or key (1091), database exists
// (1007), duplicate foreign key (1826), dropping a missing database (1008) or table (1051).
var alreadyApplied = map[uint16]bool{1060: true, 1061: true, 1050: true, 1091: true, 1007: true, 1826: true, 1008: true, 1051: true}

// ExecDDL runs DDLs that are idempotent by themselves (CREATE ... IF NOT EXISTS), treating "already
// applied" errors as success, then commits the checkpoint update.
func (s *Sink) ExecDDL(ctx context.Context, ddls []string, up CheckpointUpdate) error {
	return s.ExecDDLOnce(ctx, "", ddls, up)
}

// ExecDDLOnce runs each DDL downstream exactly once for lockID, across crashes, then commits the
// checkpoint update. A DDL is not transactional, so a marker row brackets it: "started" with the
// definition of the tables it names before it runs, "done" with their definition after. On a re-run,
// a DDL marked done whose tables still have the after-definition is skipped; one marked started
// whose tables no longer have the before-definition took effect before a crash and is only marked
// done; otherwise it runs. This holds because only the lock's owner changes those tables while the
// lock is held. "Already applied" errors are still accepted as a last resort. An empty lockID runs
// the DDLs without markers.
func (s *Sink) ExecDDLOnce(ctx context.Context, lockID string, ddls []string, up CheckpointUpdate) error {
	if err := s.checkEpoch(ctx, s.db, ""); err != nil {
		return err
	}
	for _, q := range ddls {
		if err := s.execOnce(ctx, lockID, q); err != nil {
			return err
		}
	}
	s.ForgetKeys()
	return s.Flush(ctx, nil, up)
}

type marker struct {
	state, before, after string
}

func (s *Sink) execOnce(ctx context.Context, lockID, q string) error {
	var tables []TableName
	if lockID != "" {
		var err error
		if tables, err = shardgroup.TablesOf(q, ""); err != nil {
			return fmt.Errorf("DDL %q: %w", q, err)
		}
	}
	hash := fmt.Sprintf("%x", sha256.Sum256([]byte(q)))
	var cur string
	if len(tables) > 0 {
		var err error
		if cur, err = s.definition(ctx, tables); err != nil {
			return err
		}
		var m marker
		var before, after sql.NullString
		err = s.db.QueryRowContext(ctx, "SELECT state, before_def, after_def FROM "+s.markerTable+" WHERE lock_id = ? AND ddl_hash = ?", lockID, hash).Scan(&m.state, &before, &after)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read DDL marker of %s: %w", lockID, err)
		case m.state == "done" && after.String == cur:
			return nil // ran before a restart; its tables are as it left them
		case m.state == "started" && before.String != cur:
			return s.mark(ctx, lockID, hash, q, "done", before.String, cur) // took effect before a crash
		}
		if err := s.mark(ctx, lockID, hash, q, "started", cur, ""); err != nil {
			return err
		}
	}
	if _, err := s.db.ExecContext(ctx, q); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || !alreadyApplied[me.Number] {
			return fmt.Errorf("execute DDL %q downstream: %w", q, err)
		}
	}
	if len(tables) == 0 {
		return nil
	}
	if !strings.HasPrefix(lockID, "source:") {
		failpoint.Inject("worker-after-ddl") // a lock's DDL ran downstream; no marker, checkpoint or done yet
	}
	after, err := s.definition(ctx, tables)
	if err != nil {
		return err
	}
	return s.mark(ctx, lockID, hash, q, "done", cur, after)
}

func (s *Sink) mark(ctx context.Context, lockID, hash, q, state, before, after string) error {
	_, err := s.db.ExecContext(ctx, "INSERT INTO "+s.markerTable+" (lock_id, ddl_hash, ddl, state, before_def, after_def, source) VALUES (?, ?, ?, ?, ?, ?, ?) "+
		"ON DUPLICATE KEY UPDATE ddl = VALUES(ddl), state = VALUES(state), before_def = VALUES(before_def), after_def = VALUES(after_def), source = VALUES(source)",
		lockID, hash, q, state, before, after, s.source)
	if err != nil {
		return fmt.Errorf("write DDL marker of %s: %w", lockID, err)
	}
	return nil
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// definition is the SHOW CREATE TABLE of each table (without the AUTO_INCREMENT counter, which DML
// moves), or "absent".
func (s *Sink) definition(ctx context.Context, tables []TableName) (string, error) {
	var sb strings.Builder
	for _, t := range tables {
		var name, def string
		err := s.db.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.String()).Scan(&name, &def)
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) {
			def, err = "absent", nil
		}
		if err != nil {
			return "", fmt.Errorf("definition of %s: %w", t, err)
		}
		sb.WriteString(t.String() + ": " + autoIncrement.ReplaceAllString(def, "") + "\n")
	}
	return sb.String(), nil
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func quoteCols(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteName(c)
	}
	return strings.Join(q, ", ")
}
