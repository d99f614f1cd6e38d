package meta

import (
	"os"
	"testing"

	"github.com/tributary-db/tributary/internal/mariadbtest"
)

// TestMain removes the MariaDB template datadir this test process made (about 100 MB).
func TestMain(m *testing.M) {
	code := m.Run()
	mariadbtest.RemoveTemplate()
	os.Exit(code)
}
