// The user's binlog skip|replace decisions of a subtask (dmctl binlog, DM's handle-error), kept in etcd.

package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/vocab"
)

// Operator is a user's decision about one event of the binlog (dmctl binlog skip|replace).
type Operator struct {
	Op   string         `json:"op"` // "skip" or "replace"
	Pos  vocab.Position `json:"pos"`
	SQLs []string       `json:"sqls,omitempty"`
	// Lock: for the DDLs of a lock this source owns, not for the binlog event itself.
	Lock bool `json:"lock,omitempty"`

	rev int64 // the mod revision of its etcd key (0: not stored)
}

func (o Operator) String() string {
	if o.Op == "replace" {
		return fmt.Sprintf("replace at %s with %q", o.Pos.BinlogPos(), o.SQLs)
	}
	return "skip at " + o.Pos.BinlogPos()
}

// Operators are a subtask's decisions: a copy of its keys in etcd (ha.OperatorsPrefix), read when the
// sync unit starts and after every change this worker makes, less those its checkpoint has passed. The
// sync unit finds them here without I/O on its path. A decision stays in etcd until the checkpoint past
// its event is saved: an event read again before that (a re-sync, a restart, a failover to another
// worker) meets it again, and a replacement it ran already is not run twice, because the table
// checkpoints and DDL markers committed with it say so. Then prune removes it from etcd.
type Operators struct {
	mu  sync.Mutex
	ops []Operator
	rev int64 // the etcd revision ops were read at
	// floor is the saved checkpoint: events before it are never read again, so their decisions are
	// used, and wait in used until they are removed from etcd.
	floor vocab.Position
	used  []Operator
	store *operatorStore // nil: kept in memory only (tests of the sync unit)
}

// operatorStore is where a subtask's decisions live in etcd, and the binding its writes rest on.
type operatorStore struct {
	cli          *clientv3.Client
	task, source string
	epoch        int64
}

// NewOperators returns the decisions of task's subtask on source, kept in etcd through cli by the
// worker of binding epoch (nil cli: in memory only). Load reads them.
func NewOperators(cli *clientv3.Client, task, source string, epoch int64) *Operators {
	if cli == nil {
		return &Operators{}
	}
	return &Operators{store: &operatorStore{cli: cli, task: task, source: source, epoch: epoch}}
}

// Load reads the decisions from etcd.
func (o *Operators) Load(ctx context.Context) error {
	if o.store == nil {
		return nil
	}
	st := o.store
	stored, rev, err := ha.LoadOperators(ctx, st.cli, st.task, st.source)
	if err != nil {
		return err
	}
	ops := make([]Operator, 0, len(stored))
	for _, s := range stored {
		var op Operator
		if err := json.Unmarshal(s.Value, &op); err != nil {
			return fmt.Errorf("task %s, source %s: stored binlog operation at %s: %w", st.task, st.source, s.Pos, err)
		}
		op.rev = s.Rev
		ops = append(ops, op)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if rev < o.rev {
		return nil // a later read (of a concurrent change) is in already
	}
	o.rev, o.ops = rev, nil
	for _, op := range ops {
		if o.passed(op) {
			o.markUsed(op)
		} else {
			o.ops = append(o.ops, op)
		}
	}
	return nil
}

// Add records op, replacing one at the same position, in etcd first.
func (o *Operators) Add(ctx context.Context, op Operator) error {
	if o.store == nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.ops = slices.DeleteFunc(o.ops, func(x Operator) bool { return x.Pos == op.Pos })
		o.ops = append(o.ops, op)
		return nil
	}
	st := o.store
	if err := ha.PutOperator(ctx, st.cli, st.task, st.source, st.epoch, op.Pos.BinlogPos(), []byte(ha.Encode(op))); err != nil {
		return err
	}
	return o.Load(ctx)
}

// Revert withdraws the operator at pos, and says whether there was one.
func (o *Operators) Revert(ctx context.Context, pos vocab.Position) (bool, error) {
	if o.store == nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		n := len(o.ops)
		o.ops = slices.DeleteFunc(o.ops, func(x Operator) bool { return x.Pos == pos })
		return len(o.ops) < n, nil
	}
	st := o.store
	ok, err := ha.DeleteOperator(ctx, st.cli, st.task, st.source, st.epoch, pos.BinlogPos(), 0)
	if err != nil {
		return false, err
	}
	return ok, o.Load(ctx)
}

// List returns the operators waiting.
func (o *Operators) List() []Operator {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops)
}

// find returns the operator for an event starting at one of the positions.
func (o *Operators) find(lock bool, at ...vocab.Position) (Operator, bool) {
	if o == nil {
		return Operator{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, op := range o.ops {
		if op.Lock == lock && slices.Contains(at, op.Pos) {
			return op, true
		}
	}
	return Operator{}, false
}

// prune is called once the checkpoint is saved: the operators of events before it are used (never read
// again), and are removed from etcd. One that cannot be removed now is tried again at the next prune.
func (o *Operators) prune(ctx context.Context, checkpoint vocab.Position) error {
	if o == nil || checkpoint.IsZero() {
		return nil
	}
	o.mu.Lock()
	if checkpoint.Compare(o.floor) > 0 {
		o.floor = checkpoint
	}
	o.ops = slices.DeleteFunc(o.ops, func(x Operator) bool {
		if o.passed(x) {
			o.markUsed(x)
			return true
		}
		return false
	})
	used := slices.Clone(o.used)
	o.mu.Unlock()
	if o.store == nil || len(used) == 0 {
		o.mu.Lock()
		o.used = nil
		o.mu.Unlock()
		return nil
	}
	st := o.store
	var errs []error
	for _, op := range used {
		if _, err := ha.DeleteOperator(ctx, st.cli, st.task, st.source, st.epoch, op.Pos.BinlogPos(), op.rev); err != nil {
			errs = append(errs, err)
			continue
		}
		o.mu.Lock()
		o.used = slices.DeleteFunc(o.used, func(x Operator) bool { return x.Pos == op.Pos && x.rev == op.rev })
		o.mu.Unlock()
	}
	return errors.Join(errs...)
}

// passed: op's event is before the saved checkpoint (o.mu held).
func (o *Operators) passed(op Operator) bool {
	return !o.floor.IsZero() && op.Pos.File != "" && op.Pos.Compare(o.floor) < 0
}

// markUsed queues op for removal from etcd (o.mu held).
func (o *Operators) markUsed(op Operator) {
	if !slices.ContainsFunc(o.used, func(x Operator) bool { return x.Pos == op.Pos && x.rev == op.rev }) {
		o.used = append(o.used, op)
	}
}
