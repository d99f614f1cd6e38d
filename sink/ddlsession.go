package sink

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/session"
)

// ddlSession gives a DDL the session settings of its binlog event (session.Settings) on the downstream
// connection that runs it, for that statement only: the connection is back in the sink's own settings
// (DownstreamSession) before it serves anything else. It knows the sink's own values, read once, and
// which settings the downstream takes: a variable it refuses (a time zone it has no tables for, a
// collation or sql_mode name it does not have) is left at the sink's value, with a warning, once.
type ddlSession struct {
	log  *zap.Logger
	base map[string]string // the sink's session values (nil: not read yet)
	// taken: by Settings.String(), the change from base the downstream takes.
	taken map[string]session.Change
}

// change is the change from the sink's session to in that the downstream takes, read and checked on
// conn the first time in is met.
func (d *ddlSession) change(ctx context.Context, conn *sql.Conn, in session.Settings) (session.Change, error) {
	key := in.String()
	if ch, ok := d.taken[key]; ok {
		return ch, nil
	}
	if d.base == nil {
		base, err := sessionValues(ctx, conn)
		if err != nil {
			return session.Change{}, err
		}
		d.base = base
	}
	ch := in.Against(d.base)
	if ch.Set != "" {
		if _, err := conn.ExecContext(ctx, ch.Set); err != nil {
			if !isServerError(err) {
				return session.Change{}, err
			}
			// One by one: which does the downstream refuse? Of sql_mode, only the names it does not
			// have (MariaDB's NO_AUTO_CREATE_USER on MySQL 8).
			var refused []string
			taken := in
			for _, v := range ch.Vars {
				one := session.Settings{v}.Against(d.base)
				if _, err := conn.ExecContext(ctx, one.Set); err != nil {
					if !isServerError(err) {
						return session.Change{}, err
					}
					if v.Name == session.SQLMode {
						modes, dropped, err := knownModes(ctx, conn, v.Value)
						if err != nil {
							return session.Change{}, err
						}
						d.log.Warn("the downstream has no sql_mode of these names: the upstream's DDLs run without them",
							zap.Strings("modes", dropped), zap.String("upstream", v.Value))
						taken = taken.With(session.SQLMode, modes)
						continue
					}
					refused = append(refused, v.Name)
					d.log.Warn("the downstream refuses a session setting of the upstream's DDLs: they run with the sink's own value of it",
						zap.String("variable", v.Name), zap.String("upstream", v.Value), zap.String("downstream", d.base[v.Name]), zap.Error(err))
				}
			}
			ch = taken.Without(refused...).Against(d.base)
		}
		if _, err := conn.ExecContext(ctx, in.Against(d.base).Restore); err != nil {
			return session.Change{}, err
		}
	}
	if d.taken == nil || len(d.taken) >= 64 {
		d.taken = map[string]session.Change{} // a few combinations in practice; bounded all the same
	}
	d.taken[key] = ch
	return ch, nil
}

// knownModes is the names of the sql_mode value modes the connection's server has, and those it has
// not. It leaves the session's sql_mode at the last name tried: the caller puts it back.
func knownModes(ctx context.Context, conn *sql.Conn, modes string) (known string, dropped []string, err error) {
	var keep []string
	for _, m := range strings.Split(modes, ",") {
		if m == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = '"+strings.ReplaceAll(m, "'", "''")+"'"); err != nil {
			if !isServerError(err) {
				return "", nil, err
			}
			dropped = append(dropped, m)
			continue
		}
		keep = append(keep, m)
	}
	return strings.Join(keep, ","), dropped, nil
}

// sessionValues reads the values of session.Names the connection's server has.
func sessionValues(ctx context.Context, conn *sql.Conn) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, "SHOW SESSION VARIABLES WHERE Variable_name IN ('"+strings.Join(session.Names, "', '")+"')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// SHOW VARIABLES shows the booleans as ON/OFF; SELECT @@ and the event's values are 1/0.
	for k, v := range out {
		switch strings.ToUpper(v) {
		case "ON":
			out[k] = "1"
		case "OFF":
			out[k] = "0"
		}
	}
	return out, nil
}

func isServerError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me)
}

// runDDL runs q on db in the session settings in, after prefix (statements of Tributary's own that go
// in the same query before it, "" for none; db then takes several statements a query). The settings
// are set after prefix, so Tributary's own statements run in the sink's session, and put back in the
// same query after q; when the query fails they are put back on the same connection, and a connection
// that cannot be put back is closed, never returned to the pool.
func (s *DDLExecutor) runDDL(ctx context.Context, db *sql.DB, prefix, q string, in session.Settings) error {
	join := func(stmts ...string) string {
		var out []string
		for _, st := range stmts {
			if st != "" {
				out = append(out, st)
			}
		}
		return strings.Join(out, ";\n")
	}
	if len(in) == 0 {
		_, err := db.ExecContext(ctx, join(prefix, q))
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := s.session.change(ctx, conn, in)
	if err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // it may hold some of them: closed, not reused
		return err
	}
	if ch.Set == "" {
		_, err = conn.ExecContext(ctx, join(prefix, q))
		return err
	}
	if prefix != "" {
		_, err = conn.ExecContext(ctx, join(prefix, ch.Set, q, ch.Restore))
	} else if _, err = conn.ExecContext(ctx, ch.Set); err == nil {
		_, err = conn.ExecContext(ctx, q)
	}
	if prefix == "" || err != nil {
		if _, rerr := conn.ExecContext(ctx, ch.Restore); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closed, not reused
			if err == nil {
				err = rerr
			}
		}
	}
	return err
}
