// Package ha holds the cluster state that masters and workers share through etcd: sources, workers
// (registration and liveness), source→worker bindings and tasks. Masters write sources, bindings and
// tasks (bindings only from the leader, fenced by its election key); workers write their own
// registration and liveness and read the rest. Nothing here lives only in one process's memory.
//
// Keys (all under Root):
//
//	source/<source-id>      the source YAML as the user gave it
//	worker/<name>           a registered worker: {"name","addr"}
//	keepalive/<name>        present while the worker's lease lives (its --keepalive-ttl)
//	bound/<source-id>       {"source","worker"}; the key's mod revision is the binding's epoch
//	task/<task>             {"name","config","stage","resumed","starts","startTime"}: the task YAML,
//	                        Running or Paused, resume-task count, and the start positions fixed by
//	                        start-task (with --start-time: the time's, before any meta)
//	operator/<task>/<source>/<FILE:POS>
//	                        a binlog skip|replace decision of the task's subtask on the source
//	                        (operator.go; not part of State)
package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/router"
)

// Root is the prefix of every key of this package.
const Root = "/tributary/"

const (
	sourcePrefix    = Root + "source/"
	workerPrefix    = Root + "worker/"
	keepalivePrefix = Root + "keepalive/"
	boundPrefix     = Root + "bound/"
	taskPrefix      = Root + "task/"
)

// Prefixes are the key prefixes of the state, for reading and watching it.
var Prefixes = []string{sourcePrefix, workerPrefix, keepalivePrefix, boundPrefix, taskPrefix}

// SourceKey, WorkerKey, KeepaliveKey, BoundKey and TaskKey name one entry.
func SourceKey(id string) string      { return sourcePrefix + id }
func WorkerKey(name string) string    { return workerPrefix + name }
func KeepaliveKey(name string) string { return keepalivePrefix + name }
func BoundKey(source string) string   { return boundPrefix + source }
func TaskKey(task string) string      { return taskPrefix + task }

// Stages of a task, as DM names them.
const (
	StageRunning = "Running"
	StagePaused  = "Paused"
	// StageFinished is a subtask's stage once a task-mode full load is through (workers report it; etcd
	// never holds it).
	StageFinished = "Finished"
)

// Worker is a registered worker.
type Worker struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// Binding says which worker replicates a source. Epoch is the mod revision of its key: it grows with
// every new binding, so a worker can tell a newer binding of its source from its own.
type Binding struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
	Epoch  int64  `json:"-"`
}

// Task is a started task.
type Task struct {
	Name   string `json:"name"`
	Config string `json:"config"` // the task YAML
	Stage  string `json:"stage"`
	// Resumed counts resume-task calls, so a resume restarts subtasks that stopped on an error.
	Resumed int `json:"resumed,omitempty"`
	// Starts are the sources' binlog positions when start-task ran, for sources without meta and
	// checkpoint: the task starts there even if its first attempt fails and a later one succeeds.
	Starts map[string]config.Meta `json:"starts,omitempty"`
	// StartTime is start-task's --start-time, when given. Starts then holds, for each source that had
	// no checkpoint, the position of the first event group at or after it, and a worker takes that
	// position before the source's meta in the task file.
	StartTime string `json:"startTime,omitempty"`
	// Topology is where the tables of the task's sources meet downstream, found at start-task: every
	// worker of the task decides from it whether a target is merged (router.Router.SetTopology).
	// Absent in tasks stored by an earlier version: their workers decide from their own rules.
	Topology *router.Topology `json:"topology,omitempty"`
}

// Parse returns the task's configuration.
func (t Task) Parse() (*config.Task, error) {
	return config.ParseTask("task "+t.Name, []byte(t.Config))
}

// Sources returns the source IDs of the task.
func (t Task) Sources() []string {
	cfg, err := t.Parse()
	if err != nil {
		return nil
	}
	return cfg.SourceIDs()
}

// Source is a created source.
type Source struct {
	Config string // the source YAML
	Parsed *config.Source
}

// State is everything of this package at one etcd revision.
type State struct {
	Rev      int64
	Sources  map[string]Source
	Workers  map[string]Worker
	Alive    map[string]bool // workers whose keepalive key exists
	Bindings map[string]Binding
	Tasks    map[string]Task
}

// Load reads the whole state at one revision.
func Load(ctx context.Context, cli *clientv3.Client) (State, error) {
	var gets []clientv3.Op
	for _, p := range Prefixes {
		gets = append(gets, clientv3.OpGet(p, clientv3.WithPrefix()))
	}
	resp, err := cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return State{}, err
	}
	st := State{Rev: resp.Header.Revision, Sources: map[string]Source{}, Workers: map[string]Worker{},
		Alive: map[string]bool{}, Bindings: map[string]Binding{}, Tasks: map[string]Task{}}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			if err := st.apply(string(kv.Key), kv.Value, kv.ModRevision); err != nil {
				return State{}, err
			}
		}
	}
	return st, nil
}

func (st *State) apply(key string, value []byte, rev int64) error {
	switch {
	case strings.HasPrefix(key, sourcePrefix):
		id := strings.TrimPrefix(key, sourcePrefix)
		parsed, err := config.ParseSource("source "+id, value)
		if err != nil {
			return fmt.Errorf("stored source %s: %w", id, err)
		}
		st.Sources[id] = Source{Config: string(value), Parsed: parsed}
	case strings.HasPrefix(key, workerPrefix):
		var w Worker
		if err := json.Unmarshal(value, &w); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		st.Workers[w.Name] = w
	case strings.HasPrefix(key, keepalivePrefix):
		st.Alive[strings.TrimPrefix(key, keepalivePrefix)] = true
	case strings.HasPrefix(key, boundPrefix):
		var b Binding
		if err := json.Unmarshal(value, &b); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		b.Epoch = rev
		st.Bindings[b.Source] = b
	case strings.HasPrefix(key, taskPrefix):
		var t Task
		if err := json.Unmarshal(value, &t); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		st.Tasks[t.Name] = t
	}
	return nil
}

// BoundTo returns the source bound to worker, if any.
func (st State) BoundTo(worker string) (Binding, bool) {
	for _, b := range st.Bindings {
		if b.Worker == worker {
			return b, true
		}
	}
	return Binding{}, false
}

// SortedSources returns the source IDs, sorted.
func (st State) SortedSources() []string {
	out := make([]string, 0, len(st.Sources))
	for id := range st.Sources {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Encode is the JSON of a value stored by this package.
func Encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are encoded
	}
	return string(b)
}

// Schedule is the scheduler's decision: bindings to remove (their worker is gone or their source
// was stopped) and bindings to create. It is pure: the same state gives the same plan.
type Schedule struct {
	Unbind []Binding
	Bind   []Binding
}

// Plan binds every source without a live worker to a free live worker (sorted by name, so the plan
// is deterministic) and unbinds sources whose worker is no longer alive or which no longer exist.
// A worker holds at most one source (a second binding to it, which only a damaged state could hold, is
// removed).
func Plan(st State) Schedule {
	var s Schedule
	busy := map[string]bool{}
	var unbound []string
	for _, id := range st.SortedSources() {
		b, ok := st.Bindings[id]
		switch {
		case ok && st.Alive[b.Worker] && !busy[b.Worker]:
			busy[b.Worker] = true
		case ok:
			s.Unbind = append(s.Unbind, b)
			unbound = append(unbound, id)
		default:
			unbound = append(unbound, id)
		}
	}
	for _, b := range st.Bindings {
		if _, ok := st.Sources[b.Source]; !ok {
			s.Unbind = append(s.Unbind, b)
		}
	}
	sort.Slice(s.Unbind, func(i, j int) bool { return s.Unbind[i].Source < s.Unbind[j].Source })
	var free []string
	for name := range st.Workers {
		if st.Alive[name] && !busy[name] {
			free = append(free, name)
		}
	}
	sort.Strings(free)
	for i, id := range unbound {
		if i >= len(free) {
			break
		}
		s.Bind = append(s.Bind, Binding{Source: id, Worker: free[i]})
	}
	return s
}

// SleepCtx waits for d or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// WaitChange returns when a key of the state changes after revision rev, when timeout passes, or
// when ctx ends; it reports whether a change (or a watch error) ended the wait. Callers reload the
// state afterwards, so a compacted revision just returns.
//
// It watches each of the state's prefixes, not Root: every write of a lock's keys (pessimist/…)
// would otherwise wake every worker and the master's scheduler on the lock's path, to be filtered
// out here.
func WaitChange(ctx context.Context, cli clientv3.Watcher, rev int64, timeout time.Duration) bool {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), timeout)
	defer cancel()
	changed := make(chan struct{}, len(Prefixes))
	for _, p := range Prefixes {
		wch := cli.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		go func() {
			for resp := range wch {
				if resp.Err() != nil || len(resp.Events) > 0 {
					changed <- struct{}{}
					return
				}
			}
			if wctx.Err() == nil { // closed under it (the client was closed): end the wait as before
				changed <- struct{}{}
			}
		}()
	}
	select {
	case <-changed:
		return true
	case <-wctx.Done():
		return false
	}
}
