// Package integration drives the real binaries as separate processes.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/tributary-db/tributary/internal/netutil"
	"github.com/tributary-db/tributary/master"
	"github.com/tributary-db/tributary/pessimist"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds dm-master and dmctl once per test process.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tributary-bin-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+"/", "../cmd/dm-master", "../cmd/dmctl").CombinedOutput()
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
	if err == nil {
		if jerr := json.Unmarshal(out, &r); jerr != nil {
			t.Fatalf("dmctl %v printed no JSON: %v\n%s", args, jerr, out)
		}
	}
	return r, string(out)
}

func waitLeader(t *testing.T, bin, addr string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, _ := dmctl(t, bin, addr, "shard-ddl-lock"); r.Result {
			return
		}
		if time.Now().After(deadline) {
			_, out := dmctl(t, bin, addr, "shard-ddl-lock")
			t.Fatalf("dm-master at %s never served: %s", addr, out)
		}
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

	// A worker side: task sources and one source's info, written through the master's etcd.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	layout := pessimist.NewLayout("")
	if err := pessimist.PutTaskSources(ctx, cli, layout, "test", []string{"mysql-replica-01", "mysql-replica-02"}); err != nil {
		t.Fatal(err)
	}
	ddl := "ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` INT"
	if _, err := pessimist.NewAgent(cli, layout, "test", "mysql-replica-01", nil).PutInfo(ctx, "`shardddl`.`tb`", []string{ddl}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r, out = dmctl(t, bin, addr, "shard-ddl-lock", "test")
			if r.Result && len(r.Locks) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lock not shown: %s", out)
			}
		}
		l := r.Locks[0]
		if l.ID != "test-`shardddl`.`tb`" || l.Task != "test" || l.Mode != "pessimistic" || l.Owner != "mysql-replica-01" ||
			len(l.DDLs) != 1 || l.DDLs[0] != ddl || strings.Join(l.Synced, ",") != "mysql-replica-01" || strings.Join(l.Unsynced, ",") != "mysql-replica-02" {
			t.Fatalf("lock shown as %s", out)
		}
	}
	check()
	cli.Close()

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
	if _, out := dmctl(t, bin, addr, "shard-ddl-lock", "unlock"); !strings.Contains(out, "needs a LOCK-ID") {
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
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ms[0].addr, ms[1].addr, ms[2].addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	layout := pessimist.NewLayout("")
	if err := pessimist.PutTaskSources(ctx, cli, layout, "test", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pessimist.NewAgent(cli, layout, "test", "s1", nil).PutInfo(ctx, "`db`.`t`", []string{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT"}); err != nil {
		t.Fatal(err)
	}
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
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, _ := dmctl(t, bin, follower, "shard-ddl-lock", "test")
		if r.Result && len(r.Locks) == 1 && r.Locks[0].Owner == "s1" {
			break
		}
		if time.Now().After(deadline) {
			_, out := dmctl(t, bin, follower, "shard-ddl-lock", "test")
			t.Fatalf("after killing leader %s, %s shows %s", leader, follower, out)
		}
	}
	if newLeader, _ := master.Leader(ctx, cli, master.ElectionKey); newLeader == leader || newLeader == "" {
		t.Fatalf("leader after failover: %q (was %q)", newLeader, leader)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, out := dmctl(t, bin, follower, "shard-ddl-lock", "unlock", "test-`db`.`t`", "--force-remove")
		if r.Result {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unlock through %s: %s", follower, out)
		}
	}
	r, out := dmctl(t, bin, follower, "shard-ddl-lock", "test")
	if !r.Result || len(r.Locks) != 0 {
		t.Fatalf("after unlock: %s", out)
	}
}
