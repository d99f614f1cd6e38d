package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// diagnose keeps what a run that did not settle needs to be understood, beside the processes' logs
// in the cluster's directory (kept): the lock keys as etcd holds them, each master's own answer to
// shard-ddl-lock (the leader's coordinator view against the keys), and every process's goroutines
// (where a wait hangs). It returns the line the report shows.
func (s *Soak) diagnose(ctx context.Context) string {
	dir := filepath.Join(s.c.Dir, "diagnosis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "diagnosis: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var errs []string
	if err := s.dumpLockKeys(ctx, filepath.Join(dir, "etcd-pessimist.txt")); err != nil {
		errs = append(errs, "etcd keys: "+err.Error())
	}
	for _, m := range s.c.Masters {
		_, out, err := e2e.Dmctl(s.c.Bin, m.Addr, "--rpc-timeout", "20s", "shard-ddl-lock")
		if err != nil {
			out += "\nerror: " + err.Error()
		}
		if werr := os.WriteFile(filepath.Join(dir, "shard-ddl-lock-"+m.Name+".json"), []byte(out), 0o644); werr != nil {
			errs = append(errs, werr.Error())
		}
	}
	for _, p := range append(append([]*e2e.Proc{}, s.c.Masters...), s.c.Workers...) {
		if err := fetch(ctx, "http://"+p.Addr+"/debug/pprof/goroutine?debug=2", filepath.Join(dir, "goroutines-"+p.Name+".txt")); err != nil {
			errs = append(errs, p.Name+" goroutines: "+err.Error())
		}
	}
	line := "the processes' logs are kept in " + s.c.Dir + ", and in " + dir + " the lock keys, each master's shard-ddl-lock and every process's goroutines"
	if len(errs) > 0 {
		line += " (" + strings.Join(errs, "; ") + ")"
	}
	return line
}

// dumpLockKeys writes every pessimist key with its revisions, read from etcd directly.
func (s *Soak) dumpLockKeys(ctx context.Context, path string) error {
	var eps []string
	for _, m := range s.c.Masters {
		eps = append(eps, m.Addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, pessimist.NewLayout("").Root(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d\n", resp.Header.Revision)
	for _, kv := range resp.Kvs {
		fmt.Fprintf(&b, "%s create=%d mod=%d version=%d\n\t%s\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Value)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
