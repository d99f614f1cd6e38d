package chaos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-db/tributary/tests/framework/leak"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestMain removes the MariaDB template datadir after the tests and fails a run that leaves a goroutine.
func TestMain(m *testing.M) { leak.VerifyTestMain(m, mariadbtest.RemoveTemplate) }

// ciSeed is the short soak's seed in make test: fixed, so that a red CI replays with
// make chaos SEED=4 DURATION=90s.
const ciSeed = 4

// TestSoakShort is the chaos soak CI runs (docs/testing.md "Chaos soak"): the whole cluster under overlapping
// faults for 90 s (TRIBUTARY_CHAOS_DURATION changes it), judged by every checker. -short skips it.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos soak takes minutes")
	}
	d := 90 * time.Second
	if v := os.Getenv("TRIBUTARY_CHAOS_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TRIBUTARY_CHAOS_DURATION=%q: %v", v, err)
		}
	}
	var log syncBuffer
	rep, err := Run(context.Background(), Config{Duration: d, Seed: ciSeed, Root: filepath.Join("..", ".."), Log: &log})
	if err != nil {
		t.Fatalf("the soak could not run: %v\n%s", err, log.tail(200))
	}
	t.Log("\n" + rep.String())
	if len(rep.Failures) > 0 {
		t.Errorf("the soak failed (replay: make chaos SEED=%d DURATION=%s); its last log lines:\n%s", ciSeed, d, log.tail(200))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(s.b.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
