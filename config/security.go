package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Security is DM's security section of a MySQL endpoint (source from.security, task
// target-database.security): TLS to the server. ssl-ca alone verifies the server's certificate;
// ssl-cert and ssl-key add a client certificate. cert-allowed-cn has no meaning towards a MySQL server
// (DM accepts it there) and is ignored. DM's ssl-*-bytes keys (certificates inline) are not supported
// yet.
type Security struct {
	SSLCA         string   `yaml:"ssl-ca"`
	SSLCert       string   `yaml:"ssl-cert"`
	SSLKey        string   `yaml:"ssl-key"`
	CertAllowedCN []string `yaml:"cert-allowed-cn"`
	SSLCABytes    string   `yaml:"ssl-ca-bytes"`
	SSLKeyBytes   string   `yaml:"ssl-key-bytes"`
	SSLCertBytes  string   `yaml:"ssl-cert-bytes"`
}

// validate checks what can be checked without reading the files (they are read where the connection
// is opened: on the master and on the worker, which may be other machines than dmctl's).
func (s *Security) validate(file, field string, ns *notSupported) []error {
	if s == nil {
		return nil
	}
	var errs []error
	if (s.SSLCert == "") != (s.SSLKey == "") {
		errs = append(errs, fmt.Errorf("%s: %s.security: ssl-cert and ssl-key go together (a client certificate and its key)", file, field))
	}
	ns.check(field+".security.ssl-ca-bytes", s.SSLCABytes == "")
	ns.check(field+".security.ssl-key-bytes", s.SSLKeyBytes == "")
	ns.check(field+".security.ssl-cert-bytes", s.SSLCertBytes == "")
	return errs
}

// TLSConfig returns the TLS configuration of a connection to host (nil when s sets no TLS). field
// names the endpoint in errors ("from", "target-database"; empty: errors start at "security.").
func (s *Security) TLSConfig(field, host string) (*tls.Config, error) {
	if s == nil || (s.SSLCA == "" && s.SSLCert == "" && s.SSLKey == "") {
		return nil, nil
	}
	if field != "" {
		field += "."
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if s.SSLCA != "" {
		pool, err := LoadCAPool(s.SSLCA)
		if err != nil {
			return nil, fmt.Errorf("%ssecurity.ssl-ca: %w", field, err)
		}
		cfg.RootCAs = pool
	}
	if s.SSLCert != "" || s.SSLKey != "" {
		cert, err := tls.LoadX509KeyPair(s.SSLCert, s.SSLKey)
		if err != nil {
			return nil, fmt.Errorf("%ssecurity.ssl-cert/ssl-key (%s, %s): %w", field, s.SSLCert, s.SSLKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// LoadCAPool reads a PEM file of CA certificates.
func LoadCAPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// TLSConfig returns the endpoint's TLS configuration (nil: none); field names it in errors.
func (d Database) TLSConfig(field string) (*tls.Config, error) {
	return d.Security.TLSConfig(field, d.Host)
}
