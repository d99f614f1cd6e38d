// dmctl: the command line of a Tributary cluster, printing DM-shaped JSON. The exit status is 0 when
// the command worked: the answer's "result" and every source's "result" in it are true; 1 when one of
// them is false (the JSON is printed all the same) or the master could not be reached; 2 for a usage
// error.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/internal/cli"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/starttime"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `usage: dmctl --master-addr HOST:PORT [--rpc-timeout 10m] [--ssl-ca CA --ssl-cert CERT --ssl-key KEY] COMMAND
commands:
  operate-source create SOURCE-FILE...            create sources (the master binds each to a free dm-worker)
  operate-source stop SOURCE-ID|SOURCE-FILE...    remove sources no task uses
  operate-source show [SOURCE-ID...]              show sources and their workers
  check-task TASK-FILE                            run the prechecks of a task
  start-task [--remove-meta] [--start-time T] TASK-FILE
                                                  check and start a task (--remove-meta: forget its checkpoints
                                                  and locks first; --start-time "YYYY-MM-DD HH:MM:SS": sources
                                                  without a checkpoint start at the first event at or after it,
                                                  in each source's time zone; task-mode incremental only)
  start-task -s SOURCE,... TASK-FILE              start a task on these sources only, or start again the
                                                  sources stop-task -s removed from a started task
  stop-task [-s SOURCE,...] TASK-NAME|TASK-FILE   stop a task, or only its subtasks on the sources (checkpoints
                                                  and shard DDL locks are kept)
  pause-task [-s SOURCE,...] TASK-NAME|TASK-FILE  pause a task, or only its subtasks on the sources
  resume-task [-s SOURCE,...] TASK-NAME|TASK-FILE resume a paused task or its subtasks on the sources (also
                                                  retries one stopped on an error at once)
  query-status [-s SOURCE,...] [--more] [TASK-NAME|TASK-FILE]
                                                  a task's status on each source; without a task name
                                                  the list of tasks with their status, as DM (--more,
                                                  -s: every source's subtasks in full)
  config task TASK-NAME | config source SOURCE-ID the task's or the source's file as stored (passwords
                                                  encrypted; get-config also works)
  shard-ddl-lock [TASK-NAME]                      show shard DDL locks
  shard-ddl-lock unlock LOCK-ID [--owner SOURCE] [--force-remove]
                                                  resolve a lock by hand
  binlog skip|replace|revert|list TASK [-b FILE:POS] [-s SOURCE,...] [SQLS]
                                                  skip the statement a subtask paused on, run SQLS
                                                  (replace) in its place, withdraw or list such operations
                                                  (handle-error TASK skip|replace|revert ... also works)
  binlog-schema list|update|delete TASK DB TABLE [SCHEMA-FILE] -s SOURCE [--from-source|--from-target]
                                                  show or repair a subtask's tracked schema of an upstream
                                                  table (update and delete: the subtask paused); delete
                                                  reads the upstream's definition again
  list-member [--leader] [--master] [--worker] [--name NAME,...]
  offline-member --type master|worker --name NAME remove a dead master or an offline worker
  transfer-source SOURCE-ID WORKER-NAME           bind a source to a free live worker (its subtasks paused
                                                  first); they resume there from the checkpoint
  encrypt PLAIN-TEXT                              encrypt a password for source and task files (without
                                                  --master-addr: with DM's public built-in key, as DM before v8)`

type usageError string

func (u usageError) Error() string { return string(u) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dmctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("master-addr", "", "address of a dm-master")
	timeout := fs.Duration("rpc-timeout", 10*time.Minute, "timeout of one call")
	security := cli.TLSFlags(fs, false)
	version := fs.Bool("V", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version {
		fmt.Fprint(stdout, cli.VersionInfo())
		return 0
	}
	if err := security.Check(); err != nil {
		fmt.Fprintln(stderr, "dmctl:", err)
		return 2
	}
	creds := insecure.NewCredentials()
	if tlsConfig, err := security.ClientConfig(); err != nil {
		fmt.Fprintln(stderr, "dmctl:", err)
		return 2
	} else if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	rest := fs.Args()
	if *addr == "" && len(rest) == 2 && rest[0] == "encrypt" {
		// DM before v8 encrypts without a master, with its built-in key; so does this, in DM's format,
		// which every Tributary process reads (and re-encrypts with the cluster's key when it is stored).
		out, err := config.EncryptDM(rest[1])
		if err != nil {
			fmt.Fprintln(stderr, "dmctl:", err)
			return 1
		}
		fmt.Fprintln(stderr, "dmctl: no --master-addr: encrypted with DM's built-in key, which is public (as DM before v8 does); "+
			"with --master-addr the cluster's own key is used")
		fmt.Fprintln(stdout, out)
		return 0
	}
	if *addr == "" || len(rest) == 0 {
		fmt.Fprintln(stderr, usageText)
		return 2
	}
	// As DM's dmctl: "http://" in front is allowed, and a list of masters is tried in order (the first
	// that accepts a connection is asked; any master forwards to the leader).
	addrs, err := cli.Endpoints("master-addr", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "dmctl:", err)
		return 2
	}
	*addr = firstReachable(addrs)
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintf(stderr, "dmctl: --master-addr %q: %v\n", *addr, err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := call(ctx, pb.NewMasterClient(conn), rest[0], rest[1:], stderr)
	if u, ok := err.(usageError); ok {
		fmt.Fprintf(stderr, "dmctl: %s\n%s\n", u, usageText)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "dmctl: %s: %v\n", *addr, err)
		return 1
	}
	if e, ok := resp.(*pb.EncryptResponse); ok && e.Result {
		fmt.Fprintln(stdout, e.Ciphertext) // DM prints the ciphertext alone, for scripts
		return 0
	}
	if st, ok := resp.(statusSummary); ok {
		if !st.Result {
			resp = st.QueryStatusListResponse // a failure prints as any other response
		} else {
			out, err := json.MarshalIndent(summarize(st.QueryStatusListResponse), "", "    ")
			if err != nil {
				fmt.Fprintln(stderr, "dmctl:", err)
				return 1
			}
			fmt.Fprintln(stdout, string(out))
			return exitStatus(out)
		}
	}
	// protojson varies its whitespace on purpose; json.Indent makes the output stable.
	raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
	var out bytes.Buffer
	if err == nil {
		err = json.Indent(&out, raw, "", "    ")
	}
	if err != nil {
		fmt.Fprintln(stderr, "dmctl:", err)
		return 1
	}
	fmt.Fprintln(stdout, out.String())
	return exitStatus(out.Bytes())
}

// exitStatus is 1 when a printed answer says it did not work: its "result" is false, or the
// "result" of one of its sources is (a source whose worker failed or could not be asked), as the
// scripts around DM's dmctl test; else 0.
func exitStatus(printed []byte) int {
	var answer struct {
		Result  *bool `json:"result"`
		Sources []struct {
			Result *bool `json:"result"`
		} `json:"sources"`
	}
	if json.Unmarshal(printed, &answer) != nil {
		return 0
	}
	if answer.Result != nil && !*answer.Result {
		return 1
	}
	for _, s := range answer.Sources {
		if s.Result != nil && !*s.Result {
			return 1
		}
	}
	return 0
}

// statusSummary is query-status without a task name, -s or --more: DM prints then a list of the tasks,
// each with its status and sources, and details only for one task.
type statusSummary struct{ *pb.QueryStatusListResponse }

// taskList is DM's output of query-status without a task name.
type taskList struct {
	Result bool       `json:"result"`
	Msg    string     `json:"msg"`
	Tasks  []taskItem `json:"tasks"`
}

type taskItem struct {
	TaskName   string   `json:"taskName"`
	TaskStatus string   `json:"taskStatus"`
	Sources    []string `json:"sources"`
}

// summarize gives each task DM's status from its subtasks: "Error - Some error occurred in subtask..."
// when one is Paused with an error, else Paused when one is Paused, else the stage all of them share
// (New, Finished, Stopped, Running), else Running. Tasks are in name order.
func summarize(resp *pb.QueryStatusListResponse) taskList {
	out := taskList{Result: resp.Result, Msg: resp.Msg, Tasks: []taskItem{}}
	index := map[string]int{}
	for _, src := range resp.Sources {
		for _, sub := range src.GetSubTaskStatus() {
			i, ok := index[sub.Name]
			if !ok {
				i = len(out.Tasks)
				index[sub.Name] = i
				out.Tasks = append(out.Tasks, taskItem{TaskName: sub.Name, Sources: []string{}})
			}
			t := &out.Tasks[i]
			t.Sources = append(t.Sources, src.GetSourceStatus().GetSource())
			switch {
			case strings.HasPrefix(t.TaskStatus, "Error"):
			case sub.Stage == "Paused" && len(sub.GetResult().GetErrors()) > 0:
				t.TaskStatus = "Error - Some error occurred in subtask. Please run `query-status " + sub.Name + "` to get more details."
			case t.TaskStatus == "Paused":
			case sub.Stage == "Paused":
				t.TaskStatus = "Paused"
			case t.TaskStatus == "":
				t.TaskStatus = sub.Stage
			case t.TaskStatus != sub.Stage:
				t.TaskStatus = "Running"
			}
		}
	}
	slices.SortFunc(out.Tasks, func(a, b taskItem) int { return strings.Compare(a.TaskName, b.TaskName) })
	return out
}

// firstReachable is the first of addrs that accepts a TCP connection within a second, else the first.
func firstReachable(addrs []string) string {
	if len(addrs) > 1 {
		for _, a := range addrs {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				return a
			}
		}
	}
	return addrs[0]
}

// parse parses a command's flags, which may come before or after its positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError(err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// taskName accepts a task name or a task file (as DM does).
func taskName(arg string) (string, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		t, err := config.LoadTask(arg)
		if err != nil {
			return "", err
		}
		return t.Name, nil
	}
	return arg, nil
}

// sourceFlags defines DM's -s/--source (repeated or comma-separated source IDs) on fs.
func sourceFlags(fs *flag.FlagSet) *[]string {
	var sources []string
	add := func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sources = append(sources, s)
			}
		}
		return nil
	}
	fs.Func("s", "source IDs (repeated or comma-separated)", add)
	fs.Func("source", "same as -s", add)
	return &sources
}

// unsupported are DM's dmctl commands that Tributary does not have, and why.
var unsupported = map[string]string{
	"start-relay":  "relay log is not supported (enable-relay: false)",
	"stop-relay":   "relay log is not supported (enable-relay: false)",
	"pause-relay":  "relay log is not supported (enable-relay: false)",
	"resume-relay": "relay log is not supported (enable-relay: false)",
	"purge-relay":  "relay log is not supported (enable-relay: false)",
	"validation":   "continuous data validation is not supported",
	"update-task":  "stop-task, then start-task with the changed file (the checkpoint is kept)",
}

func call(ctx context.Context, c pb.MasterClient, cmd string, args []string, stderr io.Writer) (proto.Message, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if cmd == "operate-schema" {
		return nil, usageError("operate-schema is DM's name before 6.0: use binlog-schema list|update|delete TASK DB TABLE [SCHEMA-FILE] -s SOURCE")
	}
	if why, ok := unsupported[cmd]; ok {
		return nil, usageError(fmt.Sprintf("%s is a DM command Tributary does not support yet: %s", cmd, why))
	}
	switch cmd {
	case "operate-source":
		sources := sourceFlags(fs)
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) == 0 {
			return nil, usageError("operate-source needs create, stop or show")
		}
		req := &pb.OperateSourceRequest{Op: pos[0]}
		switch pos[0] {
		case "create":
			if len(pos) < 2 {
				return nil, usageError("operate-source create needs source files")
			}
			for _, f := range pos[1:] {
				data, err := os.ReadFile(f)
				if err != nil {
					return nil, err
				}
				if _, err := config.ParseSource(f, data); err != nil {
					return nil, err
				}
				req.Config = append(req.Config, string(data))
			}
		case "stop", "show":
			for _, a := range pos[1:] {
				if st, err := os.Stat(a); err == nil && !st.IsDir() {
					src, err := config.LoadSource(a)
					if err != nil {
						return nil, err
					}
					a = src.SourceID
				}
				req.SourceID = append(req.SourceID, a)
			}
			req.SourceID = append(req.SourceID, *sources...)
			if pos[0] == "stop" && len(req.SourceID) == 0 {
				return nil, usageError("operate-source stop needs source IDs or files")
			}
		default:
			return nil, usageError(fmt.Sprintf("operate-source: unknown operation %q", pos[0]))
		}
		return c.OperateSource(ctx, req)
	case "check-task", "start-task":
		removeMeta := fs.Bool("remove-meta", false, "remove the task's checkpoints and shard DDL locks before starting")
		sources := sourceFlags(fs)
		startTime := fs.String("start-time", "", "start-task: start each source without a checkpoint at the first event group at or after this time, "+
			"\"YYYY-MM-DD HH:MM:SS\" (or with a T) in the source's time zone; task-mode incremental only")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if *startTime != "" {
			if cmd == "check-task" {
				return nil, usageError("check-task --start-time is not supported yet: start-task --start-time finds every source's " +
					"position for the time, and refuses the time (starting nothing) when a source cannot serve it")
			}
			if _, err := starttime.Parse(*startTime); err != nil {
				return nil, usageError(err.Error())
			}
		}
		if len(pos) != 1 {
			return nil, usageError(cmd + " needs one task file")
		}
		data, err := os.ReadFile(pos[0])
		if err != nil {
			return nil, err
		}
		if _, err := config.ParseTask(pos[0], data); err != nil {
			return nil, err
		}
		if cmd == "check-task" {
			return c.CheckTask(ctx, &pb.CheckTaskRequest{Task: string(data)})
		}
		return c.StartTask(ctx, &pb.StartTaskRequest{Task: string(data), RemoveMeta: *removeMeta, Sources: *sources, StartTime: *startTime})
	case "stop-task", "pause-task", "resume-task":
		sources := sourceFlags(fs)
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) != 1 {
			return nil, usageError(cmd + " needs a task name or file")
		}
		name, err := taskName(pos[0])
		if err != nil {
			return nil, err
		}
		op := map[string]string{"stop-task": "Stop", "pause-task": "Pause", "resume-task": "Resume"}[cmd]
		return c.OperateTask(ctx, &pb.OperateTaskRequest{Op: op, Name: name, Sources: *sources})
	case "query-status":
		sources := sourceFlags(fs)
		more := fs.Bool("more", false, "without a task name: every source's subtasks in full, not DM's list of tasks")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) > 1 {
			return nil, usageError("query-status takes at most one task name")
		}
		req := &pb.QueryStatusListRequest{Sources: *sources}
		if len(pos) == 1 {
			if req.Name, err = taskName(pos[0]); err != nil {
				return nil, err
			}
		}
		resp, err := c.QueryStatus(ctx, req)
		if err != nil || req.Name != "" || len(req.Sources) > 0 || *more {
			return resp, err
		}
		return statusSummary{resp}, nil
	case "shard-ddl-lock":
		owner := fs.String("owner", "", "source that executes the DDLs (default: the lock's owner)")
		force := fs.Bool("force-remove", false, "remove the lock's keys without executing anything")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) > 0 && pos[0] == "unlock" {
			if len(pos) != 2 {
				return nil, usageError("shard-ddl-lock unlock needs one LOCK-ID (see shard-ddl-lock)")
			}
			return c.UnlockDDLLock(ctx, &pb.UnlockDDLLockRequest{ID: pos[1], ReplaceOwner: *owner, ForceRemove: *force})
		}
		if *owner != "" || *force {
			return nil, usageError("--owner and --force-remove go with shard-ddl-lock unlock")
		}
		if len(pos) > 1 {
			return nil, usageError("shard-ddl-lock takes at most one task name")
		}
		req := &pb.ShowDDLLocksRequest{}
		if len(pos) == 1 {
			req.Task = pos[0]
		}
		return c.ShowDDLLocks(ctx, req)
	case "binlog", "handle-error":
		var binlogPos, sources string
		fs.StringVar(&binlogPos, "b", "", "position of the binlog event, FILE:POS (default: the statement the subtask paused on)")
		fs.StringVar(&binlogPos, "binlog-pos", "", "same as -b")
		fs.StringVar(&sources, "s", "", "sources (comma-separated; default: every source of the task)")
		fs.StringVar(&sources, "source", "", "same as -s")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) < 2 {
			return nil, usageError(cmd + " needs an operation and a task: binlog skip|replace|revert|list TASK")
		}
		opArg, task := pos[0], pos[1]
		if cmd == "handle-error" { // DM's older form: handle-error TASK skip|replace|revert
			opArg, task = pos[1], pos[0]
		}
		ops := map[string]pb.ErrorOp{"skip": pb.ErrorOp_Skip, "replace": pb.ErrorOp_Replace, "revert": pb.ErrorOp_Revert, "list": pb.ErrorOp_List, "inject": pb.ErrorOp_Inject}
		op, ok := ops[opArg]
		if !ok {
			return nil, usageError(fmt.Sprintf("%s: unknown operation %q (skip, replace, revert or list)", cmd, opArg))
		}
		name, err := taskName(task)
		if err != nil {
			return nil, err
		}
		req := &pb.HandleErrorRequest{Op: op, Task: name, BinlogPos: binlogPos, Sqls: pos[2:]}
		if sources != "" {
			req.Sources = strings.Split(sources, ",")
		}
		return c.HandleError(ctx, req)
	case "binlog-schema":
		sources := sourceFlags(fs)
		flush := fs.Bool("flush", true, "update: write the checkpoint at once (always so: the subtask is paused)")
		syncFlag := fs.Bool("sync", true, "update: send the schema to the shard group (shard-mode optimistic only; nothing to send in pessimistic)")
		fromSource := fs.Bool("from-source", false, "update: use the upstream table's current definition")
		fromTarget := fs.Bool("from-target", false, "update: use the downstream target table's definition")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) < 4 {
			return nil, usageError("binlog-schema needs an operation, a task, a database and a table: binlog-schema list|update|delete TASK DB TABLE [SCHEMA-FILE] -s SOURCE")
		}
		ops := map[string]pb.SchemaOp{"list": pb.SchemaOp_GetSchema, "update": pb.SchemaOp_SetSchema, "delete": pb.SchemaOp_RemoveSchema}
		op, ok := ops[pos[0]]
		if !ok {
			return nil, usageError(fmt.Sprintf("binlog-schema: unknown operation %q (list, update or delete)", pos[0]))
		}
		name, err := taskName(pos[1])
		if err != nil {
			return nil, err
		}
		req := &pb.OperateSchemaRequest{Op: op, Task: name, Sources: *sources, Database: pos[2], Table: pos[3],
			Flush: *flush, Sync: *syncFlag, FromSource: *fromSource, FromTarget: *fromTarget}
		switch {
		case op != pb.SchemaOp_SetSchema && (len(pos) > 4 || *fromSource || *fromTarget):
			return nil, usageError(fmt.Sprintf("binlog-schema %s takes no schema file, --from-source or --from-target", pos[0]))
		case len(pos) > 5:
			return nil, usageError(fmt.Sprintf("binlog-schema update: unexpected arguments %q", pos[5:]))
		case len(pos) == 5:
			if *fromSource || *fromTarget {
				return nil, usageError("binlog-schema update: give a schema file, --from-source or --from-target, not more than one")
			}
			b, err := os.ReadFile(pos[4])
			if err != nil {
				return nil, usageError(fmt.Sprintf("binlog-schema update: schema file: %v", err))
			}
			req.Schema = string(b)
		case op == pb.SchemaOp_SetSchema && *fromSource == *fromTarget:
			return nil, usageError("binlog-schema update needs one of a schema file, --from-source and --from-target")
		}
		if op != pb.SchemaOp_GetSchema && len(req.Sources) == 0 {
			return nil, usageError(fmt.Sprintf("binlog-schema %s needs the source: -s SOURCE", pos[0]))
		}
		return c.OperateSchema(ctx, req)
	case "list-member":
		leader := fs.Bool("leader", false, "only the leader")
		master := fs.Bool("master", false, "only the masters")
		worker := fs.Bool("worker", false, "only the workers")
		names := fs.String("name", "", "only these members (comma-separated)")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) > 0 {
			return nil, usageError(fmt.Sprintf("list-member: unexpected arguments %q", pos))
		}
		req := &pb.ListMemberRequest{Leader: *leader, Master: *master, Worker: *worker}
		if *names != "" {
			req.Names = strings.Split(*names, ",")
		}
		return c.ListMember(ctx, req)
	case "transfer-source":
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) != 2 {
			return nil, usageError("transfer-source needs SOURCE-ID WORKER-NAME")
		}
		return c.TransferSource(ctx, &pb.TransferSourceRequest{Source: pos[0], Worker: pos[1]})
	case "offline-member":
		typ := fs.String("type", "", "master or worker")
		name := fs.String("name", "", "the member's name")
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) > 0 || *typ == "" || *name == "" {
			return nil, usageError("offline-member needs --type master|worker and --name NAME")
		}
		return c.OfflineMember(ctx, &pb.OfflineMemberRequest{Type: *typ, Name: *name})
	case "config", "get-config":
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) != 2 || (pos[0] != "task" && pos[0] != "source") {
			return nil, usageError(cmd + " needs task TASK-NAME or source SOURCE-ID")
		}
		name := pos[1]
		if pos[0] == "task" {
			if name, err = taskName(name); err != nil {
				return nil, err
			}
		}
		return c.GetConfig(ctx, &pb.GetConfigRequest{Type: pos[0], Name: name})
	case "encrypt":
		pos, err := parse(fs, args)
		if err != nil {
			return nil, err
		}
		if len(pos) != 1 {
			return nil, usageError("encrypt needs one plain text")
		}
		return c.Encrypt(ctx, &pb.EncryptRequest{Plaintext: pos[0]})
	default:
		return nil, usageError(fmt.Sprintf("unknown command %q", cmd))
	}
}
