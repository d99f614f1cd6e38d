// Package mariadbtest starts throw-away mariadbd instances for tests: ROW binlog with FULL row image
// and metadata, an own datadir under a temp dir, a free port. Tests skip with a clear message when
// no mariadbd binary exists (.ci/run installs one) and under go test -short (make unit), where no
// server starts at all: start refuses to, so a test that bypasses Start fails instead of starting one.
//
// Servers are configured the way users run them: utf8mb4 server charset and the strict sql_mode of
// Debian's MariaDB package (and MySQL 8), not --no-defaults latin1. Latin1 gives the old behaviour for
// the tests that check it; TRIBUTARY_TEST_CHARSET=latin1 runs every test on latin1 servers.
package mariadbtest

import (
	"bytes"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the downstream and test driver

	"github.com/tributary-db/tributary/tests/framework/netutil"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// Server is one running mariadbd.
type Server struct {
	Port     int
	ServerID uint32
	Dir      string
	cmd      *exec.Cmd
	exited   chan struct{}
	extra    []string
}

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
	nextID       atomic.Uint32
)

func binary(name string) string {
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// template initialises one clean datadir per test process; instances start from copies of it
// (copy + boot is about 0.6 s, a fresh init 1-2 s).
func template() (string, error) {
	templateOnce.Do(func() {
		install := binary("mariadb-install-db")
		if install == "" {
			templateErr = fmt.Errorf("mariadb-install-db not found")
			return
		}
		dir, err := os.MkdirTemp("", "tributary-mariadb-template-")
		if err != nil {
			templateErr = err
			return
		}
		// Every server gets its own tmpdir: a mariadbd starting up removes the #sql temporary files in
		// its tmpdir, which in a shared /tmp are another instance's (seen: a concurrent
		// mariadb-install-db failing with "#sql-temptable-....MAD not found").
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
			templateErr = err
			return
		}
		out, err := exec.Command(install, "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--tmpdir="+filepath.Join(dir, "tmp"), "--user="+currentUser(),
			"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve").CombinedOutput()
		if err != nil {
			templateErr = fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
			return
		}
		templateDir = dir
	})
	return templateDir, templateErr
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "mysql"
}

// ProductionDefaults are the server settings of Debian's mariadb-server package (and, but for the
// collation's name, MySQL 8's): every instance starts with them unless extra options override them.
var ProductionDefaults = []string{
	"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
	"--sql-mode=STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
}

// Latin1 are options for a server with the latin1 defaults of a --no-defaults mariadbd (and of old
// installations), for the tests that check a latin1 variant.
var Latin1 = []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}

// Start starts a new instance and stops it when the test ends. extra mariadbd options override the
// defaults (for example --binlog-row-metadata=MINIMAL, or Latin1...).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	SkipShort(t)
	if binary("mariadbd") == "" {
		t.Skip("mariadbd not found: install mariadb-server (apt-get install -y mariadb-server) to run this test")
	}
	s, err := start(extra)
	if err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	t.Cleanup(func() { s.Stop(); os.RemoveAll(s.Dir) })
	return s
}

// SkipShort skips t under go test -short (make unit runs no server; make test runs these tests).
func SkipShort(t testing.TB) {
	t.Helper()
	if Short() {
		t.Skip("needs a throw-away mariadbd: skipped under -short (make unit); make test runs it")
	}
}

// Short reports whether this is a test binary run with -short, in which no server may start. Outside
// a test binary (make demo, the chaos soak's command) it is false.
func Short() bool { return testing.Testing() && flag.Parsed() && testing.Short() }

// Available reports whether a mariadbd binary is installed.
func Available() bool { return binary("mariadbd") != "" }

// Launch starts an instance outside a test (make demo); the caller stops it and calls Remove.
func Launch(extra ...string) (*Server, error) { return start(extra) }

// Remove deletes the instance's directory (after Stop).
func (s *Server) Remove() error { return os.RemoveAll(s.Dir) }

// CPU is the server process's CPU time so far (user and system), from /proc; 0 where there is none.
func (s *Server) CPU() time.Duration {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// RemoveTemplate deletes the template datadir of this process (after the last Launch).
func RemoveTemplate() {
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
}

// Main is a TestMain for a package whose tests start servers: it runs them, then removes the template
// datadir this process made (about 100 MB in TMPDIR), and exits with their code.
func Main(m *testing.M) {
	code := m.Run()
	RemoveTemplate()
	os.Exit(code)
}

func start(extra []string) (*Server, error) {
	if Short() {
		return nil, errors.New("a mariadbd under go test -short: the test should have skipped (mariadbtest.SkipShort)")
	}
	tmpl, err := template()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tributary-mariadb-")
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(tmpl, "data"), filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy template datadir: %v: %s", err, out)
	}
	for _, sub := range []string{"binlog", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	// Another test process may take the same free port between our probe and mariadbd's bind: then
	// ours exits, or we would be talking to theirs. boot checks the datadir and we retry.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := netutil.FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Port: port, ServerID: 100 + nextID.Add(1) + uint32(os.Getpid()%1000)*100, Dir: dir, extra: extra}
		if lastErr = s.boot(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func (s *Server) boot() error {
	s.cmd = exec.Command(binary("mariadbd"), "--no-defaults",
		"--datadir="+filepath.Join(s.Dir, "data"),
		"--user="+currentUser(),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--port=%d", s.Port),
		"--socket="+filepath.Join(s.Dir, "mysqld.sock"),
		"--tmpdir="+filepath.Join(s.Dir, "tmp"),
		"--pid-file="+filepath.Join(s.Dir, "mysqld.pid"),
		"--log-error="+filepath.Join(s.Dir, "error.log"),
		"--log-bin="+filepath.Join(s.Dir, "binlog", "mysql-bin"),
		"--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
		fmt.Sprintf("--server-id=%d", s.ServerID),
		"--innodb-buffer-pool-size=32M", "--performance-schema=OFF", "--skip-name-resolve",
		"--max-connections=200",
	)
	s.cmd.Args = append(s.cmd.Args, ProductionDefaults...)
	if os.Getenv("TRIBUTARY_TEST_CHARSET") == "latin1" {
		s.cmd.Args = append(s.cmd.Args, Latin1...)
	}
	s.cmd.Args = append(s.cmd.Args, s.extra...) // later options win
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.exited) }()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	var datadir string
	var qerr error
	exited := false
	ready := wait.Until(30*time.Second, func() bool {
		select {
		case <-s.exited:
			exited = true
			return true
		default:
		}
		qerr = db.QueryRow("SELECT @@datadir").Scan(&datadir)
		return qerr == nil
	})
	switch {
	case exited:
		log, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
		return fmt.Errorf("mariadbd exited at start:\n%s", log)
	case !ready:
		s.Kill()
		log, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
		return fmt.Errorf("mariadbd on port %d not ready after 30s: %v\n%s", s.Port, qerr, log)
	case filepath.Clean(datadir) != filepath.Join(s.Dir, "data"):
		s.Kill()
		return fmt.Errorf("port %d is served by another mariadbd (%s)", s.Port, datadir)
	}
	return nil
}

// Addr is host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// DSN is a go-sql-driver DSN for root on database db ("" for none).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?interpolateParams=true&multiStatements=true", s.Port, db)
}

// DB opens a connection pool, closed when the test ends.
func (s *Server) DB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Exec runs statements, failing the test on error.
func (s *Server) Exec(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s on %s: %v", q, s.Addr(), err)
		}
	}
}

// Stop shuts the server down cleanly (SIGTERM) and waits.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Kill kills the server (SIGKILL) and waits.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
}

// Boot starts a stopped server again on the same port and datadir, with extra options after the
// ones it was started with (later options win: "--log-bin=..." restarts it under another binlog name).
func (s *Server) Boot(extra ...string) error {
	s.extra = append(s.extra, extra...)
	return s.boot()
}

// BinlogDir is the directory of the server's binlog files.
func (s *Server) BinlogDir() string { return filepath.Join(s.Dir, "binlog") }

// Restart stops the server cleanly and starts it again on the same port and datadir after outage.
func (s *Server) Restart(t testing.TB, outage time.Duration) {
	t.Helper()
	s.Stop()
	time.Sleep(outage)
	if err := s.boot(); err != nil {
		t.Fatalf("restart mariadbd on port %d: %v", s.Port, err)
	}
}
