package pessimist

import (
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/internal/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

func etcdClient(t testing.TB) *clientv3.Client { return etcdtest.Client(t) }
