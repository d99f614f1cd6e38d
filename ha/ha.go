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
//	task/<task>             {"name","config","stage","resumed","starts","startTime",...}: the task
//	                        YAML, Running or Paused, resume-task count, the start positions fixed by
//	                        start-task (with --start-time: the time's, before any meta), and what
//	                        pause|resume|stop-task -s changed for single sources
//	operator/<task>/<source>/<FILE:POS>
//	                        a binlog skip|replace decision of the task's subtask on the source
//	                        (operator.go; not part of State)
package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// SourceStages is the stage of the sources that pause-task -s or resume-task -s named since the
	// last whole-task pause or resume; every other source has Stage.
	SourceStages map[string]string `json:"source-stages,omitempty"`
	// SourceResumed counts resume-task -s calls per source (added to Resumed), so a resume of one
	// source restarts its subtask even when no stage changed.
	SourceResumed map[string]int `json:"source-resumed,omitempty"`
	// Stopped are the sources stop-task -s removed from the task: no worker runs the task for them.
	// The task's shard DDL locks still wait for them (DM's way).
	Stopped []string `json:"stopped,omitempty"`
}

// StageOf is the stage the task's subtask on source should be in.
func (t Task) StageOf(source string) string {
	if st, ok := t.SourceStages[source]; ok {
		return st
	}
	return t.Stage
}

// ResumedOf counts the resume-task calls that concern source: a change restarts its subtask.
func (t Task) ResumedOf(source string) int { return t.Resumed + t.SourceResumed[source] }

// IsStopped reports whether stop-task -s removed source from the task.
func (t Task) IsStopped(source string) bool { return slices.Contains(t.Stopped, source) }

// Operate returns the task after pause|resume|stop-task for sources (none: the whole task). Every
// source must be one the task runs on. stopAll is true when nothing of the task is left to run (a
// stop of the whole task, or of its last running sources): the caller then removes the task.
// A whole-task pause or resume forgets the per-source stages.
func (t Task) Operate(op string, sources []string) (out Task, stopAll bool, err error) {
	active := t.Sources()
	var unknown []string
	for _, s := range sources {
		if !slices.Contains(active, s) {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		msg := fmt.Sprintf("%s: not a source of task %s (its sources: %s)", strings.Join(unknown, ", "), t.Name, strings.Join(active, ", "))
		if len(t.Stopped) > 0 {
			msg += fmt.Sprintf("; stopped by stop-task -s: %s", strings.Join(t.Stopped, ", "))
		}
		return t, false, errors.New(msg)
	}
	whole := len(sources) == 0
	if !whole {
		whole = true
		for _, s := range active {
			if !slices.Contains(sources, s) {
				whole = false
			}
		}
	}
	out = t
	out.SourceStages = maps.Clone(t.SourceStages)
	out.SourceResumed = maps.Clone(t.SourceResumed)
	out.Stopped = slices.Clone(t.Stopped)
	switch op {
	case "stop":
		if whole {
			return out, true, nil
		}
		for _, s := range sources {
			if !slices.Contains(out.Stopped, s) {
				out.Stopped = append(out.Stopped, s)
			}
			delete(out.SourceStages, s)
			delete(out.SourceResumed, s)
		}
		sort.Strings(out.Stopped)
	case "pause", "resume":
		stage := StagePaused
		if op == "resume" {
			stage = StageRunning
		}
		if whole {
			out.Stage, out.SourceStages = stage, nil
			if op == "resume" {
				out.Resumed++
			}
			break
		}
		if out.SourceStages == nil {
			out.SourceStages = map[string]string{}
		}
		for _, s := range sources {
			out.SourceStages[s] = stage
			if op == "resume" {
				if out.SourceResumed == nil {
					out.SourceResumed = map[string]int{}
				}
				out.SourceResumed[s]++
			}
		}
	default:
		return t, false, fmt.Errorf("unknown task operation %q (Stop, Pause or Resume)", op)
	}
	return out, false, nil
}

// Parse returns the task's configuration.
func (t Task) Parse() (*config.Task, error) {
	return config.ParseTask("task "+t.Name, []byte(t.Config))
}

// Sources returns the source IDs of the task, but those stop-task -s removed.
func (t Task) Sources() []string {
	return slices.DeleteFunc(t.AllSources(), t.IsStopped)
}

// AllSources returns the source IDs of the task's file, with those stop-task -s removed.
func (t Task) AllSources() []string {
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

// Transfer decides dmctl transfer-source: the binding that moves source to worker. It refuses an
// unknown source, an unknown or offline worker, a worker bound to another source, and a source with
// a subtask that should be running (pause it first, as DM requires: the old worker stops the
// subtask when its binding goes, and the new one starts it on resume-task); a source no worker holds
// is bound at once, whatever its subtasks' stage (nothing runs them). changed is false when
// the source is already bound to worker: nothing to do (DM answers true then).
func Transfer(st State, source, worker string) (b Binding, changed bool, err error) {
	if _, ok := st.Sources[source]; !ok {
		return Binding{}, false, fmt.Errorf("source %s does not exist (operate-source show lists the sources)", source)
	}
	if _, ok := st.Workers[worker]; !ok {
		return Binding{}, false, fmt.Errorf("worker %s is not registered (list-member --worker lists the workers)", worker)
	}
	if old, ok := st.Bindings[source]; ok && old.Worker == worker {
		return old, false, nil
	}
	if !st.Alive[worker] {
		return Binding{}, false, fmt.Errorf("worker %s is offline: transfer-source needs a free live worker", worker)
	}
	if other, ok := st.BoundTo(worker); ok {
		return Binding{}, false, fmt.Errorf("worker %s is bound to source %s: transfer-source needs a free worker", worker, other.Source)
	}
	if _, bound := st.Bindings[source]; !bound {
		return Binding{Source: source, Worker: worker}, true, nil // nothing runs it: bound at once, as DM
	}
	var running []string
	for _, t := range st.Tasks {
		if slices.Contains(t.Sources(), source) && t.StageOf(source) != StagePaused {
			running = append(running, t.Name)
		}
	}
	if len(running) > 0 {
		sort.Strings(running)
		return Binding{}, false, fmt.Errorf("source %s has running subtasks of task %s: pause them first (pause-task %s -s %s), then resume them after the transfer",
			source, strings.Join(running, ", "), running[0], source)
	}
	return Binding{Source: source, Worker: worker}, true, nil
}
