package mariadbtest

import (
	"testing"

	"github.com/tributary-db/tributary/internal/testkit/leak"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m, RemoveTemplate) }
