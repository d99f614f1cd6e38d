// dm-worker: registers with the masters' etcd under a lease and replicates the source the leader
// binds to it; serves the Worker gRPC service (status) on --worker-addr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/internal/cli"
	"github.com/tributary-db/tributary/internal/etcdcli"
	"github.com/tributary-db/tributary/internal/serve"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/worker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dm-worker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dm-worker", flag.ContinueOnError)
	name := fs.String("name", "", "name of this worker (unique in the cluster; default: --advertise-addr, as DM)")
	workerAddr := fs.String("worker-addr", "127.0.0.1:8262", "address serving the masters")
	advAddr := fs.String("advertise-addr", "", "address the masters reach this worker at (default: --worker-addr)")
	join := fs.String("join", "127.0.0.1:8261", "master addresses (host:port,..., an http:// in front allowed)")
	ttl := fs.Int("keepalive-ttl", 60, "seconds after this worker's death its source moves to another worker")
	logCfg := cli.LogFlags(fs)
	secretKeyPath := fs.String("secret-key-path", "", "file holding the 64-hex-character key of the passwords (the masters' secret-key-path); default: the key kept in etcd")
	security := cli.TLSFlags(fs, true)
	noEffect := cli.NoEffectFlags(fs, map[string]string{
		"relay-keepalive-ttl": "relay log is not supported (enable-relay: false)",
		"relay-dir":           "relay log is not supported (enable-relay: false)",
		"log-rotate":          "logs rotate by size, see --log-max-size",
	})
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
	if *ttl < 1 {
		return fmt.Errorf("--keepalive-ttl %d must be at least 1 second", *ttl)
	}
	// DM's files write addresses with or without "http://", and ":8262" for every interface.
	if *workerAddr, err = cli.ListenAddr("worker-addr", *workerAddr); err != nil {
		return err
	}
	if *advAddr, err = cli.AdvertiseAddr("worker-addr", *workerAddr, "advertise-addr", *advAddr); err != nil {
		return err
	}
	if *name == "" {
		*name = *advAddr
	}
	endpoints, err := cli.Endpoints("join", *join)
	if err != nil {
		return err
	}
	log, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer log.Sync()
	if given := noEffect.Given(); len(given) > 0 {
		log.Warn("DM settings accepted with no effect", zap.Strings("settings", given))
	}
	client, err := etcdcli.New(endpoints, clientTLS, log.Named("etcd-client"))
	if err != nil {
		return fmt.Errorf("--join %s: %w", *join, err)
	}
	defer client.Close()
	keyCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	key, err := ha.PasswordKey(keyCtx, client, *secretKeyPath)
	cancel()
	if err != nil {
		return err
	}
	config.SetPasswordKey(&key)
	if *secretKeyPath != "" {
		config.SetDMSecretKey(&key) // DM v8 encrypted its files' passwords with this file's key too
	}
	lis, err := net.Listen("tcp", *workerAddr)
	if err != nil {
		return fmt.Errorf("--worker-addr: %w", err)
	}
	srv := worker.NewServer(worker.ServerConfig{Name: *name, Addr: *advAddr, Client: client, KeepaliveTTL: *ttl, Log: log})
	g := grpc.NewServer() // TLS, if any, is the listener's (serve.New)
	pb.RegisterWorkerServer(g, srv)
	prometheus.MustRegister(srv.Collector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	for path, h := range serve.Pprof() {
		mux.Handle(path, h)
	}
	web := serve.New(lis, g, mux, serverTLS) // /metrics and /debug/pprof/ beside gRPC, as DM's worker
	go web.Serve()
	defer web.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("dm-worker started", zap.String("name", *name), zap.String("worker-addr", *workerAddr), zap.String("join", *join))
	err = srv.Run(ctx)
	log.Info("dm-worker stopping")
	return err
}
