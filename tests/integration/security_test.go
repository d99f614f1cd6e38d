package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tributary-db/tributary/ha"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/tests/framework/certtest"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/netutil"
)

// securityCluster starts a cluster (no sources yet) whose upstreams and downstream have a user
// "tri" with password, created outside the binlog; requireSSL makes the user REQUIRE SSL.
func securityCluster(t *testing.T, o e2e.Options, password string, requireSSL bool) *e2eCluster {
	t.Helper()
	e2e.SkipShort(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	o.Root, o.Bin = root, binaries(t)
	c, err := e2e.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	ec := &e2eCluster{Cluster: c, t: t, task: "shard"}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(append([]*e2e.Proc{}, c.Masters...), c.Workers...) {
				t.Logf("--- %s log (last lines):\n%s\n%s", p.Name, e2e.Tail(p.LogFile, 40), e2e.Tail(p.LogFile+".out", 10))
			}
		}
		c.Close()
	})
	req := ""
	if requireSSL {
		req = " REQUIRE SSL"
	}
	user := []string{"SET sql_log_bin = 0", "CREATE USER tri@'%' IDENTIFIED BY '" + password + "'" + req,
		"GRANT ALL ON *.* TO tri@'%'", "SET sql_log_bin = 1"}
	for i := range c.Ups {
		db := fmt.Sprintf("db_%d", i+1)
		ec.up(i, append(user, "CREATE DATABASE "+db, "CREATE TABLE "+db+".t_1 (id INT PRIMARY KEY, v VARCHAR(32))")...)
	}
	for _, q := range user {
		if _, err := c.DownDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return ec
}

// sourceAs writes upstream i's source file with user tri, the given password (as written) and
// security section (indented lines, or "").
func (c *e2eCluster) sourceAs(i int, password, security string) string {
	c.t.Helper()
	f, err := c.SourceFile(i)
	if err != nil {
		c.t.Fatal(err)
	}
	c.rewrite(f, "  user: root\n  password: \"\"\n", "  user: tri\n  password: \""+password+"\"\n"+security)
	return f
}

// taskAs writes the task file with target-database user tri, the password and security section.
func (c *e2eCluster) taskAs(password, security string) string {
	c.t.Helper()
	f, err := c.TaskFile(c.task)
	if err != nil {
		c.t.Fatal(err)
	}
	c.rewrite(f, "  user: root\n  password: \"\"\n", "  user: tri\n  password: \""+password+"\"\n"+security)
	return f
}

func (c *e2eCluster) rewrite(file, old, new string) {
	c.t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		c.t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		c.t.Fatalf("%s has no %q:\n%s", file, old, data)
	}
	if err := os.WriteFile(file, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// replicates starts the task, writes rows on every upstream and waits until the downstream has them.
func (c *e2eCluster) replicates(taskFile string) {
	c.t.Helper()
	r := c.ok("start-task", taskFile)
	for _, s := range r.List("sources") {
		if !s.Bool("result") {
			c.t.Fatalf("start-task: source %s: %s", s.Str("source"), s.Str("msg"))
		}
	}
	c.waitStage("Running")
	for i := range c.Ups {
		c.up(i, insertRows(fmt.Sprintf("db_%d.t_1", i+1), i*100+1, i*100+21, "")) // 20 rows (insertRows stops before its end)
	}
	if n := c.converge("id, v"); n != 20*len(c.Ups) {
		c.t.Fatalf("downstream has %d rows, want %d", n, 20*len(c.Ups))
	}
}

// TestClusterTLS runs masters, workers and dmctl with TLS (ssl-ca, ssl-cert, ssl-key,
// cert-allowed-cn) and MariaDB servers whose replication user must use TLS (REQUIRE SSL), reached
// with the source's from.security and the task's target-database.security. Clients without a valid
// certificate are refused on every port: dmctl without certificates, a gRPC client whose certificate
// another CA signed, one whose certificate has a common name outside cert-allowed-cn, HTTP(S) GETs,
// and etcd clients; with the right certificates a task replicates.
func TestClusterTLS(t *testing.T) {
	e2e.SkipShort(t) // before making its certificates
	dir := t.TempDir()
	ca, err := certtest.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	good, err := ca.Issue(dir, "tributary", "tributary")
	if err != nil {
		t.Fatal(err)
	}
	wrongCN, err := ca.Issue(dir, "intruder", "intruder")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := certtest.NewCA(dir, "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := otherCA.Issue(dir, "foreign", "tributary")
	if err != nil {
		t.Fatal(err)
	}
	c := securityCluster(t, e2e.Options{
		Workers:     2,
		TLS:         &e2e.TLSFiles{CA: good.CA, Cert: good.Cert, Key: good.Key, AllowedCN: "tributary"},
		MariaDBArgs: []string{"--ssl-ca=" + good.CA, "--ssl-cert=" + good.Cert, "--ssl-key=" + good.Key},
	}, "tls-pw-1", true)

	// Refused: dmctl without certificates.
	if _, out, err := e2e.Dmctl(c.Bin, c.Master.Addr, "list-member"); err == nil {
		t.Fatalf("dmctl without certificates was answered:\n%s", out)
	}
	// Refused: gRPC clients with a certificate of another CA, or of a CN not allowed, to the master and
	// to a worker.
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(good.CA)
	pool.AppendCertsFromPEM(caPEM)
	clientTLS := func(p certtest.Pair) *tls.Config {
		cert, err := tls.LoadX509KeyPair(p.Cert, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	}
	call := func(addr string, cfg *tls.Config) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if addr == c.Master.Addr {
			_, err = pb.NewMasterClient(conn).ListMember(ctx, &pb.ListMemberRequest{})
		} else {
			_, err = pb.NewWorkerClient(conn).QueryStatus(ctx, &pb.QueryStatusRequest{})
		}
		return err
	}
	for _, addr := range []string{c.Master.Addr, c.Workers[0].Addr} {
		if err := call(addr, clientTLS(foreign)); err == nil {
			t.Fatalf("%s answered a gRPC client whose certificate another CA signed", addr)
		}
		if err := call(addr, clientTLS(wrongCN)); err == nil {
			t.Fatalf("%s answered a gRPC client whose certificate's CN is not in cert-allowed-cn", addr)
		}
		err := call(addr, &tls.Config{RootCAs: pool})
		if err == nil {
			t.Fatalf("%s answered a gRPC client without a certificate", addr)
		}
		t.Logf("%s refuses a gRPC client without a certificate: %v", addr, err)
	}
	// The same calls with the right certificate are answered (so the refusals above are the
	// certificates' doing).
	for _, addr := range []string{c.Master.Addr, c.Workers[0].Addr} {
		if err := call(addr, clientTLS(good)); err != nil {
			t.Fatalf("%s refused a gRPC client with the cluster's certificate: %v", addr, err)
		}
	}
	// Refused: HTTP without TLS, and HTTPS without a client certificate; answered with one.
	get := func(url string, cfg *tls.Config) (int, error) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("http://"+c.Master.Addr+"/health", nil); err == nil && code == http.StatusOK {
		t.Fatal("the master answered a plain HTTP GET /health")
	}
	if code, err := get("https://"+c.Master.Addr+"/health", &tls.Config{RootCAs: pool}); err == nil {
		t.Fatalf("the master answered an HTTPS GET /health without a client certificate (%d)", code)
	}
	if code, err := get("https://"+c.Master.Addr+"/health", clientTLS(good)); err != nil || code != http.StatusOK {
		t.Fatalf("HTTPS GET /health with the cluster's certificate: %d %v", code, err)
	}
	// etcd's JSON gateway, which the master serves itself and which calls the member's gRPC with the
	// master's certificate (cert-allowed-cn applies to it), answers over HTTPS: curl without Origin and
	// the master's own https origin; another site is refused.
	gateway := func(hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", "https://"+c.Master.Addr+"/v3/kv/range", strings.NewReader(`{"key": "L3RyaWJ1dGFyeS8=", "range_end": "L3RyaWJ1dGFyeTA=", "count_only": true}`))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(good)}}).Do(req)
		if err != nil {
			t.Fatalf("POST /v3/kv/range over HTTPS with %v: %v", hdr, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, hdr := range [][]string{nil, {"Origin", "https://" + c.Master.Addr, "Sec-Fetch-Site", "same-origin"}} {
		if code, body := gateway(hdr...); code != http.StatusOK || !strings.Contains(body, `"count"`) {
			t.Fatalf("POST /v3/kv/range over HTTPS with %v: %d %s", hdr, code, body)
		}
	}
	if code, body := gateway("Origin", "http://"+c.Master.Addr); code != http.StatusForbidden {
		t.Fatalf("POST /v3/kv/range over HTTPS from the http:// origin: %d %s, want 403", code, body)
	}
	// Refused: etcd clients without a certificate, or with another CA's; answered with the right one.
	etcdGet := func(cfg *tls.Config) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Master.Addr}, DialTimeout: 3 * time.Second, TLS: cfg, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = cli.Get(ctx, "/tributary/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	}
	if err := etcdGet(nil); err == nil {
		t.Fatal("etcd answered a client without TLS")
	}
	if err := etcdGet(&tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("etcd answered a client without a certificate")
	}
	if err := etcdGet(clientTLS(foreign)); err == nil {
		t.Fatal("etcd answered a client whose certificate another CA signed")
	}
	if err := etcdGet(clientTLS(good)); err != nil {
		t.Fatalf("etcd refused the cluster's certificate: %v", err)
	}

	// The MySQL user tri must use TLS: without from.security the source is refused.
	plain := c.sourceAs(0, "tls-pw-1", "")
	if r, out, err := c.Dmctl("operate-source", "create", plain); err != nil || r.Bool("result") {
		t.Fatalf("a source without from.security was created although its user requires SSL: %v\n%s", err, out)
	}
	sec := "  security:\n    ssl-ca: " + good.CA + "\n"
	for i := range c.Ups {
		c.ok("operate-source", "create", c.sourceAs(i, "tls-pw-1", sec))
	}
	c.replicates(c.taskAs("tls-pw-1", sec))
}

// TestPasswordsNeverInClear runs a cluster whose MySQL user has a known password, given in plain
// text in one source file and in the task file, and encrypted with dmctl encrypt in the other source
// file. The task replicates; then no log file, no file of the masters' etcd data directories, no etcd
// key or value and no dmctl output holds the password.
func TestPasswordsNeverInClear(t *testing.T) {
	const password = "Pw-n3ver-in-clear-5f1c"
	c := securityCluster(t, e2e.Options{Workers: 2}, password, false)
	var outputs []string
	dmctl := func(args ...string) e2e.Result {
		t.Helper()
		r, out, err := c.Dmctl(args...)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, "dmctl "+strings.Join(args, " ")+":\n"+out)
		return r
	}
	// dmctl encrypt prints the ciphertext alone, as DM's does.
	raw, err := exec.Command(filepath.Join(c.Bin, "dmctl"), "--master-addr", c.Master.Addr, "encrypt", password).Output()
	if err != nil {
		t.Fatalf("dmctl encrypt: %v", err)
	}
	outputs = append(outputs, string(raw))
	cipher := strings.TrimSpace(string(raw))
	if cipher == "" || strings.Contains(cipher, password) || strings.ContainsAny(cipher, "{ \n") {
		t.Fatalf("dmctl encrypt printed %q", raw)
	}
	var files []string
	files = append(files, c.sourceAs(0, password, ""), c.sourceAs(1, cipher, ""))
	for _, f := range files {
		if r := dmctl("operate-source", "create", f); !r.Bool("result") {
			t.Fatalf("operate-source create %s: %v", f, r)
		}
	}
	// The task's password as DM before v8 encrypted it: dmctl encrypt without --master-addr writes DM's
	// format with DM's built-in key, and a DM user's file works unchanged.
	dmRaw, err := exec.Command(filepath.Join(c.Bin, "dmctl"), "encrypt", password).Output()
	if err != nil {
		t.Fatalf("dmctl encrypt without --master-addr: %v", err)
	}
	outputs = append(outputs, string(dmRaw))
	dmCipher := strings.TrimSpace(string(dmRaw))
	if dmCipher == "" || dmCipher == cipher || strings.Contains(dmCipher, password) {
		t.Fatalf("dmctl encrypt without --master-addr printed %q", dmRaw)
	}
	task := c.taskAs(dmCipher, "")
	files = append(files, task)
	c.replicates(task)
	dmctl("query-status", c.task)
	dmctl("query-status")
	dmctl("operate-source", "show")
	dmctl("list-member")
	dmctl("shard-ddl-lock")
	dmctl("check-task", task)

	// etcd: every key and value.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Master.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	sawSource := false
	for _, kv := range resp.Kvs {
		if bytes.Contains(kv.Key, []byte(password)) || bytes.Contains(kv.Value, []byte(password)) {
			t.Errorf("etcd key %s holds the password in clear text: %s", kv.Key, kv.Value)
		}
		if strings.HasPrefix(string(kv.Key), "/tributary/source/") && bytes.Contains(kv.Value, []byte("password:")) {
			sawSource = true
		}
	}
	if !sawSource || len(resp.Kvs) < 5 {
		t.Fatalf("read %d etcd keys, no source with a password among them: the check read nothing", len(resp.Kvs))
	}
	for _, o := range outputs {
		if strings.Contains(o, password) {
			t.Errorf("dmctl output holds the password: %s", o)
		}
	}
	// Every file of the cluster's directory: the logs, the processes' outputs, etcd's WAL and
	// snapshot (but the files the test wrote).
	n := 0
	err = filepath.WalkDir(c.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) == ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		if bytes.Contains(data, []byte(password)) {
			t.Errorf("%s holds the password in clear text", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d files read under %s", n, c.Dir)
	}
	t.Logf("%d etcd keys, %d files and %d dmctl outputs hold no clear-text password", len(resp.Kvs), n, len(outputs))
}

// TestMasterHTTPOnlyForItsOwnPages (issue 42): the master's address answers a web page of another
// site with no CORS header, and refuses its writes (a text/plain POST, which a page may send without
// asking CORS first, to the unlock endpoint and to etcd's JSON gateway; a WebSocket to etcd's watch),
// so the lock and the password key stay; requests without Origin (curl) and the master's own pages
// work; an origin of cors-origins (here from the --config file) gets the CORS header and may write
// JSON.
func TestMasterHTTPOnlyForItsOwnPages(t *testing.T) {
	bin := binaries(t)
	start := func(name string, extra ...string) string {
		p1, _ := netutil.FreePort()
		p2, _ := netutil.FreePort()
		addr := fmt.Sprintf("127.0.0.1:%d", p1)
		startMaster(t, bin, name, filepath.Join(t.TempDir(), name), addr, fmt.Sprintf("127.0.0.1:%d", p2), append([]string{"--openapi"}, extra...)...)
		waitLeader(t, bin, addr)
		return addr
	}
	addr := start("m1")
	base := "http://" + addr
	const evil = "http://evil.example"
	crossSite := []string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}
	sameOrigin := []string{"Origin", base, "Sec-Fetch-Site", "same-origin"}
	b64 := base64.StdEncoding.EncodeToString
	rangeKey := `{"key": "` + b64([]byte(ha.PasswordKeyKey)) + `"}`
	passwordKey := func(t *testing.T, hdr ...string) string {
		t.Helper()
		st, _, body := httpDo(t, "POST", base+"/v3/kv/range", "application/json", rangeKey, hdr...)
		var r struct{ Kvs []struct{ Value string } }
		if json.Unmarshal(body, &r); st != 200 || len(r.Kvs) != 1 || r.Kvs[0].Value == "" {
			t.Fatalf("/v3/kv/range of %s with %v: %d %s", ha.PasswordKeyKey, hdr, st, body)
		}
		return r.Kvs[0].Value
	}
	key := passwordKey(t) // curl: no Origin

	ddl := "ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` INT"
	halfFormedLock(t, []string{addr}, []string{"mysql-replica-01", "mysql-replica-02"}, "`shardddl`.`tb`", ddl)
	const lockID = "test-`shardddl`.`tb`"
	lockWaits := func(r dmctlResult) bool {
		return r.Result && len(r.Locks) == 1 && r.Locks[0].ID == lockID && strings.Join(r.Locks[0].Unsynced, ",") == "mysql-replica-02"
	}
	dmctlUntil(t, bin, addr, 30*time.Second, lockWaits, "lock not shown", "shard-ddl-lock", "test")
	unlock := base + "/api/v1/shard-ddl-locks/" + url.PathEscape(lockID) + "/unlock"

	t.Run("no CORS for another site", func(t *testing.T) {
		for _, path := range []string{"/api/v1/shard-ddl-locks", "/dashboard/", "/metrics", "/health", "/version"} {
			st, h, _ := httpDo(t, "GET", base+path, "", "", "Origin", evil)
			if a := h.Get("Access-Control-Allow-Origin"); st != 200 || a != "" {
				t.Errorf("GET %s from %s: %d, Access-Control-Allow-Origin %q", path, evil, st, a)
			}
		}
		for _, u := range []string{unlock, base + "/v3/kv/range"} { // a preflight
			_, h, _ := httpDo(t, "OPTIONS", u, "", "", "Origin", evil, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
			if a := h.Get("Access-Control-Allow-Origin"); a != "" {
				t.Errorf("preflight of %s from %s: Access-Control-Allow-Origin %q", u, evil, a)
			}
		}
	})

	t.Run("writes refused", func(t *testing.T) {
		junk := b64([]byte("0000"))
		for _, c := range []struct {
			url, ctype, body string
			hdr              []string
			want             int
		}{
			{unlock, "text/plain;charset=UTF-8", `{"force_remove":true}`, crossSite, 403},
			{unlock, "application/json", `{"force_remove":true}`, []string{"Origin", evil}, 403},                                  // a browser without Sec-Fetch-*
			{unlock, "application/json", `{"force_remove":true}`, []string{"Origin", "null", "Sec-Fetch-Site", "same-site"}, 403}, // a sandboxed frame
			{unlock, "text/plain", `{"force_remove":true}`, nil, 415},
			{unlock, "application/x-www-form-urlencoded", "force_remove=true", nil, 415},
			{base + "/v3/kv/range", "text/plain", rangeKey, crossSite, 403},
			{base + "/v3/kv/range", "text/plain", rangeKey, nil, 415},
			{base + "/v3/kv/range", "multipart/form-data; boundary=x", rangeKey, nil, 415},
			{base + "/v3/kv/put", "text/plain", `{"key": "` + b64([]byte(ha.PasswordKeyKey)) + `", "value": "` + junk + `"}`, crossSite, 403},
			{base + "/v3/kv/deleterange", "text/plain", rangeKey, []string{"Origin", evil}, 403},
		} {
			st, h, body := httpDo(t, "POST", c.url, c.ctype, c.body, c.hdr...)
			var e struct {
				Msg  string `json:"error_msg"`
				Code int    `json:"error_code"`
			}
			if err := json.Unmarshal(body, &e); st != c.want || err != nil || e.Code != c.want || e.Msg == "" || h.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("POST %s (%s) with %v: %d %s, want %d with a JSON error and no CORS", c.url, c.ctype, c.hdr, st, body, c.want)
			}
		}
		// A WebSocket to etcd's watch (browsers apply no CORS to WebSockets).
		st, _, body := httpDo(t, "GET", base+"/v3/watch", "", "", append([]string{"Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}, crossSite...)...)
		if st != 403 {
			t.Errorf("WebSocket to /v3/watch from %s: %d %s, want 403", evil, st, body)
		}
		if r, out := dmctl(t, bin, addr, "shard-ddl-lock", "test"); !lockWaits(r) {
			t.Fatalf("the lock changed: %s", out)
		}
		if k := passwordKey(t); k != key {
			t.Fatalf("the password key changed: %s, was %s", k, key)
		}
	})

	t.Run("own pages work", func(t *testing.T) {
		if k := passwordKey(t, sameOrigin...); k != key {
			t.Fatalf("same-origin read of the password key: %s, want %s", k, key)
		}
		st, _, body := httpDo(t, "POST", unlock, "application/json", `{"force_remove":true}`, sameOrigin...)
		if st != 200 || !strings.Contains(string(body), `"result": true`) {
			t.Fatalf("same-origin unlock: %d %s", st, body)
		}
		if r, out := dmctl(t, bin, addr, "shard-ddl-lock", "test"); !r.Result || len(r.Locks) != 0 {
			t.Fatalf("after the same-origin unlock: %s", out)
		}
	})

	t.Run("cors-origins", func(t *testing.T) {
		const dash = "http://dash.example:8080"
		cfg := filepath.Join(t.TempDir(), "master.toml")
		if err := os.WriteFile(cfg, []byte(`cors-origins = ["`+dash+`", "https://ops.example"]`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		base := "http://" + start("m2", "--config", cfg)
		fromDash := []string{"Origin", dash, "Sec-Fetch-Site", "cross-site"}
		for _, c := range []struct {
			method, path, ctype, body string
			hdr                       []string
			status                    int
			allow                     string
		}{
			{"GET", "/api/v1/shard-ddl-locks", "", "", fromDash, 200, dash},
			{"GET", "/health", "", "", fromDash, 200, dash},
			{"OPTIONS", "/v3/kv/range", "", "", append([]string{"Access-Control-Request-Method", "POST"}, fromDash...), 200, dash},
			{"POST", "/v3/kv/range", "application/json", rangeKey, fromDash, 200, dash},
			{"POST", "/v3/kv/range", "text/plain", rangeKey, fromDash, 415, dash},
			{"GET", "/api/v1/shard-ddl-locks", "", "", crossSite, 200, ""},
			{"POST", "/v3/kv/range", "application/json", rangeKey, crossSite, 403, ""},
		} {
			st, h, body := httpDo(t, c.method, base+c.path, c.ctype, c.body, c.hdr...)
			if a := h.Get("Access-Control-Allow-Origin"); st != c.status || a != c.allow {
				t.Errorf("%s %s (%s) with %v: %d, Access-Control-Allow-Origin %q, want %d and %q\n%s", c.method, c.path, c.ctype, c.hdr, st, a, c.status, c.allow, body)
			}
		}
	})
}

// httpDo sends one request with the content type (if any) and header pairs, and returns the answer.
func httpDo(t *testing.T, method, u, ctype, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, resp.Header, nil // a WebSocket accepted: nothing to read
	}
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}
