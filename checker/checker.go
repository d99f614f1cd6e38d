// Package checker runs a task's prechecks (start-task, check-task) against the real upstreams and
// downstream: binlog settings, replication privileges, consistent shard schemas and a compatible
// existing target table; and that the meta schema and the task's meta tables can be created and written
// with the target user's privileges (meta_schema, which cannot be ignored). Item names are DM's, so
// ignore-checking-items carries over.
package checker

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/shardgroup"
)

// Item names (DM's).
const (
	ItemBinlogEnable   = "binlog_enable"
	ItemBinlogFormat   = "binlog_format"
	ItemBinlogRowImage = "binlog_row_image"
	ItemReplPrivilege  = "replication_privilege"
	ItemShardSchema    = "schema_of_shard_tables"
	ItemTableSchema    = "table_schema"
	ItemConnection     = "connection" // cannot be ignored
	// ItemMetaSchema: the meta schema and the task's meta tables can be created and written with the
	// target user's privileges. It cannot be ignored: no subtask starts without them.
	ItemMetaSchema = "meta_schema"
)

// Known are the items ignore-checking-items may name ("all" ignores every item).
var Known = []string{ItemBinlogEnable, ItemBinlogFormat, ItemBinlogRowImage, ItemReplPrivilege, ItemShardSchema, ItemTableSchema}

// Failure is one failed check.
type Failure struct {
	Item    string
	Source  string // empty for the downstream
	Message string
}

func (f Failure) String() string {
	if f.Source == "" {
		return fmt.Sprintf("[%s] downstream: %s", f.Item, f.Message)
	}
	return fmt.Sprintf("[%s] source %s: %s", f.Item, f.Source, f.Message)
}

// Report joins failures into one message, one line each.
func Report(fs []Failure) string {
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

type shardColumns struct {
	source string
	table  shardgroup.TableName
	cols   []string
}

// Check runs the prechecks of task over the given sources (by ID). It returns the failures of the
// items not ignored; an empty result means the task may start. fresh says the task's checkpoints will
// be removed (start-task --remove-meta): the schema checks then run even where a checkpoint exists.
func Check(ctx context.Context, task *config.Task, sources map[string]*config.Source, fresh bool) []Failure {
	ignored := map[string]bool{}
	for _, it := range task.IgnoreCheckingItems {
		ignored[it] = true
	}
	// "all" skips every check but the two a task cannot run without: the downstream answers, and the
	// meta tables can be created there.
	all := ignored["all"]
	var out []Failure
	fail := func(item, source, format string, args ...any) {
		essential := item == ItemConnection || item == ItemMetaSchema
		if all && !essential || !all && ignored[item] && item != ItemMetaSchema {
			return
		}
		out = append(out, Failure{Item: item, Source: source, Message: fmt.Sprintf(format, args...)})
	}
	down, err := dbutil.OpenDB(task.TargetDatabase)
	if err == nil {
		defer down.Close()
		err = down.PingContext(ctx)
	}
	if err != nil {
		fail(ItemConnection, "", "target-database %s: %v", task.TargetDatabase, err)
		return out
	}
	if err := meta.Probe(ctx, down, task.MetaSchema, task.Name); err != nil {
		fail(ItemMetaSchema, "", "%v", err)
	}
	if all {
		return out
	}
	byTarget := map[shardgroup.TableName][]shardColumns{}
	for _, inst := range task.MySQLInstances {
		src, ok := sources[inst.SourceID]
		if !ok {
			fail(ItemConnection, inst.SourceID, "source is not created (dmctl operate-source create)")
			continue
		}
		db, err := dbutil.OpenDB(src.From)
		if err == nil {
			err = db.PingContext(ctx)
		}
		if err != nil {
			fail(ItemConnection, inst.SourceID, "from %s: %v", src.From, err)
			if db != nil {
				db.Close()
			}
			continue
		}
		checkBinlog(ctx, db, inst.SourceID, fail)
		checkPrivileges(ctx, db, inst.SourceID, fail)
		resuming := false
		if !fresh {
			if resuming, err = meta.HasCheckpoint(ctx, down, task.MetaSchema, task.Name, inst.SourceID); err != nil {
				fail(ItemConnection, "", "read checkpoint of task %s: %v", task.Name, err)
			}
		}
		// A task that resumes from a checkpoint may be mid-way through a sharding DDL: its shards
		// legitimately differ, and the target was created by the task itself.
		if !resuming {
			ba, rules := task.Rules(inst)
			rt, err := router.NewRouter(ba, rules)
			if err != nil {
				fail(ItemConnection, inst.SourceID, "%v", err)
			} else if err := collectShards(ctx, db, inst.SourceID, rt, byTarget); err != nil {
				fail(ItemConnection, inst.SourceID, "list tables: %v", err)
			}
		}
		db.Close()
	}
	targets := make([]shardgroup.TableName, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Less(targets[j]) })
	for _, target := range targets {
		shards := byTarget[target]
		first := shards[0]
		for _, s := range shards[1:] {
			if !slices.Equal(s.cols, first.cols) {
				fail(ItemShardSchema, s.source, "shard %s has columns (%s) but %s on source %s has (%s); all shards of %s must have the same schema",
					s.table, strings.Join(s.cols, ", "), first.table, first.source, strings.Join(first.cols, ", "), target)
			}
		}
		cols, err := dbutil.Signature(ctx, down, target)
		if err != nil {
			fail(ItemTableSchema, "", "read %s: %v", target, err)
		} else if len(cols) > 0 && !slices.Equal(cols, first.cols) {
			fail(ItemTableSchema, "", "table %s exists with columns (%s) but shard %s on source %s has (%s); it is left untouched: fix or drop it by hand",
				target, strings.Join(cols, ", "), first.table, first.source, strings.Join(first.cols, ", "))
		}
	}
	return out
}

func checkBinlog(ctx context.Context, db *sql.DB, source string, fail func(item, source, format string, args ...any)) {
	var logBin, format, image string
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format, @@binlog_row_image").Scan(&logBin, &format, &image); err != nil {
		fail(ItemBinlogEnable, source, "read binlog settings: %v", err)
		return
	}
	if logBin != "1" && !strings.EqualFold(logBin, "ON") {
		fail(ItemBinlogEnable, source, "log_bin is OFF; start the server with log_bin")
	}
	if !strings.EqualFold(format, "ROW") {
		fail(ItemBinlogFormat, source, "binlog_format is %s, must be ROW (SET GLOBAL binlog_format = ROW, and in the server's configuration)", format)
	}
	if !strings.EqualFold(image, "FULL") {
		fail(ItemBinlogRowImage, source, "binlog_row_image is %s, must be FULL (SET GLOBAL binlog_row_image = FULL, and in the server's configuration)", image)
	}
}

// checkPrivileges looks for REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: or BINLOG MONITOR) and
// SELECT in the user's global grants.
func checkPrivileges(ctx context.Context, db *sql.DB, source string, fail func(item, source, format string, args ...any)) {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		fail(ItemReplPrivilege, source, "SHOW GRANTS: %v", err)
		return
	}
	defer rows.Close()
	var global string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			fail(ItemReplPrivilege, source, "SHOW GRANTS: %v", err)
			return
		}
		if strings.Contains(g, " ON *.* ") {
			global += strings.ToUpper(g) + "\n"
		}
	}
	if strings.Contains(global, "ALL PRIVILEGES") {
		return
	}
	var missing []string
	if !strings.Contains(global, "REPLICATION SLAVE") && !strings.Contains(global, "REPLICATION REPLICA") {
		missing = append(missing, "REPLICATION SLAVE")
	}
	if !strings.Contains(global, "REPLICATION CLIENT") && !strings.Contains(global, "BINLOG MONITOR") {
		missing = append(missing, "REPLICATION CLIENT")
	}
	if !strings.Contains(global, "SELECT") {
		missing = append(missing, "SELECT")
	}
	if len(missing) > 0 {
		fail(ItemReplPrivilege, source, "the user lacks %s ON *.* (GRANT %s ON *.* TO the source's user)", strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
}

func collectShards(ctx context.Context, db *sql.DB, source string, rt *router.Router, byTarget map[shardgroup.TableName][]shardColumns) error {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
	if err != nil {
		return err
	}
	var tables []shardgroup.TableName
	for rows.Next() {
		var t shardgroup.TableName
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			rows.Close()
			return err
		}
		if !rt.Skip(t) {
			tables = append(tables, t)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		cols, err := dbutil.Signature(ctx, db, t)
		if err != nil {
			return err
		}
		target := rt.Route(t)
		byTarget[target] = append(byTarget[target], shardColumns{source: source, table: t, cols: cols})
	}
	return nil
}
