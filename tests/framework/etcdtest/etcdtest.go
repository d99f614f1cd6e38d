// Package etcdtest starts one embedded etcd member per test process for tests that need a real etcd.
// Under go test -short (make unit) no member starts: Client skips the test.
package etcdtest

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/tests/framework/netutil"
)

var shared struct {
	once sync.Once
	e    *embed.Etcd
	cli  *clientv3.Client
	dir  string
	err  error
}

// Client returns a client of the process's embedded etcd, starting it on first use. Tests keep apart
// by using their own key prefix. Without TRIBUTARY_ETCD_FSYNC set, the member skips fsync: only the
// tests' throw-away data lives there.
func Client(t testing.TB) *clientv3.Client {
	t.Helper()
	SkipShort(t)
	shared.once.Do(func() { shared.e, shared.cli, shared.dir, shared.err = start() })
	if shared.err != nil {
		t.Fatalf("embedded etcd: %v", shared.err)
	}
	return shared.cli
}

// SkipShort skips t under go test -short (make unit starts no embedded etcd; make test runs these tests).
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an embedded etcd: skipped under -short (make unit); make test runs it")
	}
}

// Stop stops the shared member (call it from TestMain after m.Run).
func Stop() {
	if shared.cli != nil {
		shared.cli.Close()
	}
	if shared.e != nil {
		shared.e.Close()
		os.RemoveAll(shared.dir)
	}
}

func start() (*embed.Etcd, *clientv3.Client, string, error) {
	dir, err := os.MkdirTemp("", "tributary-etcd-")
	if err != nil {
		return nil, nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.UnsafeNoFsync = os.Getenv("TRIBUTARY_ETCD_FSYNC") == ""
	// As dm-master's member (master.StartEtcd): left at zero, every request counts as slow, and etcd
	// formats each one as text for a warning (a tenth of the CPU of a 256-source lock benchmark).
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cp, err := netutil.FreePort()
	if err != nil {
		return nil, nil, dir, err
	}
	pp, err := netutil.FreePort()
	if err != nil {
		return nil, nil, dir, err
	}
	curl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
	purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, dir, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, nil, dir, fmt.Errorf("embedded etcd not ready after 30s")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{curl.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		return nil, nil, dir, err
	}
	return e, cli, dir, nil
}
