package syncer

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/vocab"
)

// TestLockDecisionScripts replays testdata/lock/*.txt: what the DDL path decides for a lock's
// operation (resolve), with no reader, applier, downstream or etcd. The path routes db_1.t_1 and
// db_1.t_2 to db.t; every position is in bin.000001, and an event at N starts at N-50 in a group that
// starts at N-80 (evAt). Commands (one per line, # starts a comment):
//
//	ddl N SQL               the DDL event ending at N (decide)
//	held                    DML of db.t was held back behind its active step
//	reader N                the reader is at N (default: the end of the last ddl)
//	persisted N             the applier's persisted checkpoint (default 0)
//	rows | norows           the flush before the lock wrote rows or not (default rows)
//	xa N                    a prepared XA transaction started at N (0: none)
//	operator N skip         binlog skip of the lock DDLs at the event group starting at N
//	operator N replace SQL  binlog replace of them with SQL (statements separated by ";")
//	op exec|skip [wrote-exec] [removed]
//	                        the operation for db.t's active step arrives: resolve, keep its decision
//	decision: WANT          the decision, as decisionString renders it
//	error: TEXT             the last op failed with an error containing TEXT
func TestLockDecisionScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "lock", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runLockScript(t, file) })
	}
}

func runLockScript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	target := vocab.TableName{Schema: "db", Name: "t"}
	d := newTestDDLPath(t)
	pos := func(s string) vocab.Position {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatalf("%s: position %q: %v", file, s, err)
		}
		if n == 0 {
			return vocab.Position{}
		}
		return vocab.Position{File: "bin.000001", Pos: uint32(n)}
	}
	v := lockView{flushedRows: true, gtidFor: func(p vocab.Position) string { return "" }}
	var ops []Operator
	v.operator = func(lock bool, at ...vocab.Position) (Operator, bool) {
		for _, o := range ops {
			for _, p := range at {
				if o.Lock == lock && o.Pos == p {
					return o, true
				}
			}
		}
		return Operator{}, false
	}
	var last string
	var lastErr error
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		at := func(format string, args ...any) { t.Errorf("%s:%d: "+format, append([]any{file, line}, args...)...) }
		switch cmd {
		case "ddl":
			n, q, _ := strings.Cut(rest, " ")
			ev := evAt(pos(n).Pos)
			if _, err := d.decide(q, "", ev); err != nil {
				at("decide: %v", err)
			}
			v.lastPos = ev.end
		case "held":
			d.shard.heldBack[target] = true
		case "reader":
			v.lastPos = pos(rest)
		case "persisted":
			v.persisted = pos(rest)
		case "rows", "norows":
			v.flushedRows = cmd == "rows"
		case "xa":
			v.oldestXA = pos(rest)
		case "operator":
			w := strings.SplitN(rest, " ", 3)
			o := Operator{Op: w[1], Pos: pos(w[0]), Lock: true}
			if o.Op == "replace" {
				o.SQLs = strings.Split(w[2], ";")
			}
			ops = append(ops, o)
		case "op":
			w := strings.Fields(rest)
			ddls, _ := d.infoOf(target)
			res := opResult{target: target, info: pessimist.Info{Task: "task", Source: "s1", Target: target.String(), DDLs: ddls}}
			res.op = pessimist.Operation{Task: "task", Source: "s1", Target: target.String(), DDLs: ddls, Exec: w[0] == "exec"}
			for _, flag := range w[1:] {
				switch flag {
				case "wrote-exec":
					res.wroteExec = true
				case "removed":
					res.removed, res.op = true, pessimist.Operation{}
				}
			}
			d.shard.pending[target] = true
			lr, err := d.resolve(res, v)
			last, lastErr = decisionString(lr), err
		case "decision:":
			if lastErr != nil {
				at("decision after an error: %v", lastErr)
			} else if last != rest {
				at("decision\n got %s\nwant %s", last, rest)
			}
		case "error:":
			if lastErr == nil || !strings.Contains(lastErr.Error(), rest) {
				at("error %v, want one containing %q", lastErr, rest)
			}
		default:
			at("unknown command %q", cmd)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// decisionString renders a lock decision on one line: positions by offset in bin.000001.
func decisionString(lr lockReady) string {
	p := func(x vocab.Position) string { return strconv.Itoa(int(x.Pos)) }
	mode := map[lockMode]string{lockSkip: "skip", lockExecOnce: "exec-once", lockExecFirst: "exec-first"}[lr.mode]
	var b strings.Builder
	fmt.Fprintf(&b, "%s ddls=%q checkpoint=%s", mode, ddl.Texts(lr.ddls), p(lr.up.Global))
	var resolved []string
	for _, t := range lr.resolution.Tables {
		resolved = append(resolved, t.Name+"@"+p(lr.up.Resolved[t]))
	}
	fmt.Fprintf(&b, " resolved=%s", strings.Join(resolved, ","))
	if lr.reread {
		fmt.Fprintf(&b, " reread=%s", p(lr.rereadFrom))
	}
	if lr.resync {
		b.WriteString(" resync")
	}
	if lr.post {
		b.WriteString(" post")
	}
	if !lr.done {
		b.WriteString(" not-done")
	}
	if lr.operator != nil {
		fmt.Fprintf(&b, " operator=%s", lr.operator.Op)
	}
	fmt.Fprintf(&b, " session=%q", lr.in.String())
	return b.String()
}
