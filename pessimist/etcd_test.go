package pessimist

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// testEtcd is one embedded etcd member shared by the package's tests (started on first use, stopped
// by TestMain). Tests keep apart by using their own key root.
var testEtcd struct {
	once sync.Once
	e    *embed.Etcd
	cli  *clientv3.Client
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testEtcd.cli != nil {
		testEtcd.cli.Close()
	}
	if testEtcd.e != nil {
		testEtcd.e.Close()
		os.RemoveAll(testEtcd.dir)
	}
	os.Exit(code)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// etcdClient returns a client of the shared embedded etcd.
func etcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	testEtcd.once.Do(func() {
		testEtcd.dir, testEtcd.err = os.MkdirTemp("", "tributary-etcd-")
		if testEtcd.err != nil {
			return
		}
		cfg := embed.NewConfig()
		cfg.Dir = testEtcd.dir
		cfg.LogLevel = "error"
		cfg.Logger = "zap"
		// Only the tests' own throw-away data lives here; fsync would make the model test disk-bound.
		cfg.UnsafeNoFsync = os.Getenv("TRIBUTARY_ETCD_FSYNC") == ""
		cp, err := freePort()
		if err != nil {
			testEtcd.err = err
			return
		}
		pp, err := freePort()
		if err != nil {
			testEtcd.err = err
			return
		}
		curl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
		purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			testEtcd.err = err
			return
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			e.Close()
			testEtcd.err = fmt.Errorf("embedded etcd not ready after 30s")
			return
		}
		testEtcd.e = e
		testEtcd.cli, testEtcd.err = clientv3.New(clientv3.Config{
			Endpoints: []string{curl.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		})
	})
	if testEtcd.err != nil {
		t.Fatalf("embedded etcd: %v", testEtcd.err)
	}
	return testEtcd.cli
}
