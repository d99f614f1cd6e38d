package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// The soak's data: two merged targets of 8 shard tables each over the three sources (merged.orders
// from shop_N.orders_M, with a primary key; merged.events from shop_N.events_M, without one but with
// a plain index on (shard, seq), as a log table has: without it every update downstream scans the
// merged table, and a long run falls behind for that alone), one unsharded table (solo.accounts on
// source 1), all in task "chaos"; and a second task, "chaos2", merging logs_N.entries_M of sources 2
// and 3 into merged2.entries.
const (
	taskMain   = "chaos"
	taskSecond = "chaos2"
)

// shardsPerSource spreads 8 shard tables of a target over the three sources.
var shardsPerSource = []int{3, 3, 2}

// target is a merged table and its shards.
type target struct {
	task   string
	name   string // downstream `db`.`t`
	prefix string // shard table name prefix (orders, events, entries)
	pk     bool   // has a primary key
	shards []*shard
}

// shard is one upstream shard table; its name changes when the soak renames it within its group.
type shard struct {
	source int    // upstream index
	index  int    // the shard's number over its target (its id space)
	schema string // upstream database
	name   string // current table name (guarded by the target's DDL runner)
}

func (s *shard) table() string { return "`" + s.schema + "`.`" + s.name + "`" }

// targets builds the soak's targets and their shards.
func targets() []*target {
	orders := &target{task: taskMain, name: "`merged`.`orders`", prefix: "orders", pk: true}
	events := &target{task: taskMain, name: "`merged`.`events`", prefix: "events"}
	entries := &target{task: taskSecond, name: "`merged2`.`entries`", prefix: "entries", pk: true}
	for _, t := range []*target{orders, events} {
		k := 0
		for src, n := range shardsPerSource {
			for j := 1; j <= n; j++ {
				t.shards = append(t.shards, &shard{source: src, index: k, schema: fmt.Sprintf("shop_%d", src+1), name: fmt.Sprintf("%s_%d", t.prefix, j)})
				k++
			}
		}
	}
	k := 0
	for src := 1; src <= 2; src++ {
		for j := 1; j <= 2; j++ {
			entries.shards = append(entries.shards, &shard{source: src, index: k, schema: fmt.Sprintf("logs_%d", src+1), name: fmt.Sprintf("entries_%d", j)})
			k++
		}
	}
	return []*target{orders, events, entries}
}

// createShard is the shard's table at the start: real-world columns (unsigned, DECIMAL, JSON, a
// generated column, utf8mb4 text, fractional timestamps).
func createShard(t *target, s *shard) string {
	switch t.prefix {
	case "orders":
		return "CREATE TABLE " + s.table() + ` (
  id BIGINT UNSIGNED NOT NULL,
  customer INT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status ENUM('new','paid','shipped','void') NOT NULL DEFAULT 'new',
  note VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
  doc JSON,
  amount_x2 DECIMAL(14,2) AS (amount * 2) VIRTUAL,
  created DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  KEY customer (customer)
)`
	case "events":
		return "CREATE TABLE " + s.table() + ` (
  shard TINYINT UNSIGNED NOT NULL,
  seq BIGINT UNSIGNED NOT NULL,
  kind VARCHAR(32) NOT NULL,
  payload MEDIUMTEXT CHARACTER SET utf8mb4,
  ts TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  KEY shard_seq (shard, seq)
)`
	default:
		return "CREATE TABLE " + s.table() + ` (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  level SMALLINT NOT NULL,
  msg TEXT CHARACTER SET utf8mb4 NOT NULL,
  at DATETIME NOT NULL
)`
	}
}

// soloTable is the unsharded table (source 1), replicated one to one.
const soloTable = "`solo`.`accounts`"

const createSolo = "CREATE TABLE " + soloTable + ` (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  balance DECIMAL(16,4) NOT NULL DEFAULT 0,
  owner VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL,
  updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
)`

// sourceID is upstream i's source-id.
func sourceID(i int) string { return e2e.SourceID(i) }

// writeTaskFiles writes the two tasks' files (task-mode all, online-ddl on for pt-osc).
func writeTaskFiles(dir string, downPort int) (main, second string, err error) {
	var inst strings.Builder
	for i := range shardsPerSource {
		fmt.Fprintf(&inst, "  - source-id: %s\n    block-allow-list: bw-main\n    route-rules: [orders, events, shop-schema]\n    syncer-config-name: global\n", sourceID(i))
	}
	common := func(name, instances, bal, routes string) string {
		return fmt.Sprintf(`name: %s
task-mode: all
shard-mode: pessimistic
meta-schema: dm_meta
online-ddl: true
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
mysql-instances:
%sblock-allow-list:
%sroutes:
%ssyncers:
  global:
    worker-count: 4
    batch: 256
`, name, downPort, instances, bal, routes)
	}
	mainBody := common(taskMain, inst.String(), `  bw-main:
    do-dbs: ["shop_*", "solo"]
`, `  orders:
    schema-pattern: "shop_*"
    table-pattern: "orders_*"
    target-schema: merged
    target-table: orders
  events:
    schema-pattern: "shop_*"
    table-pattern: "events_*"
    target-schema: merged
    target-table: events
  shop-schema:
    schema-pattern: "shop_*"
    target-schema: merged
`)
	var inst2 strings.Builder
	for i := 1; i <= 2; i++ {
		fmt.Fprintf(&inst2, "  - source-id: %s\n    block-allow-list: bw-logs\n    route-rules: [entries, logs-schema]\n    syncer-config-name: global\n", sourceID(i))
	}
	secondBody := common(taskSecond, inst2.String(), `  bw-logs:
    do-dbs: ["logs_*"]
`, `  entries:
    schema-pattern: "logs_*"
    table-pattern: "entries_*"
    target-schema: merged2
    target-table: entries
  logs-schema:
    schema-pattern: "logs_*"
    target-schema: merged2
`)
	main = filepath.Join(dir, taskMain+".yaml")
	second = filepath.Join(dir, taskSecond+".yaml")
	if err := os.WriteFile(main, []byte(mainBody), 0o644); err != nil {
		return "", "", err
	}
	return main, second, os.WriteFile(second, []byte(secondBody), 0o644)
}
