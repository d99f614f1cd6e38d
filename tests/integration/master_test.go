// Package integration drives the real binaries as separate processes.
package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/master"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/tests/framework/netutil"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// TestMain removes the binaries built for the tests and the MariaDB template datadir.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	mariadbtest.RemoveTemplate()
	os.Exit(code)
}

// binaries builds dm-master, dm-worker and dmctl (with failpoints) once per test process.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binaries: skipped under -short (make unit); make test runs it")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tributary-bin-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", binDir+"/", "../../cmd/dm-master", "../../cmd/dm-worker", "../../cmd/dmctl").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type masterProc struct {
	cmd  *exec.Cmd
	addr string
	args []string
}

func startMaster(t *testing.T, bin, name, dataDir, addr, peer string, extra ...string) *masterProc {
	t.Helper()
	m := &masterProc{addr: addr, args: append([]string{"--name", name, "--master-addr", addr, "--peer-urls", "http://" + peer,
		"--data-dir", dataDir, "--log-file", dataDir + ".log"}, extra...)}
	m.cmd = exec.Command(filepath.Join(bin, "dm-master"), m.args...)
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cmd.Process.Kill(); m.cmd.Wait() })
	return m
}

func (m *masterProc) kill9() { m.cmd.Process.Signal(syscall.SIGKILL); m.cmd.Wait() }

type dmctlResult struct {
	Result bool   `json:"result"`
	Msg    string `json:"msg"`
	Locks  []struct {
		ID       string   `json:"ID"`
		Task     string   `json:"task"`
		Mode     string   `json:"mode"`
		Owner    string   `json:"owner"`
		DDLs     []string `json:"DDLs"`
		Synced   []string `json:"synced"`
		Unsynced []string `json:"unsynced"`
	} `json:"locks"`
}

func dmctl(t *testing.T, bin, addr string, args ...string) (dmctlResult, string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "dmctl"), append([]string{"--master-addr", addr, "--rpc-timeout", "5s"}, args...)...).CombinedOutput()
	var r dmctlResult
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) && exit.ExitCode() == 1 && json.Valid(out) { // 1: an answer with a result false
		if jerr := json.Unmarshal(out, &r); jerr != nil {
			t.Fatalf("dmctl %v printed no JSON: %v\n%s", args, jerr, out)
		}
	}
	return r, string(out)
}

// dmctlUntil runs dmctl until ok accepts its result or timeout passes, then fails with what.
func dmctlUntil(t *testing.T, bin, addr string, timeout time.Duration, ok func(dmctlResult) bool, what string, args ...string) dmctlResult {
	t.Helper()
	r, _ := dmctlPoll(t, bin, addr, timeout, func(r dmctlResult, _ string) bool { return ok(r) }, what, args...)
	return r
}

// dmctlUntilOut is dmctlUntil for a condition on the printed output.
func dmctlUntilOut(t *testing.T, bin, addr string, timeout time.Duration, ok func(string) bool, what string, args ...string) string {
	t.Helper()
	_, out := dmctlPoll(t, bin, addr, timeout, func(_ dmctlResult, out string) bool { return ok(out) }, what, args...)
	return out
}

func dmctlPoll(t *testing.T, bin, addr string, timeout time.Duration, ok func(dmctlResult, string) bool, what string, args ...string) (dmctlResult, string) {
	t.Helper()
	var r dmctlResult
	var out string
	wait.Eventually(t, timeout, func() bool { r, out = dmctl(t, bin, addr, args...); return ok(r, out) },
		func() string { return fmt.Sprintf("%s: dmctl %v at %s printed %s", what, args, addr, out) })
	return r, out
}

func waitLeader(t *testing.T, bin, addr string) {
	t.Helper()
	dmctlUntil(t, bin, addr, 60*time.Second, func(r dmctlResult) bool { return r.Result }, "dm-master never served", "shard-ddl-lock")
}

// halfFormedLock writes, through the masters' etcd, a task's sources and one source's info: a lock
// waiting for the other sources.
func halfFormedLock(t *testing.T, endpoints []string, sources []string, target, ddl string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	layout := pessimist.NewLayout("")
	if err := pessimist.PutTaskSources(ctx, cli, layout, "test", sources); err != nil {
		t.Fatal(err)
	}
	if _, err := pessimist.NewAgent(cli, layout, "test", sources[0], nil).PutInfo(ctx, target, []string{ddl}); err != nil {
		t.Fatal(err)
	}
}

// TestMasterAndDmctlProcesses: a real dm-master process and dmctl: DM-shaped JSON for no lock and for a
// half-formed lock; the lock survives kill -9 and a restart of the master (the state is in etcd);
// unlock --force-remove clears it.
func TestMasterAndDmctlProcesses(t *testing.T) {
	bin := binaries(t)
	p1, _ := netutil.FreePort()
	p2, _ := netutil.FreePort()
	addr, peer := fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)
	dataDir := filepath.Join(t.TempDir(), "m1")
	m := startMaster(t, bin, "m1", dataDir, addr, peer)
	waitLeader(t, bin, addr)
	r, out := dmctl(t, bin, addr, "shard-ddl-lock")
	if !r.Result || r.Msg != "no DDL lock exists" || !strings.Contains(out, `"locks": []`) {
		t.Fatalf("no lock: %s", out)
	}

	ddl := "ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` INT"
	halfFormedLock(t, []string{addr}, []string{"mysql-replica-01", "mysql-replica-02"}, "`shardddl`.`tb`", ddl)
	check := func() {
		t.Helper()
		r = dmctlUntil(t, bin, addr, 30*time.Second, func(r dmctlResult) bool { return r.Result && len(r.Locks) == 1 },
			"lock not shown", "shard-ddl-lock", "test")
		l := r.Locks[0]
		if l.ID != "test-`shardddl`.`tb`" || l.Task != "test" || l.Mode != "pessimistic" || l.Owner != "mysql-replica-02" || // the source whose arrival completes it runs it
			len(l.DDLs) != 1 || l.DDLs[0] != ddl || strings.Join(l.Synced, ",") != "mysql-replica-01" || strings.Join(l.Unsynced, ",") != "mysql-replica-02" {
			t.Fatalf("lock shown as %+v", l)
		}
	}
	check()

	m.kill9()
	startMaster(t, bin, "m1", dataDir, addr, peer)
	waitLeader(t, bin, addr)
	check() // rebuilt from etcd alone

	r, out = dmctl(t, bin, addr, "shard-ddl-lock", "unlock", "test-`shardddl`.`tb`", "--force-remove")
	if !r.Result {
		t.Fatalf("unlock --force-remove: %s", out)
	}
	r, out = dmctl(t, bin, addr, "shard-ddl-lock", "test")
	if !r.Result || len(r.Locks) != 0 {
		t.Fatalf("after force-remove: %s", out)
	}
	if _, out := dmctl(t, bin, addr, "shard-ddl-lock", "unlock"); !strings.Contains(out, "LOCK-ID") {
		t.Fatalf("unlock without an ID: %s", out)
	}
}

// TestThreeMastersFailover: three dm-master processes form one embedded etcd cluster; dmctl may talk to
// any of them (followers forward to the leader); kill -9 of the leader elects another, which shows the
// same lock from etcd, and an unlock sent to a follower is carried out.
func TestThreeMastersFailover(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	type member struct{ name, addr, peer string }
	var ms []member
	var initial []string
	for i := 1; i <= 3; i++ {
		c, _ := netutil.FreePort()
		p, _ := netutil.FreePort()
		m := member{fmt.Sprintf("m%d", i), fmt.Sprintf("127.0.0.1:%d", c), fmt.Sprintf("127.0.0.1:%d", p)}
		ms = append(ms, m)
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	procs := map[string]*masterProc{}
	for _, m := range ms {
		procs[m.name] = startMaster(t, bin, m.name, filepath.Join(dir, m.name), m.addr, m.peer, "--initial-cluster", strings.Join(initial, ","))
	}
	for _, m := range ms {
		waitLeader(t, bin, m.addr) // served directly or forwarded
	}
	endpoints := []string{ms[0].addr, ms[1].addr, ms[2].addr}
	halfFormedLock(t, endpoints, []string{"s1", "s2"}, "`db`.`t`", "ALTER TABLE `db`.`t` ADD COLUMN `c` INT")
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	leader, err := master.Leader(ctx, cli, master.ElectionKey)
	if err != nil || leader == "" {
		t.Fatalf("leader %q %v", leader, err)
	}
	procs[leader].kill9()
	var follower string
	for _, m := range ms {
		if m.name != leader {
			follower = m.addr
		}
	}
	dmctlUntil(t, bin, follower, 60*time.Second, func(r dmctlResult) bool { return r.Result && len(r.Locks) == 1 && r.Locks[0].Owner == "s2" }, // the missing source runs it
		"lock after killing leader "+leader, "shard-ddl-lock", "test")
	if newLeader, _ := master.Leader(ctx, cli, master.ElectionKey); newLeader == leader || newLeader == "" {
		t.Fatalf("leader after failover: %q (was %q)", newLeader, leader)
	}
	dmctlUntil(t, bin, follower, 30*time.Second, func(r dmctlResult) bool { return r.Result },
		"unlock through a follower", "shard-ddl-lock", "unlock", "test-`db`.`t`", "--force-remove")
	r, out := dmctl(t, bin, follower, "shard-ddl-lock", "test")
	if !r.Result || len(r.Locks) != 0 {
		t.Fatalf("after unlock: %s", out)
	}

	// The dead leader is removed from the etcd cluster, and a new master joins with --join, its
	// settings read from a TOML --config file.
	if r, out := dmctl(t, bin, follower, "offline-member", "--type", "master", "--name", leader); !r.Result {
		t.Fatalf("offline-member %s: %s", leader, out)
	}
	c4, _ := netutil.FreePort()
	p4, _ := netutil.FreePort()
	addr4 := fmt.Sprintf("127.0.0.1:%d", c4)
	cfg := filepath.Join(dir, "m4.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("name = \"m4\"\nmaster-addr = %q\npeer-urls = \"http://127.0.0.1:%d\"\njoin = %q\ndata-dir = %q\nlog-file = %q\n",
		addr4, p4, follower, filepath.Join(dir, "m4"), filepath.Join(dir, "m4.log"))), 0o644); err != nil {
		t.Fatal(err)
	}
	m4 := exec.Command(filepath.Join(bin, "dm-master"), "--config", cfg)
	if err := m4.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m4.Process.Kill(); m4.Wait() })
	waitLeader(t, bin, addr4)
	out = dmctlUntilOut(t, bin, addr4, 30*time.Second, func(out string) bool {
		return strings.Count(out, `"alive": true`) == 3 && strings.Contains(out, `"name": "m4"`) && !strings.Contains(out, `"name": "`+leader+`"`)
	}, "masters after offline-member and --join", "list-member", "--master")

	// A master on an external etcd (here: the cluster's own) serves dmctl too.
	c5, _ := netutil.FreePort()
	addr5 := fmt.Sprintf("127.0.0.1:%d", c5)
	m5 := exec.Command(filepath.Join(bin, "dm-master"), "--name", "m5", "--master-addr", addr5, "--etcd-endpoints", "http://"+addr4,
		"--log-file", filepath.Join(dir, "m5.log"))
	if err := m5.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m5.Process.Kill(); m5.Wait() })
	waitLeader(t, bin, addr5)

	// A key that is not a flag is refused, naming it.
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("name = \"x\"\nmaster-adr = \"127.0.0.1:1\"\n"), 0o644)
	if out, err := exec.Command(filepath.Join(bin, "dm-master"), "--config", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "master-adr") {
		t.Fatalf("bad --config: %v %s", err, out)
	}
}

// TestDMConfigFiles: dm-master and dm-worker start from configuration files shaped as DM's
// documentation gives them: listen addresses as ":port" with an advertise-addr, URLs without a scheme,
// join with "http://", dm-master's [experimental] openapi, keys DM defines that mean nothing here
// (rpc-timeout, relay-keepalive-ttl, relay-dir: accepted and logged), and a worker without a name
// (named after its advertise-addr, as DM does). dmctl takes "http://" and a list of masters; -V prints
// the version. A listen address of every interface without an advertise-addr is refused, naming both.
func TestDMConfigFiles(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	c, _ := netutil.FreePort()
	p, _ := netutil.FreePort()
	w, _ := netutil.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", c)
	mcfg := filepath.Join(dir, "dm-master.toml")
	os.WriteFile(mcfg, []byte(fmt.Sprintf(`name = "master1"
log-level = "info"
log-file = %q
master-addr = ":%d"
advertise-addr = %q
peer-urls = "127.0.0.1:%d"
advertise-peer-urls = "http://127.0.0.1:%d"
initial-cluster = "master1=127.0.0.1:%d"
join = ""
data-dir = %q
rpc-timeout = "30s"
auto-compaction-retention = "1h"
[experimental]
openapi = true
`, filepath.Join(dir, "dm-master.log"), c, addr, p, p, p, filepath.Join(dir, "m1"))), 0o644)
	m := exec.Command(filepath.Join(bin, "dm-master"), "--config", mcfg)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Process.Kill(); m.Wait() })
	waitLeader(t, bin, addr)

	wcfg := filepath.Join(dir, "dm-worker.toml")
	os.WriteFile(wcfg, []byte(fmt.Sprintf(`log-level = "info"
log-file = %q
worker-addr = ":%d"
advertise-addr = "127.0.0.1:%d"
join = "http://%s"
keepalive-ttl = 60
relay-keepalive-ttl = 1800
relay-dir = "relay_log"
`, filepath.Join(dir, "dm-worker.log"), w, w, addr)), 0o644)
	wk := exec.Command(filepath.Join(bin, "dm-worker"), "--config", wcfg)
	wk.Dir = dir
	if err := wk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wk.Process.Kill(); wk.Wait() })
	// An address that refuses connections first: dmctl asks the first master that accepts one.
	dead, _ := netutil.FreePort()
	masters := fmt.Sprintf("http://127.0.0.1:%d,http://%s", dead, addr)
	dmctlUntilOut(t, bin, masters, 30*time.Second, func(out string) bool {
		return strings.Contains(out, fmt.Sprintf(`"name": "127.0.0.1:%d"`, w)) && strings.Contains(out, `"stage": "free"`)
	}, "the worker named after its advertise-addr", "list-member", "--worker")

	resp, err := http.Get("http://" + addr + "/api/v1/sources")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("[experimental] openapi: GET /api/v1/sources answered %s", resp.Status)
	}
	for file, want := range map[string]string{"dm-master.log": "rpc-timeout=30s", "dm-worker.log": "relay-keepalive-ttl=1800"} {
		data, _ := os.ReadFile(filepath.Join(dir, file))
		if !strings.Contains(string(data), "DM settings accepted with no effect") || !strings.Contains(string(data), want) {
			t.Errorf("%s does not list %s as accepted with no effect", file, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "relay_log")); err == nil {
		t.Error("relay-dir was created")
	}

	for _, cmd := range []string{"dm-master", "dm-worker", "dmctl"} {
		out, err := exec.Command(filepath.Join(bin, cmd), "-V").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Git Commit Hash:") || !strings.Contains(string(out), "Go Version:") {
			t.Errorf("%s -V: %v %s", cmd, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(bin, "dm-master"), "--master-addr", ":1", "--data-dir", filepath.Join(dir, "never")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--master-addr ":1" listens on every interface: set --advertise-addr`) {
		t.Errorf("--master-addr :1 without --advertise-addr: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err == nil {
		t.Error("the refused master created its data directory")
	}
}
