package pessimist

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader is returned when a write's fence (the leader key's revision) no longer holds: this
// process has lost leadership and must stop deciding at once.
var ErrNotLeader = errors.New("not the leader any more")

// apply runs t as one etcd transaction. fence, when given, is checked first: if it fails the result is
// ErrNotLeader and nothing is written. The bool reports whether t's own conditions held.
func apply(ctx context.Context, kv clientv3.KV, t Txn, fence []clientv3.Cmp) (bool, error) {
	ok, _, err := applyRev(ctx, kv, t, fence)
	return ok, err
}

// applyRev is apply that also returns the revision of the write.
func applyRev(ctx context.Context, kv clientv3.KV, t Txn, fence []clientv3.Cmp) (bool, int64, error) {
	cmps := make([]clientv3.Cmp, 0, len(t.Conds))
	for _, c := range t.Conds {
		if c.Prefix {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.Key), "<", c.ModRevision+1).WithPrefix())
		} else if c.End != "" {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.Key), "<", c.ModRevision+1).WithRange(c.End))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.ModRevision))
		}
	}
	ops := make([]clientv3.Op, 0, len(t.Puts)+len(t.Deletes)+len(t.DeletePrefixes))
	for _, d := range t.Deletes {
		ops = append(ops, clientv3.OpDelete(d))
	}
	for _, p := range t.DeletePrefixes {
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	for _, p := range t.Puts {
		ops = append(ops, clientv3.OpPut(p.Key, p.Value))
	}
	if len(fence) == 0 {
		resp, err := kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return false, 0, fmt.Errorf("lock %s: %s: %w", t.LockID, t.Reason, err)
		}
		return resp.Succeeded, resp.Header.Revision, nil
	}
	resp, err := kv.Txn(ctx).If(fence...).Then(clientv3.OpTxn(cmps, ops, nil)).Commit()
	if err != nil {
		return false, 0, fmt.Errorf("lock %s: %s: %w", t.LockID, t.Reason, err)
	}
	if !resp.Succeeded {
		return false, 0, ErrNotLeader
	}
	return resp.Responses[0].GetResponseTxn().Succeeded, resp.Header.Revision, nil
}
