package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPasswordEncryption(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	c1, err := k.Encrypt("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := k.Encrypt("s3cret")
	if c1 == c2 || strings.Contains(c1, "s3cret") {
		t.Fatalf("two encryptions of one password must differ (random nonce) and not show it: %q %q", c1, c2)
	}
	if p, err := k.Decrypt(c1); err != nil || p != "s3cret" {
		t.Fatalf("decrypt: %q %v", p, err)
	}
	other, _ := NewKey()
	if _, err := other.Decrypt(c1); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Fatalf("another key must not decrypt: %v", err)
	}
	if _, err := k.Decrypt("not base64!"); err == nil {
		t.Fatal("non-base64 must not decrypt")
	}
	// PlainPassword: encrypted ones are decrypted with the process's key, plain text is kept.
	SetPasswordKey(&k)
	defer SetPasswordKey(nil)
	if p := (Database{Password: c1}).PlainPassword(); p != "s3cret" {
		t.Fatalf("PlainPassword of an encrypted password: %q", p)
	}
	if p := (Database{Password: "plain-pw"}).PlainPassword(); p != "plain-pw" {
		t.Fatalf("PlainPassword of a plain one: %q", p)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	os.WriteFile(good, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	if k, err := LoadKeyFile(good); err != nil || k.String() != strings.Repeat("ab", 32) {
		t.Fatalf("%v %v", k, err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("abcd"), 0o600)
	if _, err := LoadKeyFile(bad); err == nil || !strings.Contains(err.Error(), "secret-key-path") || !strings.Contains(err.Error(), "64 hexadecimal") {
		t.Fatalf("a short key must be an error naming secret-key-path: %v", err)
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "secret-key-path") {
		t.Fatalf("a missing file must be an error naming secret-key-path: %v", err)
	}
}

func TestEncryptPasswords(t *testing.T) {
	k, _ := NewKey()
	src := "source-id: s1\n# a comment\nfrom:\n  host: 127.0.0.1\n  port: 3306\n  user: root\n  password: \"pl@in: text\"\n"
	out, err := EncryptPasswords([]byte(src), k, []string{"from", "password"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "pl@in") {
		t.Fatalf("the plain password is still there:\n%s", out)
	}
	s, err := ParseSource("s", out)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := k.Decrypt(s.From.Password); err != nil || p != "pl@in: text" {
		t.Fatalf("stored password decrypts to %q (%v)", p, err)
	}
	// Already encrypted: kept as it is.
	again, err := EncryptPasswords(out, k, []string{"from", "password"})
	if err != nil || string(again) != string(out) {
		t.Fatalf("an encrypted password must be kept:\n%s\n%s", out, again)
	}
	// A numeric password is a string too.
	out, err = EncryptPasswords([]byte("from:\n  password: 123456\n"), k, []string{"from", "password"})
	if err != nil || strings.Contains(string(out), "123456") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestSourceSecurity(t *testing.T) {
	base := "source-id: s1\nfrom:\n  host: 127.0.0.1\n  port: 3306\n  user: root\n  security:\n"
	s, err := ParseSource("s.yaml", []byte(base+"    ssl-ca: /ca.pem\n    ssl-cert: /c.pem\n    ssl-key: /k.pem\n    cert-allowed-cn: [a]\n"))
	if err != nil || s.From.Security.SSLCA != "/ca.pem" {
		t.Fatalf("%v %+v", err, s)
	}
	for in, want := range map[string]string{
		"    ssl-cert: /c.pem\n":  "ssl-cert and ssl-key go together",
		"    ssl-ca-bytes: abc\n": "from.security.ssl-ca-bytes is not supported yet",
		"    ssl-typo: /x.pem\n":  "ssl-typo",
	} {
		if _, err := ParseSource("s.yaml", []byte(base+in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error with %q, got %v", in, want, err)
		}
	}
	tls, err := (Database{Host: "h", Security: &Security{SSLCA: "/missing/ca.pem"}}).TLSConfig("from")
	if err == nil || !strings.Contains(err.Error(), "from.security.ssl-ca") {
		t.Fatalf("want an error naming from.security.ssl-ca, got %v %v", tls, err)
	}
}

// dmEncrypt writes plain as DM's dmctl encrypt does with key: base64(IV, "@", AES-256-CFB).
func dmEncrypt(t *testing.T, key [32]byte, plain string) string {
	t.Helper()
	s, err := encryptDM(key, plain)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Passwords encrypted by DM's dmctl encrypt work as they are: DM's documented example (DM before v8,
// its built-in key), and DM v8's with a secret-key-path key that is also this cluster's. Stored in
// etcd, they are re-encrypted in this cluster's format. Plain passwords, also ones that look like
// base64, stay plain.
func TestDMEncryptedPasswords(t *testing.T) {
	k, _ := NewKey()
	SetPasswordKey(&k)
	defer SetPasswordKey(nil)
	const docExample = "MKxn0Qo3m3XOyjCnhEMtsUCm83EhGQDZ/T4=" // DM's docs: dmctl encrypt 'abc!@#123'
	if p := (Database{Password: docExample}).PlainPassword(); p != "abc!@#123" {
		t.Errorf("DM's example decrypts to %q", p)
	}
	// The target-database password of DM's task file template.
	if p := (Database{Password: "/Q7B9DizNLLTTfiZHv9WoEAKamfpIUs="}).PlainPassword(); p != "123456" {
		t.Errorf("DM's task template password decrypts to %q", p)
	}
	// DM v8's format with a secret-key-path key: tried only when that file was given here too (a key the
	// cluster generated never encrypted a DM file).
	v8 := dmEncrypt(t, k, "s3cret-ü")
	if p := (Database{Password: v8}).PlainPassword(); p != v8 {
		t.Errorf("without a secret-key-path, a ciphertext of the cluster's key was read as %q", p)
	}
	SetDMSecretKey(&k)
	if p := (Database{Password: v8}).PlainPassword(); p != "s3cret-ü" {
		t.Errorf("DM v8's ciphertext with the shared key decrypts to %q", p)
	}
	SetDMSecretKey(nil) // the rest is DM's built-in key alone (a random k could read 1 in ~10^4 of them)
	other, _ := NewKey()
	if p, ok := DecryptDM(dmEncrypt(t, other, "a-long-enough-password-1234"), &k); ok {
		t.Errorf("a ciphertext of an unknown key was taken as %q", p)
	}
	for _, plain := range []string{"pl@in: text", "123456", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", ""} {
		if p := (Database{Password: plain}).PlainPassword(); p != plain {
			t.Errorf("plain password %q read as %q", plain, p)
		}
	}
	// dmctl encrypt without a master writes DM's format with DM's built-in key.
	enc, err := EncryptDM("w1th-@-dm's-key")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := DecryptDM(enc, nil); !ok || p != "w1th-@-dm's-key" || enc == "w1th-@-dm's-key" {
		t.Errorf("EncryptDM wrote %q, which reads as %q (%v)", enc, p, ok)
	}
	src := "source-id: s1\nfrom:\n  host: 127.0.0.1\n  port: 3306\n  user: dm\n  password: \"" + docExample + "\"\n"
	out, err := EncryptPasswords([]byte(src), k, []string{"from", "password"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSource("s", out)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := k.Decrypt(s.From.Password); err != nil || p != "abc!@#123" {
		t.Errorf("DM's ciphertext stored as %q, which decrypts to %q (%v)", s.From.Password, p, err)
	}
}
