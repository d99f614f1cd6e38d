package config

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Key is the AES-256 key that encrypts the passwords of source and task files (dmctl encrypt). A
// dm-master reads it from its secret-key-path file (64 hex characters, as DM's), or without one uses a
// key generated once and kept in etcd (ha.PasswordKey); dm-workers do the same.
type Key [32]byte

// NewKey returns a random key.
func NewKey() (Key, error) {
	var k Key
	_, err := rand.Read(k[:])
	return k, err
}

// ParseKey reads a key written as 64 hex characters (surrounding white space is ignored).
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(k) {
		return k, errors.New("the key must be 64 hexadecimal characters (32 bytes)")
	}
	copy(k[:], b)
	return k, nil
}

// LoadKeyFile reads a secret-key-path file.
func LoadKeyFile(path string) (Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("secret-key-path: %w", err)
	}
	k, err := ParseKey(string(data))
	if err != nil {
		return k, fmt.Errorf("secret-key-path %s: %w", path, err)
	}
	return k, nil
}

// String is the key in hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Encrypt encrypts plain with AES-256-GCM and returns base64(nonce || ciphertext || tag).
func (k Key) Encrypt(plain string) (string, error) {
	gcm, err := k.gcm()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nonce, nonce, []byte(plain), nil)), nil
}

// Decrypt reverses Encrypt; it fails when s is not base64 or was not encrypted with this key.
func (k Key) Decrypt(s string) (string, error) {
	gcm, err := k.gcm()
	if err != nil {
		return "", err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", errors.New("not base64")
	}
	if len(b) < gcm.NonceSize()+gcm.Overhead() {
		return "", errors.New("too short to be an encrypted password")
	}
	plain, err := gcm.Open(nil, b[:gcm.NonceSize()], b[gcm.NonceSize():], nil)
	if err != nil {
		return "", errors.New("does not decrypt with this cluster's key (encrypted by another cluster, or with another secret-key-path?)")
	}
	return string(plain), nil
}

func (k Key) gcm() (cipher.AEAD, error) {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// passwordKey is this process's key (SetPasswordKey); nil: passwords are taken as written.
var passwordKey atomic.Pointer[Key]

// SetPasswordKey sets the key with which this process decrypts passwords (nil: none).
func SetPasswordKey(k *Key) { passwordKey.Store(k) }

// PlainPassword returns the password to connect with: the decrypted password when it was encrypted
// with this process's key, else the password as written (plain text is accepted, as in DM). Call it
// only where a connection is opened.
func (d Database) PlainPassword() string {
	k := passwordKey.Load()
	if k != nil && d.Password != "" {
		if p, err := k.Decrypt(d.Password); err == nil {
			return p
		}
	}
	if p, ok := DecryptDM(d.Password, k); ok {
		return p
	}
	return d.Password
}

// dmBuiltinKey is the AES-256 key with which DM before v8.0 encrypted every password (dmctl encrypt,
// with no secret-key-path); it is public, in DM's source.
var dmBuiltinKey = [32]byte{0xa5, 0x29, 0xb7, 0x66, 0x59, 0x97, 0xf0, 0x43, 0xa3, 0x0a, 0xc8, 0xfa, 0xdc, 0xb5, 0x1d, 0x6a,
	0xa0, 0x32, 0xc2, 0x26, 0xab, 0x5b, 0x77, 0x50, 0x53, 0x0b, 0x12, 0xb8, 0xc1, 0xa1, 0x6a, 0x48}

// DecryptDM reads a password encrypted by DM's dmctl encrypt: base64 of a 16-byte IV, "@", and the
// password in AES-256-CFB, with DM's secret-key-path key (DM v8; the same file given here is k) or, before
// v8, DM's built-in key. CFB carries no check, so a key is taken as the right one only when the password
// it gives is printable UTF-8 text; ok is false for anything else (the value is then a plain password).
func DecryptDM(s string, k *Key) (string, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) <= aes.BlockSize+1 || b[aes.BlockSize] != '@' {
		return "", false
	}
	keys := [][32]byte{dmBuiltinKey}
	if k != nil {
		keys = [][32]byte{*k, dmBuiltinKey}
	}
	for _, key := range keys {
		block, err := aes.NewCipher(key[:])
		if err != nil {
			return "", false
		}
		plain := make([]byte, len(b)-aes.BlockSize-1)
		cipher.NewCFBDecrypter(block, b[:aes.BlockSize]).XORKeyStream(plain, b[aes.BlockSize+1:])
		if printable(plain) {
			return string(plain), true
		}
	}
	return "", false
}

// printable reports whether b is UTF-8 text without control characters.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// EncryptPasswords rewrites the YAML document data so that the password at each path (e.g.
// {"from","password"}) is encrypted with k: a plain-text password is encrypted, one that already
// decrypts with k is kept. Used before a source or task file is stored in etcd.
func EncryptPasswords(data []byte, k Key, paths ...[]string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return data, nil
	}
	changed := false
	for _, path := range paths {
		n := doc.Content[0]
		for _, key := range path {
			n = mapValue(n, key)
		}
		if n == nil || n.Kind != yaml.ScalarNode || n.Value == "" {
			continue
		}
		if _, err := k.Decrypt(n.Value); err == nil {
			continue
		}
		plain := n.Value
		if p, ok := DecryptDM(plain, &k); ok {
			plain = p // a DM file's password: stored in this cluster's format
		}
		enc, err := k.Encrypt(plain)
		if err != nil {
			return nil, err
		}
		n.Value, n.Tag, n.Style = enc, "!!str", yaml.DoubleQuotedStyle
		changed = true
	}
	if !changed {
		return data, nil
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), enc.Close()
}

// mapValue returns the value of key in mapping n (nil when n is not a mapping or has no such key).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
