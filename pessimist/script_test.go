package pessimist

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKeeperScripts replays testdata/keeper/*.txt: lock scenarios written as scripts, easier to
// review than Go setup. Commands (one per line, # starts a comment):
//
//	sources s1 s2 ...        set the task's sources
//	info SRC DDL             SRC puts an info with DDL for `db`.`t`
//	done SRC                 SRC marks its operation done (and deletes its info)
//	settle                   the coordinator decides and writes until nothing is left to do
//	restart                  a new coordinator reads everything from the store
//	unlock [OWNER] [force]   dmctl shard-ddl-lock unlock
//	ops: WANT                the operations, as "src:exec+done src:skip" (empty: none)
//	keys: N                  the number of lock keys left
//	stage: WANT              the lock's stage (or "none")
//	error: TEXT              the previous unlock failed with an error containing TEXT
func TestKeeperScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "keeper", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

func runScript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := newHarness(t)
	var lastErr error
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.Index(text, "#"); i >= 0 && !strings.HasPrefix(text, "info") {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		at := func(format string, args ...any) { t.Errorf("%s:%d: "+format, append([]any{file, line}, args...)...) }
		switch cmd {
		case "sources":
			h.setSources(strings.Fields(rest)...)
		case "info":
			src, ddl, _ := strings.Cut(rest, " ")
			h.info(src, ddl)
		case "done":
			h.done(rest)
		case "settle":
			h.settle()
		case "restart":
			h.restart()
		case "unlock":
			owner, force := "", false
			for _, w := range strings.Fields(rest) {
				if w == "force" {
					force = true
				} else {
					owner = w
				}
			}
			lastErr = h.unlock(owner, force)
		case "ops:":
			if got := h.ops(); got != rest {
				at("ops %q, want %q", got, rest)
			}
		case "keys:":
			if got := len(h.keys()); rest != strconv.Itoa(got) {
				at("%d lock keys (%v), want %s", got, h.keys(), rest)
			}
		case "stage:":
			got := "none"
			for _, l := range h.k.Locks() {
				got = l.Stage
			}
			if got != rest {
				at("stage %q, want %q", got, rest)
			}
		case "error:":
			if lastErr == nil || !strings.Contains(lastErr.Error(), rest) {
				at("error %v, want one containing %q", lastErr, rest)
			}
			lastErr = nil
		default:
			t.Fatalf("%s:%d: unknown command %q", file, line, cmd)
		}
		if lastErr != nil && cmd != "unlock" {
			at("unexpected unlock error: %v", lastErr)
			lastErr = nil
		}
	}
	if lastErr != nil {
		t.Errorf("%s: unlock error not checked: %v", file, lastErr)
	}
}
