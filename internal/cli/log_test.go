package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/tests/framework/wait"
)

// --log-format json writes one JSON object per line, text a tab-separated line; the config file key
// log-format is the flag's; a --log-file is rotated at --log-max-size and keeps --log-max-backups.
func TestLogFormatAndRotation(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"json", "text"} {
		file := filepath.Join(dir, format+".log")
		cfgFile := filepath.Join(dir, format+".toml")
		os.WriteFile(cfgFile, []byte("log-format = \""+format+"\"\nlog-file = \""+file+"\"\n"), 0o644)
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		c := LogFlags(fs)
		if err := Parse(fs, []string{"--config", cfgFile}); err != nil {
			t.Fatal(err)
		}
		log, err := c.Build()
		if err != nil {
			t.Fatal(err)
		}
		log.Info("lock put", zap.String("lock", "task-`db`.`t`"))
		log.Sync()
		data, _ := os.ReadFile(file)
		line := strings.TrimSpace(string(data))
		var m map[string]any
		isJSON := json.Unmarshal([]byte(line), &m) == nil
		if isJSON != (format == "json") {
			t.Fatalf("--log-format %s wrote %q", format, line)
		}
		if format == "json" && (m["msg"] != "lock put" || m["lock"] != "task-`db`.`t`") {
			t.Fatalf("JSON line %v", m)
		}
		if format == "text" && (!strings.Contains(line, "\tINFO\t") || !strings.Contains(line, `{"lock": "task-`+"`db`.`t`"+`"}`)) {
			t.Fatalf("text line %q", line)
		}
	}
	if _, err := (&LogConfig{Level: "info", Format: "xml", MaxSize: 1}).Build(); err == nil {
		t.Fatal("--log-format xml accepted")
	}

	file := filepath.Join(dir, "rotated.log")
	log, err := (&LogConfig{Level: "info", Format: "json", File: file, MaxSize: 1, MaxBackups: 2}).Build()
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	for range 80 { // 5 MB: four rotations, two backups kept
		log.Info("filler", zap.String("x", big))
	}
	log.Sync()
	// lumberjack removes the old backups in the background after a rotation.
	var matches []string
	wait.Eventually(t, 10*time.Second, func() bool { matches, _ = filepath.Glob(filepath.Join(dir, "rotated-*.log")); return len(matches) == 2 },
		func() string {
			return fmt.Sprintf("%d rotated files (%v), want 2 (--log-max-backups)", len(matches), matches)
		})
	if st, err := os.Stat(file); err != nil || st.Size() > 1<<20 {
		t.Fatalf("current log file: %v, %v", st, err)
	}
}
