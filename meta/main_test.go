package meta

import (
	"testing"

	"github.com/tributary-db/tributary/internal/testkit/mariadbtest"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }
