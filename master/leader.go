// Package master holds the dm-master's server pieces. leader.go runs the pessimist coordinator only
// while this master is the leader elected through etcd, fenced by the leader key.
package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// ElectionKey is the etcd prefix of the masters' leader election.
const ElectionKey = "/tributary/master/leader"

// Leadership runs the master's leader-only work.
type Leadership struct {
	cli    *clientv3.Client
	name   string
	prefix string
	ttl    int
	log    *zap.Logger
	// Run is started each time this master becomes leader, with a context that ends when leadership
	// ends and the fence that every write it makes must carry.
	Run func(ctx context.Context, fence clientv3.Cmp) error
}

// NewLeadership campaigns as name under prefix (ElectionKey when empty) with a session of ttl seconds.
func NewLeadership(cli *clientv3.Client, name, prefix string, ttl int, log *zap.Logger) *Leadership {
	if prefix == "" {
		prefix = ElectionKey
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Leadership{cli: cli, name: name, prefix: prefix, ttl: ttl, log: log.With(zap.String("master", name))}
}

// Campaign loops until ctx ends: wait to be elected, run the leader work until the session is lost,
// leadership moves, or the work returns ErrNotLeader, then campaign again.
func (l *Leadership) Campaign(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := l.term(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("leadership term ended", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return ctx.Err()
}

func (l *Leadership) term(ctx context.Context) error {
	session, err := concurrency.NewSession(l.cli, concurrency.WithTTL(l.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}
	defer session.Close()
	election := concurrency.NewElection(session, l.prefix)
	if err := election.Campaign(ctx, l.name); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	leaderKey := election.Key()
	// Every write of this term carries the fence: a deposed leader's late write fails.
	fence := clientv3.Compare(clientv3.CreateRevision(leaderKey), "=", election.Rev())
	l.log.Info("became leader", zap.String("key", leaderKey), zap.Int64("revision", election.Rev()))
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(workCtx, fence) }()
	// Resign so another master can take over at once (also on ErrNotLeader: the key is gone anyway).
	resign := func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		_ = election.Resign(rctx)
	}
	select {
	case <-session.Done():
		cancel()
		<-done
		return errors.New("etcd session lost")
	case err := <-done:
		resign()
		if err == nil || errors.Is(err, context.Canceled) {
			return ctx.Err()
		}
		return err
	case <-ctx.Done():
		cancel()
		<-done
		resign()
		return ctx.Err()
	}
}

// Leader returns the current leader's name, if any.
func Leader(ctx context.Context, cli *clientv3.Client, prefix string) (string, error) {
	if prefix == "" {
		prefix = ElectionKey
	}
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
