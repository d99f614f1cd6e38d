package worker

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/config"
)

// OpenDB opens a pool to a configured MySQL/MariaDB endpoint. The password never appears in errors
// or logs: callers print config.Database.String().
func OpenDB(d config.Database) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = d.User, d.Password
	c.Net, c.Addr = "tcp", net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
	c.InterpolateParams = true
	c.Timeout = 10 * time.Second
	c.Params = map[string]string{}
	for k, v := range d.Session {
		if s, ok := v.(string); ok {
			c.Params[k] = "'" + s + "'"
		} else if n, ok := v.(int); ok {
			c.Params[k] = strconv.Itoa(n)
		}
	}
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// CheckpointTable is the downstream table holding a task's checkpoints (all its sources).
func CheckpointTable(metaSchema, task string) TableName {
	return TableName{Schema: metaSchema, Name: task + "_checkpoint"}
}

// SourcePosition reads a source's current binlog position and, on MariaDB, its GTID set (empty
// elsewhere).
func SourcePosition(ctx context.Context, db *sql.DB) (Position, string, error) {
	var p Position
	var doDB, ignoreDB any
	if err := db.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&p.File, &p.Pos, &doDB, &ignoreDB); err != nil {
		return Position{}, "", err
	}
	var gtid sql.NullString
	_ = db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&gtid) // MySQL has no such variable
	return p, gtid.String, nil
}

// MarkerTable is the downstream table of a task's DDL markers (exactly-once DDL across crashes).
func MarkerTable(metaSchema, task string) TableName {
	return TableName{Schema: metaSchema, Name: task + "_ddl_marker"}
}

// HasCheckpoint reports whether the task has saved a resume position for source: a start then
// resumes there instead of at the task's meta.
func HasCheckpoint(ctx context.Context, db *sql.DB, metaSchema, task, source string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+CheckpointTable(metaSchema, task).String()+" WHERE source = ? AND id = ''", source).Scan(&n)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) { // no such table / database
		return false, nil
	}
	return n > 0, err
}

// RemoveCheckpoint drops the task's checkpoint and DDL marker tables (start-task --remove-meta).
// They are tables this system created for this task alone; nothing else is touched.
func RemoveCheckpoint(ctx context.Context, db *sql.DB, metaSchema, task string) error {
	_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+CheckpointTable(metaSchema, task).String()+", "+MarkerTable(metaSchema, task).String())
	return err
}

// Signature is a table's columns as "name type", lower case, for comparing definitions (empty when
// the table does not exist).
func Signature(ctx context.Context, db *sql.DB, t TableName) ([]string, error) {
	return signature(ctx, db, t)
}
