package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ddlRunner keeps shard DDL going on one target: it picks a DDL the target's columns allow, applies it
// to every shard in a random order with random delays (so that locks form, wait and resolve while
// the workload writes), and now and then renames a shard within its group. Each DDL is applied once
// per shard: after an error whose outcome is unknown (the upstream killed under it) it reads the
// shard's definition to see whether it took.
type ddlRunner struct {
	rng   *rand.Rand
	t     *target
	live  []*liveShard
	dbs   []*sql.DB // upstreams, by index
	ports []int
	ptOSC string // pt-online-schema-change's path ("": not installed)
	// extra are the columns the runner added and has not dropped, with their types; indexed those
	// with an index ix_<col>.
	extra   []column
	indexed map[string]bool
	nextCol int
	renames int
	// Steps are the DDLs applied to every shard, in order (a lock each); Downstream the ALTERs the
	// downstream must run for them, once each, each named by the column or index it is about.
	Steps      []string
	Downstream []string
	errors     int
	logf       func(format string, args ...any)
}

type column struct{ name, typ string }

// ddl is one shard DDL: the ALTER clause, the name downstream's ALTER must mention, and how to see
// that a shard has it.
type ddl struct {
	clause string
	about  string
	has    func(ctx context.Context, db *sql.DB, schema, table string) (bool, error)
	ptOSC  bool // run with pt-online-schema-change instead of ALTER TABLE
}

// step applies one DDL to every shard (or renames one shard), then waits pause.
func (r *ddlRunner) step(ctx context.Context, pause func() time.Duration) {
	if r.rng.IntN(10) == 0 {
		r.rename(ctx)
	} else if d, ok := r.next(); ok {
		r.apply(ctx, d)
	}
	select {
	case <-ctx.Done():
	case <-time.After(pause()):
	}
}

// next picks a DDL the columns allow and records what it changes.
func (r *ddlRunner) next() (ddl, bool) {
	colType := "INT NOT NULL DEFAULT 0"
	if r.t.prefix == "events" {
		// Nullable, and narrow: MariaDB's instant DROP COLUMN keeps a dropped column in the row format
		// until the table is rebuilt, and the events table is never rebuilt (no MODIFY of a type), so
		// after some 30 ADD/DROP cycles of a VARCHAR(16) utf8mb4 both sides refuse the next ADD COLUMN
		// with "Row size too large" (seed 6 at c63, upstream; the downstream would refuse it too).
		colType = "SMALLINT DEFAULT NULL"
	}
	var choices []func() ddl
	if len(r.extra) < 4 {
		choices = append(choices, func() ddl {
			r.nextCol++
			c := column{fmt.Sprintf("c%d", r.nextCol), colType}
			r.extra = append(r.extra, c)
			return ddl{clause: "ADD COLUMN " + c.name + " " + c.typ, about: c.name, has: hasColumn(c.name, ""),
				ptOSC: r.ptOSC != "" && r.t.pk && r.rng.IntN(4) == 0}
		})
	}
	if len(r.extra) > 0 {
		i := r.rng.IntN(len(r.extra))
		c := r.extra[i]
		if !r.indexed[c.name] {
			choices = append(choices, func() ddl {
				r.extra = slices.Delete(r.extra, i, i+1)
				return ddl{clause: "DROP COLUMN " + c.name, about: c.name, has: hasNoColumn(c.name)}
			})
			choices = append(choices, func() ddl {
				r.nextCol++
				n := fmt.Sprintf("c%d", r.nextCol)
				r.extra[i].name = n
				return ddl{clause: "CHANGE COLUMN " + c.name + " " + n + " " + c.typ, about: n, has: hasColumn(n, "")}
			})
			choices = append(choices, func() ddl {
				r.indexed[c.name] = true
				return ddl{clause: "ADD INDEX ix_" + c.name + " (" + c.name + ")", about: "ix_" + c.name, has: hasIndex("ix_"+c.name, true)}
			})
		} else {
			choices = append(choices, func() ddl {
				delete(r.indexed, c.name)
				return ddl{clause: "DROP INDEX ix_" + c.name, about: "ix_" + c.name, has: hasIndex("ix_"+c.name, false)}
			})
		}
		if strings.HasPrefix(c.typ, "INT ") {
			choices = append(choices, func() ddl {
				r.extra[i].typ = "BIGINT NOT NULL DEFAULT 0"
				return ddl{clause: "MODIFY COLUMN " + c.name + " BIGINT NOT NULL DEFAULT 0", about: c.name, has: hasColumn(c.name, "bigint")}
			})
		}
	}
	if len(choices) == 0 {
		return ddl{}, false
	}
	return choices[r.rng.IntN(len(choices))](), true
}

// apply runs d on every shard, in a random order, a random delay apart.
func (r *ddlRunner) apply(ctx context.Context, d ddl) {
	order := r.rng.Perm(len(r.live))
	delays := make([]time.Duration, len(order))
	for i := range delays {
		delays[i] = time.Duration(r.rng.IntN(1500)) * time.Millisecond
	}
	r.Steps = append(r.Steps, d.clause)
	r.Downstream = append(r.Downstream, d.about)
	if r.logf != nil {
		r.logf("ddl: %s %s (pt-osc %v) on its %d shards", r.t.name, d.clause, d.ptOSC, len(r.live))
	}
	for i, k := range order {
		l := r.live[k]
		for try := 0; ctx.Err() == nil; try++ {
			err := r.applyOne(ctx, l, d)
			if err == nil {
				break
			}
			r.errors++
			if r.logf != nil && try%30 == 0 {
				r.logf("ddl: %s %s on shard %d: %v (try %d; retried every second)", r.t.name, d.clause, l.s.index+1, err, try+1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delays[i]):
		}
	}
}

// applyOne runs d on one shard unless the shard has it already (an earlier try took).
func (r *ddlRunner) applyOne(ctx context.Context, l *liveShard, d ddl) error {
	l.mu.Lock()
	schema, table := l.s.schema, l.s.name
	l.mu.Unlock()
	db := r.dbs[l.s.source]
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	done, err := d.has(hctx, db, schema, table)
	cancel()
	if err != nil || done {
		return err
	}
	if d.ptOSC {
		if err := r.clearPtOSC(ctx, db, schema, table); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, r.ptOSC, "--alter", d.clause,
			fmt.Sprintf("h=127.0.0.1,P=%d,u=root,D=%s,t=%s", r.ports[l.s.source], schema, table),
			"--execute", "--recursion-method=none", "--no-version-check", "--chunk-time=0.1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pt-online-schema-change on %s.%s: %v: %s", schema, table, err, out)
		}
		return nil
	}
	return r.alter(ctx, db, fmt.Sprintf("ALTER TABLE `%s`.`%s` %s", schema, table, d.clause))
}

// clearPtOSC removes what an interrupted pt-online-schema-change left on a shard: its triggers and its
// new table. A tool killed with its server (or cut off from it) between creating its triggers and the
// swap cannot drop them, and every later run refuses the table ("has triggers but --preserve-triggers
// was not specified"): an operator drops them before running it again, and so does the runner. Runs
// on one shard are never concurrent, so nothing found here belongs to a live run.
func (r *ddlRunner) clearPtOSC(ctx context.Context, db *sql.DB, schema, table string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ? AND TRIGGER_NAME LIKE 'pt\_osc\_%'`, schema, table)
	if err != nil {
		return err
	}
	var triggers []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		triggers = append(triggers, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	stmts := make([]string, 0, len(triggers)+1)
	for _, t := range triggers {
		stmts = append(stmts, fmt.Sprintf("DROP TRIGGER IF EXISTS `%s`.`%s`", schema, t))
	}
	var leftover int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		schema, "_"+table+"_new").Scan(&leftover); err != nil {
		return err
	}
	if leftover > 0 {
		stmts = append(stmts, fmt.Sprintf("DROP TABLE IF EXISTS `%s`.`_%s_new`", schema, table))
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("clear an interrupted pt-online-schema-change: %s: %w", q, err)
		}
	}
	if len(stmts) > 0 && r.logf != nil {
		r.logf("ddl: cleared an interrupted pt-online-schema-change on %s.%s: %s", schema, table, strings.Join(stmts, "; "))
	}
	return nil
}

// alter runs a DDL upstream with a bounded wait for its metadata lock (the server's default is a day)
// and a bounded time in all; a lock wait that times out names the sessions that held the table.
func (r *ddlRunner) alter(ctx context.Context, db *sql.DB, q string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 30"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, q)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1205 {
		return fmt.Errorf("%w; sessions on the server for more than 10 s: %s", err, longSessions(ctx, db))
	}
	return err
}

// longSessions lists the server's sessions older than 10 s, with their open transactions.
func longSessions(ctx context.Context, db *sql.DB) string {
	rows, err := db.QueryContext(ctx, `SELECT p.ID, p.COMMAND, p.TIME, COALESCE(p.STATE, ''), LEFT(COALESCE(p.INFO, ''), 120), COALESCE(t.trx_started, '')
FROM information_schema.PROCESSLIST p LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
WHERE p.TIME > 10 AND p.COMMAND NOT IN ('Binlog Dump', 'Daemon')`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, secs int64
		var cmd, state, info, trx string
		if rows.Scan(&id, &cmd, &secs, &state, &info, &trx) == nil {
			out = append(out, fmt.Sprintf("[%d %s %ds %q %q trx %q]", id, cmd, secs, state, info, trx))
		}
	}
	return strings.Join(out, " ")
}

// rename renames one shard within its group (its new name routes to the same target).
func (r *ddlRunner) rename(ctx context.Context) {
	l := r.live[r.rng.IntN(len(r.live))]
	r.renames++
	l.mu.Lock()
	defer l.mu.Unlock()
	to := fmt.Sprintf("%s_%d_r%d", r.t.prefix, l.s.index+1, r.renames)
	for try := 0; ctx.Err() == nil; try++ {
		err := r.alter(ctx, r.dbs[l.s.source], fmt.Sprintf("RENAME TABLE %s TO `%s`.`%s`", l.s.table(), l.s.schema, to))
		if err == nil {
			break
		}
		if r.logf != nil && try%30 == 0 {
			r.logf("ddl: rename of %s to %s: %v (try %d; retried every second)", l.s.table(), to, err, try+1)
		}
		// Took before the error? The new name is there then.
		var n int
		if qerr := r.dbs[l.s.source].QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", l.s.schema, to).Scan(&n); qerr == nil && n == 1 {
			break
		}
		r.errors++
		time.Sleep(time.Second)
	}
	l.s.name = to
	if r.logf != nil {
		r.logf("ddl: shard %d of %s renamed to %s", l.s.index+1, r.t.name, l.s.table())
	}
}

func hasColumn(name, typ string) func(context.Context, *sql.DB, string, string) (bool, error) {
	return func(ctx context.Context, db *sql.DB, schema, table string) (bool, error) {
		var dataType string
		err := db.QueryRowContext(ctx, "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?", schema, table, name).Scan(&dataType)
		if err == sql.ErrNoRows {
			return false, nil
		}
		return err == nil && (typ == "" || dataType == typ), err
	}
}

func hasNoColumn(name string) func(context.Context, *sql.DB, string, string) (bool, error) {
	has := hasColumn(name, "")
	return func(ctx context.Context, db *sql.DB, schema, table string) (bool, error) {
		ok, err := has(ctx, db, schema, table)
		return !ok, err
	}
}

func hasIndex(name string, want bool) func(context.Context, *sql.DB, string, string) (bool, error) {
	return func(ctx context.Context, db *sql.DB, schema, table string) (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = ?", schema, table, name).Scan(&n)
		return (n > 0) == want, err
	}
}
