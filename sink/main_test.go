package sink

import (
	"testing"

	"github.com/tributary-db/tributary/tests/framework/leak"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestMain removes the MariaDB template datadir after the tests and fails a run that leaves a goroutine.
func TestMain(m *testing.M) { leak.VerifyTestMain(m, mariadbtest.RemoveTemplate) }
