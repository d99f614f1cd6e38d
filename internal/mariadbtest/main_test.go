package mariadbtest

import (
	"os"
	"testing"
)

// TestMain removes the template datadir this test process made (about 100 MB).
func TestMain(m *testing.M) {
	code := m.Run()
	RemoveTemplate()
	os.Exit(code)
}
