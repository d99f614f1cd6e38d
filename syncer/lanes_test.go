package syncer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-db/tributary/sink"
	"github.com/tributary-db/tributary/vocab"
)

func TestKeyValueEncodingIsCanonical(t *testing.T) {
	enc := func(v any) string { return string(appendKeyValue(nil, v)) }
	for _, same := range [][]any{
		{int8(5), int16(5), int32(5), int64(5), uint8(5), uint16(5), uint32(5), uint64(5), 5},
		{"ab", []byte("ab"), "ab  ", []byte("ab ")},
		{time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC), time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)},
	} {
		for _, v := range same[1:] {
			if enc(v) != enc(same[0]) {
				t.Errorf("%T %v encodes as %q, %T %v as %q: one key value must hash alike", v, v, enc(v), same[0], same[0], enc(same[0]))
			}
		}
	}
	for _, differ := range [][2]any{{int64(5), "5"}, {int64(-5), uint64(5)}, {"a", "A"}, {nil, ""}, {"a", " a"}} {
		if enc(differ[0]) == enc(differ[1]) {
			t.Errorf("%T %v and %T %v encode alike", differ[0], differ[0], differ[1], differ[1])
		}
	}
	// Two values of a multi-column key cannot run into each other.
	if a, b := appendKeyValue(appendKeyValue(nil, "ab"), "c"), appendKeyValue(appendKeyValue(nil, "a"), "bc"); string(a) == string(b) {
		t.Error(`("ab","c") and ("a","bc") encode alike`)
	}
}

// TestLanesSpreadSequentialKeys: auto-increment ids (the hot table's usual key) fill every lane about
// evenly, and a key's lane is the same on every call.
func TestLanesSpreadSequentialKeys(t *testing.T) {
	for _, n := range []int{2, 4, 16} {
		count := make([]int, n)
		const keys = 64000
		for id := 1; id <= keys; id++ {
			l, _ := laneOf(nil, []any{int64(id)}, []int{0}, n, 0)
			count[l]++
			if again, _ := laneOf(nil, []any{int32(id)}, []int{0}, n, 0); again != l {
				t.Fatalf("id %d: lane %d, then %d", id, l, again)
			}
		}
		for l, c := range count {
			if share := float64(c) * float64(n) / keys; share < 0.9 || share > 1.1 {
				t.Errorf("%d lanes: lane %d has %d of %d keys", n, l, c, keys)
			}
		}
	}
	// The stored meaning of a lane: these values must never change (checkpoints hold lanes).
	if l, _ := laneOf(nil, []any{int64(1)}, []int{0}, 16, 0); l != laneOf1of16 {
		t.Fatalf("lane of id 1 in 16 is %d, was %d: the lane hash changed, which breaks checkpoints written before", l, laneOf1of16)
	}
}

const laneOf1of16 = 1

// TestLanesChunkIntegerKeys: a chunked lane puts laneChunk consecutive integer keys on one lane and
// the next run on the next lane, whatever the value's Go type, so sequential keys fill every lane
// evenly; a value that is not an integer goes by the hash.
func TestLanesChunkIntegerKeys(t *testing.T) {
	for _, n := range []int{2, 4, 16} {
		count := make([]int, n)
		keys := 8 * n * laneChunk
		for id := 0; id < keys; id++ {
			l, _ := laneOf(nil, []any{int64(id)}, []int{0}, n, laneChunk)
			if want := id / laneChunk % n; l != want {
				t.Fatalf("%d lanes: id %d in lane %d, want %d", n, id, l, want)
			}
			for _, v := range []any{int32(id), uint64(id), uint32(id), int(id)} {
				if again, _ := laneOf(nil, []any{v}, []int{0}, n, laneChunk); again != l {
					t.Fatalf("id %d as %T: lane %d, then %d", id, v, l, again)
				}
			}
			count[l]++
		}
		for l, c := range count {
			if c != keys/n {
				t.Errorf("%d lanes: lane %d has %d of %d keys", n, l, c, keys)
			}
		}
	}
	// Negative keys have lanes too, the same for every Go type of the value.
	if a, _ := laneOf(nil, []any{int64(-5)}, []int{0}, 16, laneChunk); true {
		if b, _ := laneOf(nil, []any{int8(-5)}, []int{0}, 16, laneChunk); a != b {
			t.Fatalf("-5: lane %d as int64, %d as int8", a, b)
		}
	}
	for _, v := range []any{"x", []byte("x"), 1.5} {
		hashed, _ := laneOf(nil, []any{v}, []int{0}, 16, 0)
		if l, _ := laneOf(nil, []any{v}, []int{0}, 16, laneChunk); l != hashed {
			t.Errorf("%T value: lane %d in a chunked lane, %d by the hash", v, l, hashed)
		}
	}
	// Two key columns go by the hash even in a chunked plan.
	two, _ := laneOf(nil, []any{int64(1), int64(2)}, []int{0, 1}, 16, 0)
	if l, _ := laneOf(nil, []any{int64(1), int64(2)}, []int{0, 1}, 16, laneChunk); l != two {
		t.Errorf("two columns: lane %d, by the hash %d", l, two)
	}
}

func TestKeysSkipNullsAndCoverBothImages(t *testing.T) {
	p := &keyPlan{target: "`db`.`t`", laneIdx: []int{0}, keys: [][]int{{0}, {1}}, names: []string{"PRIMARY", "u"}}
	keys, _ := p.appendKeys(nil, nil, &sink.Change{Kind: sink.Insert, Row: []any{int64(1), nil}})
	if len(keys) != 1 {
		t.Fatalf("insert with a NULL unique value: %d keys, want 1 (the primary key)", len(keys))
	}
	keys, _ = p.appendKeys(nil, nil, &sink.Change{Kind: sink.Update, Row: []any{int64(2), int64(7)}, Old: []any{int64(1), int64(7)}})
	if len(keys) != 4 {
		t.Fatalf("update: %d keys, want 4 (both images' primary and unique keys)", len(keys))
	}
	if keys[1] != keys[3] {
		t.Fatal("the same unique value in both images hashes apart")
	}
	other := &keyPlan{target: "`db`.`t2`", laneIdx: []int{0}, keys: [][]int{{0}}, names: []string{"PRIMARY"}}
	k2, _ := other.appendKeys(nil, nil, &sink.Change{Kind: sink.Insert, Row: []any{int64(1)}})
	if k2[0] == keys[2] {
		t.Fatal("the same key value of two targets is one key")
	}
}

// TestHotTableByKey: one upstream table takes every change, on a downstream with four connections:
// its rows are spread over them by primary key, while updates move rows between lanes (new ids), pass
// unique values from row to row, shift a range of ids in one statement (each new id another row's
// old one), and delete and insert ids again; the syncer is stopped at random points in between
// (transactions of a flush in flight are rolled back, others committed). The downstream must end equal
// to the upstream: no change lost, none applied twice, no duplicate key on the way. A table with a
// case-insensitive unique key stays on one connection.
func TestHotTableByKey(t *testing.T) {
	// Chunks of 4 ids put neighbours on other lanes, as the hash does: rows move between lanes all the
	// time in both.
	t.Run("chunk=4", func(t *testing.T) { hotTableByKey(t, 4) })
	t.Run("hash", func(t *testing.T) { hotTableByKey(t, -1) })
}

func hotTableByKey(t *testing.T, chunk int) {
	seed := time.Now().UnixNano()
	if v := os.Getenv("TRIBUTARY_LANES_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	t.Logf("seed %d (TRIBUTARY_LANES_SEED)", seed)
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t)
	c.workers, c.spread, c.laneChunk = 4, true, chunk
	c.up(0, "CREATE TABLE db_1.hot (id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR(32))",
		"CREATE TABLE db_1.mail (id INT PRIMARY KEY, email VARCHAR(64) UNIQUE, v INT)")
	stop := c.startSyncer(0)
	live := map[int]bool{}
	nextID, nextU := 1, 1
	restarts := 0
	for step := 0; step < 150; step++ {
		ids := make([]int, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		pick := func() int { return ids[rng.Intn(len(ids))] }
		switch r := rng.Intn(10); {
		case r < 3 || len(ids) < 4:
			var vals []string
			for k := 0; k < 1+rng.Intn(300); k++ {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'i%d')", nextID, nextU, step))
				live[nextID] = true
				nextID++
				nextU++
			}
			c.up(0, "INSERT INTO db_1.hot VALUES "+strings.Join(vals, ","))
		case r < 4: // a row moves to a new id (most likely another lane)
			id := pick()
			c.up(0, fmt.Sprintf("UPDATE db_1.hot SET id = %d, v = 'm%d' WHERE id = %d", nextID, step, id))
			delete(live, id)
			live[nextID] = true
			nextID++
		case r < 5: // two rows swap their unique values
			a, b := pick(), pick()
			if a == b {
				continue
			}
			c.up(0, "BEGIN",
				fmt.Sprintf("SELECT u INTO @a FROM db_1.hot WHERE id = %d", a),
				fmt.Sprintf("SELECT u INTO @b FROM db_1.hot WHERE id = %d", b),
				fmt.Sprintf("UPDATE db_1.hot SET u = NULL WHERE id = %d", a),
				fmt.Sprintf("UPDATE db_1.hot SET u = @a WHERE id = %d", b),
				fmt.Sprintf("UPDATE db_1.hot SET u = @b WHERE id = %d", a),
				"COMMIT")
		case r < 6: // a range shifts by one: one rows event whose rows pass ids to each other
			lo := pick()
			hi := lo + 1 + rng.Intn(20)
			if live[hi+1] {
				continue
			}
			c.up(0, fmt.Sprintf("UPDATE db_1.hot SET id = id + 1 WHERE id BETWEEN %d AND %d ORDER BY id DESC", lo, hi))
			var moved []int
			for id := hi; id >= lo; id-- {
				if live[id] {
					moved = append(moved, id)
				}
			}
			for _, id := range moved {
				delete(live, id)
			}
			for _, id := range moved {
				live[id+1] = true
			}
			if hi+2 > nextID {
				nextID = hi + 2
			}
		case r < 7: // a row goes and its id comes back with the unique value of another that went
			a, b := pick(), pick()
			if a == b {
				continue
			}
			c.up(0, "BEGIN",
				fmt.Sprintf("SELECT u INTO @b FROM db_1.hot WHERE id = %d", b),
				fmt.Sprintf("DELETE FROM db_1.hot WHERE id IN (%d, %d)", a, b),
				fmt.Sprintf("INSERT INTO db_1.hot VALUES (%d, @b, 'r%d')", a, step),
				"COMMIT")
			delete(live, b)
		case r < 8:
			lo := pick()
			c.up(0, fmt.Sprintf("UPDATE db_1.hot SET v = 'x%d' WHERE id BETWEEN %d AND %d", step, lo, lo+50))
		case r < 9: // a case-insensitive unique value passes from a deleted row to a new one
			c.up(0, fmt.Sprintf("INSERT INTO db_1.mail VALUES (%d, 'user%d@example.com', %d)", step, step, step))
			if step > 10 {
				c.up(0, "BEGIN", fmt.Sprintf("DELETE FROM db_1.mail WHERE email = 'user%d@example.com'", step),
					fmt.Sprintf("INSERT INTO db_1.mail VALUES (%d, 'USER%d@EXAMPLE.COM', 0)", 100000+step, step), "COMMIT")
			}
		default:
			lo := pick()
			c.up(0, fmt.Sprintf("DELETE FROM db_1.hot WHERE id BETWEEN %d AND %d", lo, lo+5))
			for id := lo; id <= lo+5; id++ {
				delete(live, id)
			}
		}
		if rng.Intn(12) == 0 {
			if err := stop(); err != nil {
				t.Fatalf("step %d: the syncer failed before its restart: %v", step, err)
			}
			stop = c.startSyncer(0)
			restarts++
		}
	}
	for _, table := range []struct{ up, down, cols string }{{"hot", "db.hot", "id, u, v"}, {"mail", "db.mail", "id, email, v"}} {
		c.convergeTable(table.down, table.up, table.cols)
	}
	var hot, mail int
	if err := c.downDB.QueryRow(`SELECT COUNT(DISTINCT CASE WHEN id LIKE '%"hot"%' THEN id END), COUNT(DISTINCT CASE WHEN id LIKE '%"mail"%' THEN id END)
		FROM dm_meta.test_checkpoint WHERE id LIKE 'lane:%'`).Scan(&hot, &mail); err != nil {
		t.Fatal(err)
	}
	if hot < 2 {
		t.Errorf("db_1.hot wrote %d lane positions: its rows were not spread over the connections", hot)
	}
	if mail != 0 {
		t.Errorf("db_1.mail (case-insensitive unique key) wrote %d lane positions: its rows must stay on one connection", mail)
	}
	t.Logf("%d rows, %d restarts, %d lanes written for db_1.hot", len(live), restarts, hot)
}

// TestPartialFlushResumesByLane: a flush of one hot table's rows on four connections fails on one of
// them after the others committed (a crash between commits). The restarted syncer reads the rows again
// and applies only those of the connection that failed: the committed ones are known by their lanes'
// positions (the table position had not moved past them). Without lane positions they would be
// inserted twice (duplicate key) or, with the table position moved, the failed ones lost.
func TestPartialFlushResumesByLane(t *testing.T) {
	t.Run("chunk=1024", func(t *testing.T) { partialFlushResumesByLane(t, 0) })
	t.Run("hash", func(t *testing.T) { partialFlushResumesByLane(t, -1) })
}

func partialFlushResumesByLane(t *testing.T, chunk int) {
	c := newCluster(t)
	c.workers, c.spread, c.laneChunk = 4, true, chunk
	c.up(0, "CREATE TABLE db_1.hot (id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR(32))")
	stop := c.startSyncer(0)
	var fired atomic.Bool
	testHookFlush = func(part, parts int) error {
		if parts > 2 && part == 3 && fired.CompareAndSwap(false, true) {
			return errors.New("injected: connection 3 fails its transaction")
		}
		return nil
	}
	t.Cleanup(func() { testHookFlush = nil })
	var vals []string
	for id := 1; id <= 3000; id++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'v%d')", id, id, id))
	}
	c.up(0, "INSERT INTO db_1.hot VALUES "+strings.Join(vals, ","),
		"UPDATE db_1.hot SET id = id + 10000, v = 'moved' WHERE id % 7 = 0",
		"UPDATE db_1.hot SET u = u + 100000 WHERE id % 5 = 0")
	if err := c.failure(0); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("the syncer stopped on %v, want the injected failure", err)
	}
	stop()
	testHookFlush = nil
	var applied, lanes int
	if err := c.downDB.QueryRow("SELECT COUNT(*) FROM db.hot").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if err := c.downDB.QueryRow(`SELECT COUNT(*) FROM dm_meta.test_checkpoint c WHERE c.id LIKE 'lane:%' AND c.binlog_pos >
		COALESCE((SELECT t.binlog_pos FROM dm_meta.test_checkpoint t WHERE t.source = c.source AND t.id = ?), 0)`, tableID(vocab.TableName{Schema: "db_1", Name: "hot"})).Scan(&lanes); err != nil {
		t.Fatal(err)
	}
	if lanes == 0 || applied == 0 {
		t.Fatalf("after the failure: %d rows downstream, %d lane positions past the table's: the flush did not commit in part", applied, lanes)
	}
	t.Logf("after the failure: %d rows downstream, %d lane positions past the table position", applied, lanes)
	c.startSyncer(0)
	c.convergeTable("db.hot", "hot", "id, u, v")
}

func tableID(t vocab.TableName) string {
	js, _ := json.Marshal(t)
	return string(js)
}

// TestSpreadChunkedLanesRealSchema: chunked lanes on keys at the edges of their types, through the
// syncer on the test servers (utf8mb4, strict sql_mode): a BIGINT UNSIGNED key near 2^64 beside a JSON
// column and a generated one, and a signed key that crosses zero. Rows are inserted, moved to keys of
// other runs, deleted, with restarts between (each reads the lane rows back); the downstream ends
// equal, and its lane rows are chunked ones.
func TestSpreadChunkedLanesRealSchema(t *testing.T) {
	c := newCluster(t)
	c.workers, c.spread = 4, true
	c.up(0, "CREATE TABLE db_1.big (id BIGINT UNSIGNED PRIMARY KEY, j JSON, g INT AS (JSON_LENGTH(j)) VIRTUAL, v VARCHAR(16))",
		"CREATE TABLE db_1.neg (id BIGINT PRIMARY KEY, v VARCHAR(16))")
	stop := c.startSyncer(0)
	const top = uint64(18446744073709551615)
	for round := 0; round < 3; round++ {
		var big, neg []string
		for k := 0; k < 2000; k++ {
			big = append(big, fmt.Sprintf("(%d, '[%d, \"é\"]', 'r%d')", top-uint64(round*2000+k), k, round))
			neg = append(neg, fmt.Sprintf("(%d, 'r%d')", round*2000+k-3000, round))
		}
		c.up(0, "INSERT INTO db_1.big (id, j, v) VALUES "+strings.Join(big, ","), "INSERT INTO db_1.neg VALUES "+strings.Join(neg, ","))
		if round > 0 {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			stop = c.startSyncer(0)
		}
	}
	c.up(0, fmt.Sprintf("UPDATE db_1.big SET id = id - 10000, v = 'moved' WHERE id %% 7 = 0 AND id > %d", top-6000),
		"UPDATE db_1.neg SET id = id + 100000, v = 'moved' WHERE id % 5 = 0",
		"DELETE FROM db_1.big WHERE id % 11 = 0", "DELETE FROM db_1.neg WHERE id BETWEEN -100 AND 100")
	c.convergeTable("db.big", "big", "id, j, g, v")
	c.convergeTable("db.neg", "neg", "id, v")
	// A restart reads the lane rows back.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.up(0, "UPDATE db_1.big SET v = 'last'", "UPDATE db_1.neg SET v = 'last'")
	c.startSyncer(0)
	c.convergeTable("db.big", "big", "id, j, g, v")
	c.convergeTable("db.neg", "neg", "id, v")
	var chunked int
	if err := c.downDB.QueryRow(`SELECT COUNT(*) FROM dm_meta.test_checkpoint WHERE id LIKE 'lane:%/1024:%'`).Scan(&chunked); err != nil {
		t.Fatal(err)
	}
	if chunked < 2 {
		t.Fatalf("%d chunked lane rows: the tables were not spread by runs of keys", chunked)
	}
}
