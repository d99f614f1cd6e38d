// The fidelity tests' servers and syncers (fidelity_test.go).

package syncer

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// fidEnv is the servers every seed shares: two upstream sources, one downstream, etcd with a
// coordinator.
type fidEnv struct {
	t        testing.TB
	ups      []*mariadbtest.Server
	upDBs    []*sql.DB
	down     *mariadbtest.Server
	downDB   *sql.DB
	syncDB   *sql.DB
	cli      *clientv3.Client
	layout   pessimist.Layout
	serverID uint32
}

// openFid opens a pool whose sessions are in UTC and utf8mb4, as the literals of the generator are.
func openFid(t testing.TB, port int) *sql.DB {
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?interpolateParams=true&charset=utf8mb4&time_zone=%%27%%2B00%%3A00%%27&maxAllowedPacket=0", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newFidEnv(t *testing.T) *fidEnv {
	e := &fidEnv{t: t, serverID: 20000}
	for i := 0; i < 2; i++ {
		s := mariadbtest.Start(t)
		e.ups, e.upDBs = append(e.ups, s), append(e.upDBs, openFid(t, s.Port))
	}
	e.down = mariadbtest.Start(t)
	e.downDB = openFid(t, e.down.Port)
	if os.Getenv("TRIBUTARY_FIDELITY_GENERAL_LOG") != "" {
		e.down.Exec(t, e.downDB, "SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1")
	}
	e.syncDB = workerDB(t, e.down.Port, nil, dbutil.MultiStatements) // as a dm-worker's
	e.cli = etcdtest.Client(t)
	e.layout = pessimist.NewLayout(fmt.Sprintf("/fidelity/%s/%d/", t.Name(), time.Now().UnixNano()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	coord := pessimist.NewCoordinator(e.cli, e.layout)
	go func() { defer close(done); coord.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// fidSyncers are the two syncers of one task. A syncer stopped by a deadlock or a lock wait timeout
// downstream is started again from its checkpoint, as a worker resumes a subtask after an error.
type fidSyncers struct {
	e              *fidEnv
	t              testing.TB
	task           string
	router         *router.Router
	batch, workers int
	runs           []*fidRun
	restarts       []string
	err            error
	epoch          int64
}

// nextEpoch is the binding epoch of a new syncer: each start is a new binding.
func (fs *fidSyncers) nextEpoch() int64 {
	fs.epoch++
	return fs.epoch
}

// restart stops syncer i and starts it again from its checkpoint. What Run returns once stopped is
// not its failure (a flush cut short returns sql.ErrTxDone rather than the context's error).
func (fs *fidSyncers) restart(i int) {
	if fs.failed() != nil {
		return
	}
	fs.runs[i].stop()
	<-fs.runs[i].errc
	fs.startOne(i)
}

type fidRun struct {
	stop func()
	errc chan error
}

// start runs the task's syncers (s1, s2) until stop.
func (e *fidEnv) start(t testing.TB, task string, router *router.Router, batch, workers int) *fidSyncers {
	if err := pessimist.PutTaskSources(context.Background(), e.cli, e.layout, task, []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	fs := &fidSyncers{e: e, t: t, task: task, router: router, batch: batch, workers: workers, runs: make([]*fidRun, len(e.ups))}
	for i := range e.ups {
		fs.startOne(i)
	}
	return fs
}

func (fs *fidSyncers) startOne(i int) {
	e := fs.e
	src := fmt.Sprintf("s%d", i+1)
	e.serverID++
	s := NewSyncer(SyncerConfig{Task: fs.task, Source: src, Host: "127.0.0.1", Port: uint16(e.ups[i].Port), User: "root",
		ServerID: e.serverID, Router: fs.router, Downstream: e.syncDB, GroupStatements: true, MetaSchema: "dm_meta",
		Agent: pessimist.NewAgent(e.cli, e.layout, fs.task, src, nil), BatchRows: fs.batch, WorkerCount: fs.workers,
		Log: testLogger(), Epoch: fs.nextEpoch()})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); errc <- s.Run(ctx) }()
	stop := func() { cancel(); <-done }
	fs.t.Cleanup(stop)
	fs.runs[i] = &fidRun{stop: stop, errc: errc}
	select {
	case <-s.Started():
	case err := <-errc:
		fs.t.Fatalf("syncer %s of task %s did not start: %v", src, fs.task, err)
	}
}

// failed returns the first error a syncer stopped with, if any; syncers stopped by a retryable error
// are started again.
func (fs *fidSyncers) failed() error {
	for i, r := range fs.runs {
		select {
		case err := <-r.errc:
			if fs.err != nil {
				continue
			}
			if dbutil.Retryable(err) { // stops a syncer; its worker resumes it
				fs.restarts = append(fs.restarts, fmt.Sprintf("s%d: %v", i+1, err))
				fs.startOne(i)
				continue
			}
			fs.err = fmt.Errorf("syncer s%d stopped: %w", i+1, err)
		default:
		}
	}
	return fs.err
}

func (fs *fidSyncers) stop() {
	for _, r := range fs.runs {
		r.stop()
	}
}

// cleanup removes a finished task: its etcd keys, checkpoint, and the given databases.
func (e *fidEnv) cleanup(t testing.TB, task string, upDBs []string, downDB string) {
	ctx := context.Background()
	_ = pessimist.DeleteTask(ctx, e.cli, e.layout, task)
	if err := meta.Remove(ctx, e.downDB, "dm_meta", task); err != nil {
		t.Errorf("remove checkpoint of %s: %v", task, err)
	}
	for i, db := range upDBs {
		if _, err := e.upDBs[i%len(e.upDBs)].Exec("DROP DATABASE IF EXISTS " + vocab.Quote(db)); err != nil {
			t.Errorf("drop %s: %v", db, err)
		}
	}
	if _, err := e.downDB.Exec("DROP DATABASE IF EXISTS " + vocab.Quote(downDB)); err != nil {
		t.Errorf("drop %s: %v", downDB, err)
	}
}
