package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// logsHaveNoDuplicateKeys checks every JSON line the cluster's masters and workers logged: no key may
// appear twice in one line (strict log ingesters refuse such lines).
func (c *e2eCluster) logsHaveNoDuplicateKeys() {
	c.t.Helper()
	lines := 0
	for _, p := range append(append([]*e2e.Proc{}, c.Masters...), c.Workers...) {
		f, err := os.Open(p.LogFile)
		if err != nil {
			c.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for n := 1; sc.Scan(); n++ {
			if dup := duplicateKey(sc.Text()); dup != "" {
				f.Close()
				c.t.Fatalf("%s line %d logs %q twice: %s", p.LogFile, n, dup, sc.Text())
			}
			lines++
		}
		f.Close()
	}
	if lines == 0 {
		c.t.Fatal("no log lines read")
	}
}

// duplicateKey returns a key that appears twice in the JSON object line, or "".
func duplicateKey(line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				key := fmt.Sprint(k)
				if seen[key] {
					return key, nil
				}
				seen[key] = true
				if d, err := walk(); d != "" || err != nil {
					return d, err
				}
			}
			_, err = dec.Token() // }
			return "", err
		case json.Delim('['):
			for dec.More() {
				if d, err := walk(); d != "" || err != nil {
					return d, err
				}
			}
			_, err = dec.Token() // ]
			return "", err
		}
		return "", nil
	}
	d, err := walk()
	if err != nil && err != io.EOF {
		return ""
	}
	return d
}
