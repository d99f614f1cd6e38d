// dm-master: embedded etcd (or an external etcd cluster with --etcd-endpoints), leader election, and
// on the leader the pessimist coordinator and the source scheduler; it serves dmctl's Master gRPC
// service on --master-addr (with embedded etcd the same address serves etcd clients, as in DM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/internal/cli"
	"github.com/tributary-db/tributary/internal/etcdcli"
	"github.com/tributary-db/tributary/internal/serve"
	"github.com/tributary-db/tributary/master"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dm-master:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dm-master", flag.ContinueOnError)
	name := fs.String("name", "dm-master", "name of this master (unique in the cluster)")
	masterAddr := fs.String("master-addr", "127.0.0.1:8261", "address serving dmctl (and etcd clients, with embedded etcd)")
	advAddr := fs.String("advertise-addr", "", "address the other masters, workers and dmctl reach this one at (default: --master-addr)")
	peerURLs := fs.String("peer-urls", "http://127.0.0.1:8291", "URL for the other masters' etcd peers")
	advPeer := fs.String("advertise-peer-urls", "", "peer URL advertised to the other masters (default: --peer-urls)")
	initial := fs.String("initial-cluster", "", "name=peer-url,... of the initial masters (default: this one)")
	join := fs.String("join", "", "master addresses of a running cluster to join as a new member")
	dataDir := fs.String("data-dir", "", "directory of the embedded etcd (default: default.<name>)")
	etcdEndpoints := fs.String("etcd-endpoints", "", "client URLs of an external etcd cluster to use instead of the embedded one")
	clusterState := fs.String("initial-cluster-state", "new", "new, or existing: this member joins the running cluster of --initial-cluster (as --join does)")
	st := master.DefaultEtcdStorage
	fs.StringVar(&st.AutoCompactionMode, "auto-compaction-mode", st.AutoCompactionMode, "the embedded etcd's compaction of its history: periodic or revision")
	fs.StringVar(&st.AutoCompactionRetention, "auto-compaction-retention", st.AutoCompactionRetention, "history kept: a duration (\"1h\", \"5\" for hours) in periodic mode, revisions in revision mode")
	fs.Int64Var(&st.QuotaBackendBytes, "quota-backend-bytes", st.QuotaBackendBytes, "the embedded etcd's database size limit in bytes (at least 500 MiB)")
	fs.UintVar(&st.MaxRequestBytes, "max-request-bytes", st.MaxRequestBytes, "the embedded etcd's limit on a request's size in bytes")
	maxTxnOps := fs.Uint("max-txn-ops", st.MaxTxnOps, "the embedded etcd's limit on a transaction's operations; when given, also the most the master puts in one (default 128, etcd's own default, which an external etcd may have)")
	v1Sources := fs.String("v1-sources-path", "", "DM's upgrade from DM 1.0: not supported")
	noEffect := cli.NoEffectFlags(fs, map[string]string{
		"rpc-timeout":    "each dmctl command has its own time limit",
		"rpc-rate-limit": "the master's RPCs are not rate-limited",
		"rpc-rate-burst": "the master's RPCs are not rate-limited",
		"log-rotate":     "logs rotate by size, see --log-max-size",
	})
	logCfg := cli.LogFlags(fs)
	openapi := fs.Bool("openapi", false, "serve the HTTP API (/api/v1/) and the web page (/dashboard/) on --master-addr, as DM's openapi")
	corsOrigins := fs.String("cors-origins", "", "web origins (scheme://host[:port], comma-separated) whose pages may read and call this address's HTTP (API, etcd's JSON gateway); default none, only pages this address serves")
	secretKeyPath := fs.String("secret-key-path", "", "file holding the 64-hex-character key of the passwords (dmctl encrypt); default: a key generated once and kept in etcd")
	security := cli.TLSFlags(fs, true)
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, cli.ErrVersionPrinted) {
			return nil
		}
		return err
	}
	serverTLS, clientTLS, err := security.Configs()
	if err != nil {
		return err
	}
	if *v1Sources != "" {
		return fmt.Errorf("--v1-sources-path %s: upgrading from DM 1.0 is not supported; create the sources with dmctl operate-source create", *v1Sources)
	}
	// DM's files write addresses with or without a scheme, and ":8261" for every interface.
	if *masterAddr, err = cli.ListenAddr("master-addr", *masterAddr); err != nil {
		return err
	}
	if *advAddr, err = cli.AdvertiseAddr("master-addr", *masterAddr, "advertise-addr", *advAddr); err != nil {
		return err
	}
	*peerURLs, *advPeer, *initial = cli.WrapURLs(*peerURLs), cli.WrapURLs(*advPeer), cli.WrapCluster(*initial)
	if security.Enabled() { // DM's way: with TLS every URL of the cluster is https
		for _, u := range []*string{peerURLs, advPeer, initial} {
			*u = strings.ReplaceAll(*u, "http://", "https://")
		}
	}
	var joinAddrs []string
	if *join != "" {
		if *initial != "" {
			return errors.New("--join and --initial-cluster are exclusive: a new member learns the cluster from --join")
		}
		if joinAddrs, err = cli.Endpoints("join", *join); err != nil {
			return err
		}
	}
	switch strings.ToLower(*clusterState) {
	case "new", "existing":
	default:
		return fmt.Errorf("--initial-cluster-state %q: use new or existing", *clusterState)
	}
	st.MaxTxnOps = *maxTxnOps
	origins, err := serve.ParseOrigins("cors-origins", *corsOrigins)
	if err != nil {
		return err
	}
	log, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer log.Sync()
	originPolicy := serve.NewOriginPolicy(origins, security.Enabled(), log.Named("http"))
	if given := noEffect.Given(); len(given) > 0 {
		log.Warn("DM settings accepted with no effect", zap.Strings("settings", given))
	}
	if *dataDir == "" {
		*dataDir = "default." + *name
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc := &master.Service{Name: *name, Election: master.ElectionKey, Log: log, TLS: clientTLS}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "max-txn-ops" {
			svc.MaxTxnOps = int(*maxTxnOps)
		}
	})
	defer svc.Close()

	var client *clientv3.Client
	if *etcdEndpoints != "" {
		client, err = etcdcli.New(strings.Split(*etcdEndpoints, ","), clientTLS, log.Named("etcd-client"))
		if err != nil {
			return fmt.Errorf("--etcd-endpoints %s: %w", *etcdEndpoints, err)
		}
		defer client.Close()
		lis, err := net.Listen("tcp", *masterAddr)
		if err != nil {
			return fmt.Errorf("--master-addr: %w", err)
		}
		srv := grpc.NewServer() // TLS, if any, is the listener's (serve.New)
		pb.RegisterMasterServer(srv, svc)
		s := serve.New(lis, srv, originPolicy.Handler(master.Mux(svc.HTTPHandlers(*openapi))), serverTLS)
		go s.Serve()
		defer s.Close()
	} else {
		existing := strings.EqualFold(*clusterState, "existing")
		if *join != "" {
			if _, err := os.Stat(filepath.Join(*dataDir, "member")); err == nil {
				log.Info("data directory exists: restarting as a member, --join ignored", zap.String("data-dir", *dataDir))
			} else {
				peer := *advPeer
				if peer == "" {
					peer = *peerURLs
				}
				if *initial, err = master.Join(ctx, joinAddrs, *name, peer, clientTLS); err != nil {
					return err
				}
				existing = true
			}
		}
		e, err := master.StartEtcd(master.EtcdConfig{
			Name: *name, DataDir: *dataDir, ClientURL: security.Scheme() + "://" + cli.BindHost(*masterAddr), Storage: st, AdvertiseClientURL: security.Scheme() + "://" + *advAddr, PeerURL: *peerURLs,
			TLS:              security.EtcdTLSInfo(),
			AdvertisePeerURL: *advPeer, InitialCluster: *initial, Existing: existing, Logger: log,
			Register: func(s *grpc.Server) { pb.RegisterMasterServer(s, svc) }, HTTP: svc.HTTPHandlers(*openapi), Origins: originPolicy,
		})
		if err != nil {
			return err
		}
		defer e.Close()
		client = v3client.New(e.Server)
		defer client.Close()
	}
	svc.Client = client
	key, err := ha.PasswordKey(ctx, client, *secretKeyPath)
	if err != nil {
		return err
	}
	svc.PasswordKey = &key
	config.SetPasswordKey(&key)
	if *secretKeyPath != "" {
		config.SetDMSecretKey(&key) // DM v8 encrypted its files' passwords with this file's key too
	}
	if err := master.RegisterMember(ctx, client, *name, *advAddr); err != nil {
		return fmt.Errorf("register member %s: %w", *name, err)
	}
	prometheus.MustRegister(svc.Collector())
	go svc.TrackLocks(ctx, time.Second)
	lead := master.NewLeadership(client, *name, "", 5, log)
	lead.Run = master.LeaderRun(client, pessimist.NewLayout(""), svc, log)
	log.Info("dm-master started", zap.String("name", *name), zap.String("master-addr", *masterAddr), zap.String("data-dir", *dataDir),
		zap.Bool("external-etcd", *etcdEndpoints != ""), zap.Strings("cors-origins", origins))
	lead.Campaign(ctx)
	log.Info("dm-master stopping")
	return nil
}
