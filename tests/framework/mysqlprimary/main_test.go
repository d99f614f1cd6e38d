package mysqlprimary

import (
	"testing"

	"github.com/tributary-db/tributary/tests/framework/leak"
)

// TestMain fails a run that leaves a goroutine.
func TestMain(m *testing.M) { leak.VerifyTestMain(m, nil) }
