// Package deploy holds the Grafana dashboard and the Prometheus configuration and alert rules of a
// Tributary cluster; its test checks that they parse and name only metrics the binaries export.
package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// exported reads the metric names the binaries define: every package's metrics.go (master, worker,
// sink, ...), so that a metric moving to another package stays known.
func exported(t *testing.T) []string {
	t.Helper()
	var names []string
	desc := regexp.MustCompile(`NewDesc\("(dm_[a-z_]+)"`)
	opts := regexp.MustCompile(`Namespace: "dm", Subsystem: "([a-z_]+)", Name: "([a-z_]+)"`)
	files, err := filepath.Glob("../*/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range desc.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
		for _, m := range opts.FindAllStringSubmatch(string(src), -1) {
			names = append(names, "dm_"+m[1]+"_"+m[2])
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d metric definitions: %v", len(names), names)
	}
	return names
}

var metricRE = regexp.MustCompile(`\bdm_[a-z_]+`)

// checkNames fails on a dm_ metric in expr that the binaries do not export.
func checkNames(t *testing.T, where, expr string, known []string) {
	t.Helper()
	for _, n := range metricRE.FindAllString(expr, -1) {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(known, b) {
				base = b
			}
		}
		if !slices.Contains(known, base) {
			t.Errorf("%s: metric %s is not exported by dm-master or dm-worker", where, n)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	known := exported(t)
	data, err := os.ReadFile(filepath.Join("grafana", "tributary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/tributary.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) < 10 {
		t.Fatalf("dashboard %q has %d panels", dash.Title, len(dash.Panels))
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkNames(t, "panel "+p.Title, tg.Expr, known)
			for _, n := range metricRE.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
			}
		}
	}
	for _, n := range known {
		if !used[n] && n != "dm_master_leader" && n != "dm_master_ddl_lock_synced_sources" {
			t.Errorf("metric %s has no panel", n)
		}
	}
}

func TestPrometheusRules(t *testing.T) {
	known := exported(t)
	data, err := os.ReadFile(filepath.Join("prometheus", "tributary.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("prometheus/tributary.rules.yml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity or summary", r)
			}
			checkNames(t, "alert "+r.Alert, r.Expr, known)
			alerts = append(alerts, r.Alert)
		}
	}
	// The alerts the issue asks for: a lock pending too long, a conflict, a worker offline, lag.
	for _, want := range []string{"DM_shard_DDL_lock_pending_too_long", "DM_shard_DDL_conflict", "DM_worker_offline", "DM_replication_lag_too_high"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s missing", want)
		}
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	data, err = os.ReadFile(filepath.Join("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("prometheus/prometheus.yml: %v", err)
	}
	if !slices.Contains(prom.RuleFiles, "tributary.rules.yml") || len(prom.ScrapeConfigs) != 2 {
		t.Fatalf("prometheus.yml: %+v", prom)
	}
}
