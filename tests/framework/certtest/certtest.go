// Package certtest writes throw-away TLS certificates for tests: a CA and certificates it signs, for
// 127.0.0.1 and localhost, usable by servers and clients (crypto/x509 only, no openssl).
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority whose certificate is in the PEM file Cert.
type CA struct {
	Cert string
	crt  *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Pair is a certificate and its key (PEM files), with CA the CA's certificate file.
type Pair struct {
	CA, Cert, Key string
}

var serial int64

// NewCA writes a new CA (named name) into dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".pem")
	if err := writePEM(path, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return &CA{Cert: path, crt: crt, key: key}, nil
}

// Issue writes a certificate with common name cn, for 127.0.0.1 and localhost, signed by the CA, and
// its key, into dir as <name>.pem and <name>-key.pem.
func (ca *CA) Issue(dir, name, cn string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.crt, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{CA: ca.Cert, Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if err := writePEM(p.Cert, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	// PKCS#1/SEC 1 "EC PRIVATE KEY": what every TLS stack reads (MariaDB's OpenSSL included).
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.Key, "EC PRIVATE KEY", kb)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
