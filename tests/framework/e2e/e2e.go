// Package e2e runs a whole Tributary cluster as real processes on one machine: throw-away mariadbd
// upstreams and downstream, dm-master, dm-workers, and dmctl for every command. The integration
// tests and `make demo` share it. Under go test -short (make unit) nothing starts: tests call
// SkipShort, and Start refuses.
package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/tests/framework/netutil"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// Build compiles dm-master, dm-worker and dmctl into dir. root is the module's directory.
func Build(root, dir string) error {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/dm-master", "./cmd/dm-worker", "./cmd/dmctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// Proc is one dm-master or dm-worker process.
type Proc struct {
	Name, Addr string
	args       []string
	bin        string
	LogFile    string
	env        []string
	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
}

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	out, err := os.OpenFile(p.LogFile+".out", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return err
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() { p.cmd.Wait(); out.Close(); close(exited) }()
	return nil
}

// Kill9 kills the process with SIGKILL and waits for it.
func (p *Proc) Kill9() { p.signal(syscall.SIGKILL) }

// Stop stops the process with SIGTERM and waits for it.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM) }

// Freeze stops the process with SIGSTOP (it keeps its sockets and leases, and answers nothing) and
// Thaw lets it go on with SIGCONT; neither waits.
func (p *Proc) Freeze() { p.send(syscall.SIGSTOP) }
func (p *Proc) Thaw()   { p.send(syscall.SIGCONT) }

func (p *Proc) send(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Signal(sig)
	}
}

// Exited reports whether the process has ended (killed, or exited on its own).
func (p *Proc) Exited() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// Restart starts the process again with the same arguments.
func (p *Proc) Restart() error { return p.start() }

// Options shape a cluster.
type Options struct {
	Root         string // module root (for building); the binaries are built into Dir/bin
	Bin          string // prebuilt binaries' directory (skips building)
	Workers      int    // dm-workers to start (default 2)
	KeepaliveTTL int    // workers' --keepalive-ttl (default 3)
	Upstreams    int    // upstream mariadbd instances (default 2)
	// NoUpstreams starts no upstream mariadbd: the test brings its sources (tests/framework/mysqlprimary).
	NoUpstreams bool
	Masters     int  // dm-masters forming one etcd cluster (default 1)
	GTID        bool // sources with enable-gtid: true
	// Failpoints names the points (internal/failpoint) where processes pause once; the binaries
	// must be built with -tags failpoints. See Reached and Release.
	Failpoints []string
	// TaskMode is the task-mode of TaskFile's tasks: incremental (default), all or full. The
	// environment's TRIBUTARY_TASK_MODE sets it when empty, so `make test` runs the scenarios in both.
	TaskMode string
	// TaskExtra is appended to TaskFile's tasks (top-level YAML, e.g. mydumpers and loaders sections).
	TaskExtra string
	// InstanceExtra is appended to each mysql-instances entry of TaskFile's tasks (indented YAML lines,
	// e.g. "    mydumper-config-name: m\n").
	InstanceExtra string
	// SyncerExtra is appended to the "global" syncer config of TaskFile's tasks (indented YAML lines,
	// e.g. "    spread-hot-tables: true\n").
	SyncerExtra string
	// TLS turns the cluster's TLS on: masters and workers get --ssl-ca, --ssl-cert, --ssl-key (and
	// --cert-allowed-cn when AllowedCN is set), the masters https peer URLs, and every dmctl call the
	// client certificate.
	TLS *TLSFiles
	// MasterArgs and WorkerArgs are added to every dm-master's and dm-worker's command line.
	MasterArgs, WorkerArgs []string
	// WorkerJoin, when set, gives the master addresses a worker joins (its --join) from the masters'
	// own: the chaos soak puts a proxy on each worker's path to etcd.
	WorkerJoin func(worker string, masters []string) ([]string, error)
	// MariaDBArgs are mariadbd options of every upstream and the downstream (e.g. --ssl-cert=...).
	MariaDBArgs []string
}

// TLSFiles are the PEM files of a cluster's TLS: one CA, and the certificate and key every master,
// worker and dmctl uses.
type TLSFiles struct {
	CA, Cert, Key string
	AllowedCN     string
}

// args are the flags of a dm-master or dm-worker (allowedCN) or dmctl.
func (t *TLSFiles) args(allowedCN bool) []string {
	if t == nil {
		return nil
	}
	a := []string{"--ssl-ca", t.CA, "--ssl-cert", t.Cert, "--ssl-key", t.Key}
	if allowedCN && t.AllowedCN != "" {
		a = append(a, "--cert-allowed-cn", t.AllowedCN)
	}
	return a
}

// Cluster is a running cluster.
type Cluster struct {
	Dir       string
	Keep      bool // Close leaves Dir (the processes' logs) in place, as TRIBUTARY_KEEP does
	Bin       string
	Ups       []*mariadbtest.Server
	UpDBs     []*sql.DB
	Down      *mariadbtest.Server
	DownDB    *sql.DB
	Master    *Proc   // the first master; every command goes to it unless it is down
	Masters   []*Proc // all masters
	Workers   []*Proc
	ttl       int
	gtid      bool
	env       []string
	fpDir     string
	mode      string
	extra     string
	instExtra string
	syncExtra string
	// DmctlArgs are given to every dmctl call of Dmctl and Until (the TLS flags).
	DmctlArgs  []string
	workerArgs []string
	workerJoin func(worker string, masters []string) ([]string, error)
}

// SkipShort skips t under go test -short, and when no mariadbd is installed: a test that builds or
// runs the binaries calls it first (make unit starts no process; make test runs these tests).
func SkipShort(t testing.TB) {
	t.Helper()
	if mariadbtest.Short() {
		t.Skip("needs the real binaries and throw-away mariadbd: skipped under -short (make unit); make test runs it")
	}
	if !mariadbtest.Available() {
		t.Skip("mariadbd not found: install mariadb-server (apt-get install -y mariadb-server) to run this test")
	}
}

// Start launches the databases, one dm-master and the workers, and waits until the master leads.
func Start(o Options) (_ *Cluster, err error) {
	if mariadbtest.Short() {
		return nil, errors.New("a cluster under go test -short: the test should have skipped (e2e.SkipShort)")
	}
	if !mariadbtest.Available() {
		return nil, errors.New("mariadbd not found: install mariadb-server (apt-get install -y mariadb-server)")
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.KeepaliveTTL == 0 {
		o.KeepaliveTTL = 3
	}
	if o.Upstreams == 0 {
		o.Upstreams = 2
	}
	if o.NoUpstreams {
		o.Upstreams = 0
	}
	dir, err := os.MkdirTemp("", "tributary-e2e-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Bin: o.Bin, ttl: o.KeepaliveTTL, gtid: o.GTID, mode: o.TaskMode, extra: o.TaskExtra, instExtra: o.InstanceExtra, syncExtra: o.SyncerExtra,
		DmctlArgs: o.TLS.args(false), workerArgs: append(o.TLS.args(true), o.WorkerArgs...), workerJoin: o.WorkerJoin}
	scheme := "http://"
	if o.TLS != nil {
		scheme = "https://"
	}
	if c.mode == "" {
		c.mode = os.Getenv("TRIBUTARY_TASK_MODE")
	}
	if c.mode == "" {
		c.mode = "incremental"
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.Bin == "" {
		c.Bin = filepath.Join(dir, "bin")
		if err := Build(o.Root, c.Bin); err != nil {
			return nil, err
		}
	}
	servers := make([]*mariadbtest.Server, o.Upstreams+1)
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = mariadbtest.Launch(o.MariaDBArgs...)
		}()
	}
	wg.Wait()
	for i, s := range servers {
		if s != nil {
			if i < o.Upstreams {
				c.Ups = append(c.Ups, s)
			} else {
				c.Down = s
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, s := range c.Ups {
		db, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			return nil, err
		}
		c.UpDBs = append(c.UpDBs, db)
	}
	if c.DownDB, err = sql.Open("mysql", c.Down.DSN("")); err != nil {
		return nil, err
	}
	// The downstream's general log counts the DDLs that reached it.
	if _, err := c.DownDB.Exec("SET GLOBAL log_output = 'TABLE', GLOBAL general_log = 1"); err != nil {
		return nil, err
	}
	if len(o.Failpoints) > 0 {
		c.fpDir = filepath.Join(dir, "failpoints")
		if err := os.MkdirAll(c.fpDir, 0o755); err != nil {
			return nil, err
		}
		c.env = []string{"TRIBUTARY_FAILPOINTS=" + strings.Join(o.Failpoints, ","), "TRIBUTARY_FAILPOINT_DIR=" + c.fpDir}
	}
	if o.Masters == 0 {
		o.Masters = 1
	}
	var initial []string
	for i := 1; i <= o.Masters; i++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		peer, err := freeAddr()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("master%d", i)
		initial = append(initial, name+"="+scheme+peer)
		c.Masters = append(c.Masters, &Proc{Name: name, Addr: addr, bin: filepath.Join(c.Bin, "dm-master"), LogFile: filepath.Join(dir, name+".log"), env: c.env,
			args: append(append([]string{"--name", name, "--master-addr", addr, "--peer-urls", scheme + peer,
				"--data-dir", filepath.Join(dir, name), "--log-file", filepath.Join(dir, name+".log")}, o.TLS.args(true)...), o.MasterArgs...)})
	}
	for _, m := range c.Masters {
		m.args = append(m.args, "--initial-cluster", strings.Join(initial, ","))
		if err := m.start(); err != nil {
			return nil, err
		}
	}
	c.Master = c.Masters[0]
	if _, err := c.Until(60*time.Second, func(r Result) bool { return r.Bool("result") }, "list-member", "--leader"); err != nil {
		return nil, fmt.Errorf("dm-master did not come up: %w", err)
	}
	for i := 1; i <= o.Workers; i++ {
		if _, err := c.StartWorker(fmt.Sprintf("worker%d", i)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func freeAddr() (string, error) {
	port, err := netutil.FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// StartWorker starts a new dm-worker and waits until it is registered and alive.
func (c *Cluster) StartWorker(name string) (*Proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var join []string
	for _, m := range c.Masters {
		join = append(join, m.Addr)
	}
	if c.workerJoin != nil {
		if join, err = c.workerJoin(name, join); err != nil {
			return nil, err
		}
	}
	w := &Proc{Name: name, Addr: addr, bin: filepath.Join(c.Bin, "dm-worker"), LogFile: filepath.Join(c.Dir, name+".log"), env: c.env,
		args: []string{"--name", name, "--worker-addr", addr, "--join", strings.Join(join, ","),
			"--keepalive-ttl", fmt.Sprint(c.ttl), "--log-file", filepath.Join(c.Dir, name+".log")}}
	w.args = append(w.args, c.workerArgs...)
	if err := w.start(); err != nil {
		return nil, err
	}
	c.Workers = append(c.Workers, w)
	if err := c.WaitWorker(name, func(stage string) bool { return stage == "free" || stage == "bound" }); err != nil {
		return nil, err
	}
	return w, nil
}

// Worker returns the worker named name.
func (c *Cluster) Worker(name string) *Proc {
	for _, w := range c.Workers {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// WaitWorker waits until list-member shows worker name in a stage ok accepts.
func (c *Cluster) WaitWorker(name string, ok func(stage string) bool) error {
	_, err := c.Until(60*time.Second, func(r Result) bool {
		for _, m := range r.List("members") {
			for _, w := range m.Get("worker").List("workers") {
				if w.Str("name") == name && ok(w.Str("stage")) {
					return true
				}
			}
		}
		return false
	}, "list-member", "--worker")
	return err
}

// Close stops every process and database and removes the directory.
func (c *Cluster) Close() {
	for _, w := range c.Workers {
		w.Kill9()
	}
	for _, m := range c.Masters {
		m.Kill9()
	}
	for _, db := range append(c.UpDBs, c.DownDB) {
		if db != nil {
			db.Close()
		}
	}
	for _, s := range append(c.Ups, c.Down) {
		if s != nil {
			s.Kill()
			s.Remove()
		}
	}
	if !c.Keep && os.Getenv("TRIBUTARY_KEEP") == "" {
		os.RemoveAll(c.Dir)
	}
}

// Reached waits until a process has paused at failpoint name.
func (c *Cluster) Reached(name string, timeout time.Duration) error {
	if !wait.Until(timeout, func() bool { _, err := os.Stat(filepath.Join(c.fpDir, name+".reached")); return err == nil }) {
		return fmt.Errorf("no process reached failpoint %s within %s", name, timeout)
	}
	return nil
}

// Release lets a process paused at failpoint name go on.
func (c *Cluster) Release(name string) error {
	return os.WriteFile(filepath.Join(c.fpDir, name+".release"), nil, 0o644)
}

// Result is dmctl's JSON output.
type Result map[string]any

// Bool, Str, Get and List read a field (zero when missing).
func (r Result) Bool(k string) bool { b, _ := r[k].(bool); return b }
func (r Result) Str(k string) string {
	s, _ := r[k].(string)
	return s
}
func (r Result) Get(k string) Result {
	m, _ := r[k].(map[string]any)
	return m
}
func (r Result) List(k string) []Result {
	l, _ := r[k].([]any)
	out := make([]Result, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
func (r Result) Strings(k string) []string {
	l, _ := r[k].([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Dmctl runs dmctl against the master and returns its parsed JSON and its raw output.
func (c *Cluster) Dmctl(args ...string) (Result, string, error) {
	return Dmctl(c.Bin, c.Master.Addr, append(slices.Clone(c.DmctlArgs), args...)...)
}

// Dmctl runs dmctl against the master at addr. An answer that says it did not work (exit status 1
// with a JSON answer) is returned as any other, after a check that the exit status agrees with the
// answer: 1 exactly when its result or one of its sources' result is false.
func Dmctl(bin, addr string, args ...string) (Result, string, error) {
	cmd := exec.Command(filepath.Join(bin, "dmctl"), append([]string{"--master-addr", addr, "--rpc-timeout", "60s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		return nil, out, fmt.Errorf("dmctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	var r Result
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		if err != nil {
			return nil, out, fmt.Errorf("dmctl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil, out, fmt.Errorf("dmctl %s printed no JSON: %v: %s", strings.Join(args, " "), jerr, out)
	}
	failed := !r.Bool("result")
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			failed = true
		}
	}
	if _, ok := r["result"]; !ok {
		failed = false // as dmctl: an answer without a result field is not a failure
	}
	if failed != (err != nil) {
		return nil, out, fmt.Errorf("dmctl %s: exit status %v does not agree with the answer (a result false: %v): %s", strings.Join(args, " "), err, failed, out)
	}
	return r, out, nil
}

// Until runs dmctl until ok accepts its output or timeout passes.
func (c *Cluster) Until(timeout time.Duration, ok func(Result) bool, args ...string) (Result, error) {
	var r Result
	var last string
	if wait.Until(timeout, func() bool {
		var err error
		r, last, err = c.Dmctl(args...)
		return err == nil && ok(r)
	}) {
		return r, nil
	}
	return r, fmt.Errorf("dmctl %s: not as expected after %s; last output:\n%s", strings.Join(args, " "), timeout, last)
}

// SourceFile writes the source file of upstream i (source-id "mysql-replica-0<i+1>") and returns its path.
func (c *Cluster) SourceFile(i int) (string, error) { return c.SourceFileGTID(i, c.gtid) }

// SourceFileGTID is SourceFile with enable-gtid as gtid says, whatever the cluster's Options.GTID.
func (c *Cluster) SourceFileGTID(i int, gtid bool) (string, error) {
	return c.SourceFileVia(i, gtid, c.Ups[i].Port)
}

// SourceFileVia is SourceFileGTID with the workers reaching the upstream at port of 127.0.0.1 (a proxy).
func (c *Cluster) SourceFileVia(i int, gtid bool, port int) (string, error) {
	path := filepath.Join(c.Dir, fmt.Sprintf("source%d.yaml", i+1))
	body := fmt.Sprintf(`source-id: %s
enable-gtid: %t
flavor: mariadb
from:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
`, SourceID(i), gtid, port)
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// SourceID is the ID of upstream i.
func SourceID(i int) string { return fmt.Sprintf("mysql-replica-%02d", i+1) }

// TaskMode is the task-mode of the cluster's task files.
func (c *Cluster) TaskMode() string { return c.mode }

// TaskFile writes a shard-merge task named name: db_*.t_* on every upstream into db.t.
func (c *Cluster) TaskFile(name string) (string, error) {
	var inst strings.Builder
	for i := range c.Ups {
		fmt.Fprintf(&inst, "  - source-id: %s\n    block-allow-list: bw-rule-1\n    route-rules: [route-table, route-schema]\n    syncer-config-name: global\n%s", SourceID(i), c.instExtra)
	}
	body := fmt.Sprintf(`name: %s
task-mode: %s
shard-mode: pessimistic
meta-schema: dm_meta
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
mysql-instances:
%sblock-allow-list:
  bw-rule-1:
    do-dbs: ["db_*"]
routes:
  route-table:
    schema-pattern: "db_*"
    table-pattern: "t_*"
    target-schema: db
    target-table: t
  route-schema:
    schema-pattern: "db_*"
    target-schema: db
syncers:
  global:
    worker-count: 4
    batch: 256
%s%s`, name, c.TaskMode(), c.Down.Port, inst.String(), c.syncExtra, c.extra)
	path := filepath.Join(c.Dir, name+".yaml")
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// Exec runs statements on upstream i.
func (c *Cluster) Exec(i int, stmts ...string) error {
	for _, q := range stmts {
		if _, err := c.UpDBs[i].Exec(q); err != nil {
			return fmt.Errorf("upstream %d: %s: %w", i+1, q, err)
		}
	}
	return nil
}

// DefinitionBody is SHOW CREATE TABLE of table without its first line (the name) and the
// AUTO_INCREMENT counter: what an upstream shard and its downstream target should share.
func DefinitionBody(db *sql.DB, table string) (string, error) {
	var name, def string
	if err := db.QueryRow("SHOW CREATE TABLE "+table).Scan(&name, &def); err != nil {
		return "", fmt.Errorf("SHOW CREATE TABLE %s: %w", table, err)
	}
	_, rest, _ := strings.Cut(def, "\n")
	return autoIncrement.ReplaceAllString(rest, ""), nil
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// Rows returns a query's rows as sorted strings.
func Rows(db *sql.DB, q string) ([]string, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		parts := make([]string, len(cols))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	sort.Strings(out)
	return out, rows.Err()
}

// Merged returns the rows of every upstream shard table (db_*.t_*), columns cols, sorted.
func (c *Cluster) Merged(cols string) ([]string, error) {
	var all []string
	for _, db := range c.UpDBs {
		tables, err := Rows(db, "SELECT CONCAT('`', TABLE_SCHEMA, '`.`', TABLE_NAME, '`') FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'db\\_%' AND TABLE_NAME LIKE 't\\_%'")
		if err != nil {
			return nil, err
		}
		for _, t := range tables {
			rows, err := Rows(db, "SELECT "+cols+" FROM "+t)
			if err != nil {
				return nil, err
			}
			all = append(all, rows...)
		}
	}
	sort.Strings(all)
	return all, nil
}

// Converge waits until the downstream db.t equals the merged upstream shards (columns cols) and
// returns the number of rows, or an error showing the first difference.
func (c *Cluster) Converge(cols string, timeout time.Duration) (int, error) {
	var want, got []string
	var err error
	if wait.Until(timeout, func() bool {
		if want, err = c.Merged(cols); err == nil {
			got, err = Rows(c.DownDB, "SELECT "+cols+" FROM db.t")
		}
		return err == nil && slices.Equal(got, want)
	}) {
		return len(got), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("downstream db.t has %d rows, merged upstream %d: %s", len(got), len(want), FirstDiff(got, want))
}

// FirstDiff describes where two sorted row lists first differ.
func FirstDiff(got, want []string) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("first difference at row %d: downstream %q, upstream %q", i, g, w)
		}
	}
	return "none"
}

// DownstreamStatements counts the statements the downstream received that start with prefix (from
// its general log; see DownstreamLog).
func (c *Cluster) DownstreamStatements(prefix string) (int, error) {
	stmts, err := c.DownstreamLog()
	n := 0
	for _, q := range stmts {
		if strings.HasPrefix(q, prefix) {
			n++
		}
	}
	return n, err
}

// DownstreamLog returns the statements the downstream received (its general log, queries and executed
// prepared statements), sorted. An entry of several statements (a worker sends a lock's DDL with its
// marker in one query, separated by ";\n") counts as those statements, each without leading space.
// The load cut-over's ALTER giving a target its comment back (loader.CommentBack) is left out: like
// the meta tables' statements, it is Tributary's bookkeeping, not a replicated DDL.
func (c *Cluster) DownstreamLog() ([]string, error) {
	rows, err := Rows(c.DownDB, "SELECT argument FROM mysql.general_log WHERE command_type IN ('Query', 'Execute')")
	var out []string
	for _, r := range rows {
		for _, q := range strings.Split(r, ";\n") {
			if !strings.HasSuffix(q, loader.CommentBack) {
				out = append(out, strings.TrimLeft(q, " \t\r\n"))
			}
		}
	}
	return out, err
}

// Checksum is a CHECKSUM of the downstream table, for printing.
func Checksum(ctx context.Context, db *sql.DB, table string) (int64, error) {
	var name string
	var sum sql.NullInt64
	err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+table).Scan(&name, &sum)
	return sum.Int64, err
}

// Tail returns the last n lines of a process's log, for failure messages.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
