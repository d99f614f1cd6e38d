package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/vocab"
)

// eventSessions reads the session settings of a DDL's binlog event (session.Decode, session.Settings):
// each DDL Tributary sends downstream because of an event runs in them (DDLExecutor.ExecDDL*). It names the
// upstream's collations, read once from its information_schema.
type eventSessions struct {
	flavor string
	up     *sql.DB
	down   *sql.DB // asked whether it has a collation
	log    *zap.Logger
	cat    session.Catalog // nil: not read yet
}

// ddlEvent is what a DDL item of a shard group keeps of its event until its lock resolves.
type ddlEvent struct {
	start vocab.Position // the event group's start
	in    session.Settings
	// stmts are the item's DDLs as the splitter parsed them, which the owner runs downstream.
	stmts []ddl.Statement
}

// of is the event's settings. What it cannot decode or carry is logged: the DDL runs in the sink's
// values of those.
func (e *eventSessions) of(ctx context.Context, q *replication.QueryEvent, at vocab.Position) (session.Settings, error) {
	vars, err := session.Decode(q.StatusVars)
	if err != nil {
		e.log.Debug("status variables of a query event read in part", zap.Stringer("pos", at), zap.Error(err))
	}
	if e.cat == nil && e.up != nil {
		if e.cat, err = collations(ctx, e.up); err != nil {
			return nil, fmt.Errorf("read the upstream's collations, to run a DDL in its session's character set: %w", err)
		}
	}
	in, notes := vars.Settings(e.flavor, e.cat)
	for _, n := range notes {
		e.log.Warn("a session setting of a DDL's event is not carried downstream", zap.Stringer("pos", at), zap.String("why", n))
	}
	return in, nil
}

// defaultCharset makes a CREATE TABLE part that names no character set or collation say the one the
// table took upstream (its database's then), which the downstream database need not have: it is the
// user's, or Tributary created it with the downstream server's default. A replica has the same
// database as its source; a merged or routed downstream does not. The table's collation is read from
// the upstream's table as it is now (its database's default may have changed since; the table's
// changes only by an ALTER TABLE of it); a table gone or renamed since, or a collation the downstream
// does not have, leaves the statement as it is.
func (e *eventSessions) defaultCharset(ctx context.Context, p ddl.Part) ddl.Statement {
	if p.Kind != ddl.KindCreateTable || e.up == nil {
		return p.Statement
	}
	var collation string
	err := e.up.QueryRowContext(ctx, "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		p.Source.Schema, p.Source.Name).Scan(&collation)
	if errors.Is(err, sql.ErrNoRows) {
		e.log.Debug("CREATE TABLE of a table gone upstream runs with the downstream database's character set", zap.Stringer("table", p.Source))
		return p.Statement
	}
	if err == nil && e.down != nil {
		var n int
		if err = e.down.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLLATIONS WHERE COLLATION_NAME = ?", collation).Scan(&n); err == nil && n == 0 {
			err = fmt.Errorf("the downstream has no collation %s", collation)
		}
	}
	if err == nil {
		var out ddl.Statement
		if out, err = p.WithDefaultCollation(collation); err == nil {
			return out
		}
		// The collation is in the tree but not in the text: the statement is read again.
		if st, perr := ddl.ParseStatement(p.SQL); perr == nil {
			p.Statement = st
		}
	}
	e.log.Warn("CREATE TABLE runs downstream with the downstream database's character set", zap.Stringer("table", p.Source), zap.String("ddl", p.SQL), zap.Error(err))
	return p.Statement
}

func collations(ctx context.Context, db *sql.DB) (session.Catalog, error) {
	rows, err := db.QueryContext(ctx, "SELECT ID, COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cat := session.Catalog{}
	for rows.Next() {
		var id sql.NullInt64
		var name, charset sql.NullString // NULL in rows of collations that have no id (MariaDB 10.10+'s uca1400)
		if err := rows.Scan(&id, &name, &charset); err != nil {
			return nil, err
		}
		if id.Valid && id.Int64 > 0 && id.Int64 < 1<<16 && name.Valid && charset.Valid {
			cat[uint16(id.Int64)] = session.Collation{Name: name.String, Charset: charset.String}
		}
	}
	return cat, rows.Err()
}
