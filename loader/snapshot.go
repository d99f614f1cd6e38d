package loader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/vocab"
)

// snapshot is a set of upstream connections that read one consistent state of the source, and that
// state's binlog position and GTID set.
type snapshot struct {
	conns  []*sql.Conn
	pos    vocab.Position
	gtid   string
	locked bool // taken under a brief global read lock (else: one connection, MariaDB's snapshot status)
}

func (s *snapshot) close() {
	for _, c := range s.conns {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		c.Close()
	}
}

// lockWait bounds FLUSH TABLES WITH READ LOCK: it waits for running statements, and every write of
// the source waits behind it meanwhile.
const lockWait = 10 * time.Second

// takeSnapshot opens n reader connections on one consistent state. With the RELOAD privilege it takes
// FLUSH TABLES WITH READ LOCK for the few milliseconds it needs to start a consistent-snapshot
// transaction on every connection and read the binlog position (mysqldump's way; the copy then holds
// no lock). Without it, on MariaDB, one connection's START TRANSACTION WITH CONSISTENT SNAPSHOT and its
// binlog_snapshot_file/position status give the same without any lock, with one reader. inspect runs
// on the first connection while the state is still locked, so the tables' definitions are the
// snapshot's; the tables it returns are then opened on every other connection too, still under the
// lock, so that each reader holds their metadata locks from the start. (A reader that opened a table
// only later would queue behind an upstream ALTER of it, which itself waits for the first
// connection's transaction to end: neither would ever go on.)
func takeSnapshot(ctx context.Context, db *sql.DB, n int, log *zap.Logger, inspect func(*sql.Conn) ([]vocab.TableName, error)) (*snapshot, error) {
	s := &snapshot{}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	first, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, first)
	if _, err := first.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", int(lockWait/time.Second))); err != nil {
		return nil, err
	}
	_, err = first.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
	var me *mysql.MySQLError
	switch {
	case err == nil:
		s.locked = true
	case errors.As(err, &me) && (me.Number == 1227 || me.Number == 1045 || me.Number == 1044):
		log.Warn("no RELOAD privilege for FLUSH TABLES WITH READ LOCK: one reader on a consistent snapshot without a lock (MariaDB)", zap.Error(err))
	case errors.As(err, &me) && (me.Number == 1205 || me.Number == 3024):
		return nil, fmt.Errorf("FLUSH TABLES WITH READ LOCK waited %s for running statements (a long query or transaction holds tables); the load retries: %w", lockWait, err)
	default:
		return nil, fmt.Errorf("FLUSH TABLES WITH READ LOCK: %w", err)
	}
	if s.locked {
		for i := 1; i < n; i++ {
			c, err := db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			s.conns = append(s.conns, c)
		}
	}
	for _, c := range s.conns {
		if _, err := c.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return nil, err
		}
		if _, err := c.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
			return nil, err
		}
	}
	if s.locked {
		pos, gtid, err := dbutil.SourcePosition(ctx, first)
		if err != nil {
			return nil, fmt.Errorf("read binlog position under the read lock (is log_bin on?): %w", err)
		}
		s.pos, s.gtid = pos, gtid
	} else {
		if err := s.snapshotStatus(ctx, first); err != nil {
			return nil, err
		}
	}
	tables, err := inspect(first)
	if err != nil {
		return nil, err
	}
	if s.locked {
		for _, c := range s.conns[1:] {
			for _, t := range tables {
				if _, err := c.ExecContext(ctx, "SELECT 1 FROM "+t.String()+" LIMIT 0"); err != nil {
					return nil, fmt.Errorf("open %s under the read lock: %w", t, err)
				}
			}
		}
	}
	if s.locked {
		if _, err := first.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// snapshotStatus reads MariaDB's position of the connection's consistent snapshot.
func (s *snapshot) snapshotStatus(ctx context.Context, c *sql.Conn) error {
	rows, err := c.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		switch strings.ToLower(k) {
		case "binlog_snapshot_file":
			s.pos.File = v
		case "binlog_snapshot_position":
			var p uint64
			fmt.Sscan(v, &p)
			s.pos.Pos = uint32(p)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if s.pos.File == "" {
		return errors.New("the source gives no binlog_snapshot_file status (MySQL, or log_bin off): the load needs the RELOAD privilege for FLUSH TABLES WITH READ LOCK")
	}
	var gtid sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", s.pos.File, s.pos.Pos).Scan(&gtid); err == nil {
		s.gtid = gtid.String
	}
	return nil
}

// keyBounds reads the smallest and largest key of a table on a snapshot connection (nil: empty).
func keyBounds(ctx context.Context, c *sql.Conn, t vocab.TableName, key string) (min, max *big.Int, err error) {
	var lo, hi sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT MIN("+quote(key)+"), MAX("+quote(key)+") FROM "+t.String()).Scan(&lo, &hi); err != nil {
		return nil, nil, fmt.Errorf("key range of %s: %w", t, err)
	}
	if !lo.Valid || !hi.Valid {
		return nil, nil, nil
	}
	min, _ = new(big.Int).SetString(lo.String, 10)
	max, _ = new(big.Int).SetString(hi.String, 10)
	return min, max, nil
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
