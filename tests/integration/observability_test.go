package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/master"
	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// The operator's view of one lock's life, on real processes: the HTTP API answers every path its
// OpenAPI document lists with the fields it documents; the metrics of the master and the workers
// show the lock, the stages and the binlog positions; the web page (headless Chromium) shows the
// half-formed lock and then its resolution; the logs of all processes tell the lock's whole life
// under its ID.
func TestObservability(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, MasterArgs: []string{"--openapi"}}, true)
	base := "http://" + c.Master.Addr
	c.halfForm()
	const lockID = "shard-`db`.`t`"

	t.Run("api", func(t *testing.T) {
		checkAPI(t, base, c.task)
		// query-status's shard groups are a snapshot refreshed at each flush: wait for the one of the
		// info put.
		// (A source without a group of its own shows DM's pseudo group.)
		lock := waitAPILock(t, base, func(l apiLockView) bool {
			return len(l.Tables) > 0 && l.Tables[0].Source == s1 && len(l.Tables[0].Unsynced) == 0
		})
		if lock.ID != lockID || !slices.Equal(lock.Synced, []string{s1}) || !slices.Equal(lock.Unsynced, []string{s2}) || lock.Stage != "waiting" {
			t.Fatalf("API lock %+v, want %s waiting with %s synced and %s not", lock, lockID, s1, s2)
		}
		if tb := lock.Tables[0]; tb.Source != s1 || !slices.Equal(tb.Synced, []string{"`db_1`.`t_1`", "`db_1`.`t_2`"}) || len(tb.Unsynced) != 0 {
			t.Fatalf("API lock tables %+v, want %s's db_1.t_1 and db_1.t_2 synced", lock.Tables, s1)
		}
	})

	t.Run("api task stop and start", func(t *testing.T) {
		// DM's OpenAPI stop keeps the task for start: pause-task and resume-task, here of one source.
		post := func(path, body string) (int, []byte) {
			resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		stageOf := func(r e2e.Result, src string) string {
			for _, s := range r.List("sources") {
				if s.Get("sourceStatus").Str("source") == src {
					for _, st := range s.List("subTaskStatus") {
						return st.Str("stage")
					}
				}
			}
			return ""
		}
		if status, body := post("/api/v1/tasks/"+c.task+"/stop", `{"source_name_list": ["`+s2+`"]}`); status != 200 {
			t.Fatalf("stop %s: %d %s", s2, status, body)
		}
		c.until(s2+" paused by the API, "+s1+" running", func(r e2e.Result) bool {
			return stageOf(r, s2) == "Paused" && stageOf(r, s1) == "Running"
		}, "query-status", c.task)
		if status, body := post("/api/v1/tasks/"+c.task+"/start", `{"start_time": "2026-01-01 00:00:00"}`); status != 400 || !strings.Contains(string(body), "dmctl start-task") {
			t.Fatalf("start with start_time: %d %s, want 400 naming dmctl start-task", status, body)
		}
		if status, body := post("/api/v1/tasks/no-such-task/start", ``); status != 404 {
			t.Fatalf("start of an unknown task: %d %s, want 404", status, body)
		}
		if status, body := post("/api/v1/tasks/"+c.task+"/start", ``); status != 200 {
			t.Fatalf("start: %d %s", status, body)
		}
		c.until("both running again", func(r e2e.Result) bool {
			return stageOf(r, s2) == "Running" && stageOf(r, s1) == "Running"
		}, "query-status", c.task)
	})

	t.Run("pprof", func(t *testing.T) {
		// Go's profiles beside gRPC, as DM's master and worker serve them: the index, a named profile
		// under it, and a CPU profile of a second.
		for _, b := range append([]string{base}, "http://"+c.Workers[0].Addr, "http://"+c.Workers[1].Addr) {
			if status, body := httpGet(t, b+"/debug/pprof/"); status != 200 || !strings.Contains(string(body), "goroutine") {
				t.Fatalf("%s/debug/pprof/: %d %.200s", b, status, body)
			}
			if status, body := httpGet(t, b+"/debug/pprof/goroutine?debug=1"); status != 200 || !strings.Contains(string(body), "goroutine profile: total") {
				t.Fatalf("%s/debug/pprof/goroutine: %d %.200s", b, status, body)
			}
			if status, body := httpGet(t, b+"/debug/pprof/profile?seconds=1"); status != 200 || len(body) == 0 {
				t.Fatalf("%s/debug/pprof/profile: %d, %d bytes", b, status, len(body))
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := scrape(t, base)
		if v := m.value(`dm_master_ddl_state_number{task="shard",type="Un-synced"}`); v != 1 {
			t.Fatalf("dm_master_ddl_state_number Un-synced = %v, want 1", v)
		}
		if v := m.value(`dm_master_ddl_lock_unsynced_sources{lock="` + lockID + `",task="shard"}`); v != 1 {
			t.Fatalf("unsynced sources of the lock = %v, want 1", v)
		}
		if v := m.value(`dm_master_leader`); v != 1 {
			t.Fatalf("dm_master_leader = %v", v)
		}
		resolving := 0.0
		for _, w := range c.Workers {
			wm := scrape(t, "http://"+w.Addr)
			src := wm.label("dm_worker_task_state", "source_id")
			if v := wm.value(`dm_worker_task_state{source_id="` + src + `",task="shard",worker="` + w.Name + `"}`); v != 2 {
				t.Fatalf("%s: dm_worker_task_state = %v, want 2 (Running)", w.Name, v)
			}
			for _, node := range []string{"master", "syncer"} {
				if v := wm.value(`dm_syncer_binlog_file{node="` + node + `",source_id="` + src + `",task="shard"}`); v < 1 {
					t.Fatalf("%s: dm_syncer_binlog_file{node=%s} = %v", w.Name, node, v)
				}
				if v := wm.value(`dm_syncer_binlog_pos{node="` + node + `",source_id="` + src + `",task="shard"}`); v < 4 {
					t.Fatalf("%s: dm_syncer_binlog_pos{node=%s} = %v", w.Name, node, v)
				}
			}
			if v := wm.value(`dm_syncer_finished_jobs_total{source_id="` + src + `",task="shard",type="insert"}`); v < 100 {
				t.Fatalf("%s: rows inserted = %v, want at least 100", w.Name, v)
			}
			if v := wm.value(`dm_syncer_txn_duration_time_count{source_id="` + src + `",task="shard"}`); v < 1 {
				t.Fatalf("%s: no transaction timed", w.Name)
			}
			resolving += wm.value(`dm_syncer_shard_lock_resolving{source_id="` + src + `",task="shard"}`)
		}
		if resolving != 1 {
			t.Fatalf("%v sources resolving a lock, want 1 (%s)", resolving, s1)
		}
	})

	t.Run("dashboard-before", func(t *testing.T) {
		dom := dashboard(t, base, "before.png", func(dom string) bool { return strings.Contains(dom, `data-lock="`+lockID+`"`) })
		row := lockRow(dom, lockID)
		if !strings.Contains(cell(row, "unsynced"), s2) || strings.Contains(cell(row, "unsynced"), s1) || !strings.Contains(cell(row, "synced"), s1) {
			t.Fatalf("dashboard lock row does not show %s synced and %s unsynced:\n%s", s1, s2, row)
		}
		for _, want := range []string{"ADD COLUMN", "`db_1`.`t_1`", "waiting", "worker1", "master1"} {
			if !strings.Contains(dom, want) {
				t.Fatalf("dashboard lacks %q", want)
			}
		}
	})

	c.finishLockPlus(0)
	t.Run("resolved", func(t *testing.T) {
		waitAPILocksEmpty(t, base)
		if v := scrape(t, base).value(`dm_master_ddl_state_number{task="shard",type="Un-synced"}`); v != 0 {
			t.Fatalf("dm_master_ddl_state_number Un-synced = %v after the lock resolved", v)
		}
		dom := dashboard(t, base, "after.png", func(dom string) bool { return strings.Contains(dom, "no DDL lock exists") })
		if strings.Contains(dom, `data-lock="`) {
			t.Fatal("the dashboard still shows a lock row")
		}
	})

	t.Run("logs", func(t *testing.T) {
		checkLockLogs(t, c, lockID)
	})
}

// --- the API against its OpenAPI document ---

type apiLockView struct {
	ID       string   `json:"id"`
	Stage    string   `json:"stage"`
	Synced   []string `json:"synced"`
	Unsynced []string `json:"unsynced"`
	Tables   []struct {
		Source   string   `json:"source"`
		Synced   []string `json:"synced"`
		Unsynced []string `json:"unsynced"`
	} `json:"tables"`
}

func httpGet(t testing.TB, u string) (int, []byte) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// checkAPI calls every path of the OpenAPI document and checks each answer against the schema of its
// status (or default), required fields and types.
func checkAPI(t *testing.T, base, task string) {
	var doc map[string]any
	if err := json.Unmarshal(master.OpenAPI, &doc); err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	_, served := httpGet(t, base+"/api/v1/openapi.json")
	if string(served) != string(master.OpenAPI) {
		t.Fatal("the served /api/v1/openapi.json is not the embedded document")
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	paths := doc["paths"].(map[string]any)
	if len(paths) < 8 {
		t.Fatalf("only %d paths documented", len(paths))
	}
	for p, item := range paths {
		for method, op := range item.(map[string]any) {
			u := base + strings.NewReplacer("{task_name}", task, "{lock_id}", url.PathEscape("shard-`no`.`such`"),
				"{source_name}", s1, "{source-name}", s1, "{schema_name}", "db_1", "{table_name}", "t_1").Replace(p)
			var status int
			var body []byte
			switch method {
			case "get":
				status, body = httpGet(t, u)
			case "post", "put", "delete":
				// An empty body: refused with the reason, or a no-op (the subtask runs, so a
				// binlog-schema change is refused too).
				reqBody := `{}`
				if strings.HasSuffix(p, "/stop") || strings.HasSuffix(p, "/start") {
					// refused (an unknown source), so that the task runs on: a 400 in the Error shape
					reqBody = `{"source_name_list": ["no-such-source"]}`
				}
				req, _ := http.NewRequest(strings.ToUpper(method), u, strings.NewReader(reqBody))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			default:
				t.Fatalf("%s %s: method not covered by the test", method, p)
			}
			responses := op.(map[string]any)["responses"].(map[string]any)
			r, ok := responses[strconv.Itoa(status)]
			if !ok {
				r, ok = responses["default"]
			}
			if !ok {
				t.Fatalf("%s %s answered %d, which the document does not list: %s", method, p, status, body)
			}
			if method == "get" && status != 200 {
				t.Fatalf("%s %s answered %d: %s", method, p, status, body)
			}
			schema := r.(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("%s %s: not JSON: %v: %s", method, p, err, body)
			}
			if err := conform(v, schema, schemas, method+" "+p); err != nil {
				t.Fatalf("%v\n%s", err, body)
			}
		}
	}
	// transfer-source without a worker is refused with the reason, not a server error.
	req, _ := http.NewRequest("POST", base+"/api/v1/sources/"+s1+"/transfer", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), `\"worker_name\" is missing`) {
		t.Fatalf("transfer without worker_name answered %d: %s", resp.StatusCode, body)
	}
	// An undocumented path is a JSON 404, not the page of another handler.
	if status, body := httpGet(t, base+"/api/v1/no-such-path"); status != 404 || !strings.Contains(string(body), "error_msg") {
		t.Fatalf("unknown API path answered %d: %s", status, body)
	}
}

// conform checks v against an OpenAPI schema: $ref, type, required properties, enums, items.
func conform(v any, schema, schemas map[string]any, at string) error {
	if ref, ok := schema["$ref"].(string); ok {
		return conform(v, schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any), schemas, at)
	}
	switch schema["type"] {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", at, v)
		}
		req, _ := schema["required"].([]any)
		for _, k := range req {
			if _, ok := o[k.(string)]; !ok {
				return fmt.Errorf("%s: required field %q missing", at, k)
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for k, pv := range o {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if props != nil {
					return fmt.Errorf("%s: field %q is not documented", at, k)
				}
				continue
			}
			if err := conform(pv, ps, schemas, at+"."+k); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", at, v)
		}
		for i, e := range a {
			if err := conform(e, schema["items"].(map[string]any), schemas, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %T, want a string", at, v)
		}
		if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, any(s)) {
			return fmt.Errorf("%s: %q not in %v", at, s, enum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", at, v)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || (schema["type"] == "integer" && f != float64(int64(f))) {
			return fmt.Errorf("%s: %v, want a %s", at, v, schema["type"])
		}
	}
	return nil
}

func apiLocks(t *testing.T, base string) []apiLockView {
	t.Helper()
	status, body := httpGet(t, base+"/api/v1/shard-ddl-locks")
	var r struct {
		Data []apiLockView `json:"data"`
	}
	if err := json.Unmarshal(body, &r); status != 200 || err != nil {
		t.Fatalf("shard-ddl-locks: %d %v %s", status, err, body)
	}
	return r.Data
}

func waitAPILock(t *testing.T, base string, ok func(apiLockView) bool) apiLockView {
	t.Helper()
	var locks []apiLockView
	wait.Eventually(t, 60*time.Second, func() bool { locks = apiLocks(t, base); return len(locks) == 1 && ok(locks[0]) },
		func() string { return fmt.Sprintf("API locks %+v", locks) })
	return locks[0]
}

func waitAPILocksEmpty(t *testing.T, base string) {
	t.Helper()
	wait.Eventually(t, 60*time.Second, func() bool { return len(apiLocks(t, base)) == 0 }, func() string { return "the API still shows a lock" })
}

// --- metrics ---

type metrics map[string]float64

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$`)

func scrape(t testing.TB, base string) metrics {
	t.Helper()
	status, body := httpGet(t, base+"/metrics")
	if status != 200 {
		t.Fatalf("%s/metrics: %d", base, status)
	}
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if g := sampleRE.FindStringSubmatch(sc.Text()); g != nil {
			v, _ := strconv.ParseFloat(g[2], 64)
			m[g[1]] = v
		}
	}
	return m
}

// value is the sample's value (-1 when absent).
func (m metrics) value(sample string) float64 {
	if v, ok := m[sample]; ok {
		return v
	}
	return -1
}

// label returns the value of label in the first sample of name.
func (m metrics) label(name, label string) string {
	re := regexp.MustCompile(`^` + name + `\{.*` + label + `="([^"]*)"`)
	for k := range m {
		if g := re.FindStringSubmatch(k); g != nil {
			return g[1]
		}
	}
	return ""
}

// --- the web page in headless Chromium ---

func chromiumPath() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// dashboard loads /dashboard/ in headless Chromium until its DOM satisfies ok, then keeps a
// screenshot under the test's temp dir (and, with TRIBUTARY_DASHBOARD_PNG set, there too).
func dashboard(t *testing.T, base, shot string, ok func(string) bool) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs headless chromium: skipped under -short (make unit); make test runs it")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium not found: install it (apt-get install -y chromium) to run the browser test")
	}
	dir := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--user-data-dir=" + filepath.Join(dir, "profile"),
			"--virtual-time-budget=5000"}, append(extra, base+"/dashboard/")...)
	}
	var dom string
	wait.Eventually(t, 90*time.Second, func() bool {
		out, err := exec.Command(bin, args("--dump-dom")...).Output()
		if err != nil {
			t.Fatalf("chromium --dump-dom: %v", err)
		}
		dom = string(out)
		return strings.Contains(dom, `data-loaded="true"`) && ok(dom)
	}, func() string { return "the dashboard never showed what the test waits for:\n" + dom })
	png := filepath.Join(dir, shot)
	if out, err := exec.Command(bin, args("--screenshot="+png, "--window-size=1400,900", "--hide-scrollbars")...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", png, err)
	}
	t.Logf("dashboard screenshot: %s", png)
	if keep := os.Getenv("TRIBUTARY_DASHBOARD_PNG"); keep != "" && shot == "before.png" {
		data, _ := os.ReadFile(png)
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dom
}

// lockRow is the <tr> of the lock in the dumped DOM.
func lockRow(dom, id string) string {
	i := strings.Index(dom, `data-lock="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(dom[i:], "</tr>")
	return dom[i : i+j]
}

// cell is the content of the row's <td class="name">.
func cell(row, class string) string {
	i := strings.Index(row, `<td class="`+class+`">`)
	if i < 0 {
		return ""
	}
	j := strings.Index(row[i:], "</td>")
	return row[i : i+j]
}

// --- the lock's life in the logs ---

// checkLockLogs reads every process's log for the lock's ID: each line that names the lock carries it
// in the "lock" field, and together they tell its whole life.
func checkLockLogs(t *testing.T, c *e2eCluster, id string) {
	type line struct {
		proc string
		m    map[string]any
	}
	steps := []struct {
		what string
		ok   func(l line) bool
	}{
		{"a source's info put", func(l line) bool { return l.m["msg"] == "info put" }},
		{"the owner chosen (exec put: by the info that completed the lock, or by the master)", func(l line) bool {
			return l.m["msg"] == "info put" && l.m["exec"] == true || strings.HasPrefix(fmt.Sprint(l.m["reason"]), "exec by owner")
		}},
		{"the owner's exec of the DDLs", func(l line) bool { return l.m["msg"] == "sharding DDL resolved" && l.m["exec"] == true }},
		{"the owner's done", func(l line) bool { return l.m["msg"] == "operation done" && l.m["exec"] == true }},
		{"a non-owner's skip (the owner's done) done", func(l line) bool {
			return l.m["msg"] == "operation done" && l.m["exec"] == false && l.m["implicit"] == true
		}},
		{"the lock resolved", func(l line) bool { return l.m["msg"] == "shard DDL lock resolved" }},
	}
	var lines []line
	var bad, missing []string
	wait.Eventually(t, 30*time.Second, func() bool {
		lines, bad, missing = nil, nil, nil
		for _, p := range append(append([]*e2e.Proc{}, c.Masters...), c.Workers...) {
			data, err := os.ReadFile(p.LogFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range strings.Split(string(data), "\n") {
				if !strings.Contains(raw, id) {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(raw), &m); err != nil {
					continue // a line of etcd or a partial last line
				}
				if m["lock"] != id {
					bad = append(bad, p.Name+": "+raw)
					continue
				}
				lines = append(lines, line{p.Name, m})
			}
		}
		for _, s := range steps {
			if !slices.ContainsFunc(lines, s.ok) {
				missing = append(missing, s.what)
			}
		}
		return len(bad) == 0 && len(missing) == 0
	}, func() string {
		return fmt.Sprintf("lock %s in the logs: lines naming it without the lock field:\n%s\nsteps not found: %v",
			id, strings.Join(bad, "\n"), missing)
	})
	t.Logf("%d log lines carry lock %s", len(lines), id)
}
