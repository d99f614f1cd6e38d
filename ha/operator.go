package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The binlog skip|replace decisions (dmctl binlog, DM's handle-error) of a task's subtask on one source
// are kept here, so they reach whichever worker runs the source after a restart or a failover:
//
//	operator/<task>/<source>/<FILE:POS>   the decision for the event at FILE:POS, as the worker encodes it
//
// The worker bound to the source writes them (fenced by its binding's epoch and by the task's key, so a
// worker the source has left, or a stopped task, cannot add one) and removes each once its subtask's
// checkpoint past the event is saved; stop-task removes a task's with it. They are not part of State:
// a change restarts no subtask.
const operatorPrefix = Root + "operator/"

// TaskOperatorsPrefix is the prefix of every decision of a task; OperatorsPrefix of those of one source.
func TaskOperatorsPrefix(task string) string      { return operatorPrefix + task + "/" }
func OperatorsPrefix(task, source string) string  { return TaskOperatorsPrefix(task) + source + "/" }
func OperatorKey(task, source, pos string) string { return OperatorsPrefix(task, source) + pos }

// StoredOperator is one decision as stored: the position of its event ("FILE:POS"), the worker's
// JSON of it, and the mod revision of its key.
type StoredOperator struct {
	Pos   string
	Value json.RawMessage
	Rev   int64
}

// LoadOperators returns the decisions of task's subtask on source in the order they were given (a
// decision given again for the same event counts as new), and the revision they were read at.
func LoadOperators(ctx context.Context, cli clientv3.KV, task, source string) ([]StoredOperator, int64, error) {
	prefix := OperatorsPrefix(task, source)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("task %s, source %s: read the binlog operations: %w", task, source, err)
	}
	out := make([]StoredOperator, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, StoredOperator{Pos: strings.TrimPrefix(string(kv.Key), prefix), Value: kv.Value, Rev: kv.ModRevision})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rev < out[j].Rev })
	return out, resp.Header.Revision, nil
}

// ErrNotBound: the source is bound to another worker than the one writing (the binding's epoch
// changed), or the task was stopped; nothing was written.
type ErrNotBound struct{ Task, Source string }

func (e ErrNotBound) Error() string {
	return fmt.Sprintf("task %s, source %s: the task was stopped or the source moved to another worker; nothing changed, give the operation again", e.Task, e.Source)
}

// fence is what a write of a worker for task's subtask on source rests on: the worker's binding is
// still the source's (epoch) and the task exists.
func fence(task, source string, epoch int64) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(BoundKey(source)), "=", epoch),
		clientv3.Compare(clientv3.CreateRevision(TaskKey(task)), ">", 0),
	}
}

// PutOperator stores the decision value for the event at pos, replacing one for the same event, as
// the worker of binding epoch.
func PutOperator(ctx context.Context, cli clientv3.KV, task, source string, epoch int64, pos string, value []byte) error {
	resp, err := cli.Txn(ctx).If(fence(task, source, epoch)...).Then(clientv3.OpPut(OperatorKey(task, source, pos), string(value))).Commit()
	if err != nil {
		return fmt.Errorf("task %s, source %s: store the binlog operation at %s: %w", task, source, pos, err)
	}
	if !resp.Succeeded {
		return ErrNotBound{Task: task, Source: source}
	}
	return nil
}

// DeleteOperator removes the decision for the event at pos as the worker of binding epoch, and says
// whether there was one. rev > 0 removes it only if its key was last written at rev (a decision used
// by the subtask, not one given again since); rev 0 removes it whatever it is (binlog revert).
func DeleteOperator(ctx context.Context, cli clientv3.KV, task, source string, epoch int64, pos string, rev int64) (bool, error) {
	key := OperatorKey(task, source, pos)
	cmps := fence(task, source, epoch)
	if rev > 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, fmt.Errorf("task %s, source %s: remove the binlog operation at %s: %w", task, source, pos, err)
	}
	if !resp.Succeeded {
		if rev > 0 {
			return false, nil // given again, or not ours to remove any more: left for the worker bound now
		}
		return false, ErrNotBound{Task: task, Source: source}
	}
	return resp.Responses[0].GetResponseDeleteRange().Deleted > 0, nil
}

// DeleteTaskOperators is the operation that removes every decision of a task (stop-task).
func DeleteTaskOperators(task string) clientv3.Op {
	return clientv3.OpDelete(TaskOperatorsPrefix(task), clientv3.WithPrefix())
}
