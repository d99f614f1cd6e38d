package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestReadErrorsPause: a binlog read a retry cannot fix pauses the syncer with a ReadError that says
// what was asked for, what the source has and the way out: the resume position purged from the
// source; the source user without REPLICATION SLAVE. Each is met again on a retry (the same error).
func TestReadErrorsPause(t *testing.T) {
	c := newCluster(t)
	stop := c.startSyncer(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11))
	c.waitRow(10)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Restarted under another binlog base name: the resume file is not in its index.
	c.ups[0].Stop()
	if err := c.ups[0].Boot("--log-bin=" + c.ups[0].BinlogDir() + "/pid-bin"); err != nil {
		t.Fatal(err)
	}
	stop = c.startSyncer(0)
	var re *ReadError
	err := c.failure(0)
	first, last := binaryLogs(t, c.upDBs[0]) // the names the server chose
	if !errors.As(err, &re) || re.Class != readPosition || !strings.Contains(err.Error(), "binlog files "+first+" to "+last) {
		t.Fatalf("resume after a restart under another binlog name: %v", err)
	}
	stop()
	c.ups[0].Stop()
	if err := c.ups[0].Boot("--log-bin=" + c.ups[0].BinlogDir() + "/mysql-bin"); err != nil {
		t.Fatal(err)
	}

	// Purged.
	c.up(0, "FLUSH BINARY LOGS", insert("db_1.t_1", 11, 21), "FLUSH BINARY LOGS", "PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
	first, last = binaryLogs(t, c.upDBs[0])
	// The resume position is in the file the syncer started in: nothing rotated the binlog before the
	// restarts above.
	resume := c.startPosition(0).File
	if resume >= first { // one base name: the numbered names sort as the files do
		t.Fatalf("%s was not purged: the source has %s to %s", resume, first, last)
	}
	c.startSyncer(0)
	err = c.failure(0)
	if !errors.As(err, &re) || re.Class != readPosition || re.Code != 1236 || !sink.IsPermanent(err) {
		t.Fatalf("resume from a purged binlog: %v", err)
	}
	for _, want := range []string{"(" + resume + ", ", "binlog files " + first + " to " + last, "gtid_binlog_pos 0-", "start-task --remove-meta", "purged"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q:\n%v", want, err)
		}
	}
}

// binaryLogs are the first and last of the source's binlog files (SHOW BINARY LOGS).
func binaryLogs(t *testing.T, db *sql.DB) (first, last string) {
	t.Helper()
	files, err := dbutil.BinaryLogs(context.Background(), db)
	if err != nil || len(files) == 0 {
		t.Fatalf("SHOW BINARY LOGS: %v %v", files, err)
	}
	return files[0].Name, files[len(files)-1].Name
}

// TestReadRetryShowsTheFailure: while the source is down the syncer retries with a backoff that grows
// (2 s, 4 s, ...) and its status shows the last failure and the attempt count; once the source is back
// and the binlog moves, the status is clear again and every row arrives.
func TestReadRetryShowsTheFailure(t *testing.T) {
	c := newCluster(t)
	_, s := c.startSyncerGet(0)
	c.startSyncer(1)
	c.up(0, insert("db_1.t_1", 1, 11))
	c.waitRow(10)
	c.ups[0].Stop()
	wait.Eventually(t, 30*time.Second, func() bool { st := s.Status(); return st.ReadErr != nil && st.ReadAttempt >= 2 },
		func() string { st := s.Status(); return "no second attempt shown: " + errString(st.ReadErr) })
	if err := c.ups[0].Boot(); err != nil {
		t.Fatal(err)
	}
	c.up(0, insert("db_1.t_1", 11, 21))
	c.waitRow(20)
	wait.Eventually(t, 30*time.Second, func() bool { return s.Status().ReadErr == nil },
		func() string { return "the failure is still shown: " + errString(s.Status().ReadErr) })
}

// runAs runs a syncer of source 1 as user with serverID, from the source's current position, and
// returns its Run error.
func (c *cluster) runAs(user, password string, serverID uint32) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSyncer(SyncerConfig{Start: c.binlogEnd(0), Task: "other", Source: "s1", Host: "127.0.0.1", Port: uint16(c.ups[0].Port),
		User: user, Password: password, ServerID: serverID, Router: c.router, Downstream: c.syncDB, DDLDownstream: c.ddlDB, GroupStatements: true,
		MetaSchema: "dm_meta_" + user, Agent: pessimist.NewAgent(c.cli, c.layout, "other", "s1", nil), Epoch: 1, Log: c.logger()})
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	c.t.Cleanup(cancel)
	return errc
}

// TestReadErrorsOfTheConnection: a source user without REPLICATION SLAVE, and a second replica that
// takes a syncer's server-id, pause with a ReadError naming the way out.
func TestReadErrorsOfTheConnection(t *testing.T) {
	c := newCluster(t)
	c.up(0, "CREATE USER norepl IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO norepl")
	var re *ReadError
	select {
	case err := <-c.runAs("norepl", "pw", 9100):
		if !errors.As(err, &re) || re.Class != readAccess || !strings.Contains(err.Error(), "GRANT REPLICATION SLAVE") {
			t.Fatalf("a user without REPLICATION SLAVE: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a user without REPLICATION SLAVE is retried")
	}
	c.startSyncer(0)
	c.up(0, insert("db_1.t_1", 1, 3))
	c.waitRow(2)
	other := c.runAs("root", "", 9000) // syncer 0's server-id
	c.up(0, insert("db_1.t_1", 3, 5))
	var err error
	select {
	case err = <-other:
	case err = <-c.failures(0):
	case <-time.After(60 * time.Second):
		t.Fatal("two replicas with one server-id read on")
	}
	if !errors.As(err, &re) || re.Class != readServerID || !strings.Contains(err.Error(), "server-id 9000") {
		t.Fatalf("a second replica with the server-id: %v", err)
	}
}

func TestClassifyRead(t *testing.T) {
	for _, c := range []struct {
		err   error
		class readClass
	}{
		{&gmysql.MyError{Code: 1236, Message: "Could not find first log file name in binary log index file"}, readPosition},
		{fmt.Errorf("start: %w", &gmysql.MyError{Code: 1236, Message: "A slave with the same server_uuid/server_id as this slave has connected to the master"}), readServerID},
		{&gmysql.MyError{Code: 1045, Message: "Access denied"}, readAccess},
		{&gmysql.MyError{Code: 1227, Message: "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s)"}, readAccess},
		{&gmysql.MyError{Code: 1047, Message: "Unknown command"}, readFlavor},
		{&gmysql.MyError{Code: 1927, Message: "Connection was killed"}, ""},
		{io.ErrUnexpectedEOF, ""},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), ""},
	} {
		if _, got := classifyRead(c.err); got != c.class {
			t.Errorf("%v: class %q, want %q", c.err, got, c.class)
		}
	}
}

// TestReadRetryBackoff: the wait doubles from 2 s to 30 s across failures; a heartbeat or the fake
// rotate of a new dump shows the source answers (the failure is no longer shown) but does not start
// the backoff again; an event of the binlog does.
func TestReadRetryBackoff(t *testing.T) {
	var r readRetry
	var waits []time.Duration
	for range 6 {
		_, w := r.failed(io.ErrUnexpectedEOF)
		waits = append(waits, w)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if _, _, _, ok := r.failing(); !ok {
		t.Fatal("the failure is not shown")
	}
	r.read(&replication.BinlogEvent{Header: &replication.EventHeader{EventType: replication.HEARTBEAT_EVENT, LogPos: 1234}})
	if _, _, _, ok := r.failing(); ok {
		t.Fatal("the failure is still shown after the source answered")
	}
	if n, w := r.failed(io.ErrUnexpectedEOF); n != 7 || w != 30*time.Second {
		t.Fatalf("after a heartbeat: attempt %d, wait %v: the backoff started again", n, w)
	}
	r.read(&replication.BinlogEvent{Header: &replication.EventHeader{EventType: replication.QUERY_EVENT, LogPos: 2000}})
	if n, w := r.failed(io.ErrUnexpectedEOF); n != 1 || w != 2*time.Second {
		t.Fatalf("after the binlog moved: attempt %d, wait %v", n, w)
	}
}
