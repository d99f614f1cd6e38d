package dbutil

import (
	"testing"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }
