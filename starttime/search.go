package starttime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// searchFiles returns the index of the file to scan for the first event group at or after ts: the
// last file whose first event is older than ts (a group of second ts may still end the file before
// one that begins in that second). first(i) is file i's first timestamp; files are oldest first, and
// their first timestamps do not decrease. before is true when the oldest file begins after ts: the
// events of that time, if any, are no longer on the server.
func searchFiles(n int, first func(i int) (uint32, error), ts uint32) (idx int, before bool, err error) {
	if n == 0 {
		return 0, false, fmt.Errorf("the server lists no binlog file (SHOW BINARY LOGS)")
	}
	lo, hi := 0, n-1 // the answer is the largest i with first(i) < ts, or -1
	idx = -1
	for lo <= hi {
		mid := (lo + hi) / 2
		f, err := first(mid)
		if err != nil {
			return 0, false, err
		}
		if f < ts {
			idx, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if idx >= 0 {
		return idx, false, nil
	}
	f, err := first(0)
	if err != nil {
		return 0, false, err
	}
	if f == ts { // the oldest file began in that very second: its first group is the answer
		return 0, false, nil
	}
	return 0, true, nil
}

// event is what the scan needs of a binlog event.
type event struct {
	Type     replication.EventType
	Time     uint32 // header timestamp
	Start    uint32 // the event's position in its file
	Query    string // QUERY_EVENT's statement
	GTID     *mysql.MariadbGTID
	GTIDList []mysql.MariadbGTID
}

// scanner walks one binlog file's events in order, and says which event begins the first event
// group at or after ts. An event group begins at a GTID event (MariaDB writes one before every
// transaction and DDL; MySQL a GTID or anonymous GTID event); in a binlog without them, at a BEGIN, or
// at a statement outside a transaction (a DDL). It tracks the MariaDB GTID set executed before the
// event it is at: the file's GTID list, then each GTID read.
type scanner struct {
	ts       uint32
	sawGTID  bool // the file has GTID events: groups begin there only
	inTxn    bool
	gtids    gtidSet
	lastTime uint32 // the newest timestamp of a group's first event seen
}

func newScanner(ts uint32) *scanner { return &scanner{ts: ts, gtids: gtidSet{}} }

// step takes the next event, and reports whether it begins the group the search is for (its Start is
// then the position, and s.gtids the GTID set before it).
func (s *scanner) step(ev event) bool {
	begins := false
	switch ev.Type {
	case replication.MARIADB_GTID_LIST_EVENT:
		s.gtids = gtidSet{}
		for _, g := range ev.GTIDList {
			s.gtids.list(g)
		}
	case replication.MARIADB_GTID_EVENT, replication.GTID_EVENT, replication.ANONYMOUS_GTID_EVENT:
		s.sawGTID, begins = true, true
	case replication.QUERY_EVENT:
		if s.sawGTID {
			break
		}
		switch q := strings.ToUpper(strings.TrimSpace(ev.Query)); {
		case q == "BEGIN" || strings.HasPrefix(q, "XA START") || strings.HasPrefix(q, "XA BEGIN"):
			begins, s.inTxn = !s.inTxn, true
		case q == "COMMIT" || q == "ROLLBACK" || strings.HasPrefix(q, "XA END") || strings.HasPrefix(q, "XA COMMIT") || strings.HasPrefix(q, "XA ROLLBACK"):
			s.inTxn = false
		default:
			begins = !s.inTxn
		}
	case replication.XID_EVENT, replication.XA_PREPARE_LOG_EVENT:
		s.inTxn = false
	}
	if begins {
		if ev.Time >= s.ts {
			return true
		}
		s.lastTime = max(s.lastTime, ev.Time)
	}
	if ev.GTID != nil {
		s.gtids.add(*ev.GTID)
	}
	return false
}

// gtidSet is a MariaDB GTID position: one GTID per domain, the newest (as gtid_binlog_pos).
type gtidSet map[uint32]mysql.MariadbGTID

// add records a GTID read in binlog order: it is the domain's newest.
func (g gtidSet) add(x mysql.MariadbGTID) { g[x.DomainID] = x }

// list records an entry of a GTID list event, which holds one GTID per domain and server: the
// domain's newest is the one of the highest sequence number.
func (g gtidSet) list(x mysql.MariadbGTID) {
	if cur, ok := g[x.DomainID]; !ok || x.SequenceNumber > cur.SequenceNumber {
		g[x.DomainID] = x
	}
}

func (g gtidSet) String() string {
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
