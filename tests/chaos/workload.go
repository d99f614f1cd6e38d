package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// workload writes to one source's shards at a steady rate: inserts, updates, updates of the primary
// key, deletes, transactions over several tables, now and then a big row or a 50k-row transaction.
// Errors (an upstream killed under it, a table renamed under it) are counted and the statement is
// dropped: the checker compares the downstream with what the upstream holds, not with what the
// workload meant to write.
type workload struct {
	rng    *rand.Rand
	db     *sql.DB
	src    int
	shards []*liveShard // this source's shards of every target
	solo   bool         // this source holds solo.accounts
	rate   float64      // operations a second
	// bigEvery: a 50k-row transaction this often (0: never).
	bigEvery time.Duration
	// bigShard, bigFirst: the shard and first key of the last big transaction, whose 50k rows the
	// next one deletes (in one transaction too), so the tables do not grow over a long run.
	bigShard *liveShard
	bigFirst uint64
	stats    *workStats
}

// workStats are the workloads' counters.
type workStats struct {
	ops, rows, errors, bigTxns atomic.Int64
}

// liveShard is a shard with the keys the workload has written to it and believes are there.
type liveShard struct {
	t    *target
	s    *shard
	mu   *sync.Mutex // the shard's name: held by the DDL runner while it renames it
	next uint64      // next sequence number of the shard's id space
	live []uint64    // ids (orders, entries) or seqs (events) believed present
	// stale: an error left the workload unsure what is there; keys are read again before the next
	// update or delete.
	stale bool
}

// id is key n of the shard's id space: the shard's index in the high bits, so the shards of a target
// never collide in the merged table.
func (l *liveShard) id(n uint64) uint64 { return uint64(l.s.index+1)<<40 | n }

func (l *liveShard) name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.table()
}

// run writes until ctx ends.
func (w *workload) run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.rate))
	defer tick.Stop()
	nextBig := time.Now().Add(w.bigEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if w.bigEvery > 0 && time.Now().After(nextBig) {
			nextBig = time.Now().Add(w.bigEvery/2 + time.Duration(w.rng.Int64N(int64(w.bigEvery))))
			w.bigTxn(ctx)
			continue
		}
		w.op(ctx)
	}
}

// op is one operation, chosen at random.
func (w *workload) op(ctx context.Context) {
	l := w.shards[w.rng.IntN(len(w.shards))]
	if l.stale {
		if err := w.reload(ctx, l); err != nil {
			w.stats.errors.Add(1)
			return
		}
	}
	var err error
	switch p := w.rng.IntN(100); {
	case p < 40 || len(l.live) < 10:
		err = w.exec(ctx, w.insert(l, 1+w.rng.IntN(5), false))
	case p < 65:
		err = w.exec(ctx, w.update(l))
	case p < 73:
		err = w.exec(ctx, w.updateKey(l))
	case p < 85:
		err = w.exec(ctx, w.delete(l))
	case p < 97:
		err = w.txn(ctx)
	default:
		err = w.exec(ctx, w.insert(l, 1, true))
	}
	w.stats.ops.Add(1)
	if err != nil {
		w.stats.errors.Add(1)
		l.stale = true
	}
}

// stmt is one statement of the workload: the rows it writes, and what it does to the live keys once
// it committed.
type stmt struct {
	q     string
	rows  int
	apply func()
}

// exec runs one statement on its own.
func (w *workload) exec(ctx context.Context, st stmt) error {
	if st.q == "" {
		return nil
	}
	if _, err := w.db.ExecContext(ctx, st.q); err != nil {
		return err
	}
	w.stats.rows.Add(int64(st.rows))
	st.apply()
	return nil
}

// insert writes n rows; big makes one of them large (a JSON document or a text of some 200 KiB).
func (w *workload) insert(l *liveShard, n int, big bool) stmt {
	var vals []string
	var keys []uint64
	for i := 0; i < n; i++ {
		l.next++
		k := l.next
		keys = append(keys, k)
		vals = append(vals, w.values(l, k, big && i == 0))
	}
	return stmt{"INSERT INTO " + l.name() + " " + columns(l.t) + " VALUES " + strings.Join(vals, ","), n, func() { l.live = append(l.live, keys...) }}
}

func columns(t *target) string {
	switch t.prefix {
	case "orders":
		return "(id, customer, amount, status, note, doc, created)"
	case "events":
		return "(shard, seq, kind, payload)"
	default:
		return "(id, level, msg, at)"
	}
}

var notes = []string{"plain", "ünïcödé", "日本語のメモ", "emoji 🚀", "quote '' and \\\\ backslash", ""}

func (w *workload) values(l *liveShard, k uint64, big bool) string {
	switch l.t.prefix {
	case "orders":
		doc := fmt.Sprintf(`{"k": %d, "tags": ["a", "b"], "n": %d.5}`, k, w.rng.IntN(1000))
		if big {
			doc = fmt.Sprintf(`{"k": %d, "blob": "%s"}`, k, strings.Repeat("x", 200<<10))
		}
		return fmt.Sprintf("(%d, %d, %d.%02d, '%s', '%s', '%s', NOW(6))", l.id(k), w.rng.Uint32N(1<<31)+1<<31, w.rng.IntN(100000), w.rng.IntN(100),
			[]string{"new", "paid", "shipped", "void"}[w.rng.IntN(4)], notes[w.rng.IntN(len(notes))], doc)
	case "events":
		payload := fmt.Sprintf("'payload %d %s'", k, notes[w.rng.IntN(len(notes))])
		if big {
			payload = "'" + strings.Repeat("y", 200<<10) + "'"
		}
		return fmt.Sprintf("(%d, %d, 'kind%d', %s)", l.s.index, k, w.rng.IntN(8), payload)
	default:
		msg := notes[w.rng.IntN(len(notes))]
		if big {
			msg = strings.Repeat("z", 60<<10)
		}
		return fmt.Sprintf("(%d, %d, '%s', NOW())", l.id(k), w.rng.IntN(7)-3, msg)
	}
}

// keyCond is the WHERE of live key k.
func keyCond(l *liveShard, k uint64) string {
	if l.t.prefix == "events" {
		return fmt.Sprintf("shard = %d AND seq = %d", l.s.index, k)
	}
	return fmt.Sprintf("id = %d", l.id(k))
}

func (w *workload) pick(l *liveShard) (int, uint64, bool) {
	if len(l.live) == 0 {
		return 0, 0, false
	}
	i := w.rng.IntN(len(l.live))
	return i, l.live[i], true
}

func (w *workload) update(l *liveShard) stmt {
	_, k, ok := w.pick(l)
	if !ok {
		return stmt{}
	}
	var set string
	switch l.t.prefix {
	case "orders":
		set = fmt.Sprintf("amount = amount + 1.25, status = '%s', doc = JSON_SET(COALESCE(doc, '{}'), '$.u', %d)", []string{"new", "paid", "shipped", "void"}[w.rng.IntN(4)], w.rng.IntN(100))
	case "events":
		set = fmt.Sprintf("kind = 'upd%d'", w.rng.IntN(8))
	default:
		set = fmt.Sprintf("level = level + 1, msg = '%s'", notes[w.rng.IntN(len(notes))])
	}
	return stmt{"UPDATE " + l.name() + " SET " + set + " WHERE " + keyCond(l, k), 1, func() {}}
}

// updateKey moves a row to a new key (the primary key of orders and entries, the (shard, seq) of
// events).
func (w *workload) updateKey(l *liveShard) stmt {
	i, k, ok := w.pick(l)
	if !ok {
		return stmt{}
	}
	l.next++
	nk := l.next
	set := fmt.Sprintf("id = %d", l.id(nk))
	if l.t.prefix == "events" {
		set = fmt.Sprintf("seq = %d", nk)
	}
	return stmt{"UPDATE " + l.name() + " SET " + set + " WHERE " + keyCond(l, k), 1, func() { l.live[i] = nk }}
}

func (w *workload) delete(l *liveShard) stmt {
	i, k, ok := w.pick(l)
	if !ok {
		return stmt{}
	}
	return stmt{"DELETE FROM " + l.name() + " WHERE " + keyCond(l, k), 1, func() {
		l.live[i] = l.live[len(l.live)-1]
		l.live = l.live[:len(l.live)-1]
	}}
}

// txn writes to up to three of the source's tables (and solo.accounts where it lives) in one
// transaction.
func (w *workload) txn(ctx context.Context) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var applies []func()
	rows := 0
	used := map[*liveShard]bool{}
	for i := 0; i < 3; i++ {
		l := w.shards[w.rng.IntN(len(w.shards))]
		if used[l] || l.stale {
			continue
		}
		used[l] = true
		st := w.insert(l, 1+w.rng.IntN(3), false)
		if w.rng.IntN(2) == 0 && len(l.live) > 0 {
			st = w.update(l)
		}
		if _, err := tx.ExecContext(ctx, st.q); err != nil {
			for l := range used {
				l.stale = true
			}
			return err
		}
		rows += st.rows
		applies = append(applies, st.apply)
	}
	if w.solo {
		id := 1 + w.rng.IntN(200)
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, balance, owner) VALUES (%d, %d.0001, 'owner %d') ON DUPLICATE KEY UPDATE balance = balance + 1.5", soloTable, id, w.rng.IntN(1000), id)); err != nil {
			return err
		}
		rows++
	}
	if err := tx.Commit(); err != nil {
		for l := range used {
			l.stale = true // committed or not: unknown
		}
		return err
	}
	for _, a := range applies {
		a()
	}
	w.stats.rows.Add(int64(rows))
	return nil
}

// bigTxn inserts 50,000 rows into one shard in one transaction (in statements of 1,000 rows); the
// next one deletes them in one transaction, so a long run's tables stay the same size.
func (w *workload) bigTxn(ctx context.Context) {
	if w.bigShard != nil {
		w.bigDelete(ctx)
		return
	}
	var l *liveShard
	for _, c := range w.shards {
		if c.t.pk && !c.stale {
			l = c
			break
		}
	}
	if l == nil {
		return
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		w.stats.errors.Add(1)
		return
	}
	defer tx.Rollback()
	first := l.next + 1
	for i := 0; i < 50; i++ {
		if _, err := tx.ExecContext(ctx, w.insert(l, 1000, false).q); err != nil {
			w.stats.errors.Add(1)
			l.stale = true
			return
		}
	}
	if err := tx.Commit(); err != nil {
		w.stats.errors.Add(1)
		l.stale = true
		return
	}
	for k := first; k <= l.next; k++ {
		l.live = append(l.live, k)
	}
	w.bigShard, w.bigFirst = l, first
	w.stats.rows.Add(50000)
	w.stats.bigTxns.Add(1)
}

// bigDelete deletes, in one transaction, the rows of the keys the last big transaction inserted that
// are still under them (updates of the key moved some away).
func (w *workload) bigDelete(ctx context.Context) {
	l, first := w.bigShard, w.bigFirst
	w.bigShard = nil
	last := first + 50000 - 1
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		w.stats.errors.Add(1)
		return
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE id BETWEEN %d AND %d", l.name(), l.id(first), l.id(last)))
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		w.stats.errors.Add(1)
		l.stale = true
		return
	}
	l.live = slices.DeleteFunc(l.live, func(k uint64) bool { return k >= first && k <= last })
	n, _ := res.RowsAffected()
	w.stats.rows.Add(n)
	w.stats.bigTxns.Add(1)
}

// reload reads the shard's keys again after an error.
func (w *workload) reload(ctx context.Context, l *liveShard) error {
	q := fmt.Sprintf("SELECT id & %d FROM %s", uint64(1)<<40-1, l.name())
	if l.t.prefix == "events" {
		q = "SELECT seq FROM " + l.name()
	}
	rows, err := w.db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	var live []uint64
	for rows.Next() {
		var k uint64
		if err := rows.Scan(&k); err != nil {
			return err
		}
		live = append(live, k)
		l.next = max(l.next, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.live, l.stale = live, false
	return nil
}
