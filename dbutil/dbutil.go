// Package dbutil holds the MySQL/MariaDB helpers that the worker, the master and the prechecks share:
// opening a configured endpoint, a source's binlog position, and a table's column signature. It
// imports no Tributary package but config and shardgroup's plain types.
package dbutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

// OpenDB opens a pool to a configured MySQL/MariaDB endpoint, with TLS when its security section sets
// it. An encrypted password (dmctl encrypt) is decrypted here, where the connection is opened. The
// password never appears in errors or logs: callers print config.Database.String(). opts adjust the
// driver's configuration (MultiStatements).
func OpenDB(d config.Database, opts ...func(*mysql.Config)) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = d.User, d.PlainPassword()
	tlsConfig, err := d.TLSConfig("")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	c.TLS = tlsConfig
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
	for _, o := range opts {
		o(c)
	}
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// MultiStatements lets a query hold several statements separated by ";" (the server runs them in
// order and stops at the first error). Only for a pool whose every query Tributary builds itself.
func MultiStatements(c *mysql.Config) { c.MultiStatements = true }

// SourcePosition reads a source's current binlog position and its GTID set: MariaDB's
// @@gtid_binlog_pos, MySQL's Executed_Gtid_Set (the status's fifth column).
func SourcePosition(ctx context.Context, db RowsQuerier) (vocab.Position, string, error) {
	p, executed, err := masterStatus(ctx, db, "SHOW MASTER STATUS")
	if err != nil {
		// MySQL 8.4 renamed it.
		var err2 error
		if p, executed, err2 = masterStatus(ctx, db, "SHOW BINARY LOG STATUS"); err2 != nil {
			return vocab.Position{}, "", err
		}
	}
	var gtid sql.NullString
	if db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&gtid) != nil { // MySQL has no such variable
		return p, executed, nil
	}
	return p, gtid.String, nil
}

// BinaryLog is one file of SHOW BINARY LOGS.
type BinaryLog struct {
	Name string
	Size int64
}

// BinaryLogs lists a server's binlog files, oldest first (SHOW BINARY LOGS; MySQL 8 adds a column).
func BinaryLogs(ctx context.Context, db RowsQuerier) ([]BinaryLog, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []BinaryLog
	for rows.Next() {
		var f BinaryLog
		vals := []any{&f.Name, &f.Size}
		for len(vals) < len(cols) {
			vals = append(vals, new(sql.RawBytes)) // Encrypted (MySQL 8)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// masterStatus reads the file and position of SHOW MASTER STATUS (4 columns on MariaDB, 5 on MySQL)
// and MySQL's Executed_Gtid_Set (newlines and all, as MySQL wraps a long set, taken out).
func masterStatus(ctx context.Context, db RowsQuerier, q string) (vocab.Position, string, error) {
	var p vocab.Position
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return p, "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return p, "", err
	}
	if len(cols) < 2 {
		return p, "", fmt.Errorf("%s: %d columns", q, len(cols))
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return p, "", err
		}
		return p, "", fmt.Errorf("%s returned no row (is log_bin on?)", q)
	}
	var executed sql.NullString
	dest := []any{&p.File, &p.Pos}
	for _, c := range cols[2:] {
		if strings.EqualFold(c, "Executed_Gtid_Set") {
			dest = append(dest, &executed)
		} else {
			dest = append(dest, new(any))
		}
	}
	if err := rows.Scan(dest...); err != nil {
		return p, "", err
	}
	return p, strings.NewReplacer("\n", "", " ", "").Replace(executed.String), rows.Err()
}

// RowsQuerier is a *sql.DB, *sql.Conn or *sql.Tx.
type RowsQuerier interface {
	RowQuerier
	Querier
}

// Signature is a table's columns as "name type", lower case, for comparing definitions
// (ComparableType; empty when the table does not exist).
func Signature(ctx context.Context, db *sql.DB, t vocab.TableName) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", t, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		out = append(out, strings.ToLower(name)+" "+ComparableType(typ))
	}
	return out, rows.Err()
}

// RowQuerier is a *sql.DB, *sql.Conn or *sql.Tx.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// Querier is a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// Columns reads a table's columns with their flags from information_schema (MariaDB and MySQL
// 8 both mark generated columns "VIRTUAL GENERATED" or "STORED GENERATED" in EXTRA; MariaDB before
// 10.2 said "PERSISTENT").
func Columns(ctx context.Context, db Querier, t vocab.TableName) ([]vocab.Column, error) {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, COLUMN_TYPE, EXTRA, DATA_TYPE, COALESCE(CHARACTER_OCTET_LENGTH, 0)
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", t, err)
	}
	defer rows.Close()
	var out []vocab.Column
	for rows.Next() {
		var name, typ, extra, dataType string
		var octets int64
		if err := rows.Scan(&name, &typ, &extra, &dataType, &octets); err != nil {
			return nil, err
		}
		extra = strings.ToUpper(extra)
		c := vocab.Column{
			Name:      name,
			Type:      typ,
			Unsigned:  strings.Contains(strings.ToLower(typ), "unsigned"),
			Generated: strings.Contains(extra, "VIRTUAL GENERATED") || strings.Contains(extra, "STORED GENERATED") || strings.Contains(extra, "PERSISTENT"),
		}
		if strings.EqualFold(dataType, "binary") {
			c.BinaryLen = int(octets)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Retryable reports whether a statement failed on a deadlock (1213) or a lock wait timeout (1205): the
// server rolled the transaction back, and running it again may succeed.
func Retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// IsNoSuchTable reports whether a statement failed because its table (1146) or its database (1049)
// does not exist.
func IsNoSuchTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049)
}

// intWidth is an integer type's display width: int(11), bigint(20) unsigned.
var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)`)

// ComparableType is a COLUMN_TYPE as definitions are compared: lower case, and an integer type
// without its display width unless ZEROFILL gives the width a meaning. MySQL 8.0.17+ writes INT where
// MySQL 5.7 and MariaDB write INT(11); the values and storage are the same, so shards of 5.7 and 8.0,
// or a MySQL 8 table and its MariaDB target, do not differ by it.
func ComparableType(typ string) string {
	typ = strings.ToLower(strings.TrimSpace(typ))
	if strings.Contains(typ, "zerofill") {
		return typ
	}
	return intWidth.ReplaceAllString(typ, "$1")
}
