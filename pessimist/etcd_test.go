package pessimist

import (
	"flag"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/leak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Tests check the Keeper's kept counts at every decision; benchmarks measure without the check.
	verifyCounts = flag.Lookup("test.bench").Value.String() == ""
	leak.VerifyTestMain(m, etcdtest.Stop) // then fails a run that leaves a goroutine
}

func etcdClient(t testing.TB) *clientv3.Client { return etcdtest.Client(t) }
