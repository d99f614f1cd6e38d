package syncer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

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
		g.add(*gtid)
	}
	return g, nil
}

func (g mariadbGTIDs) add(gtid mysql.MariadbGTID) {
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
