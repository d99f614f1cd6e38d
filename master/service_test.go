package master

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/tests/framework/etcdtest"
	"github.com/tributary-db/tributary/tests/framework/wait"
)

// TestServiceOverGRPC: dmctl's two lock calls over real gRPC against a leader master: a lock shown in
// DM's shape, a conflict with both DDLs, force-remove, and "no DDL lock exists".
func TestServiceOverGRPC(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := fmt.Sprintf("/test/%s/%d/", t.Name(), time.Now().UnixNano())
	layout := pessimist.NewLayout(base + "pessimist/")
	if err := pessimist.PutTaskSources(ctx, cli, layout, "test", []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	svc := &Service{}
	l := NewLeadership(cli, "m1", base+"election", 5, nil)
	l.Run = LeaderRun(cli, layout, svc, nil)
	// The campaign ends with ctx (the deferred cancel); wait for it after (a cleanup runs after the
	// defers), so that its resign is not on its way when etcd stops.
	var campaign sync.WaitGroup
	t.Cleanup(campaign.Wait)
	campaign.Go(func() { l.Campaign(ctx) })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterMasterServer(srv, svc)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewMasterClient(conn)

	show := func() *pb.ShowDDLLocksResponse {
		resp, err := client.ShowDDLLocks(ctx, &pb.ShowDDLLocksRequest{Task: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var resp *pb.ShowDDLLocksResponse
	wait.Eventually(t, 10*time.Second, func() bool { resp = show(); return resp.Result },
		func() string { return fmt.Sprintf("master never served locks: %+v", resp) })
	if resp.Msg != "no DDL lock exists" || len(resp.Locks) != 0 {
		t.Fatalf("empty: %+v", resp)
	}
	a1 := pessimist.NewAgent(cli, layout, "test", "s1", nil)
	a2 := pessimist.NewAgent(cli, layout, "test", "s2", nil)
	if _, err := a1.PutInfo(ctx, "`shardddl`.`tb`", []string{"ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` INT"}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { return len(show().Locks) != 0 }, func() string { return "lock never shown" })
	lk := show().Locks[0]
	if lk.ID != "test-`shardddl`.`tb`" || lk.Mode != "pessimistic" || lk.Owner != "s2" || // the missing source, whose info will complete the lock, runs it
		strings.Join(lk.Synced, ",") != "s1" || strings.Join(lk.Unsynced, ",") != "s2" {
		t.Fatalf("lock %+v", lk)
	}
	if _, err := a2.PutInfo(ctx, "`shardddl`.`tb`", []string{"ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` FLOAT"}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { return show().Locks[0].Stage == "conflict" }, func() string { return "conflict never shown" })
	if c := show().Locks[0].Conflict; len(c) != 2 || !strings.Contains(c[1].DDLs[0], "FLOAT") {
		t.Fatalf("conflict %+v", c)
	}
	u, err := client.UnlockDDLLock(ctx, &pb.UnlockDDLLockRequest{ID: lk.ID})
	// DM's semantics: the owner's DDLs run, the other source skips its own; the answer says so.
	if err != nil || !u.Result || len(u.Executed) != 1 || u.Executed[0].Source != "s1" || len(u.Skipped) != 1 ||
		u.Skipped[0].Source != "s2" || !strings.Contains(u.Skipped[0].DDLs[0], "FLOAT") {
		t.Fatalf("plain unlock of a conflict: %+v %v", u, err)
	}
	u, err = client.UnlockDDLLock(ctx, &pb.UnlockDDLLockRequest{ID: lk.ID, ForceRemove: true})
	if err != nil || !u.Result {
		t.Fatalf("force-remove: %+v %v", u, err)
	}
	wait.Eventually(t, 10*time.Second, func() bool { return len(show().Locks) == 0 }, func() string { return "lock still shown after force-remove" })
}
