package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/config"
)

// PasswordKeyKey holds the cluster's generated password key (hex), for masters and workers started
// without secret-key-path.
const PasswordKeyKey = Root + "secret/password-key"

// PasswordKey returns the key of path (secret-key-path) when path is given, else the cluster's key in
// etcd, generating it when there is none yet: the put is a transaction that succeeds only if the key
// does not exist, so two processes starting together agree on one key.
func PasswordKey(ctx context.Context, cli *clientv3.Client, path string) (config.Key, error) {
	if path != "" {
		return config.LoadKeyFile(path)
	}
	fresh, err := config.NewKey()
	if err != nil {
		return config.Key{}, err
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(PasswordKeyKey), "=", 0)).
		Then(clientv3.OpPut(PasswordKeyKey, fresh.String())).
		Else(clientv3.OpGet(PasswordKeyKey)).Commit()
	if err != nil {
		return config.Key{}, fmt.Errorf("read the password key in etcd: %w", err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return config.Key{}, fmt.Errorf("password key %s vanished", PasswordKeyKey)
	}
	k, err := config.ParseKey(string(kvs[0].Value))
	if err != nil {
		return k, fmt.Errorf("etcd key %s: %w", PasswordKeyKey, err)
	}
	return k, nil
}
