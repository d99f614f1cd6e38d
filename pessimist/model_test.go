package pessimist

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/tests/framework/wait"
	"github.com/tributary-db/tributary/vocab"
)

var (
	modelRuns = flag.Int("model.runs", 500, "runs of TestModel")
	modelSeed = flag.Int64("model.seed", 0, "first seed of TestModel (0: 1)")
)

// TestModel is the randomized model test of the whole protocol on a real embedded etcd: 1-8 sources,
// 1-6 shard tables each, 1-5 successive DDLs, each source's binlog a random interleaving of its
// tables' DDLs; workers (shardgroup + Agent) and coordinators run concurrently and are restarted at
// random. A simulated downstream records every execution. After each run: every DDL executed exactly
// once, by one owner, only after every table of every source reached it; skips only after the owner's
// done; every source finished; no keys left. Reproduce a failure with -model.seed=S -model.runs=1.
func TestModel(t *testing.T) {
	cli := etcdClient(t)
	first := *modelSeed
	if first == 0 {
		first = 1
	}
	start := time.Now()
	var restarts struct{ coord, worker int }
	for seed := first; seed < first+int64(*modelRuns); seed++ {
		m := newModel(t, cli, seed)
		if err := m.run(); err != nil {
			t.Fatalf("seed %d (%d sources, %d tables, %d DDLs): %v\nreproduce: go test ./pessimist -run TestModel -model.seed=%d -model.runs=1",
				seed, m.nSources, m.nTables, m.nDDLs, err, seed)
		}
		restarts.coord += m.coordRestarts
		restarts.worker += m.workerRestarts
	}
	t.Logf("%d runs in %v (%d coordinator and %d worker restarts)", *modelRuns, time.Since(start).Round(time.Millisecond), restarts.coord, restarts.worker)
}

type event struct{ table, step int }

type model struct {
	t        *testing.T
	cli      *clientv3.Client
	layout   Layout
	rng      *rand.Rand
	seed     int64
	task     string
	target   string
	nSources int
	nTables  int
	nDDLs    int
	binlogs  [][]event // per source

	mu         sync.Mutex
	reached    [][]int // per source, per table: steps read from the binlog (monotonic)
	checkpoint []int   // per source: steps applied downstream (durable across worker restarts)
	executed   map[int][]string
	violations []string

	coordRestarts, workerRestarts int
}

func newModel(t *testing.T, cli *clientv3.Client, seed int64) *model {
	rng := rand.New(rand.NewSource(seed))
	m := &model{
		t: t, cli: cli, rng: rng, seed: seed,
		layout:   NewLayout(fmt.Sprintf("/model/%d/", seed)),
		task:     "task",
		target:   "`db`.`t`",
		nSources: 1 + rng.Intn(8), nTables: 1 + rng.Intn(6), nDDLs: 1 + rng.Intn(5),
		executed: map[int][]string{},
	}
	m.binlogs = make([][]event, m.nSources)
	m.reached = make([][]int, m.nSources)
	m.checkpoint = make([]int, m.nSources)
	for s := range m.binlogs {
		next := make([]int, m.nTables)
		for left := m.nTables * m.nDDLs; left > 0; left-- {
			var ready []int
			for tb, n := range next {
				if n < m.nDDLs {
					ready = append(ready, tb)
				}
			}
			tb := ready[rng.Intn(len(ready))]
			m.binlogs[s] = append(m.binlogs[s], event{tb, next[tb]})
			next[tb]++
		}
		m.reached[s] = make([]int, m.nTables)
	}
	return m
}

func (m *model) source(s int) string { return fmt.Sprintf("s%d", s) }
func (m *model) ddl(step int) []string {
	return []string{fmt.Sprintf("ALTER TABLE `db`.`t` ADD COLUMN `c%d` INT", step)}
}
func stepOf(ddls []string) int {
	var n int
	fmt.Sscanf(ddls[0], "ALTER TABLE `db`.`t` ADD COLUMN `c%d` INT", &n)
	return n
}

func (m *model) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

func (m *model) finished() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.checkpoint {
		if c < m.nDDLs {
			return false
		}
	}
	return true
}

// runner is a goroutine that can be stopped and waited for.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func start(ctx context.Context, f func(context.Context)) *runner {
	ctx, cancel := context.WithCancel(ctx)
	r := &runner{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); f(ctx) }()
	return r
}

func (r *runner) stop() { r.cancel(); <-r.done }

func (m *model) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sources := make([]string, m.nSources)
	for s := range sources {
		sources[s] = m.source(s)
	}
	if err := PutTaskSources(ctx, m.cli, m.layout, m.task, sources); err != nil {
		return err
	}
	coordinator := func(ctx context.Context) {
		opts := []CoordinatorOption{WithRetryInterval(20 * time.Millisecond)}
		if m.seed%3 == 0 {
			opts = append(opts, WithMaxTxnOps(6)) // large decisions split over several transactions
		}
		c := NewCoordinator(m.cli, m.layout, opts...)
		if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			m.violate("coordinator: %v", err)
		}
	}
	coords := []*runner{start(ctx, coordinator)}
	workers := make([]*runner, m.nSources)
	for s := range workers {
		workers[s] = start(ctx, func(ctx context.Context) { m.workerProcess(ctx, s) })
	}
	// Chaos: restart coordinators (sometimes letting two overlap, as a deposed leader would) and
	// workers at random moments until every worker has read its whole binlog.
	allDone := func() bool {
		for _, w := range workers {
			select {
			case <-w.done:
			default:
				return false
			}
		}
		return true
	}
	for !allDone() || !m.finished() {
		if ctx.Err() != nil {
			for _, r := range append(coords, workers...) {
				r.stop()
			}
			return fmt.Errorf("not finished after 30s: checkpoints %v, keys %v", m.checkpointsCopy(), m.keys())
		}
		time.Sleep(time.Duration(m.rng.Intn(1000)) * time.Microsecond) // the random moment of the next fault
		switch r := m.rng.Intn(20); {
		case r == 0 && m.coordRestarts < 4:
			m.coordRestarts++
			coords = append(coords, start(ctx, coordinator))
			if len(coords) > 2 || m.rng.Intn(2) == 0 {
				coords[0].stop()
				coords = coords[1:]
			}
		case r == 1 && m.workerRestarts < 6:
			m.mu.Lock()
			m.workerRestarts++
			m.mu.Unlock()
			s := m.rng.Intn(m.nSources)
			workers[s].stop()
			workers[s] = start(ctx, func(ctx context.Context) { m.workerProcess(ctx, s) })
		}
	}
	for _, w := range workers {
		w.stop()
	}
	// The coordinator cleans up after the last done; wait for it (bounded).
	var left []string
	wait.Until(10*time.Second, func() bool { left = m.keys(); return len(left) == 0 })
	for _, c := range coords {
		c.stop()
	}
	if _, err := m.cli.Delete(context.Background(), m.layout.Root(), clientv3.WithPrefix()); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.violations) > 0 {
		return errors.New(strings.Join(m.violations, "\n"))
	}
	if len(left) > 0 {
		return fmt.Errorf("keys left behind: %v", left)
	}
	for step := 0; step < m.nDDLs; step++ {
		if len(m.executed[step]) != 1 {
			return fmt.Errorf("DDL step %d executed %d times: %v", step, len(m.executed[step]), m.executed[step])
		}
	}
	return nil
}

func (m *model) checkpointsCopy() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.checkpoint...)
}

// keys lists the lock keys of the run (not the task's source list or the agents' generations, which
// live as long as the task).
func (m *model) keys() []string {
	resp, err := m.cli.Get(context.Background(), m.layout.Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); !strings.HasPrefix(k, m.layout.Root()+kindTask+"/") && !strings.HasPrefix(k, m.layout.Root()+kindAgent+"/") {
			out = append(out, k)
		}
	}
	return out
}

// workerProcess runs worker incarnations of source s until one reads its whole binlog: an incarnation
// that crashes (returns early) is replaced at once, as a supervisor restarts a dm-worker.
func (m *model) workerProcess(ctx context.Context, s int) {
	m.mu.Lock()
	base := m.seed*1_000_000 + int64(s)*1000 + int64(m.workerRestarts)*100
	m.mu.Unlock()
	for i := int64(0); ctx.Err() == nil && !m.worker(ctx, s, rand.New(rand.NewSource(base+i))); i++ {
	}
}

// worker is one dm-worker of source s from its checkpoint to the end of its binlog (or until ctx ends,
// which is how a crash is simulated: what it wrote stays, what it held in memory is lost).
func (m *model) worker(ctx context.Context, s int, rng *rand.Rand) (completed bool) {
	src := m.source(s)
	agent := NewAgent(m.cli, m.layout, m.task, src, nil)
	// Every third run leaves every exec to the coordinator, every third has the odd sources do so
	// (the others may complete a lock themselves), and the rest let each last info write the exec.
	if mode := m.seed % 3; mode == 1 || mode == 2 && s%2 == 1 {
		agent.LeaveExecToCoordinator()
	}
	agent.retry = 5 * time.Millisecond
	m.mu.Lock()
	ck := m.checkpoint[s]
	m.mu.Unlock()

	// Recovery: an operation the checkpoint shows as applied was interrupted before its done.
	ops, err := agent.Operations(ctx)
	if err != nil {
		return false
	}
	for _, op := range ops {
		if stepOf(op.DDLs) < ck {
			info, _, err := agent.Info(ctx, op.Target)
			if err != nil {
				return false
			}
			if err := agent.DoneOperationDeleteInfo(ctx, op, info); err != nil {
				if ctx.Err() == nil {
					m.violate("%s: recovery done of step %d: %v", src, stepOf(op.DDLs), err)
				}
				return false
			}
		}
	}

	target := vocab.TableName{Schema: "db", Name: "t"}
	g := shardgroup.NewShardingGroup(target)
	position := func(i int) vocab.Position { return vocab.Position{File: "bin.000001", Pos: uint32(i + 1)} }
	for tb := 0; tb < m.nTables; tb++ {
		var resolved vocab.Position
		for i, ev := range m.binlogs[s] {
			if ev.table == tb && ev.step == ck-1 {
				resolved = position(i)
			}
		}
		if err := g.AddTable(vocab.TableName{Schema: "db_" + src, Name: fmt.Sprintf("t_%d", tb)}, resolved); err != nil {
			m.violate("%s: %v", src, err)
			return false
		}
	}
	for i, ev := range m.binlogs[s] {
		if ctx.Err() != nil {
			return false
		}
		if rng.Intn(4) == 0 {
			time.Sleep(time.Duration(rng.Intn(300)) * time.Microsecond) // let sources interleave
		}
		m.mu.Lock()
		if m.reached[s][ev.table] < ev.step+1 {
			m.reached[s][ev.table] = ev.step + 1
		}
		m.mu.Unlock()
		res, err := g.TrySync(shardgroup.DDLItem{
			Source: vocab.TableName{Schema: "db_" + src, Name: fmt.Sprintf("t_%d", ev.table)},
			Target: target, DDLs: m.ddl(ev.step), Pos: position(i),
		})
		if err != nil {
			m.violate("%s: %v", src, err)
			return false
		}
		if res.Duplicate && res.Resolved {
			continue
		}
		for g.Status().Synced {
			if !m.resolveStep(ctx, agent, s, g.Status().ActiveDDLs, rng) {
				return false
			}
			if _, err := g.ResolveActive(); err != nil {
				m.violate("%s: %v", src, err)
				return false
			}
		}
	}
	return true
}

// resolveStep posts the info of a synced step, waits for the operation, applies it to the simulated
// downstream (exec or skip, atomically with the checkpoint) and marks it done.
func (m *model) resolveStep(ctx context.Context, agent *Agent, s int, ddls []string, rng *rand.Rand) bool {
	src, step := m.source(s), stepOf(ddls)
	info, err := agent.PutInfo(ctx, m.target, ddls)
	if err != nil {
		return false
	}
	op, err := agent.WaitOperation(ctx, info)
	if err != nil {
		if ctx.Err() == nil {
			m.violate("%s: wait for step %d: %v", src, step, err)
		}
		return false
	}
	if op.Exec {
		m.mu.Lock()
		for s2, tables := range m.reached {
			for tb, n := range tables {
				if n <= step {
					m.violations = append(m.violations, fmt.Sprintf("step %d executed by %s before table %d of %s reached it", step, src, tb, m.source(s2)))
				}
			}
		}
		m.executed[step] = append(m.executed[step], src)
		m.checkpoint[s] = step + 1
		m.mu.Unlock()
	} else {
		// A skip must come only after the owner's done is in etcd.
		owner, err := m.execOp(ctx)
		if err != nil {
			return false
		}
		m.mu.Lock()
		if owner == nil || !owner.Done || !sameDDLs(owner.DDLs, ddls) || len(m.executed[step]) == 0 {
			m.violations = append(m.violations, fmt.Sprintf("%s got skip of step %d before the owner was done (owner op %+v)", src, step, owner))
		}
		m.checkpoint[s] = step + 1
		m.mu.Unlock()
	}
	if rng.Intn(8) == 0 {
		return false // crash between applying downstream and done; recovery must finish it
	}
	if err := agent.DoneOperationDeleteInfo(ctx, op, info); err != nil {
		if ctx.Err() == nil {
			m.violate("%s: done of step %d: %v", src, step, err)
		}
		return false
	}
	return true
}

func (m *model) execOp(ctx context.Context) (*Operation, error) {
	resp, err := m.cli.Get(ctx, m.layout.taskPrefix(kindOp, m.task), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		var o Operation
		if err := decodeKV(kv, &o); err != nil {
			return nil, err
		}
		if o.Exec {
			return &o, nil
		}
	}
	return nil, nil
}
