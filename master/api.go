package master

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/internal/serve"
	pb "github.com/tributary-db/tributary/proto"
)

// OpenAPI is the OpenAPI 3 document of the HTTP API; the server answers its paths and the tests
// check every one of them against it.
//
//go:embed openapi.json
var OpenAPI []byte

//go:embed dashboard
var dashboardFS embed.FS

// HTTPHandlers are the master's HTTP paths, served on --master-addr beside gRPC: /metrics and Go's
// profiles under /debug/pprof/ (as DM's) always,
// the JSON API under /api/v1/ and the web page under /dashboard/ when openapi is true (DM's
// --openapi). With embedded etcd they go into etcd's UserHandlers; otherwise onto a mux.
func (s *Service) HTTPHandlers(openapi bool) map[string]http.Handler {
	h := map[string]http.Handler{"/metrics": promhttp.Handler()}
	maps.Copy(h, serve.Pprof())
	if !openapi {
		return h
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(OpenAPI)
	})
	api.HandleFunc("GET /api/v1/cluster/masters", s.apiMasters)
	api.HandleFunc("GET /api/v1/cluster/workers", s.apiWorkers)
	api.HandleFunc("GET /api/v1/sources", s.apiSources)
	api.HandleFunc("GET /api/v1/tasks", s.apiTasks)
	api.HandleFunc("GET /api/v1/tasks/{task_name}/status", s.apiTaskStatus)
	api.HandleFunc("GET /api/v1/shard-ddl-locks", s.apiLocks)
	api.HandleFunc("POST /api/v1/shard-ddl-locks/{lock_id}/unlock", s.apiUnlock)
	api.HandleFunc("POST /api/v1/tasks/{task_name}/start", s.apiTaskStartStop)
	api.HandleFunc("POST /api/v1/tasks/{task_name}/stop", s.apiTaskStartStop)
	api.HandleFunc("POST /api/v1/sources/{source_name}/transfer", s.apiTransfer) // DM names it {source-name}: a Go pattern name is an identifier
	api.HandleFunc("GET /api/v1/tasks/{task_name}/sources/{source_name}/schemas/{schema_name}/{table_name}", s.apiSchema)
	api.HandleFunc("PUT /api/v1/tasks/{task_name}/sources/{source_name}/schemas/{schema_name}/{table_name}", s.apiSchema)
	api.HandleFunc("DELETE /api/v1/tasks/{task_name}/sources/{source_name}/schemas/{schema_name}/{table_name}", s.apiSchema)
	api.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, errors.New("no such API path: "+r.Method+" "+r.URL.Path))
	})
	h["/api/v1/"] = api
	sub, _ := fs.Sub(dashboardFS, "dashboard")
	h["/dashboard/"] = http.StripPrefix("/dashboard/", http.FileServerFS(sub))
	h["/dashboard"] = http.RedirectHandler("/dashboard/", http.StatusMovedPermanently)
	return h
}

// Mux serves handlers on one http.ServeMux (for the address that is not etcd's).
func Mux(handlers map[string]http.Handler) *http.ServeMux {
	m := http.NewServeMux()
	for p, h := range handlers {
		m.Handle(p, h)
	}
	return m
}

// apiResponse is the list shape DM's OpenAPI answers with.
type apiList[T any] struct {
	Total int `json:"total"`
	Data  []T `json:"data"`
}

func list[T any](data []T) apiList[T] {
	if data == nil {
		data = []T{}
	}
	return apiList[T]{Total: len(data), Data: data}
}

func apiJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// decodeBody reads a request's JSON body (at most 1 MiB) into v, refusing fields v does not have.
// An empty body leaves v as it is when optional, and is an error otherwise.
func decodeBody(r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	if optional && len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// apiError answers DM's way: {"error_msg": ..., "error_code": ...}.
func apiError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error_msg": err.Error(), "error_code": status})
}

func apiContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 30*time.Second)
}

type apiMaster struct {
	Name       string   `json:"name"`
	Alive      bool     `json:"alive"`
	Leader     bool     `json:"leader"`
	Addr       string   `json:"addr"`
	ClientURLs []string `json:"client_urls"`
	PeerURLs   []string `json:"peer_urls"`
}

func (s *Service) apiMasters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	resp, _ := s.ListMember(ctx, &pb.ListMemberRequest{Leader: true, Master: true})
	var leader string
	var out []apiMaster
	for _, m := range resp.Members {
		if l := m.GetLeader(); l != nil {
			leader = l.Name
		}
	}
	for _, m := range resp.Members {
		mm := m.GetMaster()
		if mm == nil {
			continue
		}
		if mm.Msg != "" {
			apiError(w, http.StatusInternalServerError, errors.New(mm.Msg))
			return
		}
		for _, m := range mm.Masters {
			a := apiMaster{Name: m.Name, Alive: m.Alive, Leader: m.Name == leader, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs}
			if r, err := s.Client.Get(ctx, MembersPrefix+m.Name); err == nil && len(r.Kvs) > 0 {
				a.Addr = string(r.Kvs[0].Value)
			}
			out = append(out, a)
		}
	}
	apiJSON(w, list(out))
}

type apiWorker struct {
	Name        string `json:"name"`
	Addr        string `json:"addr"`
	BoundStage  string `json:"bound_stage"` // free, bound or offline
	BoundSource string `json:"bound_source_name"`
}

func (s *Service) apiWorkers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	resp, _ := s.ListMember(ctx, &pb.ListMemberRequest{Worker: true})
	var out []apiWorker
	for _, m := range resp.Members {
		wm := m.GetWorker()
		if wm == nil {
			continue
		}
		if wm.Msg != "" {
			apiError(w, http.StatusInternalServerError, errors.New(wm.Msg))
			return
		}
		for _, x := range wm.Workers {
			out = append(out, apiWorker{Name: x.Name, Addr: x.Addr, BoundStage: x.Stage, BoundSource: x.Source})
		}
	}
	apiJSON(w, list(out))
}

// apiSource is a source without its password.
type apiSource struct {
	SourceName string `json:"source_name"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	User       string `json:"user"`
	EnableGTID bool   `json:"enable_gtid"`
	Flavor     string `json:"flavor"`
	Worker     string `json:"worker_name"`
}

func (s *Service) apiSources(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	var out []apiSource
	for _, id := range st.SortedSources() {
		src := st.Sources[id].Parsed
		out = append(out, apiSource{SourceName: id, Host: src.From.Host, Port: src.From.Port, User: src.From.User,
			EnableGTID: src.EnableGTID, Flavor: src.Flavor, Worker: st.Bindings[id].Worker})
	}
	apiJSON(w, list(out))
}

type apiTask struct {
	Name       string          `json:"name"`
	Stage      string          `json:"stage"` // the task's desired stage (Running or Paused)
	TaskMode   string          `json:"task_mode"`
	ShardMode  string          `json:"shard_mode"`
	Sources    []string        `json:"source_name_list"`
	StatusList []apiTaskStatus `json:"status_list,omitempty"` // with ?with_status=true
}

// apiTaskStatus is one source's subtask, as query-status shows it.
type apiTaskStatus struct {
	Name                string         `json:"name"`
	SourceName          string         `json:"source_name"`
	WorkerName          string         `json:"worker_name"`
	Stage               string         `json:"stage"`
	Unit                string         `json:"unit"`
	UnresolvedDDLLockID string         `json:"unresolved_ddl_lock_id"`
	ErrorMsg            string         `json:"error_msg"`
	Sync                *apiSyncStatus `json:"sync_status,omitempty"`
}

type apiSyncStatus struct {
	MasterBinlog        string          `json:"master_binlog"`
	SyncerBinlog        string          `json:"syncer_binlog"`
	BlockingDDLs        []string        `json:"blocking_ddls"`
	UnresolvedGroups    []apiShardGroup `json:"unresolved_groups"`
	Synced              bool            `json:"synced"`
	SecondsBehindMaster int64           `json:"seconds_behind_master"`
	TotalEvents         int64           `json:"total_events"`
	PreparedXA          []apiPreparedXA `json:"prepared_xa"` // XA transactions waiting for their outcome
}

type apiPreparedXA struct {
	XID      string `json:"xid"`
	Position string `json:"position"`
	Seconds  int64  `json:"seconds"`
}

type apiShardGroup struct {
	Target   string   `json:"target"`
	DDLs     []string `json:"ddls"`
	Synced   []string `json:"synced"`
	Unsynced []string `json:"unsynced"`
}

func (s *Service) apiTasks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	withStatus := r.URL.Query().Get("with_status") == "true"
	var out []apiTask
	for _, t := range sortedTasks(st) {
		a := apiTask{Name: t.Name, Stage: t.Stage, Sources: t.Sources()}
		for _, src := range a.Sources {
			if t.StageOf(src) == ha.StagePaused {
				a.Stage = ha.StagePaused // DM's rule: a task with a paused subtask is Paused (pause-task -s)
			}
		}
		if cfg, err := t.Parse(); err == nil {
			a.TaskMode, a.ShardMode = cfg.TaskMode, cfg.ShardMode
		}
		if withStatus {
			if a.StatusList, err = s.taskStatus(ctx, t.Name); err != nil {
				apiError(w, http.StatusInternalServerError, err)
				return
			}
		}
		out = append(out, a)
	}
	apiJSON(w, list(out))
}

func (s *Service) apiTaskStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	out, err := s.taskStatus(ctx, r.PathValue("task_name"))
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	apiJSON(w, list(out))
}

func (s *Service) taskStatus(ctx context.Context, task string) ([]apiTaskStatus, error) {
	resp, err := s.QueryStatus(ctx, &pb.QueryStatusListRequest{Name: task})
	if err != nil {
		return nil, err
	}
	if !resp.Result {
		return nil, errors.New(resp.Msg)
	}
	var out []apiTaskStatus
	for _, src := range resp.Sources {
		if src == nil {
			continue
		}
		var source, worker string
		if src.SourceStatus != nil {
			source, worker = src.SourceStatus.Source, src.SourceStatus.Worker
		}
		if len(src.SubTaskStatus) == 0 {
			out = append(out, apiTaskStatus{Name: task, SourceName: source, WorkerName: worker, ErrorMsg: src.Msg})
		}
		for _, sub := range src.SubTaskStatus {
			a := apiTaskStatus{Name: sub.Name, SourceName: source, WorkerName: worker, Stage: sub.Stage, Unit: sub.Unit,
				UnresolvedDDLLockID: sub.UnresolvedDDLLockID, ErrorMsg: src.Msg}
			if res := sub.Result; res != nil {
				var msgs []string
				for _, e := range res.Errors {
					msgs = append(msgs, strings.TrimSpace(e.Message+" "+e.RawCause))
				}
				a.ErrorMsg = strings.Join(msgs, "; ")
			}
			if sy := sub.Sync; sy != nil {
				as := &apiSyncStatus{MasterBinlog: sy.MasterBinlog, SyncerBinlog: sy.SyncerBinlog, BlockingDDLs: nonNil(sy.BlockingDDLs),
					UnresolvedGroups: []apiShardGroup{}, Synced: sy.Synced, SecondsBehindMaster: sy.SecondsBehindMaster, TotalEvents: sy.TotalEvents}
				as.PreparedXA = []apiPreparedXA{}
				for _, x := range sy.PreparedXA {
					as.PreparedXA = append(as.PreparedXA, apiPreparedXA{XID: x.Xid, Position: x.Position, Seconds: x.Seconds})
				}
				for _, g := range sy.UnresolvedGroups {
					as.UnresolvedGroups = append(as.UnresolvedGroups, apiShardGroup{Target: g.Target, DDLs: nonNil(g.DDLs), Synced: nonNil(g.Synced), Unsynced: nonNil(g.Unsynced)})
				}
				a.Sync = as
			}
			out = append(out, a)
		}
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// apiLock is a shard DDL lock with what the dashboard shows of it.
type apiLock struct {
	ID        string         `json:"id"`
	Task      string         `json:"task"`
	Target    string         `json:"target"`
	Mode      string         `json:"mode"`
	Owner     string         `json:"owner"`
	DDLs      []string       `json:"ddls"`
	Stage     string         `json:"stage"` // waiting, conflict, executing, skipping or unlocked
	Synced    []string       `json:"synced"`
	Unsynced  []string       `json:"unsynced"`
	Conflict  []apiSourceDDL `json:"conflict"`
	FirstSeen time.Time      `json:"first_seen"`
	AgeSecond float64        `json:"age_seconds"`
	// Tables are each source's shard group of the lock's target, from query-status.
	Tables []apiLockTables `json:"tables"`
}

type apiSourceDDL struct {
	Source string   `json:"source"`
	DDLs   []string `json:"ddls"`
}

type apiLockTables struct {
	Source   string   `json:"source"`
	DDLs     []string `json:"ddls"`
	Synced   []string `json:"synced"`
	Unsynced []string `json:"unsynced"`
}

func (s *Service) apiLocks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	task := r.URL.Query().Get("task")
	resp, err := s.ShowDDLLocks(ctx, &pb.ShowDDLLocksRequest{Task: task})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	if !resp.Result && resp.Msg != "no DDL lock exists" {
		apiError(w, http.StatusInternalServerError, errors.New(resp.Msg))
		return
	}
	keys := make([]lockKey, len(resp.Locks))
	for i, l := range resp.Locks {
		keys[i] = lockKey{l.ID, l.Task, l.Stage}
	}
	first := locksSeen.observe(keys, task == "")
	statuses := map[string][]apiTaskStatus{}
	now := time.Now()
	out := []apiLock{}
	for _, l := range resp.Locks {
		a := apiLock{ID: l.ID, Task: l.Task, Target: strings.TrimPrefix(l.ID, l.Task+"-"), Mode: l.Mode, Owner: l.Owner,
			DDLs: nonNil(l.DDLs), Stage: l.Stage, Synced: nonNil(l.Synced), Unsynced: nonNil(l.Unsynced), Conflict: []apiSourceDDL{},
			FirstSeen: first[l.ID], AgeSecond: now.Sub(first[l.ID]).Seconds(), Tables: []apiLockTables{}}
		for _, c := range l.Conflict {
			a.Conflict = append(a.Conflict, apiSourceDDL{Source: c.Source, DDLs: nonNil(c.DDLs)})
		}
		st, ok := statuses[l.Task]
		if !ok {
			st, err = s.taskStatus(ctx, l.Task)
			if err != nil {
				s.logger().Warn("HTTP API: task status for a lock's tables", zap.String("lock", l.ID), zap.Error(err))
			}
			statuses[l.Task] = st
		}
		for _, sub := range st {
			if sub.Sync == nil {
				continue
			}
			for _, g := range sub.Sync.UnresolvedGroups {
				if g.Target == a.Target {
					a.Tables = append(a.Tables, apiLockTables{Source: sub.SourceName, DDLs: g.DDLs, Synced: g.Synced, Unsynced: g.Unsynced})
				}
			}
		}
		sort.Slice(a.Tables, func(i, j int) bool { return a.Tables[i].Source < a.Tables[j].Source })
		out = append(out, a)
	}
	apiJSON(w, list(out))
}

// apiUnlockRequest is the body of an unlock: DM's shard-ddl-lock unlock [--owner] [--force-remove].
type apiUnlockRequest struct {
	Owner       string `json:"owner"`
	ForceRemove bool   `json:"force_remove"`
}

type apiUnlockResponse struct {
	Result   bool           `json:"result"`
	Msg      string         `json:"msg"`
	Executed []apiSourceDDL `json:"executed"`
	Skipped  []apiSourceDDL `json:"skipped"`
}

func (s *Service) apiUnlock(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	var req apiUnlockRequest
	if err := decodeBody(r, &req, true); err != nil {
		apiError(w, http.StatusBadRequest, errors.New("unlock body: "+err.Error()))
		return
	}
	id := r.PathValue("lock_id")
	resp, err := s.UnlockDDLLock(ctx, &pb.UnlockDDLLockRequest{ID: id, ReplaceOwner: req.Owner, ForceRemove: req.ForceRemove})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	out := apiUnlockResponse{Result: resp.Result, Msg: resp.Msg, Executed: []apiSourceDDL{}, Skipped: []apiSourceDDL{}}
	for _, e := range resp.Executed {
		out.Executed = append(out.Executed, apiSourceDDL{e.Source, nonNil(e.DDLs)})
	}
	for _, e := range resp.Skipped {
		out.Skipped = append(out.Skipped, apiSourceDDL{e.Source, nonNil(e.DDLs)})
	}
	s.logger().Info("HTTP API unlock", zap.String("lock", id), zap.String("owner", req.Owner), zap.Bool("force-remove", req.ForceRemove),
		zap.Bool("result", resp.Result), zap.String("msg", resp.Msg))
	if !resp.Result {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(out)
		return
	}
	apiJSON(w, out)
}

// apiTransferRequest is DM's WorkerNameRequest: the body of POST /sources/{source-name}/transfer.
type apiTransferRequest struct {
	WorkerName string `json:"worker_name"`
}

type apiResult struct {
	Result bool   `json:"result"`
	Msg    string `json:"msg"`
}

// apiTaskRequest is the body of DM's POST /api/v1/tasks/{task-name}/start and /stop (both optional).
type apiTaskRequest struct {
	SourceNameList       []string `json:"source_name_list"`
	RemoveMeta           bool     `json:"remove_meta"`
	StartTime            string   `json:"start_time"`
	SafeModeTimeDuration string   `json:"safe_mode_time_duration"`
	TimeoutDuration      string   `json:"timeout_duration"`
}

// apiTaskStartStop is DM's OpenAPI start and stop of a task that exists: stop keeps the task and its
// checkpoints so that start goes on from them (DM's "Stopped" stage), which is pause-task and
// resume-task, for the sources of source_name_list or all of them. A task is created from its file
// with dmctl start-task (with --start-time and --remove-meta there); this API has no task files, so
// start_time and remove_meta are refused with the way to do it, as is safe_mode_time_duration.
// 200 {"result": true, ...} with each source's answer; 400 with the reason when refused; 404 for an
// unknown task.
func (s *Service) apiTaskStartStop(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	task := r.PathValue("task_name")
	op, verb := "Resume", "start"
	if strings.HasSuffix(r.URL.Path, "/stop") {
		op, verb = "Pause", "stop"
	}
	var req apiTaskRequest
	err := decodeBody(r, &req, true)
	switch {
	case err != nil:
		apiError(w, http.StatusBadRequest, fmt.Errorf("task %s body: %w", task, err))
		return
	case op == "Resume" && (req.StartTime != "" || req.RemoveMeta):
		apiError(w, http.StatusBadRequest, fmt.Errorf("start_time and remove_meta apply when a task is started from its file: "+
			"dmctl stop-task %s, then dmctl start-task [--remove-meta] [--start-time \"YYYY-MM-DD HH:MM:SS\"] TASK-FILE", task))
		return
	case req.SafeModeTimeDuration != "":
		apiError(w, http.StatusBadRequest, errors.New("safe_mode_time_duration is not supported: set the task's syncers safe-mode instead"))
		return
	}
	st, err := ha.Load(ctx, s.Client)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	if _, ok := st.Tasks[task]; !ok {
		apiError(w, http.StatusNotFound, errNoTask(task))
		return
	}
	resp, err := s.OperateTask(ctx, &pb.OperateTaskRequest{Op: op, Name: task, Sources: req.SourceNameList})
	if err == nil && !resp.Result {
		err = errors.New(resp.Msg)
	}
	s.logger().Info("HTTP API task "+verb, zap.String("task", task),
		zap.Strings("sources", req.SourceNameList), zap.Bool("result", err == nil))
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	apiJSON(w, resp)
}

// apiTransfer is DM's transfer-source: 200 {"result": true, "msg": ""} when the source moved (or was
// already there), 400 with the reason when it is refused.
func (s *Service) apiTransfer(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	var req apiTransferRequest
	err := decodeBody(r, &req, false)
	if err == nil && req.WorkerName == "" {
		err = errors.New(`"worker_name" is missing: give the name of the free worker to bind the source to`)
	}
	source := r.PathValue("source_name")
	if err != nil {
		resp := &pb.TransferSourceResponse{Msg: "transfer body: " + err.Error()}
		s.answerTransfer(w, source, req, resp)
		return
	}
	resp, err := s.TransferSource(ctx, &pb.TransferSourceRequest{Source: source, Worker: req.WorkerName})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	s.answerTransfer(w, source, req, resp)
}

// answerTransfer writes transfer-source's answer: 200 when it holds, 400 with the reason otherwise.
func (s *Service) answerTransfer(w http.ResponseWriter, source string, req apiTransferRequest, resp *pb.TransferSourceResponse) {
	s.logger().Info("HTTP API transfer-source", zap.String("source", source), zap.String("worker", req.WorkerName),
		zap.Bool("result", resp.Result), zap.String("msg", resp.Msg))
	out := apiResult{Result: resp.Result, Msg: resp.Msg}
	if !resp.Result {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(out)
		return
	}
	apiJSON(w, out)
}

// apiTableSchema is DM's answer to GET .../schemas/{schema}/{table}: the tracked CREATE TABLE.
type apiTableSchema struct {
	SchemaName      string `json:"schema_name"`
	TableName       string `json:"table_name"`
	SchemaCreateSQL string `json:"schema_create_sql"`
}

// apiSchemaRequest is DM's body of PUT .../schemas/{schema}/{table}.
type apiSchemaRequest struct {
	SQLContent string `json:"sql_content"`
	Flush      *bool  `json:"flush"`
	Sync       *bool  `json:"sync"`
	FromSource bool   `json:"from_source"`
	FromTarget bool   `json:"from_target"`
}

// apiSchema is binlog-schema list (GET), update (PUT) and delete (DELETE) of one source's table.
func (s *Service) apiSchema(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := apiContext(r)
	defer cancel()
	req := &pb.OperateSchemaRequest{Task: r.PathValue("task_name"), Sources: []string{r.PathValue("source_name")},
		Database: r.PathValue("schema_name"), Table: r.PathValue("table_name")}
	switch r.Method {
	case http.MethodGet:
		req.Op = pb.SchemaOp_GetSchema
	case http.MethodDelete:
		req.Op = pb.SchemaOp_RemoveSchema
	case http.MethodPut:
		req.Op = pb.SchemaOp_SetSchema
		var body apiSchemaRequest
		if err := decodeBody(r, &body, false); err != nil {
			apiError(w, http.StatusBadRequest, errors.New("schema body: "+err.Error()))
			return
		}
		req.Schema, req.FromSource, req.FromTarget = body.SQLContent, body.FromSource, body.FromTarget
		req.Flush, req.Sync = body.Flush == nil || *body.Flush, body.Sync == nil || *body.Sync
	}
	resp, err := s.OperateSchema(ctx, req)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	msg := resp.Msg
	if len(resp.Sources) == 1 {
		msg = resp.Sources[0].Msg
	}
	s.logger().Info("HTTP API binlog-schema", zap.String("op", r.Method), zap.String("task", req.Task), zap.Strings("sources", req.Sources),
		zap.String("table", req.Database+"."+req.Table), zap.Bool("result", resp.Result))
	if !resp.Result {
		apiError(w, http.StatusBadRequest, errors.New(msg))
		return
	}
	if r.Method == http.MethodGet {
		apiJSON(w, apiTableSchema{SchemaName: req.Database, TableName: req.Table, SchemaCreateSQL: msg})
		return
	}
	apiJSON(w, map[string]any{"result": true, "msg": msg})
}
