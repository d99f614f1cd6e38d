// The demo behind `make demo`: two upstream MariaDB servers with two shard tables each, one
// downstream, one dm-master and two dm-workers, all throw-away under a temp dir. It creates the
// sources and a shard-merge task with dmctl, writes to all four shards while two DDLs are applied
// shard by shard, prints the lock as it forms and resolves, and checks that the downstream table
// equals the merge of the upstream shards.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributary-db/tributary/tests/framework/e2e"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

func main() {
	bin := flag.String("bin", "bin", "directory with dm-master, dm-worker and dmctl")
	flag.Parse()
	start := time.Now()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "\nDEMO FAILED:", err)
		os.Exit(1)
	}
	fmt.Printf("\nDemo finished in %.1fs; everything it started is stopped and removed.\n", time.Since(start).Seconds())
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// show runs dmctl, prints the command and its JSON, and fails unless "result" is true.
func show(c *e2e.Cluster, args ...string) (e2e.Result, error) {
	fmt.Printf("$ dmctl --master-addr %s %s\n", c.Master.Addr, strings.Join(args, " "))
	r, out, err := c.Dmctl(args...)
	if err != nil {
		return nil, err
	}
	fmt.Println(strings.TrimSpace(out))
	if !r.Bool("result") {
		return r, fmt.Errorf("dmctl %s failed", strings.Join(args, " "))
	}
	return r, nil
}

// shard is one upstream shard table with its own writer; DDLs take its lock so each row is written
// with the columns the table has at that moment.
type shard struct {
	up     int
	table  string
	mu     sync.Mutex
	cols   int // 2: (id, v); 3: (id, v, c)
	nextID int
	rows   atomic.Int64
}

func (s *shard) insert(c *e2e.Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vals []string
	for i := 0; i < 20; i++ {
		s.nextID++
		if s.cols == 2 {
			vals = append(vals, fmt.Sprintf("(%d, 'row %d')", s.nextID, s.nextID))
		} else {
			vals = append(vals, fmt.Sprintf("(%d, 'row %d', %d)", s.nextID, s.nextID, rand.IntN(1000)))
		}
	}
	if err := c.Exec(s.up, "INSERT INTO "+s.table+" VALUES "+strings.Join(vals, ", ")); err != nil {
		return err
	}
	s.rows.Add(20)
	return nil
}

func (s *shard) ddl(c *e2e.Cluster, stmt string, cols int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("upstream %d> %s\n", s.up+1, strings.ReplaceAll(stmt, "TBL", s.table))
	if err := c.Exec(s.up, strings.ReplaceAll(stmt, "TBL", s.table)); err != nil {
		return err
	}
	s.cols = cols
	return nil
}

// preload is the rows each shard holds before the task starts.
const preload = 10000

// task is the name of the demo's task, as in examples/task.yaml (docs/walkthrough.md shows its output).
const task = "shard-merge"

func run(bin string) error {
	if !mariadbtest.Available() {
		return fmt.Errorf("mariadbd not found: apt-get install -y mariadb-server")
	}
	step("Starting 2 upstream MariaDB servers, 1 downstream, dm-master and 2 dm-workers (throw-away, under /tmp)")
	c, err := e2e.Start(e2e.Options{Bin: bin, Workers: 2, KeepaliveTTL: 10, TaskMode: "all"})
	if err != nil {
		return err
	}
	defer mariadbtest.RemoveTemplate()
	defer c.Close()
	fmt.Printf("upstream 1: %s, upstream 2: %s, downstream: %s, dm-master: %s, logs in %s\n",
		c.Ups[0].Addr(), c.Ups[1].Addr(), c.Down.Addr(), c.Master.Addr, c.Dir)

	step("Creating the shard tables db_1.t_1, db_1.t_2 (upstream 1) and db_2.t_1, db_2.t_2 (upstream 2)")
	var shards []*shard
	for i := 0; i < 2; i++ {
		db := fmt.Sprintf("db_%d", i+1)
		if err := c.Exec(i, "CREATE DATABASE "+db); err != nil {
			return err
		}
		for j := 1; j <= 2; j++ {
			s := &shard{up: i, table: fmt.Sprintf("%s.t_%d", db, j), cols: 2, nextID: (i*2 + j) * 1_000_000}
			if err := c.Exec(i, "CREATE TABLE "+s.table+" (id BIGINT PRIMARY KEY, v VARCHAR(64))"); err != nil {
				return err
			}
			shards = append(shards, s)
		}
	}
	step(fmt.Sprintf("Filling each shard with %d rows before the task starts (task-mode all loads them, then follows the binlog)", preload))
	for _, s := range shards {
		from := s.nextID + 500_000
		if err := c.Exec(s.up, fmt.Sprintf("INSERT INTO %s SELECT seq, CONCAT('before-', seq) FROM %s.seq_%d_to_%d",
			s.table, strings.Split(s.table, ".")[0], from, from+preload-1)); err != nil {
			return err
		}
	}

	step("Creating the two sources")
	for i := 0; i < 2; i++ {
		f, err := c.SourceFile(i)
		if err != nil {
			return err
		}
		if _, err := show(c, "operate-source", "create", f); err != nil {
			return err
		}
	}
	step("Starting the shard-merge task (task-mode all): db_*.t_* -> db.t, DDL coordinated pessimistically")
	f, err := c.TaskFile(task)
	if err != nil {
		return err
	}
	if _, err := show(c, "start-task", f); err != nil {
		return err
	}

	step("Writing to all four shards continuously")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	werr := make(chan error, len(shards))
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := s.insert(c); err != nil {
					werr <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	stopWriters := func() error {
		cancel()
		wg.Wait()
		select {
		case err := <-werr:
			return err
		default:
			return nil
		}
	}
	defer stopWriters()
	time.Sleep(time.Second)

	for n, d := range []struct{ stmt, what string }{
		{"ALTER TABLE TBL ADD COLUMN c INT", "DDL 1"},
		{"ALTER TABLE TBL ADD INDEX idx_c (c)", "DDL 2"},
	} {
		step("%s, shard by shard, while the writes go on", d.what)
		first := n == 0
		for i, s := range shards {
			if err := s.ddl(c, d.stmt, 3); err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond)
			if i == 1 {
				// Upstream 1 is through; upstream 2 is not: the lock is half formed.
				fmt.Println("\nUpstream 1's shards have both reached the DDL; upstream 2's have not. The lock waits:")
				if _, err := c.Until(30*time.Second, func(r e2e.Result) bool {
					locks := r.List("locks")
					return len(locks) == 1 && len(locks[0].Strings("synced")) == 1
				}, "shard-ddl-lock", task); err != nil {
					return err
				}
				if _, err := show(c, "shard-ddl-lock", task); err != nil {
					return err
				}
				if first {
					fmt.Println("\nquery-status shows what upstream 1 is blocked on (its rows after the DDL wait for the lock):")
					if _, err := c.Until(10*time.Second, func(r e2e.Result) bool {
						return strings.Contains(fmt.Sprint(r), "unresolvedDDLLockID:"+task+"-")
					}, "query-status", task); err != nil {
						return err
					}
					if _, err := show(c, "query-status", task); err != nil {
						return err
					}
				}
				fmt.Println()
			}
		}
		fmt.Println("\nAll four shards have reached it: one source executes it downstream, the other skips it.")
		if _, err := c.Until(60*time.Second, func(r e2e.Result) bool { return len(r.List("locks")) == 0 }, "shard-ddl-lock", task); err != nil {
			return err
		}
		if _, err := show(c, "shard-ddl-lock", task); err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}

	step("Stopping the writers and waiting until both sources are synced")
	if err := stopWriters(); err != nil {
		return err
	}
	written := int64(len(shards) * preload)
	for _, s := range shards {
		written += s.rows.Load()
	}
	fmt.Printf("%d rows written upstream (%d before the task)\n", written, len(shards)*preload)
	if _, err := c.Until(60*time.Second, func(r e2e.Result) bool {
		subs := 0
		for _, s := range r.List("sources") {
			for _, sub := range s.List("subTaskStatus") {
				if sub.Str("stage") == "Running" && sub.Get("sync").Bool("synced") {
					subs++
				}
			}
		}
		return subs == 2
	}, "query-status", task); err != nil {
		return err
	}
	if _, err := show(c, "query-status", task); err != nil {
		return err
	}

	step("Checking the downstream against the merged upstream shards")
	n, err := c.Converge("id, v, c", 30*time.Second)
	if err != nil {
		return err
	}
	if int64(n) != written {
		return fmt.Errorf("downstream has %d rows, %d were written", n, written)
	}
	sum, err := e2e.Checksum(context.Background(), c.DownDB, "db.t")
	if err != nil {
		return err
	}
	var ddl string
	if err := c.DownDB.QueryRow("SHOW CREATE TABLE db.t").Scan(new(string), &ddl); err != nil {
		return err
	}
	fmt.Printf("downstream db.t:\n%s\n", ddl)
	fmt.Printf("\nOK: downstream db.t equals the merge of the 4 upstream shards: %d rows, row by row (CHECKSUM TABLE db.t = %d).\n", n, sum)
	alters, err := c.DownstreamStatements("ALTER TABLE `db`.`t`")
	if err != nil {
		return err
	}
	if alters != 2 {
		return fmt.Errorf("the downstream received %d ALTER TABLE statements for db.t, want 2", alters)
	}
	fmt.Println("The downstream's general log shows 2 ALTER TABLE statements for db.t: each DDL ran once, after every")
	fmt.Println("shard had reached it, and the rows written meanwhile all arrived.")
	return nil
}
