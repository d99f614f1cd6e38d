package dbutil

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/tests/framework/certtest"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestOpenDBTLS connects to a MariaDB started with TLS as a user that must use it (REQUIRE SSL): with
// the endpoint's security section the connection is encrypted and verified against ssl-ca; without it
// the server refuses the user; a certificate from another CA is refused by the client; a missing file
// is an error naming the key. The password is given encrypted (dmctl encrypt), as a user may.
func TestOpenDBTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certtest.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(dir, "server", "mariadb")
	if err != nil {
		t.Fatal(err)
	}
	s := mariadbtest.Start(t, "--ssl-ca="+server.CA, "--ssl-cert="+server.Cert, "--ssl-key="+server.Key)
	root := s.DB(t)
	s.Exec(t, root, "CREATE USER tls_user@'%' IDENTIFIED BY 'tls-secret-1' REQUIRE SSL")

	key, err := config.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	config.SetPasswordKey(&key)
	t.Cleanup(func() { config.SetPasswordKey(nil) })
	enc, err := key.Encrypt("tls-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	d := config.Database{Host: "127.0.0.1", Port: s.Port, User: "tls_user", Password: enc}
	ping := func(d config.Database) (string, error) {
		db, err := OpenDB(d)
		if err != nil {
			return "", err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var name, cipher string
		err = db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
		return cipher, err
	}

	if _, err := ping(d); err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("without TLS the REQUIRE SSL user must be refused, got %v", err)
	}
	d.Security = &config.Security{SSLCA: server.CA}
	cipher, err := ping(d)
	if err != nil {
		t.Fatalf("with ssl-ca: %v", err)
	}
	if cipher == "" {
		t.Fatal("connected, but Ssl_cipher is empty: the session is not encrypted")
	}
	t.Logf("TLS session, cipher %s", cipher)

	other, err := certtest.NewCA(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	d.Security = &config.Security{SSLCA: other.Cert}
	if _, err := ping(d); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a server certificate not signed by ssl-ca must be refused, got %v", err)
	}
	d.Security = &config.Security{SSLCA: dir + "/missing.pem"}
	if _, err := ping(d); err == nil || !strings.Contains(err.Error(), "security.ssl-ca") || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("a missing ssl-ca file must be an error naming security.ssl-ca and the file, got %v", err)
	}
	d.Security = &config.Security{SSLCA: server.CA, SSLCert: server.Cert, SSLKey: dir + "/missing-key.pem"}
	if _, err := ping(d); err == nil || !strings.Contains(err.Error(), "security.ssl-cert/ssl-key") {
		t.Fatalf("a missing ssl-key file must be an error naming the keys, got %v", err)
	}
}
