// Package etcdcli builds the long-lived etcd clients of the binaries: a dm-worker's, and a
// dm-master's when it uses an external etcd cluster (--etcd-endpoints).
package etcdcli

import (
	"crypto/tls"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// KeepAlive is how often the client pings a connection that carries nothing, and how long it waits
// for the answer before it drops the connection and dials again.
const KeepAlive = 5 * time.Second

// New returns a client of endpoints. Its connections are pinged (KeepAlive): a path that loses its
// bytes without a reset (a peer gone silently, a middlebox that forgot the flow) is dropped within
// about ten seconds and the watches resume on a new connection from the revision they had reached;
// without the pings a watch waits on such a connection until TCP gives up, which for an idle one
// is never.
func New(endpoints []string, tlsConfig *tls.Config, log *zap.Logger) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
		// Pings go only while a stream is open (a watch, a lease keep-alive: both binaries always
		// have one): etcd's server sends a client that pings without one away (it does not permit
		// it), and it accepts a ping every 5 s (its --grpc-keepalive-min-time).
		DialKeepAliveTime: KeepAlive, DialKeepAliveTimeout: KeepAlive,
		Logger: log, TLS: tlsConfig,
	})
}
