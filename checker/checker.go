// Package checker runs a task's prechecks (start-task, check-task) against the real upstreams and
// downstream: binlog settings, replication privileges, consistent shard schemas and a compatible
// existing target table; and that the meta schema and the task's meta tables can be created and written
// with the target user's privileges (meta_schema, which cannot be ignored), and that no other task of
// the cluster writes one of its targets (one_task_per_target, owner.go, run by the master, which knows
// the other tasks; it cannot be ignored either). A task that loads
// (task-mode all or full) also checks the privileges of the load's snapshot and reads (dump_privilege),
// that no target it would write holds rows already (table_empty), and reports how much it loads
// (load_size). A task of several sources also lists its shard groups across sources (shard_groups,
// topology.go: information, and a warning for a group some of its sources take no part in). Every
// task warns of a route, block-allow-list or filter rule that matches none of a source's tables
// (unmatched_rules, rules.go), and of shards merged into one target whose AUTO_INCREMENT keys can
// collide there, decided across all the task's sources (auto_increment_ID, autoinc.go). Items tells
// which items run for a task (items.go). Item names are DM's where DM has the item, so
// ignore-checking-items carries over.
//
// A check ends in an error (the task does not start), a warning (it starts; DM's behaviour for
// non-mandatory items) or information.
package checker

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/loader"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/router"
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
	// ItemDumpPrivilege (DM's): the source user may take the load's consistent snapshot and read the
	// replicated tables.
	ItemDumpPrivilege = "dump_privilege"
	// ItemTableEmpty: no target the load writes into holds rows already (unless on-duplicate merges
	// into them), and no hidden table of an earlier load is in the way. Not a DM item (DM checks
	// empty targets for its physical import only).
	ItemTableEmpty = "table_empty"
	// ItemLoadSize: information on how many rows and bytes each source loads. Not a DM item.
	ItemLoadSize = "load_size"
	// ItemMetaPosition: where an incremental task starts a source that has no checkpoint. A meta must
	// name a position the source has; a source without one starts at its current position, which is
	// said (rows written before are not copied). Not a DM item.
	ItemMetaPosition = "meta_position"
	// ItemGTIDMode: a MySQL source with enable-gtid runs gtid_mode=ON and enforce_gtid_consistency=ON,
	// so that every transaction has a GTID to resume by. Not a DM item.
	ItemGTIDMode = "gtid_mode"
)

// Known are the items ignore-checking-items may name ("all" ignores every item).
var Known = []string{ItemBinlogEnable, ItemBinlogFormat, ItemBinlogRowImage, ItemReplPrivilege, ItemShardSchema, ItemTableSchema,
	ItemDumpPrivilege, ItemTableEmpty, ItemLoadSize, ItemMetaPosition, ItemTargetPrivilege, ItemUnmatchedRules, ItemAutoIncrement, ItemGTIDMode}

// Level is how much a check's result weighs.
type Level int

// Levels.
const (
	Error   Level = iota // the task does not start
	Warning              // the task starts; the result says what is degraded or at risk
	Info                 // information only
)

func (l Level) String() string {
	switch l {
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return "error"
}

// Failure is one result of a check: a failure (Level Error, the zero value), a warning or
// information.
type Failure struct {
	Item    string
	Source  string // empty for the downstream
	Message string
	Level   Level
}

func (f Failure) String() string {
	item := f.Item
	if f.Level != Error {
		item += " " + f.Level.String()
	}
	if f.Source == "" {
		return fmt.Sprintf("[%s] downstream: %s", item, f.Message)
	}
	return fmt.Sprintf("[%s] source %s: %s", item, f.Source, f.Message)
}

// Report joins results into one message, one line each: errors first, then warnings, then
// information.
func Report(fs []Failure) string {
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, func(a, b Failure) int { return int(a.Level) - int(b.Level) })
	lines := make([]string, len(sorted))
	for i, f := range sorted {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// Failed reports whether a result is an error: the task may not start.
func Failed(fs []Failure) bool {
	return slices.ContainsFunc(fs, func(f Failure) bool { return f.Level == Error })
}

// report records a check's result at a level.
type report func(level Level, item, source, format string, args ...any)

func (r report) fail(item, source, format string, args ...any) {
	r(Error, item, source, format, args...)
}
func (r report) warn(item, source, format string, args ...any) {
	r(Warning, item, source, format, args...)
}
func (r report) info(item, source, format string, args ...any) {
	r(Info, item, source, format, args...)
}

type shardColumns struct {
	source string
	table  vocab.TableName
	cols   []string
}

// srcTable is a replicated table of a source, with information_schema's estimates of its size.
type srcTable struct {
	table, target vocab.TableName
	rows, bytes   int64
}

// loadInto is a source whose load plans where to write a target (its on-duplicate decides whether the
// target may hold rows).
type loadInto struct {
	source, onDuplicate string
}

// Check runs the prechecks of task over the given sources (by ID). It returns the results of the
// items not ignored: errors (Failed: the task may not start), warnings and information. fresh says
// the task's checkpoints will be removed (start-task --remove-meta): the schema checks then run even
// where a checkpoint exists, and a load starts again on every source.
func Check(ctx context.Context, task *config.Task, sources map[string]*config.Source, fresh bool) []Failure {
	ignored := map[string]bool{}
	for _, it := range task.IgnoreCheckingItems {
		ignored[it] = true
	}
	// "all" skips every check but the two a task cannot run without: the downstream answers, and the
	// meta tables can be created there.
	all := ignored["all"]
	var out []Failure
	r := report(func(level Level, item, source, format string, args ...any) {
		essential := item == ItemConnection || item == ItemMetaSchema
		if all && !essential || !all && ignored[item] && item != ItemMetaSchema {
			return
		}
		out = append(out, Failure{Item: item, Source: source, Message: fmt.Sprintf(format, args...), Level: level})
	})
	down, err := dbutil.OpenDB(task.TargetDatabase)
	if err == nil {
		defer down.Close()
		err = down.PingContext(ctx)
	}
	if err != nil {
		r.fail(ItemConnection, "", "target-database %s: %v", task.TargetDatabase, err)
		return out
	}
	if err := meta.Probe(ctx, down, task.MetaSchema, task.Name); err != nil {
		r.fail(ItemMetaSchema, "", "%v", err)
	}
	if all {
		return out
	}
	// The loads recorded in the checkpoint table: a source whose load is switched does not load
	// again, one that has a header resumes its load with the targets placed already.
	loads := map[string]loader.LoadState{}
	if task.Dumps() {
		if loads, err = loader.Loads(ctx, down, task.MetaSchema, task.Name); err != nil {
			r.fail(ItemConnection, "", "read the load state of task %s: %v", task.Name, err)
			loads = map[string]loader.LoadState{}
		}
	}
	byTarget := map[vocab.TableName][]shardColumns{}
	autoInc := map[vocab.TableName][]autoIncShard{}
	planned := map[vocab.TableName][]loadInto{}
	schemas := map[string]bool{} // the target databases
	for _, inst := range task.MySQLInstances {
		src, ok := sources[inst.SourceID]
		if !ok {
			r.fail(ItemConnection, inst.SourceID, "source is not created (dmctl operate-source create)")
			continue
		}
		db, err := dbutil.OpenDB(src.From)
		if err == nil {
			err = db.PingContext(ctx)
		}
		if err != nil {
			r.fail(ItemConnection, inst.SourceID, "from %s: %v", src.From, err)
			if db != nil {
				db.Close()
			}
			continue
		}
		checkSource(ctx, r, task, inst, src, db, down, fresh, loads, byTarget, autoInc, planned)
		_ = targetSchemas(ctx, db, task, inst, schemas) // a failure to list tables is reported above
		db.Close()
	}
	checkTargetPrivileges(ctx, r, down, task, schemas)
	if !ignored[ItemShardGroups] && len(task.MySQLInstances) > 1 {
		// A source that cannot be read is reported above; the groups are then not known.
		if tp, err := Topology(ctx, task, sources); err == nil {
			checkTopology(r, task, tp)
		}
	}
	targets := make([]vocab.TableName, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	vocab.SortTables(targets)
	for _, target := range targets {
		shards := byTarget[target]
		first := shards[0]
		for _, s := range shards[1:] {
			if !slices.Equal(s.cols, first.cols) {
				r.fail(ItemShardSchema, s.source, "shard %s has columns (%s) but %s on source %s has (%s); all shards of %s must have the same schema",
					s.table, strings.Join(s.cols, ", "), first.table, first.source, strings.Join(first.cols, ", "), target)
			}
		}
		cols, err := dbutil.Signature(ctx, down, target)
		if err != nil {
			r.fail(ItemTableSchema, "", "read %s: %v", target, err)
		} else if len(cols) > 0 && !slices.Equal(cols, first.cols) {
			r.fail(ItemTableSchema, "", "table %s exists with columns (%s) but shard %s on source %s has (%s); it is left untouched: fix or drop it by hand",
				target, strings.Join(cols, ", "), first.table, first.source, strings.Join(first.cols, ", "))
		}
	}
	for _, c := range autoIncCollisions(autoInc) {
		r.warn(ItemAutoIncrement, "", "%s", c.message())
	}
	if len(planned) > 0 && !ignored[ItemTableEmpty] {
		checkTargetsEmpty(ctx, r, down, task.MetaSchema, task.Name, fresh, loads, planned)
	}
	return out
}

// checkSource runs the checks of one source.
func checkSource(ctx context.Context, r report, task *config.Task, inst config.Instance, src *config.Source, db, down *sql.DB, fresh bool,
	loads map[string]loader.LoadState, byTarget map[vocab.TableName][]shardColumns, autoInc map[vocab.TableName][]autoIncShard, planned map[vocab.TableName][]loadInto) {
	source := inst.SourceID
	grants, inactiveRoles, grantsErr := globalGrants(ctx, db)
	if task.Syncs() {
		checkBinlog(ctx, db, source, r, true)
		if src.EnableGTID {
			checkGTIDMode(ctx, db, source, r)
		}
		if grantsErr != nil {
			r.fail(ItemReplPrivilege, source, "SHOW GRANTS: %v", grantsErr)
		} else {
			checkPrivileges(grants, inactiveRoles, source, r)
		}
	} else {
		// task-mode full: no binlog is replicated, but the load reads the snapshot's binlog position.
		checkBinlog(ctx, db, source, r, false)
	}
	resuming := false
	var err error
	if !fresh {
		if resuming, err = meta.HasCheckpoint(ctx, down, task.MetaSchema, task.Name, source); err != nil {
			r.fail(ItemConnection, "", "read checkpoint of task %s: %v", task.Name, err)
		}
	}
	if err == nil {
		checkStart(ctx, r, task, inst, src, db, resuming)
	}
	// The load runs unless this source's load was switched (handed over to the sync unit) already.
	state, hasLoad := loads[source]
	willLoad := task.Dumps() && (fresh || !state.Switched())
	ba, rules := task.Rules(inst)
	rt, err := router.NewRouter(ba, rules)
	if err != nil {
		r.fail(ItemConnection, source, "%v", err)
		return
	}
	estimates, err := dbutil.TableEstimates(ctx, db)
	if err != nil {
		r.fail(ItemConnection, source, "list tables: %v", err)
		return
	}
	tables := replicatedTables(estimates, rt)
	all := make([]vocab.TableName, len(estimates))
	for i, e := range estimates {
		all[i] = e.Table
	}
	warnings, err := unmatchedRules(task, inst, all)
	if err != nil {
		r.fail(ItemConnection, source, "%v", err)
	}
	for _, w := range warnings {
		r.warn(ItemUnmatchedRules, source, "%s", w)
	}
	// A task that resumes from a checkpoint may be mid-way through a sharding DDL: its shards
	// legitimately differ, and the target was created by the task itself.
	if resuming && !willLoad {
		return
	}
	if !resuming {
		if err := collectShards(ctx, db, source, tables, byTarget); err != nil {
			r.fail(ItemConnection, source, "list tables: %v", err)
		}
		if err := collectAutoInc(ctx, db, source, tables, autoInc); err != nil {
			r.warn(ItemAutoIncrement, source, "the AUTO_INCREMENT keys of the shards are not compared: %v", err)
		}
	}
	if !willLoad {
		return
	}
	if grantsErr != nil {
		r.fail(ItemDumpPrivilege, source, "SHOW GRANTS: %v", grantsErr)
	} else {
		checkDumpPrivileges(ctx, db, source, grants, tables, r)
	}
	var rows, bytes int64
	for _, t := range tables {
		rows += t.rows
		bytes += t.bytes
	}
	what := "the full load copies"
	if hasLoad && !fresh {
		what = "the full load resumes, copying what remains of"
	}
	r.info(ItemLoadSize, source, "%s %d tables: about %d rows, %s (information_schema's estimates, scaled to the tables' files where those have grown past them)", what, len(tables), rows, humanBytes(bytes))
	// A source with a load header resumes it: its targets are placed already. Otherwise its load
	// plans where each target goes, and refuses a target holding rows unless on-duplicate merges.
	if hasLoad && !fresh {
		return
	}
	onDup := task.LoadOf(inst).OnDuplicate
	seen := map[vocab.TableName]bool{}
	for _, t := range tables {
		if !seen[t.target] {
			seen[t.target] = true
			planned[t.target] = append(planned[t.target], loadInto{source: source, onDuplicate: onDup})
		}
	}
}

// NoMeta is the start of ItemMetaPosition's warning for a source without a meta (the master names
// the position it started at in start-task's answer).
const NoMeta = "no meta: the task starts this source at its current binlog position"

// checkStart checks where an incremental task starts a source that has no checkpoint (or whose
// checkpoint start-task --remove-meta removes): at its meta, which must be a position the source has;
// without one, at its current position.
func checkStart(ctx context.Context, r report, task *config.Task, inst config.Instance, src *config.Source, db *sql.DB, resuming bool) {
	source := inst.SourceID
	if task.TaskMode != "incremental" || resuming {
		return // it loads first, or resumes from its checkpoint
	}
	m := inst.Meta
	if m == nil || m.BinlogName == "" && (m.BinlogGTID == "" || !src.EnableGTID) {
		r.warn(ItemMetaPosition, source, "%s; rows written before are not copied (give the source a meta with binlog-name and binlog-pos, or use task-mode: all to load them)", NoMeta)
		return
	}
	if src.EnableGTID && m.BinlogGTID != "" {
		checkStartGTID(ctx, r, source, m.BinlogGTID, db, src.Flavor)
		return
	}
	files, err := dbutil.BinaryLogs(ctx, db)
	if err != nil {
		r.fail(ItemMetaPosition, source, "SHOW BINARY LOGS: %v", err)
		return
	}
	if len(files) == 0 {
		r.fail(ItemMetaPosition, source, "meta binlog-name %s: the source has no binlog files (is log-bin on?)", m.BinlogName)
		return
	}
	for _, f := range files {
		if f.Name != m.BinlogName {
			continue
		}
		if int64(m.BinlogPos) > f.Size {
			r.fail(ItemMetaPosition, source, "meta binlog-pos %d is past the end of %s (%d bytes): set binlog-pos to a position in the file (SHOW BINLOG EVENTS IN '%s')",
				m.BinlogPos, f.Name, f.Size, f.Name)
		}
		return
	}
	r.fail(ItemMetaPosition, source, "meta binlog-name %s is not a binlog file of the source, which has %s to %s (SHOW BINARY LOGS): it was purged, "+
		"or the server names its binlog otherwise (log-bin's base name); set binlog-name and binlog-pos to a position the source has, or use task-mode: all",
		m.BinlogName, files[0].Name, files[len(files)-1].Name)
}

// checkStartGTID checks a MariaDB meta binlog-gtid against the source's binlog: every domain it names
// must be there, no further than the source's last GTID of the domain. (A GTID the source purged is
// found by the reader, which pauses the subtask saying so.)
func checkStartGTID(ctx context.Context, r report, source, gtid string, db *sql.DB, flavor string) {
	if flavor == "mysql" {
		return
	}
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return // not MariaDB: the reader says what the source has if it cannot start there
	}
	last := map[string]uint64{}
	for _, g := range strings.Split(pos, ",") {
		if d, _, seq, ok := splitGTID(g); ok {
			last[d] = seq
		}
	}
	for _, g := range strings.Split(gtid, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		d, _, seq, ok := splitGTID(g)
		if !ok {
			r.fail(ItemMetaPosition, source, "meta binlog-gtid %q: %q is not a MariaDB GTID (domain-server-sequence)", gtid, g)
			return
		}
		if have, ok := last[d]; !ok || seq > have {
			r.fail(ItemMetaPosition, source, "meta binlog-gtid %s names %s, which the source's binlog does not reach (gtid_binlog_pos %s)", gtid, g, cmp.Or(pos, "empty"))
			return
		}
	}
}

func splitGTID(g string) (domain, server string, seq uint64, ok bool) {
	parts := strings.Split(strings.TrimSpace(g), "-")
	if len(parts) != 3 {
		return "", "", 0, false
	}
	n, err := strconv.ParseUint(parts[2], 10, 64)
	return parts[0], parts[1], n, err == nil
}

// checkTargetsEmpty checks the targets that a load will place: one that exists must be empty unless
// every source loading into it merges (on-duplicate ignore or replace); one that does not must not
// have a table of its hidden name that the task's loads did not create (a load refuses to write into
// it, and --remove-meta to drop it).
func checkTargetsEmpty(ctx context.Context, r report, down *sql.DB, metaSchema, task string, fresh bool, loads map[string]loader.LoadState, planned map[vocab.TableName][]loadInto) {
	placed := map[vocab.TableName]bool{} // targets a resumed load placed already
	for _, st := range loads {
		for _, m := range st.Targets {
			if !fresh {
				placed[m.Target] = true
			}
		}
	}
	targets := make([]vocab.TableName, 0, len(planned))
	for t := range planned {
		if !placed[t] {
			targets = append(targets, t)
		}
	}
	vocab.SortTables(targets)
	for _, target := range targets {
		exists, err := tableExists(ctx, down, target)
		if err != nil {
			r.fail(ItemTableEmpty, "", "%v", err)
			continue
		}
		if !exists {
			// The load places it under a hidden name: a table of that name must be the task's loads'.
			if err := loader.HiddenConflict(ctx, down, metaSchema, task, target, fresh); err != nil {
				r.fail(ItemTableEmpty, "", "%v", err)
			}
			continue
		}
		var strict []string
		for _, l := range planned[target] {
			if l.onDuplicate != "ignore" && l.onDuplicate != "replace" {
				strict = append(strict, l.source)
			}
		}
		if len(strict) == 0 {
			continue
		}
		var one int
		err = down.QueryRowContext(ctx, "SELECT 1 FROM "+target.String()+" LIMIT 1").Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			r.fail(ItemTableEmpty, "", "look into %s: %v", target, err)
		default:
			r.fail(ItemTableEmpty, "", "table %s exists and holds rows: the full load of source %s does not write into it (loaders on-duplicate: error). Empty or drop it, or set the loaders' on-duplicate to ignore or replace to merge the load into its rows",
				target, strings.Join(strict, ", "))
		}
	}
}

func tableExists(ctx context.Context, db *sql.DB, t vocab.TableName) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for %s: %w", t, err)
	}
	return n > 0, nil
}

// checkBinlog checks log_bin and, when the task replicates the binlog, its format and row image.
func checkBinlog(ctx context.Context, db *sql.DB, source string, r report, syncs bool) {
	var logBin, format, image string
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format, @@binlog_row_image").Scan(&logBin, &format, &image); err != nil {
		r.fail(ItemBinlogEnable, source, "read binlog settings: %v", err)
		return
	}
	if logBin != "1" && !strings.EqualFold(logBin, "ON") {
		if syncs {
			r.fail(ItemBinlogEnable, source, "log_bin is OFF; start the server with log_bin")
		} else {
			r.fail(ItemBinlogEnable, source, "log_bin is OFF: the load reads its snapshot's binlog position; start the server with log_bin")
		}
	}
	if !syncs {
		return
	}
	if !strings.EqualFold(format, "ROW") {
		r.fail(ItemBinlogFormat, source, "binlog_format is %s, must be ROW (SET GLOBAL binlog_format = ROW, and in the server's configuration)", format)
	}
	if !strings.EqualFold(image, "FULL") {
		r.fail(ItemBinlogRowImage, source, "binlog_row_image is %s, must be FULL (SET GLOBAL binlog_row_image = FULL, and in the server's configuration)", image)
	}
	var options string
	if db.QueryRowContext(ctx, "SELECT @@binlog_row_value_options").Scan(&options) == nil && strings.Contains(strings.ToUpper(options), "PARTIAL_JSON") {
		// MySQL 8 only (MariaDB has no such variable)
		r.fail(ItemBinlogRowImage, source, "binlog_row_value_options is PARTIAL_JSON: JSON updates are logged as diffs, which cannot be written whole and stop replication at the first; "+
			"SET GLOBAL binlog_row_value_options = '' (and in the server's configuration)")
	}
}

// globalGrants returns the user's grants ON *.*, upper case, one a line, with those of the MySQL 8
// roles granted to it that are active in its sessions (its default roles, or all of them with
// activate_all_roles_on_login): SHOW GRANTS lists a role as GRANT `r`@`%` TO the user, not its
// privileges. A role that is not active gives nothing; its privileges are left out, and the failure
// that follows says which roles to activate.
func globalGrants(ctx context.Context, db *sql.DB) (global string, inactive []string, err error) {
	lines, err := showGrants(ctx, db, "SHOW GRANTS")
	if err != nil {
		return "", nil, err
	}
	var roles []string
	for _, g := range lines {
		if strings.Contains(g, " ON *.* ") {
			global += strings.ToUpper(g) + "\n"
		} else if m := roleGrant.FindStringSubmatch(g); m != nil {
			roles = append(roles, m[1])
		}
	}
	if len(roles) == 0 {
		return global, nil, nil
	}
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_ROLE()").Scan(&current); err != nil {
		return global, nil, nil // not MySQL 8's roles
	}
	if !current.Valid || strings.EqualFold(current.String, "NONE") {
		return global, roles, nil
	}
	via, err := showGrants(ctx, db, "SHOW GRANTS FOR CURRENT_USER() USING "+current.String)
	if err != nil {
		return "", nil, err
	}
	for _, g := range via {
		if strings.Contains(g, " ON *.* ") {
			global += strings.ToUpper(g) + "\n"
		}
	}
	return global, nil, nil
}

// roleGrant is SHOW GRANTS's line of roles granted to the user (MySQL 8): GRANT `r1`@`%`,`r2`@`%` TO ...
var roleGrant = regexp.MustCompile("^GRANT (`[^`]+`@`[^`]*`(?:\\s*,\\s*`[^`]+`@`[^`]*`)*) TO ")

func showGrants(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// checkGTIDMode: a MySQL source with enable-gtid must give every transaction a GTID (gtid_mode=ON,
// enforce_gtid_consistency=ON); MariaDB always does.
func checkGTIDMode(ctx context.Context, db *sql.DB, source string, r report) {
	var mode, enforce string
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_mode, @@enforce_gtid_consistency").Scan(&mode, &enforce); err != nil {
		return // MariaDB: no such variables
	}
	if !strings.EqualFold(mode, "ON") || !(strings.EqualFold(enforce, "ON") || enforce == "1") {
		r.fail(ItemGTIDMode, source, "enable-gtid needs gtid_mode=ON and enforce_gtid_consistency=ON on a MySQL source (they are %s and %s): "+
			"set them (the reference manual's \"Enabling GTID Transactions Online\"), or set enable-gtid: false in the source file", mode, enforce)
	}
}

func hasAll(global string) bool { return strings.Contains(global, "ALL PRIVILEGES") }

func hasReplClient(global string) bool {
	return hasAll(global) || strings.Contains(global, "REPLICATION CLIENT") || strings.Contains(global, "BINLOG MONITOR")
}

// checkPrivileges looks for REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: or BINLOG MONITOR) and
// SELECT in the user's global grants.
func checkPrivileges(global string, inactiveRoles []string, source string, r report) {
	if hasAll(global) {
		return
	}
	var missing []string
	if !strings.Contains(global, "REPLICATION SLAVE") && !strings.Contains(global, "REPLICATION REPLICA") {
		missing = append(missing, "REPLICATION SLAVE")
	}
	if !hasReplClient(global) {
		missing = append(missing, "REPLICATION CLIENT")
	}
	if !strings.Contains(global, "SELECT") {
		missing = append(missing, "SELECT")
	}
	if len(missing) > 0 {
		if len(inactiveRoles) > 0 {
			r.fail(ItemReplPrivilege, source, "the user lacks %s ON *.*; its roles %s are not active when it logs in, so their privileges do not count "+
				"(SET DEFAULT ROLE ALL TO the source's user, or activate_all_roles_on_login=ON)", strings.Join(missing, ", "), strings.Join(inactiveRoles, ", "))
			return
		}
		r.fail(ItemReplPrivilege, source, "the user lacks %s ON *.* (GRANT %s ON *.* TO the source's user)", strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
}

// snapshotGrants judges the global grants for the load's snapshot: FLUSH TABLES WITH READ LOCK needs
// RELOAD, and SHOW MASTER STATUS under it REPLICATION CLIENT (BINLOG MONITOR on MariaDB 10.5+).
// Without RELOAD, MariaDB gives a consistent snapshot's binlog position without a lock, to one reader
// (a warning); MySQL does not (an error).
func snapshotGrants(global string, mariadb bool) (errs, warns []string) {
	reload := hasAll(global) || strings.Contains(global, "RELOAD")
	switch {
	case !reload && mariadb:
		warns = append(warns, "the user lacks RELOAD ON *.*: the load cannot take FLUSH TABLES WITH READ LOCK, so it reads the source with one connection on MariaDB's lock-free consistent snapshot instead of mydumpers threads connections (GRANT RELOAD ON *.* TO the source's user for parallel reads)")
	case !reload:
		errs = append(errs, "the user lacks RELOAD ON *.*: the load takes its consistent snapshot under FLUSH TABLES WITH READ LOCK, and MySQL has no lock-free way to read a snapshot's binlog position (GRANT RELOAD ON *.* TO the source's user)")
	case !hasReplClient(global):
		errs = append(errs, "the user lacks REPLICATION CLIENT (or BINLOG MONITOR) ON *.*: the load reads the snapshot's binlog position with SHOW MASTER STATUS (GRANT REPLICATION CLIENT ON *.* TO the source's user)")
	}
	return errs, warns
}

// checkDumpPrivileges checks what the load needs of the source user: the snapshot's privileges, and
// SELECT on every replicated table.
func checkDumpPrivileges(ctx context.Context, db *sql.DB, source, global string, tables []srcTable, r report) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT @@version").Scan(&version); err != nil {
		r.fail(ItemDumpPrivilege, source, "read the server version: %v", err)
		return
	}
	errs, warns := snapshotGrants(global, strings.Contains(strings.ToLower(version), "mariadb"))
	for _, e := range errs {
		r.fail(ItemDumpPrivilege, source, "%s", e)
	}
	for _, w := range warns {
		r.warn(ItemDumpPrivilege, source, "%s", w)
	}
	if hasAll(global) || strings.Contains(global, "SELECT") {
		return
	}
	// No SELECT ON *.*: try each table the user can see. A table it holds no privilege on at all is
	// not in its information_schema, so neither this check nor the load finds it.
	var denied []string
	for _, t := range tables {
		_, err := db.ExecContext(ctx, "SELECT 1 FROM "+t.table.String()+" LIMIT 0")
		var me *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &me) && (me.Number == 1142 || me.Number == 1143 || me.Number == 1044):
			denied = append(denied, t.table.String())
		default:
			r.fail(ItemDumpPrivilege, source, "read %s: %v", t.table, err)
		}
	}
	if len(denied) > 0 {
		const show = 10
		list := strings.Join(denied[:min(len(denied), show)], ", ")
		if len(denied) > show {
			list += fmt.Sprintf(" and %d more", len(denied)-show)
		}
		r.fail(ItemDumpPrivilege, source, "the user lacks SELECT on %s, which the load reads (GRANT SELECT ON the schemas or *.* TO the source's user)", list)
	}
	r.warn(ItemDumpPrivilege, source, "the user has no SELECT ON *.*: a table it holds no privilege on is invisible to it and is not loaded (%d replicated tables are visible)", len(tables))
}

// listTables lists the source's tables that the task replicates, with their size estimates.
func listTables(ctx context.Context, db *sql.DB, rt *router.Router) ([]srcTable, error) {
	tables, err := dbutil.TableEstimates(ctx, db)
	if err != nil {
		return nil, err
	}
	return replicatedTables(tables, rt), nil
}

// replicatedTables keeps the tables that the task replicates, with their targets.
func replicatedTables(tables []dbutil.TableEstimate, rt *router.Router) []srcTable {
	var out []srcTable
	for _, e := range tables {
		if !rt.Skip(e.Table) {
			out = append(out, srcTable{table: e.Table, target: rt.Route(e.Table), rows: e.Rows, bytes: e.Bytes})
		}
	}
	return out
}

func collectShards(ctx context.Context, db *sql.DB, source string, tables []srcTable, byTarget map[vocab.TableName][]shardColumns) error {
	for _, t := range tables {
		cols, err := dbutil.Signature(ctx, db, t.table)
		if err != nil {
			return err
		}
		byTarget[t.target] = append(byTarget[t.target], shardColumns{source: source, table: t.table, cols: cols})
	}
	return nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
