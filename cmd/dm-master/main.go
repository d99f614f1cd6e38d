// dm-master: embedded etcd, leader election, and the pessimist coordinator on the leader, serving
// dmctl's Master gRPC service on --master-addr (the same address serves etcd clients, as in DM).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"google.golang.org/grpc"

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
	masterAddr := fs.String("master-addr", "127.0.0.1:8261", "address serving dmctl and etcd clients")
	advAddr := fs.String("advertise-addr", "", "address the other masters and dmctl reach this one at (default: --master-addr)")
	peerURLs := fs.String("peer-urls", "http://127.0.0.1:8291", "URL for the other masters' etcd peers")
	advPeer := fs.String("advertise-peer-urls", "", "peer URL advertised to the other masters (default: --peer-urls)")
	initial := fs.String("initial-cluster", "", "name=peer-url,... of the initial masters (default: this one)")
	dataDir := fs.String("data-dir", "", "directory of the embedded etcd (default: default.<name>)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFile := fs.String("log-file", "", "log file (default: stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log, err := newLogger(*logLevel, *logFile)
	if err != nil {
		return err
	}
	defer log.Sync()
	if *dataDir == "" {
		*dataDir = "default." + *name
	}
	if *advAddr == "" {
		*advAddr = *masterAddr
	}
	svc := &master.Service{Name: *name, Election: master.ElectionKey}
	defer svc.Close()
	e, err := master.StartEtcd(master.EtcdConfig{
		Name: *name, DataDir: *dataDir, ClientURL: "http://" + *masterAddr, PeerURL: *peerURLs,
		AdvertisePeerURL: *advPeer, InitialCluster: *initial, LogFile: *logFile,
		Register: func(s *grpc.Server) { pb.RegisterMasterServer(s, svc) },
	})
	if err != nil {
		return err
	}
	defer e.Close()
	cli := v3client.New(e.Server)
	defer cli.Close()
	svc.Client = cli
	if err := master.RegisterMember(context.Background(), cli, *name, *advAddr); err != nil {
		return fmt.Errorf("register member %s: %w", *name, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lead := master.NewLeadership(cli, *name, "", 5, log)
	lead.Run = master.LeaderRun(cli, pessimist.NewLayout(""), svc, log)
	log.Info("dm-master started", zap.String("name", *name), zap.String("master-addr", *masterAddr), zap.String("data-dir", *dataDir))
	lead.Campaign(ctx)
	log.Info("dm-master stopping")
	return nil
}

func newLogger(level, file string) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	if err := cfg.Level.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	if file != "" {
		cfg.OutputPaths, cfg.ErrorOutputPaths = []string{file}, []string{file}
	}
	return cfg.Build()
}
