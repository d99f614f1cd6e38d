package master

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// EtcdConfig is the embedded etcd member of a dm-master.
type EtcdConfig struct {
	Name               string
	DataDir            string
	ClientURL          string // where the member serves etcd clients
	AdvertiseClientURL string // where clients reach it (default: ClientURL)
	PeerURL            string // where it talks to the other members
	AdvertisePeerURL   string
	InitialCluster     string // name=peer-url,...; empty: this member alone
	Existing           bool   // join a running cluster (--join) instead of forming a new one
	LogLevel           string
	LogFile            string // etcd\'s own log (default: stderr)
	// TLS, when set, is the TLS of the client and peer URLs (both https then; cmd/dm-master's
	// --ssl-ca, --ssl-cert, --ssl-key and --cert-allowed-cn).
	TLS *transport.TLSInfo
	// Register adds the master\'s own gRPC services to the etcd client server, so that one address
	// (--master-addr) serves both, as in DM.
	Register func(*grpc.Server)
	// HTTP are extra HTTP paths served on the client URL beside etcd's and gRPC (the master's metrics,
	// API and web page; etcd's UserHandlers, as DM does).
	HTTP map[string]http.Handler
	// Storage is the member's compaction and size limits, DM's flags of the same names; zero fields
	// take DM's defaults (DefaultEtcdStorage).
	Storage EtcdStorage
	// Logger, when set, is etcd's logger (instead of LogFile), at LogLevel (default warn).
	Logger *zap.Logger
}

// EtcdStorage are the embedded etcd's settings that DM exposes: how its history is compacted, how
// large its database may grow and how large a request or a transaction may be.
type EtcdStorage struct {
	AutoCompactionMode      string // periodic or revision
	AutoCompactionRetention string // periodic: a duration ("1h", or "5" for hours); revision: revisions to keep
	QuotaBackendBytes       int64
	MaxTxnOps               uint
	MaxRequestBytes         uint
}

// DefaultEtcdStorage is DM's: the history older than an hour compacted, a 2 GiB database, 2048
// operations a transaction, etcd's 1.5 MiB request.
var DefaultEtcdStorage = EtcdStorage{AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", QuotaBackendBytes: 2 << 30,
	MaxTxnOps: 2048, MaxRequestBytes: embed.DefaultMaxRequestBytes}

// minQuotaBackendBytes is DM's lower bound of --quota-backend-bytes (500 MiB).
const minQuotaBackendBytes = 500 << 20

// apply sets st on cfg, each zero field at DM's default; an invalid mode is an error naming its flag.
func (st EtcdStorage) apply(cfg *embed.Config) error {
	d := DefaultEtcdStorage
	mode := strings.ToLower(cmp.Or(st.AutoCompactionMode, d.AutoCompactionMode))
	if mode != "periodic" && mode != "revision" {
		return fmt.Errorf("--auto-compaction-mode %q: use periodic or revision", st.AutoCompactionMode)
	}
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = mode, cmp.Or(st.AutoCompactionRetention, d.AutoCompactionRetention)
	cfg.QuotaBackendBytes = max(cmp.Or(st.QuotaBackendBytes, d.QuotaBackendBytes), minQuotaBackendBytes)
	cfg.MaxTxnOps = cmp.Or(st.MaxTxnOps, d.MaxTxnOps)
	cfg.MaxRequestBytes = cmp.Or(st.MaxRequestBytes, d.MaxRequestBytes)
	return nil
}

// StartEtcd starts the embedded etcd member and waits until it serves.
func StartEtcd(c EtcdConfig) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = c.Name, c.DataDir
	cfg.Logger, cfg.LogLevel = "zap", c.LogLevel
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	parse := func(field, s string) (url.URL, error) {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return url.URL{}, fmt.Errorf("%s %q is not a URL like http://127.0.0.1:2379", field, s)
		}
		return *u, nil
	}
	client, err := parse("client URL", c.ClientURL)
	if err != nil {
		return nil, err
	}
	peer, err := parse("--peer-urls", c.PeerURL)
	if err != nil {
		return nil, err
	}
	adv := peer
	if c.AdvertisePeerURL != "" {
		if adv, err = parse("--advertise-peer-urls", c.AdvertisePeerURL); err != nil {
			return nil, err
		}
	}
	advClient := client
	if c.AdvertiseClientURL != "" {
		if advClient, err = parse("--advertise-addr", c.AdvertiseClientURL); err != nil {
			return nil, err
		}
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{advClient}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{adv}
	cfg.ServiceRegister = c.Register
	cfg.UserHandlers = c.HTTP
	if c.TLS != nil {
		cfg.ClientTLSInfo, cfg.PeerTLSInfo = *c.TLS, *c.TLS
	}
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	if err := c.Storage.apply(cfg); err != nil {
		return nil, err
	}
	if c.LogFile != "" {
		cfg.LogOutputs = []string{c.LogFile}
	}
	if c.Logger != nil {
		var lvl zapcore.Level
		if err := lvl.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
			return nil, fmt.Errorf("etcd log level %q: %w", cfg.LogLevel, err)
		}
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.Logger.Named("etcd").WithOptions(zap.IncreaseLevel(lvl)))
	}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(c.Name)
	}
	if c.Existing {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd %s in %s: %w", c.Name, c.DataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd %s not ready after 60s", c.Name)
	}
}

// Join adds a member named name with peer URL peerURL to the running cluster reached at join (the
// --master-addr of running masters) and returns the initial cluster string the new member starts
// with. tlsConfig is the cluster's client TLS (nil: none).
func Join(ctx context.Context, join []string, name, peerURL string, tlsConfig *tls.Config) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: join, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), TLS: tlsConfig})
	if err != nil {
		return "", fmt.Errorf("--join %v: %w", join, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return "", fmt.Errorf("--join %v: add member %s (%s): %w", join, name, peerURL, err)
	}
	var parts []string
	for _, m := range resp.Members {
		n := m.Name
		if m.ID == resp.Member.ID {
			n = name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ","), nil
}
