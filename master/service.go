package master

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
)

// Service is the gRPC Master service dmctl calls. Lock queries and unlocks go to the coordinator,
// which exists only on the leader; a follower forwards them to the leader, so dmctl may be given any
// master.
type Service struct {
	pb.UnimplementedMasterServer
	lead atomic.Pointer[leaderState]

	// Layout is where the pessimist keys live (pessimist.NewLayout("") when zero).
	Layout pessimist.Layout
	Log    *zap.Logger

	// For forwarding (optional): the etcd client, the election prefix and this master's name.
	Client   *clientv3.Client
	Election string
	Name     string

	// PasswordKey encrypts the passwords of the source and task files stored in etcd and answers
	// dmctl encrypt (master/encrypt.go); nil: passwords are stored as given.
	PasswordKey *config.Key
	// TLS is the client side of the cluster's TLS, for the connections to the leader and to the
	// workers; nil: no TLS.
	TLS *tls.Config

	// MaxTxnOps is the most operations the pessimist coordinator puts in one etcd transaction (0:
	// pessimist.DefaultMaxTxnOps, etcd's own default limit).
	MaxTxnOps int

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// MembersPrefix is where each master records the address dmctl and the other masters reach it at.
const MembersPrefix = "/tributary/master/members/"

// RegisterMember records a master's advertised address.
func RegisterMember(ctx context.Context, cli *clientv3.Client, name, addr string) error {
	_, err := cli.Put(ctx, MembersPrefix+name, addr)
	return err
}

// leaderClient returns a client of the leader master, for forwarding.
func (s *Service) leaderClient(ctx context.Context) (pb.MasterClient, error) {
	if s.Client == nil {
		return nil, errors.New("this master is not the leader")
	}
	leader, err := Leader(ctx, s.Client, s.Election)
	if err != nil {
		return nil, fmt.Errorf("find the leader: %w", err)
	}
	if leader == "" || leader == s.Name {
		return nil, errors.New("no leader elected yet; try again")
	}
	resp, err := s.Client.Get(ctx, MembersPrefix+leader)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("address of leader %s unknown (%v)", leader, err)
	}
	conn, err := s.dial(string(resp.Kvs[0].Value))
	if err != nil {
		return nil, err
	}
	return pb.NewMasterClient(conn), nil
}

// dial returns a cached connection to a master or worker address.
func (s *Service) dial(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[string]*grpc.ClientConn{}
	}
	conn, ok := s.conns[addr]
	if !ok {
		var err error
		creds := insecure.NewCredentials()
		if s.TLS != nil {
			creds = credentials.NewTLS(s.TLS)
		}
		if conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(creds)); err != nil {
			return nil, err
		}
		s.conns[addr] = conn
	}
	return conn, nil
}

// Close closes the forwarding connections.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// leaderState is what a master has while it leads: the coordinator and the fence of every write.
type leaderState struct {
	coord *pessimist.Coordinator
	fence clientv3.Cmp
}

// LeaderRun returns a Leadership Run that, while this master leads, coordinates pessimistic locks
// under layout, binds sources to workers, and serves both through svc. The first of the two to fail
// ends the term.
func LeaderRun(cli *clientv3.Client, layout pessimist.Layout, svc *Service, log *zap.Logger) func(context.Context, clientv3.Cmp) error {
	return func(ctx context.Context, fence clientv3.Cmp) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := pessimist.NewCoordinator(cli, layout, pessimist.WithFence(fence), pessimist.WithLogger(log), pessimist.WithMaxTxnOps(svc.MaxTxnOps))
		st := &leaderState{coord: c, fence: fence}
		svc.lead.Store(st)
		defer svc.lead.CompareAndSwap(st, nil)
		errc := make(chan error, 2)
		go func() { errc <- c.Run(ctx) }()
		go func() { errc <- RunScheduler(ctx, cli, fence, log) }()
		err := <-errc
		cancel()
		<-errc
		return err
	}
}

// ShowDDLLocks implements dmctl shard-ddl-lock [task].
func (s *Service) ShowDDLLocks(ctx context.Context, req *pb.ShowDDLLocksRequest) (*pb.ShowDDLLocksResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.ShowDDLLocksResponse, error) {
		resp, err := showLocks(l, req)
		if err != nil || s.Client == nil || len(resp.Locks) == 0 {
			return resp, err
		}
		// A lock that waits for a paused or stopped source says so (it waits until the source is back).
		if st, err := ha.Load(ctx, s.Client); err == nil {
			if locks, err := l.coord.Locks(); err == nil {
				if notes := waitNotes(st, locks, req.Task); len(notes) > 0 {
					resp.Msg = strings.Join(notes, "; ")
				}
			}
		}
		return resp, nil
	},
		func(c pb.MasterClient) (*pb.ShowDDLLocksResponse, error) { return c.ShowDDLLocks(ctx, req) },
		func(err error) *pb.ShowDDLLocksResponse { return &pb.ShowDDLLocksResponse{Msg: err.Error()} })
}

func showLocks(lead *leaderState, req *pb.ShowDDLLocksRequest) (*pb.ShowDDLLocksResponse, error) {
	locks, err := lead.coord.Locks()
	if err != nil {
		return nil, err
	}
	resp := &pb.ShowDDLLocksResponse{Result: true}
	for _, l := range locks {
		if req.Task != "" && l.Task != req.Task {
			continue
		}
		pl := &pb.DDLLock{ID: l.ID, Task: l.Task, Mode: l.Mode, Owner: l.Owner, DDLs: l.DDLs,
			Synced: l.Synced, Unsynced: l.Unsynced, Stage: l.Stage}
		for _, c := range l.Conflict {
			pl.Conflict = append(pl.Conflict, &pb.SourceDDLs{Source: c.Source, DDLs: c.DDLs})
		}
		resp.Locks = append(resp.Locks, pl)
	}
	if len(resp.Locks) == 0 {
		resp.Msg = "no DDL lock exists" // DM's words
	}
	return resp, nil
}

// UnlockDDLLock implements dmctl shard-ddl-lock unlock.
func (s *Service) UnlockDDLLock(ctx context.Context, req *pb.UnlockDDLLockRequest) (*pb.UnlockDDLLockResponse, error) {
	return onLeader(ctx, s, func(l *leaderState) (*pb.UnlockDDLLockResponse, error) {
		if !req.ForceRemove {
			if task, stopped, err := s.stoppedLockTask(ctx, l, req.ID); err != nil {
				return nil, err
			} else if stopped {
				if err := l.coord.RemoveStoppedLock(ctx, req.ID, ha.TaskKey(task)); err != nil {
					return nil, err
				}
				return &pb.UnlockDDLLockResponse{Result: true, Msg: "lock " + req.ID + " removed: task " + task +
					" is stopped, so nothing ran downstream; start-task " + task + " reads its DDLs again from the checkpoints"}, nil
			}
		}
		u, err := l.coord.UnlockLock(ctx, req.ID, req.ReplaceOwner, req.ForceRemove)
		if err != nil {
			return nil, err
		}
		return unlockResponse(req, u), nil
	},
		func(c pb.MasterClient) (*pb.UnlockDDLLockResponse, error) { return c.UnlockDDLLock(ctx, req) },
		func(err error) *pb.UnlockDDLLockResponse { return &pb.UnlockDDLLockResponse{Msg: err.Error()} })
}

// stoppedLockTask returns the task of lock id and whether that task is stopped (stop-task keeps its
// locks). A master without an etcd client of its own (tests) knows no tasks: none is stopped.
func (s *Service) stoppedLockTask(ctx context.Context, l *leaderState, id string) (string, bool, error) {
	task, err := l.coord.LockTask(id)
	if err != nil || s.Client == nil {
		return task, false, err
	}
	resp, err := s.Client.Get(ctx, ha.TaskKey(task), clientv3.WithCountOnly())
	if err != nil {
		return "", false, err
	}
	return task, resp.Count == 0, nil
}

// unlockResponse says what an unlock does: the owner's DDLs run downstream; the sources that sent
// other DDLs skip theirs, and those that have not reached the lock skip when they do.
func unlockResponse(req *pb.UnlockDDLLockRequest, u pessimist.Unlock) *pb.UnlockDDLLockResponse {
	resp := &pb.UnlockDDLLockResponse{Result: true}
	if req.ForceRemove {
		resp.Msg = "lock " + req.ID + " removed: nothing ran downstream; apply its DDLs there by hand if they are needed"
		return resp
	}
	resp.Executed = []*pb.SourceDDLs{{Source: u.Owner, DDLs: u.DDLs}}
	for _, o := range u.OverruledDDLs {
		resp.Skipped = append(resp.Skipped, &pb.SourceDDLs{Source: o.Source, DDLs: o.DDLs})
	}
	msg := fmt.Sprintf("lock %s: %s executes %q downstream", req.ID, u.Owner, u.DDLs)
	if len(u.Overrule) > 0 {
		msg += fmt.Sprintf("; %s skip the other DDLs they sent", strings.Join(u.Overrule, ", "))
	}
	if len(u.Missing) > 0 {
		msg += fmt.Sprintf("; %s skip these DDLs when they reach them", strings.Join(u.Missing, ", "))
	}
	resp.Msg = msg
	return resp
}

// onLeader answers a dmctl call: with do when this master leads, else by forwarding it to the leader
// with forward. An error becomes a response with "result": false and the error as "msg".
func onLeader[R any](ctx context.Context, s *Service, do func(*leaderState) (R, error), forward func(pb.MasterClient) (R, error), fail func(error) R) (R, error) {
	if l := s.lead.Load(); l != nil {
		resp, err := do(l)
		if err != nil {
			return fail(err), nil
		}
		return resp, nil
	}
	lc, err := s.leaderClient(ctx)
	if err != nil {
		return fail(err), nil
	}
	return forward(lc)
}
