// The Keeper's decisions as etcd transactions: their conditions, puts and deletes.

package pessimist

import (
	"fmt"
	"strings"
)

// Cond guards a Txn. Plain: the key's ModRevision must equal ModRevision (0: the key must not exist).
// Prefix: no key under Key may have a ModRevision above ModRevision, i.e. nothing under it was put
// since the Keeper's revision (one comparison for all keys of a lock, however many sources it has).
// End (with Prefix false): the same for the keys in [Key, End) only.
type Cond struct {
	Key         string
	ModRevision int64
	Prefix      bool
	End         string
}

// DefaultMaxTxnOps is etcd's default limit on the comparisons and on the operations of one transaction
// (--max-txn-ops). Larger decisions are written in several transactions, one after the other.
const DefaultMaxTxnOps = 128

// KV is a key and the value to put there.
type KV struct{ Key, Value string }

// Txn is one decision of the Keeper: an etcd transaction that writes Puts and Deletes only if every
// Cond holds. Conds name the exact revisions the decision was based on, so a decision taken on stale
// state (a deposed leader, a restarted coordinator, a duplicate) fails instead of acting twice.
type Txn struct {
	LockID         string
	Reason         string
	Conds          []Cond
	Puts           []KV
	Deletes        []string
	DeletePrefixes []string // only for unlock --force-remove
}

func (t Txn) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s:", t.LockID, t.Reason)
	for _, p := range t.Puts {
		fmt.Fprintf(&sb, " put %s", p.Key)
	}
	for _, d := range t.Deletes {
		fmt.Fprintf(&sb, " delete %s", d)
	}
	for _, d := range t.DeletePrefixes {
		fmt.Fprintf(&sb, " delete-prefix %s", d)
	}
	return sb.String()
}
