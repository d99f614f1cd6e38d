package syncer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/tributary-db/tributary/vocab"
)

// gtidSet is a replica's GTID set in GTID mode, as its flavor keeps it: the set after the last
// complete event group, which the binlog is read from again after a restart.
type gtidSet interface {
	// add records one event group's GTID (its text as gtidOf gives it).
	add(gtid string) error
	String() string
}

// newGTIDSet parses a GTID set of the flavor ("" is the empty set).
func newGTIDSet(flavor, s string) (gtidSet, error) {
	if flavor == mysql.MySQLFlavor {
		set, err := mysql.ParseMysqlGTIDSet(s)
		if err != nil {
			return nil, fmt.Errorf("MySQL GTID set %q: %w", s, err)
		}
		return mysqlGTIDs{set.(*mysql.MysqlGTIDSet)}, nil
	}
	return parseMariadbGTIDs(s)
}

// gtidOf is the GTID of an event group's first event ("domain-server-seq" on MariaDB,
// "uuid[:tag]:gno" on MySQL), or "" for another event.
func gtidOf(ev replication.Event) (string, error) {
	switch e := ev.(type) {
	case *replication.MariadbGTIDEvent:
		return fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber), nil
	case *replication.GtidTaggedLogEvent:
		u, err := uuid.FromBytes(e.SID)
		if err != nil {
			return "", fmt.Errorf("tagged GTID event: %w", err)
		}
		return fmt.Sprintf("%s:%s:%d", u, e.Tag, e.GNO), nil
	case *replication.GTIDEvent:
		u, err := uuid.FromBytes(e.SID)
		if err != nil {
			return "", fmt.Errorf("GTID event: %w", err)
		}
		return fmt.Sprintf("%s:%d", u, e.GNO), nil
	}
	return "", nil
}

// mysqlGTIDs is a MySQL GTID set (gtid_executed's form: intervals per UUID and tag). Unlike
// MariaDB's, it holds every transaction, so a set read at a position must start from the file's
// PREVIOUS_GTIDS (gtidsAt).
type mysqlGTIDs struct{ set *mysql.MysqlGTIDSet }

func (g mysqlGTIDs) add(gtid string) error {
	if err := g.set.Update(gtid); err != nil {
		return fmt.Errorf("GTID %q: %w", gtid, err)
	}
	return nil
}

func (g mysqlGTIDs) String() string { return g.set.String() }

// mariadbGTIDs is a MariaDB GTID set holding one GTID per domain, the newest, as a replica's
// gtid_slave_pos does. (go-mysql's set keeps one per domain and server, and resuming from a set with
// two GTIDs of one domain after a primary switchover fails with ERROR 1943.)
type mariadbGTIDs map[uint32]mysql.MariadbGTID

func parseMariadbGTIDs(s string) (mariadbGTIDs, error) {
	g := mariadbGTIDs{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		gtid, err := mysql.ParseMariadbGTID(part)
		if err != nil {
			return nil, fmt.Errorf("GTID set %q: %w", s, err)
		}
		g.addGTID(*gtid)
	}
	return g, nil
}

func (g mariadbGTIDs) add(text string) error {
	gtid, err := mysql.ParseMariadbGTID(text)
	if err != nil {
		return fmt.Errorf("GTID %q: %w", text, err)
	}
	g.addGTID(*gtid)
	return nil
}

func (g mariadbGTIDs) addGTID(gtid mysql.MariadbGTID) {
	if cur, ok := g[gtid.DomainID]; !ok || gtid.SequenceNumber >= cur.SequenceNumber || gtid.ServerID != cur.ServerID {
		g[gtid.DomainID] = gtid
	}
}

func (g mariadbGTIDs) String() string {
	domains := make([]uint32, 0, len(g))
	for d := range g {
		domains = append(domains, d)
	}
	slices.Sort(domains)
	parts := make([]string, len(domains))
	for i, d := range domains {
		x := g[d]
		parts[i] = fmt.Sprintf("%d-%d-%d", x.DomainID, x.ServerID, x.SequenceNumber)
	}
	return strings.Join(parts, ",")
}

// gtidsAt reads a MySQL source's GTID set at a position from its binlog: the file's
// PREVIOUS_GTIDS and the GTID of every event group that starts before the position (which is an
// event group's boundary: a checkpoint, a task's meta, SHOW BINARY LOG STATUS).
func (s *Syncer) gtidsAt(ctx context.Context, pos vocab.Position) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	bs := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: s.cfg.ServerID, Flavor: s.cfg.Flavor,
		Host: s.cfg.Host, Port: s.cfg.Port, User: s.cfg.User, Password: s.cfg.Password, TLSConfig: s.cfg.TLS,
		ReadTimeout: 30 * time.Second, MaxReconnectAttempts: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer bs.Close()
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("source %s: the GTID set at %s (read from the binlog from %s:4): %w", s.cfg.Source, pos, pos.File, err)
	}
	st, err := bs.StartSync(mysql.Position{Name: pos.File, Pos: 4})
	if err != nil {
		return fail(err)
	}
	var set gtidSet
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			return fail(err)
		}
		h := ev.Header
		switch e := ev.Event.(type) {
		case *replication.PreviousGTIDsEvent:
			if set, err = newGTIDSet(mysql.MySQLFlavor, e.GTIDSets); err != nil {
				return fail(err)
			}
		case *replication.RotateEvent:
			if h.LogPos != 0 && string(e.NextLogName) != pos.File {
				return fail(fmt.Errorf("the file ends at %d, before the position", h.LogPos))
			}
		default:
			if g, err := gtidOf(ev.Event); err != nil {
				return fail(err)
			} else if g != "" && h.LogPos-h.EventSize < pos.Pos {
				if set == nil {
					return fail(fmt.Errorf("a GTID event at %d before the file's PREVIOUS_GTIDS", h.LogPos-h.EventSize))
				}
				if err := set.add(g); err != nil {
					return fail(err)
				}
			}
		}
		if set != nil && h.LogPos >= pos.Pos {
			return set.String(), nil
		}
	}
}
