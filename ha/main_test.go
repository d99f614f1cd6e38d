package ha

import (
	"os"
	"testing"

	"github.com/tributary-db/tributary/internal/testkit/etcdtest"
)

// TestMain stops the embedded etcd of the tests and removes its data directory.
func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}
