package meta

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

func pos(n uint32) vocab.Position { return vocab.Position{File: "mysql-bin.000007", Pos: n} }

func TestTableNamesFitMySQLIdentifiers(t *testing.T) {
	short := CheckpointTable("m", "shard")
	if short.Name != "shard_checkpoint" || MarkerTable("m", "shard").Name != "shard_ddl_marker" {
		t.Fatalf("short names: %s %s", short, MarkerTable("m", "shard"))
	}
	fits := strings.Repeat("t", MaxIdentifier-len(checkpointSuffix))
	if got := CheckpointTable("m", fits).Name; got != fits+checkpointSuffix {
		t.Fatalf("a name that just fits was changed: %s", got)
	}
	long := strings.Repeat("a", 59) + "1"
	other := strings.Repeat("a", 59) + "2"
	for _, f := range []func(string, string) vocab.TableName{CheckpointTable, MarkerTable} {
		a, b := f("m", long).Name, f("m", other).Name
		if len(a) != MaxIdentifier || len(b) != MaxIdentifier || a == b || !strings.HasPrefix(a, strings.Repeat("a", 40)) {
			t.Fatalf("long names %q %q", a, b)
		}
	}
}

// roundTrip writes every kind of checkpoint row and a marker through a store, and reads them back.
func roundTrip(t *testing.T, db *sql.DB, schema, task, source string) {
	t.Helper()
	ctx := context.Background()
	long := vocab.TableName{Schema: "db_1", Name: strings.Repeat("x", 1980) + "_表_🙂"}
	if id := tableID("", long); len(id) < 2000 {
		t.Fatalf("the long id has %d bytes", len(id))
	}
	st := NewStore(db, schema, task, source)
	st.SetEpoch(3)
	if err := st.Init(ctx); err != nil {
		t.Fatal(err)
	}
	target := vocab.TableName{Schema: "db", Name: "t"}
	up := CheckpointUpdate{
		Global: pos(4), GlobalGTID: "0-1-100",
		Tables:         map[vocab.TableName]vocab.Position{long: pos(10), {Schema: "db_1", Name: "t_1"}: pos(11)},
		Resolved:       map[vocab.TableName]vocab.Position{long: pos(12)},
		Schemas:        map[vocab.TableName]string{long: `[{"from":{"file":"","pos":0},"cols":["id"]}]`},
		Online:         map[vocab.TableName]string{long: `{"ghost":{"Schema":"db_1","Name":"_t_gho"}}`, {Schema: "db_1", Name: "t_2"}: ""},
		ResolvedTarget: &target, ResolvedDDLs: []string{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT"},
		// Lanes of a long table name, of two key versions with the same lane numbers, and a chunked lane
		// with a hashed one's numbers and key: kept apart.
		Lanes: map[vocab.TableName][]Lane{long: {{N: 4, Index: 1, Cols: []string{"id"}, Pos: pos(13)}, {N: 4, Index: 1, Cols: []string{"id", "k"}, Pos: pos(14)},
			{N: 16, Index: 15, Cols: []string{"id"}, Pos: pos(15)}, {N: 4, Index: 1, Chunk: 1024, Cols: []string{"id"}, Pos: pos(16)}}},
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckEpoch(ctx, tx, true); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(ctx, tx, up); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Writing the same rows again updates them.
	up.Tables[long] = pos(20)
	if err := st.Write(ctx, db, up); err != nil {
		t.Fatal(err)
	}
	cp, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Checkpoint{Global: pos(4), GlobalGTID: "0-1-100", Tables: up.Tables, Resolved: up.Resolved, Schemas: up.Schemas,
		ResolvedDDLs: map[vocab.TableName][]string{target: up.ResolvedDDLs},
		Online:       map[vocab.TableName]string{long: up.Online[long]}, // a run written as "" is over
		Lanes:        up.Lanes}
	slices.SortFunc(cp.Lanes[long], func(a, b Lane) int { return a.Pos.Compare(b.Pos) })
	if !reflect.DeepEqual(cp, want) {
		t.Fatalf("loaded %+v\nwant   %+v", cp, want)
	}
	if has, err := HasCheckpoint(ctx, db, schema, task, source); err != nil || !has {
		t.Fatalf("HasCheckpoint %v %v", has, err)
	}
	lockID := task + "-" + source + long.String()
	ddl := "ALTER TABLE `db`.`t` ADD COLUMN `c` INT COMMENT '" + strings.Repeat("é", 3000) + "'"
	if _, ok, err := st.Marker(ctx, lockID, ddl); ok || err != nil {
		t.Fatalf("marker before any: %v %v", ok, err)
	}
	if err := st.Mark(ctx, lockID, ddl, Marker{State: "started", Before: "before 🙂"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Mark(ctx, lockID, ddl, Marker{State: "done", Before: "before 🙂", After: "after"}); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := st.Marker(ctx, lockID, ddl); !ok || err != nil || m != (Marker{State: "done", Before: "before 🙂", After: "after"}) {
		t.Fatalf("marker %+v %v %v", m, ok, err)
	}
	// A stale epoch is fenced.
	stale := NewStore(db, schema, task, source)
	stale.SetEpoch(2)
	if err := stale.Init(ctx); err == nil || !strings.Contains(err.Error(), ErrFenced.Error()) {
		t.Fatalf("stale claim: %v", err)
	}
}

// TestLayoutOnEveryServer creates the meta tables of a task with a 60-character name on servers with
// utf8mb4, utf8mb3 and latin1 defaults and with the REDUNDANT and COMPACT row formats (767-byte index
// columns), and round-trips rows with ids of 2000 bytes.
func TestLayoutOnEveryServer(t *testing.T) {
	servers := map[string][]string{
		"utf8mb4":   nil,
		"utf8mb3":   {"--character-set-server=utf8mb3", "--collation-server=utf8mb3_general_ci"},
		"latin1":    mariadbtest.Latin1,
		"redundant": {"--innodb-default-row-format=redundant"},
		"compact":   append([]string{"--innodb-default-row-format=compact"}, mariadbtest.Latin1...),
	}
	for name, args := range servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := mariadbtest.Start(t, args...)
			db := s.DB(t)
			task := strings.Repeat("long_task_", 6)
			roundTrip(t, db, "dm_meta", task, "mysql-replica-01")
			roundTrip(t, db, "dm_meta", task, "mysql-replica-02") // a second source in the same tables
			for _, tbl := range []vocab.TableName{CheckpointTable("dm_meta", task), MarkerTable("dm_meta", task)} {
				var n, def string
				if err := db.QueryRow("SHOW CREATE TABLE "+tbl.String()).Scan(&n, &def); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(def, "DEFAULT CHARSET=utf8mb4") {
					t.Fatalf("%s:\n%s", tbl, def)
				}
				var format string
				if err := db.QueryRow("SELECT ROW_FORMAT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", tbl.Schema, tbl.Name).Scan(&format); err != nil {
					t.Fatal(err)
				}
				if (name == "redundant" || name == "compact") && !strings.EqualFold(format, name) {
					t.Fatalf("%s has row format %s", tbl, format)
				}
			}
			// Init again does nothing; Remove drops exactly the two tables.
			ctx := context.Background()
			if err := Init(ctx, db, "dm_meta", task); err != nil {
				t.Fatal(err)
			}
			s.Exec(t, db, "CREATE TABLE dm_meta.keep (id INT PRIMARY KEY)")
			if err := Remove(ctx, db, "dm_meta", task); err != nil {
				t.Fatal(err)
			}
			var tables []string
			rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dm_meta'")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n string
				rows.Scan(&n)
				tables = append(tables, n)
			}
			rows.Close()
			if len(tables) != 1 || tables[0] != "keep" {
				t.Fatalf("after Remove: %v", tables)
			}
			if has, err := HasCheckpoint(ctx, db, "dm_meta", task, "mysql-replica-01"); has || err != nil {
				t.Fatalf("HasCheckpoint after Remove: %v %v", has, err)
			}
		})
	}
}

// The DDL of the tables before this layout, exactly as Tributary created them.
const (
	oldCheckpointDDL = ` (
			source VARCHAR(128) NOT NULL,
			id VARCHAR(700) NOT NULL COMMENT 'upstream table (DML applied), resolved:<table> (last sharding DDL resolved), ddl:<target> (DDLs of the last lock), schema:<table> (tracked columns), empty (where to resume)',
			binlog_name VARCHAR(255) NOT NULL DEFAULT '',
			binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
			binlog_gtid TEXT NULL,
			ddls TEXT NULL,
			updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
			PRIMARY KEY (source, id))`
	oldMarkerDDL = ` (
			lock_id VARCHAR(700) NOT NULL COMMENT 'the shard DDL lock (or source:<id> for DDL of unsharded tables)',
			ddl_hash CHAR(64) NOT NULL COMMENT 'SHA-256 of the DDL',
			ddl TEXT NOT NULL,
			state VARCHAR(16) NOT NULL COMMENT 'started: about to run; done: ran',
			before_def MEDIUMTEXT NULL COMMENT 'definition of the DDL''s tables before it ran',
			after_def MEDIUMTEXT NULL COMMENT 'and after',
			source VARCHAR(128) NOT NULL,
			updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
			PRIMARY KEY (lock_id, ddl_hash))`
)

// oldTask creates a task's meta tables in the old layout and writes rows the way the old code did.
func oldTask(t *testing.T, s *mariadbtest.Server, db *sql.DB, task string) map[string]Checkpoint {
	t.Helper()
	ckpt, marker := CheckpointTable("dm_meta", task).String(), MarkerTable("dm_meta", task).String()
	s.Exec(t, db, "CREATE DATABASE IF NOT EXISTS dm_meta", "CREATE TABLE IF NOT EXISTS "+ckpt+oldCheckpointDDL, "CREATE TABLE IF NOT EXISTS "+marker+oldMarkerDDL)
	const put = " (source, id, binlog_name, binlog_pos, binlog_gtid, ddls) VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE " +
		"binlog_name = VALUES(binlog_name), binlog_pos = VALUES(binlog_pos), binlog_gtid = VALUES(binlog_gtid), ddls = VALUES(ddls)"
	js := func(t vocab.TableName) string { b, _ := json.Marshal(t); return string(b) }
	want := map[string]Checkpoint{}
	for i, src := range []string{"mysql-replica-01", "mysql-replica-02"} {
		n := uint32(1000 * (i + 1))
		t1, t2, target := vocab.TableName{Schema: "db_1", Name: "t_1"}, vocab.TableName{Schema: "db_1", Name: "t_2"}, vocab.TableName{Schema: "db", Name: "t"}
		ddls := []string{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT"}
		ddlsJS, _ := json.Marshal(ddls)
		schema := `[{"from":{"file":"","pos":0},"cols":["id","v"]}]`
		for _, q := range [][]any{
			{src, "epoch", "", 0, nil, nil},
			{src, js(t1), "mysql-bin.000003", n + 1, nil, nil},
			{src, js(t2), "mysql-bin.000003", n + 2, nil, nil},
			{src, "resolved:" + js(t1), "mysql-bin.000003", n + 3, nil, nil},
			{src, "ddl:" + js(target), "", 0, nil, string(ddlsJS)},
			{src, "schema:" + js(t1), "", 0, nil, schema},
			{src, "", "mysql-bin.000003", n + 4, fmt.Sprintf("0-1-%d", n), nil},
		} {
			if _, err := db.Exec("INSERT INTO "+ckpt+put, q...); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec("INSERT INTO "+ckpt+" (source, id, binlog_pos) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE binlog_pos = GREATEST(binlog_pos, VALUES(binlog_pos))", src, "epoch", 5); err != nil {
			t.Fatal(err)
		}
		want[src] = Checkpoint{Global: vocab.Position{File: "mysql-bin.000003", Pos: n + 4}, GlobalGTID: fmt.Sprintf("0-1-%d", n),
			Tables:       map[vocab.TableName]vocab.Position{t1: {File: "mysql-bin.000003", Pos: n + 1}, t2: {File: "mysql-bin.000003", Pos: n + 2}},
			Resolved:     map[vocab.TableName]vocab.Position{t1: {File: "mysql-bin.000003", Pos: n + 3}},
			ResolvedDDLs: map[vocab.TableName][]string{target: ddls},
			Schemas:      map[vocab.TableName]string{t1: schema}, Online: map[vocab.TableName]string{}, Lanes: map[vocab.TableName][]Lane{}}
	}
	ddl := "ALTER TABLE `db`.`t` ADD COLUMN `c` INT"
	if _, err := db.Exec("INSERT INTO "+marker+" (lock_id, ddl_hash, ddl, state, before_def, after_def, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
		task+"-`db`.`t`", Hash(ddl), ddl, "done", "before", "after", "mysql-replica-01"); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestMigrateOldLayout: tables the previous version created on a latin1 server are migrated in place
// by Init, concurrently called by several workers, also when an earlier migration stopped half-way;
// every position survives, the marker is found, and writes work afterwards. A migrated table is
// defined exactly as a new one. A foreign table under the name is refused.
func TestMigrateOldLayout(t *testing.T) {
	s := mariadbtest.Start(t, mariadbtest.Latin1...)
	db := s.DB(t)
	ctx := context.Background()
	wants := map[string]map[string]Checkpoint{}
	for _, task := range []string{"plain", "halfway"} {
		wants[task] = oldTask(t, s, db, task)
	}
	// A migration that stopped after its first step.
	s.Exec(t, db, "ALTER TABLE dm_meta.halfway_checkpoint ADD COLUMN id_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL")
	if err := checkpointLayout.fillHashes(ctx, db, CheckpointTable("dm_meta", "halfway")); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, db, "ALTER TABLE dm_meta.halfway_ddl_marker ADD COLUMN lock_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL")

	for task, want := range wants {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = Init(ctx, db, "dm_meta", task)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("task %s: %v", task, err)
			}
		}
		for src, w := range want {
			st := NewStore(db, "dm_meta", task, src)
			st.SetEpoch(5)
			if err := st.Init(ctx); err != nil {
				t.Fatal(err)
			}
			cp, err := st.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cp, w) {
				t.Fatalf("task %s source %s after the migration:\n%+v\nwant\n%+v", task, src, cp, w)
			}
			// Writes update the migrated rows.
			t1 := vocab.TableName{Schema: "db_1", Name: "t_1"}
			if err := st.Write(ctx, db, CheckpointUpdate{Global: pos(99), Tables: map[vocab.TableName]vocab.Position{t1: pos(98)}}); err != nil {
				t.Fatal(err)
			}
			if cp, err = st.Load(ctx); err != nil || cp.Global != pos(99) || cp.Tables[t1] != pos(98) || len(cp.Tables) != 2 {
				t.Fatalf("after a write: %+v %v", cp, err)
			}
			stale := NewStore(db, "dm_meta", task, src)
			stale.SetEpoch(4)
			if err := stale.Init(ctx); err == nil || !strings.Contains(err.Error(), ErrFenced.Error()) {
				t.Fatalf("the migrated epoch does not fence: %v", err)
			}
		}
		st := NewStore(db, "dm_meta", task, "mysql-replica-01")
		ddl := "ALTER TABLE `db`.`t` ADD COLUMN `c` INT"
		if m, ok, err := st.Marker(ctx, task+"-`db`.`t`", ddl); !ok || err != nil || m != (Marker{State: "done", Before: "before", After: "after"}) {
			t.Fatalf("marker after the migration: %+v %v %v", m, ok, err)
		}
	}
	// Defined as new tables are.
	if err := Init(ctx, db, "dm_meta", "fresh"); err != nil {
		t.Fatal(err)
	}
	def := func(tbl vocab.TableName, task string) string {
		var n, d string
		if err := db.QueryRow("SHOW CREATE TABLE "+tbl.String()).Scan(&n, &d); err != nil {
			t.Fatal(err)
		}
		d = regexp.MustCompile("`"+task+"_").ReplaceAllString(d, "`TASK_")
		return strings.Replace(d, "of task "+task+"'", "of task TASK'", 1)
	}
	for _, f := range []func(string, string) vocab.TableName{CheckpointTable, MarkerTable} {
		if got, want := def(f("dm_meta", "plain"), "plain"), def(f("dm_meta", "fresh"), "fresh"); got != want {
			t.Fatalf("migrated:\n%s\nnew:\n%s", got, want)
		}
	}
	// A table of the task's name that is not of Tributary's layouts is someone else's: reported, not
	// changed. One with the task's mark but a key this version does not know is the task's.
	s.Exec(t, db, "CREATE TABLE dm_meta.odd_checkpoint (x INT PRIMARY KEY)")
	err := Init(ctx, db, "dm_meta", "odd")
	if err == nil || !strings.Contains(err.Error(), "task odd did not create") || strings.Contains(err.Error(), "drop") {
		t.Fatalf("Init over a foreign table: %v", err)
	}
	s.Exec(t, db, "ALTER TABLE dm_meta.odd_checkpoint COMMENT = '"+checkpointLayout.mark("odd")+"'")
	err = Init(ctx, db, "dm_meta", "odd")
	if err == nil || !strings.Contains(err.Error(), "layout this version does not know") || !strings.Contains(err.Error(), "(x)") {
		t.Fatalf("Init over the task's table of an unknown layout: %v", err)
	}
}

// TestProbe: the precheck's probe names the meta schema and the missing privilege, and leaves no
// table behind.
func TestProbe(t *testing.T) {
	s := mariadbtest.Start(t)
	root := s.DB(t)
	ctx := context.Background()
	s.Exec(t, root,
		"CREATE USER 'nometa'@'%' IDENTIFIED BY 'pw'", "GRANT ALL ON db.* TO 'nometa'@'%'",
		"CREATE USER 'nodrop'@'%' IDENTIFIED BY 'pw'", "GRANT CREATE, SELECT, INSERT, UPDATE ON dm_meta.* TO 'nodrop'@'%'",
		"CREATE USER 'noalter'@'%' IDENTIFIED BY 'pw'", "GRANT CREATE, DROP, SELECT, INSERT, UPDATE ON dm_meta.* TO 'noalter'@'%'",
		"CREATE USER 'full'@'%' IDENTIFIED BY 'pw'", "GRANT "+Privileges+" ON dm_meta.* TO 'full'@'%'")
	as := func(user string) *sql.DB {
		db, err := sql.Open("mysql", fmt.Sprintf("%s:pw@tcp(%s)/?interpolateParams=true", user, s.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	probeTables := func() int {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'tributary\\_probe\\_%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := Probe(ctx, as("nometa"), "dm_meta", "task")
	if err == nil || !strings.Contains(err.Error(), "meta-schema `dm_meta`: cannot create the schema") || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("no privileges: %v", err)
	}
	// The schema is created when the user may.
	if err := Probe(ctx, as("full"), "dm_meta", "task"); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, as("nodrop"), "dm_meta", "task"); err == nil || !strings.Contains(err.Error(), "DROP command denied") {
		t.Fatalf("no DROP: %v", err)
	}
	// What nodrop could not drop is left for a user who can.
	rows, err := root.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'tributary\\_probe\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		left = append(left, n)
	}
	rows.Close()
	for _, n := range left {
		s.Exec(t, root, "DROP TABLE dm_meta."+n)
	}
	// ALTER is needed only when the task's tables have the old layout.
	if err := Probe(ctx, as("noalter"), "dm_meta", "task"); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, root, "CREATE TABLE dm_meta.task_checkpoint"+strings.Replace(oldCheckpointDDL, "VARCHAR(700)", "VARCHAR(700) CHARACTER SET latin1", 1))
	if err := Probe(ctx, as("noalter"), "dm_meta", "task"); err == nil || !strings.Contains(err.Error(), "older version") || !strings.Contains(err.Error(), "ALTER command denied") {
		t.Fatalf("no ALTER with an old layout: %v", err)
	}
	if err := Probe(ctx, as("full"), "dm_meta", "task"); err != nil {
		t.Fatal(err)
	}
	if n := probeTables(); n != 0 {
		t.Fatalf("%d probe tables left", n)
	}
}

// TestLaneIDs: a hashed lane's row id keeps the form of checkpoints written before chunked lanes
// (n/index/key), a chunked lane's adds its chunk, and both read back as written.
func TestLaneIDs(t *testing.T) {
	tbl := vocab.TableName{Schema: "db_1", Name: "t_1"}
	for _, l := range []Lane{{N: 16, Index: 3, Cols: []string{"id"}}, {N: 16, Index: 3, Chunk: 1024, Cols: []string{"id"}}} {
		id := laneID(tbl, l)
		if parts := strings.Count(strings.SplitN(id, ":", 2)[1], "/"); (l.Chunk == 0) != (parts == 2) {
			t.Fatalf("lane id %q", id)
		}
		got, gl, err := parseLaneID(id)
		if err != nil || got != tbl || gl.N != l.N || gl.Index != l.Index || gl.Chunk != l.Chunk {
			t.Fatalf("%q read back as %v %+v %v", id, got, gl, err)
		}
	}
	for _, bad := range []string{`lane:16/3/abcd1234/0:{"Schema":"a","Name":"b"}`, `lane:16/3/abcd1234/x:{"Schema":"a","Name":"b"}`,
		`lane:16/3/abcd1234/1/2:{"Schema":"a","Name":"b"}`} {
		if _, _, err := parseLaneID(bad); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}
