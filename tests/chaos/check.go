package chaos

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// statusWatch polls query-status while the soak runs and keeps how long each subtask stayed Paused.
type statusWatch struct {
	s       *Soak
	mu      sync.Mutex
	paused  map[string]time.Time // task/source -> Paused since
	Longest time.Duration
	Which   string
}

func (w *statusWatch) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		for _, task := range []string{taskMain, taskSecond} {
			r, _, err := w.s.dmctl("query-status", task)
			if err != nil {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			for _, src := range r.List("sources") {
				for _, st := range src.List("subTaskStatus") {
					id := task + "/" + src.Get("sourceStatus").Str("source")
					if st.Str("stage") == "Paused" {
						if _, ok := w.paused[id]; !ok {
							w.paused[id] = now
						}
						if d := now.Sub(w.paused[id]); d > w.Longest {
							w.Longest, w.Which = d, id
						}
					} else {
						delete(w.paused, id)
					}
				}
			}
			w.mu.Unlock()
		}
	}
}

// checkData compares every target downstream with the merge of its shards, value by value (the
// upstream read after everything settled).
func (s *Soak) checkData(ctx context.Context) []string {
	var bad []string
	for _, t := range s.targets {
		var want []string
		for _, sh := range t.shards {
			rows, err := e2e.Rows(s.c.UpDBs[sh.source], "SELECT * FROM "+sh.table())
			if err != nil {
				return append(bad, fmt.Sprintf("read shard %s: %v", sh.table(), err))
			}
			want = append(want, rows...)
		}
		got, err := e2e.Rows(s.c.DownDB, "SELECT * FROM "+t.name)
		if err != nil {
			bad = append(bad, fmt.Sprintf("read target %s: %v", t.name, err))
			continue
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			msg := fmt.Sprintf("target %s differs from the merge of its shards: %d rows downstream, %d upstream; %s", t.name, len(got), len(want), e2e.FirstDiff(got, want))
			bad = append(bad, msg)
			s.logf("check: %s", msg)
			continue
		}
		s.logf("check: %s: %d rows equal to its shards'", t.name, len(got))
	}
	want, err := e2e.Rows(s.c.UpDBs[0], "SELECT * FROM "+soloTable+" ORDER BY id")
	if err == nil {
		var got []string
		if got, err = e2e.Rows(s.c.DownDB, "SELECT * FROM "+soloTable+" ORDER BY id"); err == nil && !slices.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("%s differs: %s", soloTable, e2e.FirstDiff(got, want)))
		}
	}
	if err != nil {
		bad = append(bad, fmt.Sprintf("read %s: %v", soloTable, err))
	}
	return bad
}

var alterOf = regexp.MustCompile("(?i)ALTER\\s+TABLE\\s+(`[^`]+`\\.`[^`]+`)\\s+(.*)")

// checkDDLs reads the ALTERs the downstream ran (its binlog) and checks that each target got each of
// its DDL steps exactly once, in order.
func (s *Soak) checkDDLs(ctx context.Context) []string {
	ran, err := downstreamAlters(ctx, s.c.DownDB)
	if err != nil {
		return []string{"read the downstream's binlog: " + err.Error()}
	}
	var bad []string
	for _, r := range s.runners {
		got := ran[r.t.name]
		if len(got) != len(r.Downstream) {
			bad = append(bad, fmt.Sprintf("target %s: %d ALTERs ran downstream for %d DDL steps (each must run once): ran %q, steps %q", r.t.name, len(got), len(r.Downstream), got, r.Steps))
			continue
		}
		for i, about := range r.Downstream {
			if !strings.Contains(got[i], about) {
				bad = append(bad, fmt.Sprintf("target %s: ALTER %d downstream is %q, want step %q", r.t.name, i+1, got[i], r.Steps[i]))
				break
			}
		}
	}
	return bad
}

// downstreamAlters lists the ALTER TABLEs in the downstream's binlog, by table, in order.
func downstreamAlters(ctx context.Context, db *sql.DB) (map[string][]string, error) {
	files, err := e2e.Rows(db, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	out := map[string][]string{}
	for _, f := range files {
		name, _, _ := strings.Cut(f, "|")
		events, err := binlogEvents(ctx, db, name)
		if err != nil {
			return nil, err
		}
		for _, ev := range events {
			// Log_name|Pos|Event_type|Server_id|End_log_pos|Info
			fields := strings.SplitN(ev, "|", 6)
			if len(fields) == 6 && fields[2] == "Query" {
				// The load cut-over's ALTER giving a target its upstream comment back is not a DDL step.
				if m := alterOf.FindStringSubmatch(fields[5]); m != nil && !strings.HasSuffix(strings.TrimSpace(fields[5]), loader.CommentBack) {
					out[m[1]] = append(out[m[1]], m[2])
				}
			}
		}
	}
	return out, nil
}

// binlogEvents is SHOW BINLOG EVENTS of one file, in the file's order.
func binlogEvents(ctx context.Context, db *sql.DB, file string) ([]string, error) {
	events, err := e2e.Rows(db, "SHOW BINLOG EVENTS IN '"+strings.ReplaceAll(file, "'", "''")+"'")
	if err != nil {
		return nil, err
	}
	pos := func(ev string) int64 {
		f := strings.SplitN(ev, "|", 3)
		n, _ := strconv.ParseInt(f[1], 10, 64)
		return n
	}
	slices.SortFunc(events, func(a, b string) int { return cmp.Compare(pos(a), pos(b)) })
	return events, ctx.Err()
}
