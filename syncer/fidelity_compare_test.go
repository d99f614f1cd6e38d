package syncer

import (
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// How the fidelity tests compare a target with its merged shards (fidelity_test.go).

// fcompare is a comparison of one target table with its shard tables.
type fcompare struct {
	shards []fshardRef
	down   string // `schema`.`table` downstream
	cols   []*fcol
}

type fshardRef struct {
	db    *sql.DB
	table string
}

func (c fcompare) query(table string) string {
	exprs := make([]string, len(c.cols))
	for i, col := range c.cols {
		exprs[i] = col.t.compareExpr(col.name)
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM " + table
}

// columnsQuery reads the definition of a table's columns.
const columnsQuery = `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(COLUMN_DEFAULT, 'NULL'), EXTRA,
	COALESCE(GENERATION_EXPRESSION, ''), COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, '')
	FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`

const indexesQuery = `SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, COALESCE(SUB_PART, 0), NON_UNIQUE
	FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`

func splitName(t string) (string, string) {
	parts := strings.SplitN(t, ".", 2)
	return strings.Trim(parts[0], "`"), strings.Trim(parts[1], "`")
}

var hexDefault = regexp.MustCompile(`^0x([0-9a-fA-F]*)$`)

func definitionRows(db *sql.DB, table string) ([]string, error) {
	schema, name := splitName(table)
	var out []string
	for _, q := range []string{columnsQuery, indexesQuery} {
		rows, err := db.Query(q, schema, name)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var vals [8]sql.NullString
			ptrs := []any{}
			cols, _ := rows.Columns()
			for i := range cols {
				ptrs = append(ptrs, &vals[i])
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			var parts []string
			for i := range cols {
				parts = append(parts, vals[i].String)
			}
			if len(cols) == 8 {
				// The same default: X'ab' upstream, 0xab as the DDL parser writes it downstream.
				parts[3] = hexDefault.ReplaceAllString(parts[3], "X'$1'")
			}
			out = append(out, strings.Join(parts, "|"))
		}
		rows.Close()
	}
	return out, nil
}

type fchecker struct {
	down *sql.DB
	c    fcompare
}

// state compares once: schema first, then rows. It returns "" when equal.
func (fc fchecker) state() (string, error) {
	c := fc.c
	want, err := definitionRows(c.shards[0].db, c.shards[0].table)
	if err != nil {
		return "", err
	}
	got, err := definitionRows(fc.down, c.down)
	if err != nil {
		return "", err
	}
	if !slices.Equal(got, want) {
		return "schema differs:\n" + lineDiff(got, want), nil
	}
	var up []string
	for _, sh := range c.shards {
		r, err := e2e.Rows(sh.db, c.query(sh.table))
		if err != nil {
			return "", fmt.Errorf("%s: %w", sh.table, err)
		}
		up = append(up, r...)
	}
	sort.Strings(up)
	down, err := e2e.Rows(fc.down, c.query(c.down))
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.down, err)
	}
	if slices.Equal(up, down) {
		return "", nil
	}
	return fmt.Sprintf("rows differ (%d downstream, %d upstream):\n%s", len(down), len(up), rowDiff(c.cols, down, up)), nil
}

// lineDiff lists lines only in got or only in want.
func lineDiff(got, want []string) string {
	var sb strings.Builder
	for _, l := range got {
		if !slices.Contains(want, l) {
			sb.WriteString("  downstream only: " + l + "\n")
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			sb.WriteString("  upstream only:   " + l + "\n")
		}
	}
	return sb.String()
}

// rowDiff shows rows missing on either side of two sorted multisets, column by column.
func rowDiff(cols []*fcol, down, up []string) string {
	onlyDown, onlyUp := multisetMinus(down, up), multisetMinus(up, down)
	var sb strings.Builder
	show := func(label string, rows []string) {
		for i, r := range rows {
			if i == 4 {
				fmt.Fprintf(&sb, "  ... %d more %s\n", len(rows)-i, label)
				break
			}
			fmt.Fprintf(&sb, "  %s:\n", label)
			for j, v := range strings.Split(r, "|") {
				if j < len(cols) {
					if len(v) > 160 {
						v = v[:160] + fmt.Sprintf("...(%d)", len(v))
					}
					fmt.Fprintf(&sb, "    %s %s = %s\n", cols[j].name, cols[j].t.sql(), v)
				}
			}
		}
	}
	show("downstream only", onlyDown)
	show("upstream only", onlyUp)
	if len(onlyDown) > 0 && len(onlyUp) > 0 {
		// The columns where the first rows of both sides differ.
		a, b := strings.Split(onlyDown[0], "|"), strings.Split(onlyUp[0], "|")
		for j := range a {
			if j < len(b) && j < len(cols) && a[j] != b[j] {
				fmt.Fprintf(&sb, "  first rows differ in %s %s\n", cols[j].name, cols[j].t.sql())
			}
		}
	}
	return sb.String()
}

func multisetMinus(a, b []string) []string {
	count := map[string]int{}
	for _, r := range b {
		count[r]++
	}
	var out []string
	for _, r := range a {
		if count[r] > 0 {
			count[r]--
			continue
		}
		out = append(out, r)
	}
	return out
}

// converge waits until the downstream equals the merged upstream; on a syncer's error or after the
// timeout it returns what differs.
func (fc fchecker) converge(fs *fidSyncers, timeout time.Duration) string {
	var last string
	var failed error
	converged := wait.Until(timeout, func() bool {
		d, err := fc.state()
		if err == nil && d == "" {
			return true
		}
		if err != nil {
			last = err.Error()
		} else {
			last = d
		}
		failed = fs.failed()
		return failed != nil
	})
	switch {
	case failed != nil:
		// Read once more: what it committed before it stopped.
		if d, err2 := fc.state(); err2 == nil {
			last = d
		}
		return fmt.Sprintf("%v\nstate: %s", failed, last)
	case !converged:
		return "not converged after " + timeout.String() + ": " + last
	}
	return ""
}
