package master

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/netutil"
)

func startTestEtcd(t *testing.T, st EtcdStorage) (*embed.Etcd, error) {
	t.Helper()
	etcdtest.SkipShort(t)
	c, _ := netutil.FreePort()
	p, _ := netutil.FreePort()
	e, err := StartEtcd(EtcdConfig{Name: "m", DataDir: t.TempDir(), ClientURL: fmt.Sprintf("http://127.0.0.1:%d", c),
		PeerURL: fmt.Sprintf("http://127.0.0.1:%d", p), Storage: st})
	if err == nil {
		t.Cleanup(e.Close)
	}
	return e, err
}

// The embedded etcd takes DM's storage settings: its history is compacted (periodic, one hour), its
// database and transactions have DM's limits; a given value wins, a quota below DM's lower bound is
// raised to it, and a mode etcd does not know is refused before anything starts.
func TestEtcdStorageSettings(t *testing.T) {
	e, err := startTestEtcd(t, EtcdStorage{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	if cfg.AutoCompactionMode != "periodic" || cfg.AutoCompactionRetention != "1h" || cfg.QuotaBackendBytes != 2<<30 ||
		cfg.MaxTxnOps != 2048 || cfg.MaxRequestBytes != embed.DefaultMaxRequestBytes {
		t.Errorf("defaults: compaction %s %s, quota %d, max txn ops %d, max request %d", cfg.AutoCompactionMode, cfg.AutoCompactionRetention,
			cfg.QuotaBackendBytes, cfg.MaxTxnOps, cfg.MaxRequestBytes)
	}
	// etcd's own limit (128 operations) would refuse this transaction.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ListenClientUrls[0].Host}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var ops []clientv3.Op
	for i := range 300 {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("k%d", i), "v"))
	}
	if _, err := cli.Txn(t.Context()).Then(ops...).Commit(); err != nil {
		t.Errorf("a transaction of 300 operations: %v", err)
	}

	e, err = startTestEtcd(t, EtcdStorage{AutoCompactionMode: "Revision", AutoCompactionRetention: "1000", QuotaBackendBytes: 1 << 20, MaxTxnOps: 64})
	if err != nil {
		t.Fatal(err)
	}
	cfg = e.Config()
	if cfg.AutoCompactionMode != "revision" || cfg.AutoCompactionRetention != "1000" || cfg.QuotaBackendBytes != 500<<20 || cfg.MaxTxnOps != 64 {
		t.Errorf("given: compaction %s %s, quota %d, max txn ops %d", cfg.AutoCompactionMode, cfg.AutoCompactionRetention, cfg.QuotaBackendBytes, cfg.MaxTxnOps)
	}

	if _, err := startTestEtcd(t, EtcdStorage{AutoCompactionMode: "daily"}); err == nil || !strings.Contains(err.Error(), "--auto-compaction-mode") {
		t.Errorf("mode daily: %v", err)
	}
}
