package ha

import (
	"testing"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/leak"
)

// TestMain stops the embedded etcd of the tests and removes its data directory, then fails a run that
// leaves a goroutine.
func TestMain(m *testing.M) { leak.VerifyTestMain(m, etcdtest.Stop) }
