// Package meta owns the downstream tables Tributary keeps for a task, and the only ones it creates or
// drops on its own: `<meta-schema>.<task>_checkpoint` (per source: where to resume, per-table DML and
// DDL positions, tracked schemas, the binding epoch that fences stale workers) and
// `<meta-schema>.<task>_ddl_marker` (exactly-once DDL). The worker writes them; the master reads and
// removes them; the prechecks probe that they can be created. Neither needs the other's package.
//
// Each table records whose it is: it is created with the comment "tributary <checkpoint|DDL marker>
// table of task <task>". A table of such a name is written, migrated or dropped only when it carries
// the task's mark, or when an older version made it (no comment, only the layout's columns: it is then
// adopted, and the mark written on it). Any other table of that name is someone else's: every
// operation refuses it and leaves it as it is.
//
// The layout fits every server Tributary supports (MySQL 8, MariaDB; utf8mb4, utf8mb3 or latin1
// defaults; strict sql_mode; any innodb row format, including REDUNDANT and COMPACT whose index
// columns are limited to 767 bytes): the tables say DEFAULT CHARSET=utf8mb4, and their keys are short
// columns only. A readable id of any length is kept in a TEXT column and keyed by its hex SHA-256.
// Tables of the layout of Tributary before this one (id VARCHAR(700) in the primary key) are migrated
// in place by Init, re-entrantly.
package meta

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/tributary-db/tributary/vocab"
)

// MaxIdentifier is MySQL's limit on a table name, in characters.
const MaxIdentifier = 64

const (
	checkpointSuffix = "_checkpoint"
	markerSuffix     = "_ddl_marker"
)

// CheckpointTable is the downstream table holding a task's checkpoints (all its sources).
func CheckpointTable(schema, task string) vocab.TableName {
	return vocab.TableName{Schema: schema, Name: tableName(task, checkpointSuffix)}
}

// MarkerTable is the downstream table of a task's DDL markers (exactly-once DDL across crashes).
func MarkerTable(schema, task string) vocab.TableName {
	return vocab.TableName{Schema: schema, Name: tableName(task, markerSuffix)}
}

// tableName is task+suffix when it fits MySQL's 64 characters; otherwise the longest prefix of task
// that fits with "_" and the first 8 hex digits of the task name's SHA-256 before the suffix, e.g.
// `a_very_long_task_name_of_sixty_characters_ab_1f2e3d4c_checkpoint`.
func tableName(task, suffix string) string {
	if utf8.RuneCountInString(task)+len(suffix) <= MaxIdentifier {
		return task + suffix
	}
	tag := "_" + Hash(task)[:8]
	keep := MaxIdentifier - len(suffix) - len(tag)
	prefix := []rune(task)[:keep]
	return string(prefix) + tag + suffix
}

// Hash is the hex SHA-256 of s: the key of a readable id in the meta tables.
func Hash(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

// layout describes one meta table: its columns in order, its primary key, and how a table of the
// previous layout (keyed by the long readable column itself) turns into it.
type layout struct {
	what    string   // "checkpoint" or "DDL marker", for errors
	columns []column // in order
	key     []string // primary key
	oldKey  []string // primary key of the previous layout
	hash    string   // the key column holding Hash(from)
	from    string   // the readable column it is computed from
}

type column struct{ name, def string }

var checkpointLayout = layout{
	what: "checkpoint",
	columns: []column{
		{"source", "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"},
		{"id_hash", "CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'hex SHA-256 of id'"},
		{"id", "TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'upstream table as JSON (DML applied), resolved:<table> (last sharding DDL resolved), ddl:<target> (DDLs of the last lock), schema:<table> (tracked columns), epoch (binding owning the checkpoint), empty (where to resume)'"},
		{"binlog_name", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"},
		{"binlog_pos", "BIGINT UNSIGNED NOT NULL DEFAULT 0"},
		{"binlog_gtid", "TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL"},
		{"ddls", "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL"},
		{"updated_at", "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP"},
	},
	key:    []string{"source", "id_hash"},
	oldKey: []string{"source", "id"},
	hash:   "id_hash", from: "id",
}

var markerLayout = layout{
	what: "DDL marker",
	columns: []column{
		{"lock_hash", "CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'hex SHA-256 of lock_id'"},
		{"ddl_hash", "CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'hex SHA-256 of the DDL'"},
		{"lock_id", "TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the shard DDL lock (or source:<id> for DDL of unsharded tables)'"},
		{"ddl", "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"},
		{"state", "VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'started: about to run; done: ran'"},
		{"before_def", "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL COMMENT 'definition of the DDL''s tables before it ran'"},
		{"after_def", "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL COMMENT 'and after'"},
		{"source", "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"},
		{"updated_at", "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP"},
	},
	key:    []string{"lock_hash", "ddl_hash"},
	oldKey: []string{"lock_id", "ddl_hash"},
	hash:   "lock_hash", from: "lock_id",
}

// Mark is the table comment a task's meta table is created with: its record that this task made it.
// Task names are letters, digits, '_', '-' and '.' (package config), so it needs no escaping.
func (l layout) mark(task string) string { return "tributary " + l.what + " table of task " + task }

// create is the CREATE TABLE statement of the layout under the name t (without IF NOT EXISTS),
// with the table comment comment ("": none).
func (l layout) create(t vocab.TableName, comment string) string {
	var sb strings.Builder
	sb.WriteString("CREATE TABLE " + t.String() + " (\n")
	for _, c := range l.columns {
		sb.WriteString("\t" + c.name + " " + c.def + ",\n")
	}
	sb.WriteString("\tPRIMARY KEY (" + strings.Join(l.key, ", ") + ")\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	if comment != "" {
		sb.WriteString(" COMMENT='" + comment + "'")
	}
	return sb.String()
}

// CreateCheckpoint is the CREATE TABLE statement of task's checkpoint table named t, with its mark.
func CreateCheckpoint(t vocab.TableName, task string) string {
	return checkpointLayout.create(t, checkpointLayout.mark(task))
}

// CreateMarker is the CREATE TABLE statement of task's DDL marker table named t, with its mark.
func CreateMarker(t vocab.TableName, task string) string {
	return markerLayout.create(t, markerLayout.mark(task))
}

// state is what a meta table looks like on the server.
type state int

const (
	absent  state = iota
	current       // this layout
	old           // the previous layout, maybe part-way through its migration
	unknown
)

type inspection struct {
	state   state
	columns map[string]bool
	key     []string
	comment string
}

// owner is whose a meta table is, as its comment and columns tell.
type owner int

const (
	ownerNone   owner = iota // absent
	ownerTask                // it carries the task's mark
	ownerLegacy              // no comment, and only the layout's columns: what versions before the mark created
	ownerOther               // anything else: not this task's
)

// owner judges whether the inspected table is the task's. A table of an older version (created
// without a comment) is adopted when it has no comment at all, its key is one of the layout's and
// every column is one of the layout's: it is in the task's meta-schema, named after the task, and made
// exactly as Tributary made it. Any other comment, or another column, makes it someone else's.
func (l layout) owner(in inspection, task string) owner {
	switch {
	case len(in.columns) == 0:
		return ownerNone
	case in.comment == l.mark(task):
		return ownerTask
	case in.comment != "" || in.state == unknown:
		return ownerOther
	}
	known := map[string]bool{l.hash: true}
	for _, c := range l.columns {
		known[c.name] = true
	}
	for c := range in.columns {
		if !known[c] {
			return ownerOther
		}
	}
	return ownerLegacy
}

// notOurs is the error for a table of a meta table's name that the task did not create.
func (l layout) notOurs(t vocab.TableName, task string, in inspection) error {
	why := "its comment is not the task's mark"
	if in.comment == "" {
		why = "it has no comment and columns other than Tributary's " + l.what + " table"
	}
	return fmt.Errorf("%s table %s of task %s: a table of this name exists that task %s did not create (%s); "+
		"it is left as it is: rename it, or choose another meta-schema for the task", l.what, t, task, task, why)
}

// inspect reads t's columns, primary key and comment from information_schema.
func (l layout) inspect(ctx context.Context, q querier, t vocab.TableName) (inspection, error) {
	in := inspection{columns: map[string]bool{}}
	rows, err := q.QueryContext(ctx, "SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name)
	if err != nil {
		return in, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return in, err
		}
		in.columns[c] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return in, err
	}
	if len(in.columns) == 0 {
		return in, nil // absent
	}
	var comment sql.NullString
	if err := q.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&comment); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return in, fmt.Errorf("read the comment of %s: %w", t, err)
	}
	in.comment = comment.String
	rows, err = q.QueryContext(ctx, "SELECT LOWER(COLUMN_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", t.Schema, t.Name)
	if err != nil {
		return in, fmt.Errorf("read the primary key of %s: %w", t, err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return in, err
		}
		in.key = append(in.key, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return in, err
	}
	switch {
	case equal(in.key, l.key):
		in.state = current
	case equal(in.key, l.oldKey) && in.columns[l.from]:
		in.state = old
	default:
		in.state = unknown
	}
	return in, nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// ensure creates t in this layout with the task's mark, or migrates it from the previous one. Each
// step can be interrupted and run again: the table's state says which step comes next. A table the
// task did not create is refused and left as it is; one an older version created (no mark) is adopted
// by writing the mark on it.
func (l layout) ensure(ctx context.Context, q querier, t vocab.TableName, task string) error {
	in, err := l.inspect(ctx, q, t)
	if err != nil {
		return err
	}
	switch l.owner(in, task) {
	case ownerNone:
		if _, err := q.ExecContext(ctx, strings.Replace(l.create(t, l.mark(task)), "CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1)); err != nil {
			return fmt.Errorf("create %s table %s: %w", l.what, t, err)
		}
		return nil
	case ownerOther:
		return l.notOurs(t, task, in)
	case ownerLegacy:
		if _, err := q.ExecContext(ctx, "ALTER TABLE "+t.String()+" COMMENT = '"+l.mark(task)+"'"); err != nil {
			return fmt.Errorf("mark %s table %s of an older version as task %s's: %w", l.what, t, task, err)
		}
	}
	switch in.state {
	case current:
		return nil
	case unknown:
		return fmt.Errorf("%s table %s of task %s has a layout this version does not know (primary key (%s)); its comment says task %s created it: "+
			"start-task --remove-meta starts the task afresh without it, or restore it", l.what, t, task, strings.Join(in.key, ", "), task)
	}
	// The previous layout: (1) add the hash column, (2) fill it, (3) make it the key and give every
	// column its definition of this layout, in one ALTER.
	if !in.columns[l.hash] {
		if _, err := q.ExecContext(ctx, "ALTER TABLE "+t.String()+" ADD COLUMN "+l.hash+" CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL"); err != nil {
			return fmt.Errorf("migrate %s table %s (add %s): %w", l.what, t, l.hash, err)
		}
		in.columns[l.hash] = true
	}
	if err := l.fillHashes(ctx, q, t); err != nil {
		return fmt.Errorf("migrate %s table %s (fill %s): %w", l.what, t, l.hash, err)
	}
	specs := []string{"DROP PRIMARY KEY"}
	for i, c := range l.columns {
		pos := " FIRST"
		if i > 0 {
			pos = " AFTER " + l.columns[i-1].name
		}
		verb := "MODIFY COLUMN "
		if !in.columns[c.name] {
			verb = "ADD COLUMN "
		}
		specs = append(specs, verb+c.name+" "+c.def+pos)
	}
	specs = append(specs, "ADD PRIMARY KEY ("+strings.Join(l.key, ", ")+")", "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	if _, err := q.ExecContext(ctx, "ALTER TABLE "+t.String()+" "+strings.Join(specs, ", ")); err != nil {
		return fmt.Errorf("migrate %s table %s (new key): %w", l.what, t, err)
	}
	return nil
}

// fillHashes computes the hash column of the rows that have none (the previous layout's key
// identifies each row).
func (l layout) fillHashes(ctx context.Context, q querier, t vocab.TableName) error {
	rows, err := q.QueryContext(ctx, "SELECT "+l.oldKey[0]+", "+l.oldKey[1]+" FROM "+t.String()+" WHERE "+l.hash+" IS NULL OR "+l.hash+" = ''")
	if err != nil {
		return err
	}
	var keys [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	fromIdx := 0
	if l.oldKey[1] == l.from {
		fromIdx = 1
	}
	for _, k := range keys {
		if _, err := q.ExecContext(ctx, "UPDATE "+t.String()+" SET "+l.hash+" = ? WHERE "+l.oldKey[0]+" = ? AND "+l.oldKey[1]+" = ?",
			Hash(k[fromIdx]), k[0], k[1]); err != nil {
			return err
		}
	}
	return nil
}

// Init creates the meta schema and the task's two tables if they do not exist, and migrates tables
// of the previous layout. Workers of every source of a task call it at start, concurrently: the
// work is serialized by a named lock (GET_LOCK) held on a connection of its own, and each step is
// re-entrant, so an Init interrupted by a crash is finished by the next one.
func Init(ctx context.Context, db *sql.DB, schema, task string) error {
	ckpt, marker := CheckpointTable(schema, task), MarkerTable(schema, task)
	if ready(ctx, db, task, ckpt, marker) {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	unlock, err := lock(ctx, conn, "tributary-meta-"+Hash(schema + "\x00" + task)[:32])
	if err != nil {
		return fmt.Errorf("meta tables of task %s in %s: %w", task, vocab.TableName{Schema: schema}, err)
	}
	defer unlock()
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
		return fmt.Errorf("look for the meta schema %s: %w", vocab.TableName{Schema: schema}, err)
	}
	if n == 0 {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+vocab.TableName{Schema: schema}.String()+" DEFAULT CHARACTER SET utf8mb4"); err != nil {
			return fmt.Errorf("create the meta schema %s: %w", vocab.TableName{Schema: schema}, err)
		}
	}
	if err := checkpointLayout.ensure(ctx, conn, ckpt, task); err != nil {
		return err
	}
	return markerLayout.ensure(ctx, conn, marker, task)
}

// ready reports whether both tables exist in this layout with the task's mark (then Init has nothing
// to do and takes no lock). An error counts as not ready: Init then reports it.
func ready(ctx context.Context, db *sql.DB, task string, ckpt, marker vocab.TableName) bool {
	for _, c := range []struct {
		l layout
		t vocab.TableName
	}{{checkpointLayout, ckpt}, {markerLayout, marker}} {
		in, err := c.l.inspect(ctx, db, c.t)
		if err != nil || in.state != current || c.l.owner(in, task) != ownerTask {
			return false
		}
	}
	return true
}

// lock takes the named lock on conn, waiting up to a minute. A server without GET_LOCK (old TiDB
// has a no-op one that errors) runs unlocked: every step of Init is re-entrant anyway.
func lock(ctx context.Context, conn *sql.Conn, name string) (func(), error) {
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", name).Scan(&got)
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, fmt.Errorf("another worker has held the lock %s for a minute while creating or migrating them", name)
	}
	return func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name); err != nil {
			// Discard the connection: closing it releases the lock on the server.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}, nil
}

// HasCheckpoint reports whether the task has saved a resume position for source: a start then
// resumes there instead of at the task's meta. It reads either layout.
func HasCheckpoint(ctx context.Context, db *sql.DB, schema, task, source string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+CheckpointTable(schema, task).String()+" WHERE source = ? AND id = ''", source).Scan(&n)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) { // no such table / database
		return false, nil
	}
	return n > 0, err
}

// Remove drops the task's checkpoint and DDL marker tables (start-task --remove-meta): those that
// carry the task's mark, or that an older version made for it (see ensure). When either is a table
// the task did not create, nothing is dropped.
func Remove(ctx context.Context, db *sql.DB, schema, task string) error {
	var drop []string
	for _, c := range []struct {
		l layout
		t vocab.TableName
	}{{checkpointLayout, CheckpointTable(schema, task)}, {markerLayout, MarkerTable(schema, task)}} {
		in, err := c.l.inspect(ctx, db, c.t)
		if err != nil {
			return err
		}
		switch c.l.owner(in, task) {
		case ownerOther:
			return fmt.Errorf("nothing removed: %w", c.l.notOurs(c.t, task, in))
		case ownerTask, ownerLegacy:
			drop = append(drop, c.t.String())
		}
	}
	if len(drop) == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(drop, ", "))
	return err
}
