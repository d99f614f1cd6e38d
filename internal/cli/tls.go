package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TLS is the cluster's TLS as DM configures it on dm-master, dm-worker and dmctl: ssl-ca (the CA
// that signed every member's and client's certificate), ssl-cert and ssl-key (this process's
// certificate), and cert-allowed-cn (the common names a client certificate must have, if set). With
// ssl-ca set, every gRPC, HTTP and etcd connection of the cluster uses TLS and a server accepts only
// clients with a certificate signed by that CA.
type TLS struct {
	CA, Cert, Key string
	AllowedCN     []string
}

// TLSFlags defines --ssl-ca, --ssl-cert, --ssl-key and (when allowedCN) --cert-allowed-cn on fs (and
// so the config file keys of the same names). Call Check after parsing.
func TLSFlags(fs *flag.FlagSet, allowedCN bool) *TLS {
	t := &TLS{}
	fs.StringVar(&t.CA, "ssl-ca", "", "PEM file of the CA of the cluster's certificates (turns TLS on)")
	fs.StringVar(&t.Cert, "ssl-cert", "", "PEM file of this process's certificate")
	fs.StringVar(&t.Key, "ssl-key", "", "PEM file of the key of --ssl-cert")
	if allowedCN {
		fs.Func("cert-allowed-cn", "common names a client certificate must have (comma-separated; default: any signed by --ssl-ca)", func(s string) error {
			for _, cn := range strings.Split(s, ",") {
				if cn = strings.TrimSpace(cn); cn != "" {
					t.AllowedCN = append(t.AllowedCN, cn)
				}
			}
			return nil
		})
	}
	return t
}

// Enabled reports whether TLS is on.
func (t *TLS) Enabled() bool { return t != nil && t.CA != "" }

// Check reads the files now, so that a missing or bad one is an error at start naming its flag.
func (t *TLS) Check() error {
	if t.CA == "" {
		// DM starts without TLS then; a process that would silently serve in plain text what its file
		// says is protected is refused instead, naming what is set.
		var set []string
		for _, f := range []struct {
			name string
			on   bool
		}{{"ssl-cert", t.Cert != ""}, {"ssl-key", t.Key != ""}, {"cert-allowed-cn", len(t.AllowedCN) > 0}} {
			if f.on {
				set = append(set, "--"+f.name)
			}
		}
		if len(set) > 0 {
			return fmt.Errorf("%s set without --ssl-ca: TLS is on only with --ssl-ca (the CA of the cluster's certificates); set it, or remove %s",
				strings.Join(set, ", "), strings.Join(set, ", "))
		}
		return nil
	}
	if t.Cert == "" || t.Key == "" {
		return errors.New("--ssl-ca needs --ssl-cert and --ssl-key (this process's certificate and key)")
	}
	if _, err := t.pool(); err != nil {
		return err
	}
	if _, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
		return fmt.Errorf("--ssl-cert %s / --ssl-key %s: %w", t.Cert, t.Key, err)
	}
	return nil
}

func (t *TLS) pool() (*x509.CertPool, error) {
	data, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, fmt.Errorf("--ssl-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--ssl-ca %s holds no PEM certificate", t.CA)
	}
	return pool, nil
}

// keyPair reloads the certificate on every handshake, so renewed files are picked up.
func (t *TLS) keyPair() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("--ssl-cert %s / --ssl-key %s: %w", t.Cert, t.Key, err)
	}
	return &c, nil
}

// ServerConfig is the server side: a client certificate signed by --ssl-ca is required, with one of
// --cert-allowed-cn's common names when that is set. nil when TLS is off.
func (t *TLS) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	pool, err := t.pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientCAs:  pool,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.keyPair()
		},
		NextProtos: []string{"h2", "http/1.1"},
	}
	if len(t.AllowedCN) > 0 {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			if cn := cs.PeerCertificates[0].Subject.CommonName; !slices.Contains(t.AllowedCN, cn) {
				return fmt.Errorf("client certificate CN %q is not in cert-allowed-cn", cn)
			}
			return nil
		}
	}
	return cfg, nil
}

// ClientConfig is the client side: the server's certificate must be signed by --ssl-ca, and this
// process presents its own. nil when TLS is off.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	pool, err := t.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.keyPair()
		},
	}, nil
}

// Configs checks the flags and returns both sides, for a process that serves and also dials other
// members (dm-master, dm-worker). Both are nil when TLS is off.
func (t *TLS) Configs() (server, client *tls.Config, err error) {
	if err := t.Check(); err != nil {
		return nil, nil, err
	}
	if server, err = t.ServerConfig(); err != nil {
		return nil, nil, err
	}
	if client, err = t.ClientConfig(); err != nil {
		return nil, nil, err
	}
	return server, client, nil
}

// EtcdTLSInfo is the embedded etcd's TLS for its client and peer URLs (the same certificates).
func (t *TLS) EtcdTLSInfo() *transport.TLSInfo {
	if !t.Enabled() {
		return nil
	}
	return &transport.TLSInfo{CertFile: t.Cert, KeyFile: t.Key, TrustedCAFile: t.CA, ClientCertAuth: true, AllowedCNs: t.AllowedCN}
}

// Scheme is the scheme of the cluster's URLs: https with TLS, else http.
func (t *TLS) Scheme() string {
	if t.Enabled() {
		return "https"
	}
	return "http"
}
