package master

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/tmc/grpc-websocket-proxy/wsproxy"
	etcdservergw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	v3electiongw "go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb/gw"
	v3lockgw "go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb/gw"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tributary-db/tributary/internal/serve"
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
	// Origins is which web pages may use the client URL (--cors-origins): etcd's CORS answers and
	// every HTTP path, etcd's JSON gateway (/v3/) included, go through it. Nil: no page but the
	// address's own.
	Origins *serve.OriginPolicy
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
	origins := c.Origins
	if origins == nil {
		origins = serve.NewOriginPolicy(nil, c.TLS != nil, cmp.Or(c.Logger, zap.NewNop()))
	}
	// etcd answers CORS (preflights included) before any handler runs, and an empty set means
	// "every origin" to it: an origin no request can carry (a header value holds no NUL) stands for
	// none.
	cfg.CORS = map[string]struct{}{}
	for _, o := range origins.Origins() {
		cfg.CORS[o] = struct{}{}
	}
	if len(cfg.CORS) == 0 {
		cfg.CORS["\x00"] = struct{}{}
	}
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
	gateway, closeGateway, err := etcdGateway(client.Host, c.TLS)
	if err != nil {
		return nil, err
	}
	cfg.EnableGRPCGateway = false // served here, behind the origin policy
	cfg.UserHandlers = map[string]http.Handler{"/v3/": origins.Handler(gateway)}
	for p, h := range c.HTTP {
		cfg.UserHandlers[p] = origins.Handler(h)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		closeGateway()
		return nil, fmt.Errorf("start embedded etcd %s in %s: %w", c.Name, c.DataDir, err)
	}
	go func() { // the gateway's connection ends with the member it serves
		<-e.Server.StopNotify()
		closeGateway()
	}()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd %s not ready after 60s", c.Name)
	}
}

// etcdGateway is etcd's JSON gateway (/v3/kv/range and the rest, as embed's registerGateway builds
// it: the same marshaler, services and WebSocket proxy for streams), calling the member's gRPC at
// addr. The master serves it itself because embed offers no way to put a handler in front of its own;
// the close function closes the gRPC connection.
func etcdGateway(addr string, tlsInfo *transport.TLSInfo) (http.Handler, func(), error) {
	creds := insecure.NewCredentials()
	if tlsInfo != nil {
		cfg, err := tlsInfo.ServerConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("etcd gateway TLS: %w", err)
		}
		// The member's own listener, dialed by its listen address, which its certificate need not
		// name: its certificate is checked against the CA alone. etcd's check of a client's CN
		// (cert-allowed-cn) is dropped on this side: without a verified chain it refuses every server
		// (the reason etcd's own gateway fails with cert-allowed-cn); the member still checks ours.
		roots := cfg.ClientCAs
		cfg = cfg.Clone()
		cfg.InsecureSkipVerify, cfg.VerifyPeerCertificate, cfg.ClientCAs, cfg.NextProtos = true, nil, nil, nil
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd gateway: the member sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			return err
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return nil, nil, fmt.Errorf("etcd gateway: dial %s: %w", addr, err)
	}
	mux := gw.NewServeMux(gw.WithMarshalerOption(gw.MIMEWildcard, &gw.HTTPBodyMarshaler{
		Marshaler: &gw.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}))
	ctx := context.Background()
	for _, register := range []func(context.Context, *gw.ServeMux, *grpc.ClientConn) error{
		etcdservergw.RegisterKVHandler, etcdservergw.RegisterWatchHandler, etcdservergw.RegisterLeaseHandler,
		etcdservergw.RegisterClusterHandler, etcdservergw.RegisterMaintenanceHandler, etcdservergw.RegisterAuthHandler,
		v3lockgw.RegisterLockHandler, v3electiongw.RegisterElectionHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("etcd gateway: %w", err)
		}
	}
	h := wsproxy.WebsocketProxy(mux,
		// a stream over a WebSocket (its GET) is the gateway's POST
		wsproxy.WithRequestMutator(func(_ *http.Request, out *http.Request) *http.Request { out.Method = http.MethodPost; return out }),
		wsproxy.WithMaxRespBodyBufferSize(0x7fffffff),
		wsproxy.WithLogger(wsLogger{}))
	return h, func() { conn.Close() }, nil
}

// wsLogger drops the WebSocket proxy's lines (a client going away), as the master logs no request.
type wsLogger struct{}

func (wsLogger) Warnln(...any)  {}
func (wsLogger) Debugln(...any) {}

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
