package pessimist

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// LockID names the lock of one target table of one task, as DM does: task-`db`.`tbl`.
func LockID(task, target string) string { return task + "-" + target }

// Info is a source's statement that all its shard tables routed to Target have reached DDLs.
type Info struct {
	Task   string   `json:"task"`
	Source string   `json:"source"`
	Target string   `json:"target"` // quoted, `db`.`tbl`
	DDLs   []string `json:"ddls"`
	// Session is the session settings the source's DDL events carry (for the log only: the DDLs run
	// downstream in the owner's).
	Session string `json:"session,omitempty"`

	// Revisions of the etcd key, filled in when read; not stored.
	CreateRevision int64 `json:"-"`
	ModRevision    int64 `json:"-"`

	// created: Agent.PutInfo created the key (no info of this source was there). Every operation
	// that can answer such an info is written after it, so a wait whose watch delivers everything
	// after it needs no read of the lock.
	created bool
	// exec: the put completed the lock and wrote this exec operation for its source (Agent.PutInfo).
	exec *Operation
}

// LockID is the ID of the lock the info belongs to.
func (i Info) LockID() string { return LockID(i.Task, i.Target) }

// WroteExec reports whether the put that returned this info completed its lock and wrote the exec
// operation for its source, in the transaction that created the info: no exec of this round of the
// lock existed before, so no owner can have run any of its DDLs yet.
func (i Info) WroteExec() bool { return i.exec != nil }

// Operation tells one source what to do with a lock's DDLs: execute them (the owner) or skip them.
// The source marks it Done once that has taken effect downstream.
//
// The participants of an exec operation are the other sources that had reached its DDLs when it was
// written: their infos with the same DDLs, created before it (the coordinator decides an exec only
// when the lock holds no info of a source outside the task, and only if no info changed since it
// looked). Once the owner marks it done it is their skip (an implicit skip): they have no operation
// key of their own, and their done is the deletion of their info. Only sources that arrive later (a
// source an unlock marked missing, one added to the task) or that an unlock overruled are sent a skip
// operation of their own. The exec holds only their number; their names, which only the coordinator
// needs, are in the lock's Round.
type Operation struct {
	Task   string   `json:"task"`
	Source string   `json:"source"`
	Target string   `json:"target"`
	DDLs   []string `json:"ddls"`
	Exec   bool     `json:"exec"`
	Done   bool     `json:"done"`
	// Sources (exec, and an implicit skip's copy of it) is the number of sources in the exec's
	// round: the owner and its participants. Every agent reads the exec; a list of N names in it would cost O(N²) per lock.
	Sources int `json:"sources,omitempty"`

	// Revisions of the etcd key, filled in when read; not stored. For an implicit skip they are the
	// exec operation's.
	CreateRevision int64 `json:"-"`
	ModRevision    int64 `json:"-"`
	// Owner is set (not stored) on an implicit skip: the source whose done exec operation it is.
	Owner string `json:"-"`
}

// Implicit reports whether o is an implicit skip: the owner's done exec operation, seen by one of its
// participants.
func (o Operation) Implicit() bool { return o.Owner != "" }

// Round names the participants of a lock's exec operation. The coordinator writes it with the exec
// (so its ModRevision is the exec's CreateRevision) and deletes it with the exec; only the coordinator
// reads it: it tells a participant's info of the next round (which waits) from the info of a source
// that arrived after the exec (which is sent a skip).
type Round struct {
	Task         string   `json:"task"`
	Target       string   `json:"target"`
	Owner        string   `json:"owner"`
	Participants []string `json:"participants"`

	ModRevision int64 `json:"-"`
}

// LockID is the ID of the lock the operation belongs to.
func (o Operation) LockID() string { return LockID(o.Task, o.Target) }

// Unlock is a user's request (dmctl shard-ddl-lock unlock) to resolve a lock without waiting for the
// Missing sources: Owner executes DDLs once the other sources are in; each Missing source is sent a
// skip when it reaches DDLs later. It is deleted once no source is missing any more.
type Unlock struct {
	Task     string   `json:"task"`
	Target   string   `json:"target"`
	DDLs     []string `json:"ddls"`
	Owner    string   `json:"owner"`
	Missing  []string `json:"missing"`
	Executed bool     `json:"executed"`
	// Overrule are the sources that sent other DDLs than the owner's (a conflict the user unlocked):
	// they skip theirs, as in DM.
	Overrule []string `json:"overrule,omitempty"`
	// OverruledDDLs are what the overruled sources sent (for the unlock's answer; not stored).
	OverruledDDLs []SourceDDLs `json:"-"`

	ModRevision int64 `json:"-"`
}

// TaskSources is the set of sources a task's locks wait for. The master writes it when a task starts
// or its sources change; a lock of a task without it is never decided.
type TaskSources struct {
	Task    string   `json:"task"`
	Sources []string `json:"sources"`

	ModRevision int64 `json:"-"`
}

// removal is the value of a removal mark (Layout.RemovedKey, Layout.TaskRemovedKey).
type removal struct {
	Reason string `json:"reason"`
}

// Layout is the etcd key layout under one root:
//
//	<root>task/<task>                      TaskSources
//	<root>info/<task>/<target>/<source>    Info
//	<root>op/<task>/<target>/<source>      Operation
//	<root>op/<task>/<target>               the lock's removal mark: put by every master transaction that
//	                                       deletes infos (unlock --force-remove), so a waiting agent sees
//	                                       the removal through its one watch of the task's operations
//	<root>op/<task>/                       the task's removal mark, put and deleted again by DeleteTask
//	<root>unlock/<task>/<target>           Unlock
//	<root>agent/<task>/<source>            generation of the source's current agent
//	<root>round/<task>/<target>            Round (the participants of the exec operation)
//	<root>done/<task>/<target>/<rev>       counts (by its version) the dones of the round whose exec
//	                                       operation was created at rev
//	<root>arrive/<task>/<target>           counts (by its version) the infos created since the lock's last
//	                                       new round, while they agree (value: their DDLs and the task's
//	                                       source set); "poison" once one does not (Agent.PutInfo)
//
// Every segment is path-escaped, so names holding '/' cannot collide. The target is part of the key:
// locks of different target tables of one source are independent.
type Layout struct{ root string }

// DefaultRoot is where the pessimist keys live unless told otherwise.
const DefaultRoot = "/tributary/pessimist/"

// NewLayout returns the layout under root ("" means DefaultRoot).
func NewLayout(root string) Layout {
	if root == "" {
		root = DefaultRoot
	}
	if !strings.HasSuffix(root, "/") {
		root += "/"
	}
	return Layout{root: root}
}

// Key kinds.
const (
	kindTask   = "task"
	kindInfo   = "info"
	kindOp     = "op"
	kindUnlock = "unlock"
	kindAgent  = "agent"
	kindDone   = "done"
	kindRound  = "round"
	kindArrive = "arrive"
)

// The kinds of Key, exported for readers of the keys' history.
const (
	KindTask   = kindTask
	KindInfo   = kindInfo
	KindOp     = kindOp
	KindUnlock = kindUnlock
)

func (l Layout) Root() string { return l.root }

func (l Layout) key(kind string, segs ...string) string {
	var sb strings.Builder
	sb.WriteString(l.root)
	sb.WriteString(kind)
	for _, s := range segs {
		sb.WriteByte('/')
		sb.WriteString(url.PathEscape(s))
	}
	return sb.String()
}

func (l Layout) TaskKey(task string) string { return l.key(kindTask, task) }
func (l Layout) InfoKey(task, target, source string) string {
	return l.key(kindInfo, task, target, source)
}
func (l Layout) OperationKey(task, target, source string) string {
	return l.key(kindOp, task, target, source)
}
func (l Layout) UnlockKey(task, target string) string { return l.key(kindUnlock, task, target) }

// RemovedKey is the lock's removal mark. It lies under the task's operations but outside the lock's
// (lockPrefix ends with '/'), so no reader of operations takes it for one; it stays until the task's
// keys are removed, one key per target whose lock was ever force-removed.
func (l Layout) RemovedKey(task, target string) string { return l.key(kindOp, task, target) }

// TaskRemovedKey is the task's removal mark (DeleteTask): the first key under the task's operations,
// seen by every agent's watch of them. It parses as a lock's removal mark with an empty target.
func (l Layout) TaskRemovedKey(task string) string   { return l.taskPrefix(kindOp, task) }
func (l Layout) RoundKey(task, target string) string { return l.key(kindRound, task, target) }

// ArriveKey counts the arrivals of a lock (see Agent.PutInfo): each info created puts it, so its
// version tells the agent whose info completes the lock that it does, without reading the others.
func (l Layout) ArriveKey(task, target string) string { return l.key(kindArrive, task, target) }

// AgentKey is rewritten by every new agent (worker incarnation) of a source: its revision fences the
// info puts of older incarnations whose requests land late.
func (l Layout) AgentKey(task, source string) string { return l.key(kindAgent, task, source) }

// DoneKey counts the dones of one round of a lock: each source that finishes the round (the owner and
// the exec operation's participants) puts it, so its version tells the last one that it is the last
// without reading the other sources' keys. The round is named by its exec operation's create revision,
// so a counter left behind by an earlier round can never be mistaken for this one's.
func (l Layout) DoneKey(task, target string, execCreateRevision int64) string {
	return l.key(kindDone, task, target, strconv.FormatInt(execCreateRevision, 10))
}

// lockPrefix is the prefix of all infos (or operations) of one lock; the trailing slash keeps
// `db`.`t` from matching `db`.`t2`.
func (l Layout) lockPrefix(kind, task, target string) string { return l.key(kind, task, target) + "/" }

// TaskPrefix is the prefix of every key of one task of the given kind.
func (l Layout) taskPrefix(kind, task string) string { return l.key(kind, task) + "/" }

// Key is a pessimist key decoded: its kind (task, info, op, unlock, agent, done, round, arrive) and
// the task, target and source it names, where it names them. Removed marks a removal mark
// (RemovedKey, TaskRemovedKey): an op key without a source.
type Key struct {
	Kind, Task, Target, Source string
	Removed                    bool
}

// Parse decodes a key of this layout (for tools that read the keys' history, such as the chaos
// soak's checker).
func (l Layout) Parse(key string) (Key, error) {
	p, err := l.parse(key)
	return Key{Kind: p.kind, Task: p.task, Target: p.target, Source: p.source, Removed: p.removed}, err
}

// parsedKey is a decoded key.
type parsedKey struct {
	kind, task, target, source string
	removed                    bool // the lock's removal mark (RemovedKey)
}

func (l Layout) parse(key string) (parsedKey, error) {
	rest, ok := strings.CutPrefix(key, l.root)
	if !ok {
		return parsedKey{}, fmt.Errorf("key %q is not under %q", key, l.root)
	}
	segs := strings.Split(rest, "/")
	for i := 1; i < len(segs); i++ {
		s, err := url.PathUnescape(segs[i])
		if err != nil {
			return parsedKey{}, fmt.Errorf("key %q: %w", key, err)
		}
		segs[i] = s
	}
	want := map[string]int{kindTask: 2, kindInfo: 4, kindOp: 4, kindUnlock: 3, kindAgent: 3, kindDone: 4, kindRound: 3, kindArrive: 3}[segs[0]]
	if segs[0] == kindOp && len(segs) == 3 {
		return parsedKey{kind: kindOp, task: segs[1], target: segs[2], removed: true}, nil
	}
	if want == 0 || len(segs) != want {
		return parsedKey{}, fmt.Errorf("key %q has an unknown shape", key)
	}
	p := parsedKey{kind: segs[0], task: segs[1]}
	if segs[0] == kindAgent {
		p.source = segs[2]
		return p, nil
	}
	if want >= 3 {
		p.target = segs[2]
	}
	if want == 4 {
		p.source = segs[3]
	}
	return p, nil
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pessimist: encode %T: %v", v, err)) // plain structs of strings: cannot fail
	}
	return string(b)
}

func sameDDLs(a, b []string) bool { return slices.Equal(a, b) }
