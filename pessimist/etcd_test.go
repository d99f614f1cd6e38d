package pessimist

import (
	"flag"
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/internal/testkit/etcdtest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Tests check the Keeper's kept counts at every decision; benchmarks measure without the check.
	verifyCounts = flag.Lookup("test.bench").Value.String() == ""
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

func etcdClient(t testing.TB) *clientv3.Client { return etcdtest.Client(t) }
