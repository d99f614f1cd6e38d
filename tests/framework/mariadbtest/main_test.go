package mariadbtest

import (
	"testing"

	"github.com/tributary-db/tributary/tests/framework/leak"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m, RemoveTemplate) }
