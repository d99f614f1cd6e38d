// Package script runs data-driven test scripts with golden output, in the style of raft's testdata:
// a file holds cases, each a command line (and any lines under it, up to "----"), then "----", then
// the output the command must give, up to a blank line. Lines starting with # between cases are
// comments. With TRIBUTARY_UPDATE_TESTDATA=1 the files are rewritten with the output the code gives,
// for review in the diff.
package script

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Case is one command of a script.
type Case struct {
	Pos   string // file:line, for messages
	Cmd   string // the first word of the command line
	Args  string // the rest of the command line
	Input string // the lines between the command line and "----"
}

// Run runs every *.txt file of dir as a subtest: do gives each case's output, which must equal the
// file's. A case do fails with t.Errorf stops nothing; t.Fatalf stops the file.
func Run(t *testing.T, dir string, do func(t *testing.T, c Case) string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runFile(t, file, do) })
	}
}

func runFile(t *testing.T, file string, do func(t *testing.T, c Case) string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	update := os.Getenv("TRIBUTARY_UPDATE_TESTDATA") == "1"
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out = append(out, line)
			i++
			continue
		}
		c := Case{Pos: file + ":" + strconv.Itoa(i+1)}
		c.Cmd, c.Args, _ = strings.Cut(strings.TrimSpace(line), " ")
		c.Args = strings.TrimSpace(c.Args)
		head := []string{line}
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			head = append(head, lines[i])
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the command", c.Pos)
		}
		i++ // ----
		var want []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			want = append(want, lines[i])
			i++
		}
		c.Input = strings.Join(input, "\n")
		got := strings.TrimRight(do(t, c), "\n")
		if !update && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s %s\n got:\n%s\nwant:\n%s", c.Pos, c.Cmd, c.Args, got, strings.Join(want, "\n"))
		}
		out = append(append(append(out, head...), "----"), strings.Split(got, "\n")...)
	}
	if update {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
