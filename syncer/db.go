package syncer

import (
	"crypto/tls"
	"database/sql"
	"net"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// openUpstream opens the sync unit's pool to its source, in UTC as the downstream session: SHOW CREATE
// TABLE writes TIMESTAMP defaults in the session's zone. tlsConfig nil: no TLS.
func openUpstream(host string, port uint16, user, password string, tlsConfig *tls.Config) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = user, password
	c.Net, c.Addr = "tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))
	c.InterpolateParams = true
	c.Params = map[string]string{"time_zone": "'+00:00'"}
	c.TLS = tlsConfig
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}
