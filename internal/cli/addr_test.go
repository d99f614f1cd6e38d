package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The addresses of DM's configuration files, as DM reads them.
func TestAddresses(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "127.0.0.1:8261", want: "127.0.0.1:8261"},
		{in: ":8261", want: ":8261"},
		{in: "http://10.0.0.5:8261", want: "10.0.0.5:8261"},
		{in: "HTTPS://[::1]:8261", want: "[::1]:8261"},
		{in: "127.0.0.1", err: `--master-addr "127.0.0.1" is not an address`},
		{in: "127.0.0.1:", err: "is not an address"},
	} {
		got, err := ListenAddr("master-addr", c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ListenAddr(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ listen, adv, want, err string }{
		{listen: "127.0.0.1:8261", want: "127.0.0.1:8261"},
		{listen: ":8261", adv: "10.0.0.5:8261", want: "10.0.0.5:8261"},
		{listen: ":8261", adv: "http://10.0.0.5:8261", want: "10.0.0.5:8261"},
		{listen: ":8261", err: `--master-addr ":8261" listens on every interface: set --advertise-addr`},
		{listen: "0.0.0.0:8261", err: "listens on every interface"},
		{listen: "[::]:8261", err: "listens on every interface"},
		{listen: ":8261", adv: "0.0.0.0:8261", err: `--advertise-addr "0.0.0.0:8261" must name a host`},
		{listen: ":8261", adv: "10.0.0.5", err: "is not an address"},
	} {
		got, err := AdvertiseAddr("master-addr", c.listen, "advertise-addr", c.adv)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("AdvertiseAddr(%q, %q) = %q, %v; want error %q", c.listen, c.adv, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("AdvertiseAddr(%q, %q) = %q, %v; want %q", c.listen, c.adv, got, err, c.want)
		}
	}
	if got := BindHost(":8261"); got != "0.0.0.0:8261" {
		t.Errorf("BindHost(:8261) = %q", got)
	}
	if got := BindHost("10.0.0.5:8261"); got != "10.0.0.5:8261" {
		t.Errorf("BindHost(10.0.0.5:8261) = %q", got)
	}
	for in, want := range map[string]string{
		"127.0.0.1:8291":        "http://127.0.0.1:8291",
		"http://127.0.0.1:8291": "http://127.0.0.1:8291",
		"https://a:1, b:2":      "https://a:1,http://b:2",
		":8291":                 "http://0.0.0.0:8291",
		"":                      "",
	} {
		if got := WrapURLs(in); got != want {
			t.Errorf("WrapURLs(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := WrapCluster("m1=127.0.0.1:8291,m2=http://127.0.0.1:8292"), "m1=http://127.0.0.1:8291,m2=http://127.0.0.1:8292"; got != want {
		t.Errorf("WrapCluster = %q, want %q", got, want)
	}
	eps, err := Endpoints("join", "http://127.0.0.1:8261,127.0.0.1:8361, https://h:8461")
	if want := []string{"127.0.0.1:8261", "127.0.0.1:8361", "h:8461"}; err != nil || !slices.Equal(eps, want) {
		t.Errorf("Endpoints = %q, %v; want %q", eps, err, want)
	}
	for _, bad := range []string{"", " , ", "127.0.0.1"} {
		if _, err := Endpoints("join", bad); err == nil || !strings.Contains(err.Error(), "--join") {
			t.Errorf("Endpoints(%q): %v, want an error naming --join", bad, err)
		}
	}
}

// A --config file in DM's shape: its [experimental] table, keys DM defines that have no effect
// here (given back by Given), -L winning over the file's log-level, and -V.
func TestConfigFileDMKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.toml")
	os.WriteFile(file, []byte("log-level = \"warn\"\nrpc-timeout = \"30s\"\nrpc-rate-burst = 40\n[experimental]\nopenapi = true\n"), 0o644)
	parse := func(args ...string) (*flag.FlagSet, *LogConfig, *bool, *NoEffect, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		lc := LogFlags(fs)
		openapi := fs.Bool("openapi", false, "")
		ne := NoEffectFlags(fs, map[string]string{"rpc-timeout": "why1", "rpc-rate-burst": "why2", "rpc-rate-limit": "why3"})
		return fs, lc, openapi, ne, Parse(fs, args)
	}
	_, lc, openapi, ne, err := parse("--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if !*openapi || lc.Level != "warn" {
		t.Errorf("openapi %v, log level %q: want true, warn", *openapi, lc.Level)
	}
	if got, want := ne.Given(), []string{"rpc-rate-burst=40 (why2)", "rpc-timeout=30s (why1)"}; !slices.Equal(got, want) {
		t.Errorf("Given() = %q, want %q", got, want)
	}
	if _, lc, _, _, err = parse("-L", "debug", "--config", file); err != nil || lc.Level != "debug" {
		t.Errorf("-L debug with the file's log-level warn: level %q, %v", lc.Level, err)
	}
	fs, _, _, _, err := parse("-V")
	if !errors.Is(err, ErrVersionPrinted) || !strings.Contains(fs.Output().(*bytes.Buffer).String(), "Go Version: go") {
		t.Errorf("-V: %v", err)
	}
	os.WriteFile(file, []byte("openapi = false\n[experimental]\nopenapi = true\n"), 0o644)
	if _, _, _, _, err := parse("--config", file); err == nil || !strings.Contains(err.Error(), `both "openapi" and "experimental.openapi"`) {
		t.Errorf("openapi twice: %v", err)
	}
	os.WriteFile(file, []byte("[log]\nlevel = \"info\"\n"), 0o644)
	if _, _, _, _, err := parse("--config", file); err == nil || !strings.Contains(err.Error(), `key "log.level" is not supported`) {
		t.Errorf("unknown table key: %v", err)
	}
}

// Without --ssl-ca, TLS is off: a certificate or common names given alone are refused, naming them.
func TestTLSNeedsCA(t *testing.T) {
	err := (&TLS{AllowedCN: []string{"dm"}}).Check()
	if err == nil || !strings.Contains(err.Error(), "--cert-allowed-cn set without --ssl-ca") {
		t.Errorf("cert-allowed-cn alone: %v", err)
	}
	err = (&TLS{Cert: "c.pem", Key: "k.pem"}).Check()
	if err == nil || !strings.Contains(err.Error(), "--ssl-cert, --ssl-key set without --ssl-ca") {
		t.Errorf("certificate alone: %v", err)
	}
	if err := (&TLS{}).Check(); err != nil {
		t.Errorf("no TLS: %v", err)
	}
}
