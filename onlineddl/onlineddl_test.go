package onlineddl

import (
	"slices"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/vocab"
)

func pos(n uint32) vocab.Position { return vocab.Position{File: "binlog.000001", Pos: n} }

type step struct {
	sql  string
	want []string // DDLs that replace it; nil with pass false: dropped
	pass bool
}

// ghostRun is gh-ost's statement sequence (from a real run's binlog), pt is pt-online-schema-change's.
var ghostRun = []step{
	{sql: "drop /* gh-ost */ table if exists `db_1`.`_t_1_ghc`"},
	{sql: "drop /* gh-ost */ table if exists `db_1`.`_t_1_gho`"},
	{sql: "create /* gh-ost */ table `db_1`.`_t_1_ghc` (id bigint auto_increment, last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256"},
	{sql: "create /* gh-ost */ table `db_1`.`_t_1_gho` like `db_1`.`t_1`"},
	{sql: "alter /* gh-ost */ table `db_1`.`_t_1_gho` add column c int not null default 0"},
	{sql: "create /* gh-ost */ table `db_1`.`_t_1_del` (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'"},
	{sql: "drop /* gh-ost */ table if exists `db_1`.`_t_1_del`"},
	{sql: "rename /* gh-ost */ table `db_1`.`t_1` to `db_1`.`_t_1_del`, `db_1`.`_t_1_gho` to `db_1`.`t_1`",
		want: []string{"ALTER TABLE `db_1`.`t_1` ADD COLUMN `c` INT NOT NULL DEFAULT 0"}},
	{sql: "drop /* gh-ost */ table if exists `db_1`.`_t_1_ghc`"},
	{sql: "drop /* gh-ost */ table if exists `db_1`.`_t_1_del`"},
}

var ptRun = []step{
	{sql: "CREATE TABLE `db_2`.`_t_1_new` (\n  `id` int(11) NOT NULL,\n  `v` varchar(32) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"},
	{sql: "ALTER TABLE `db_2`.`_t_1_new` ADD COLUMN c INT NOT NULL DEFAULT 0"},
	{sql: "CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_db_2_t_1_del` AFTER DELETE ON `db_2`.`t_1` FOR EACH ROW DELETE IGNORE FROM `db_2`.`_t_1_new` WHERE `db_2`.`_t_1_new`.`id` <=> OLD.`id`", pass: true},
	{sql: "RENAME TABLE `db_2`.`t_1` TO `db_2`.`_t_1_old`, `db_2`.`_t_1_new` TO `db_2`.`t_1`",
		want: []string{"ALTER TABLE `db_2`.`t_1` ADD COLUMN `c` INT NOT NULL DEFAULT 0"}},
	{sql: "DROP TABLE IF EXISTS `db_2`.`_t_1_old`"},
	{sql: "DROP TRIGGER IF EXISTS `db_2`.`pt_osc_db_2_t_1_del`", pass: true},
}

func play(t *testing.T, r *Rules, runs Runs, steps []step, from uint32) {
	t.Helper()
	for i, s := range steps {
		d, err := r.Decide(runs, mustParse(s.sql), "db", pos(from+uint32(i)*100))
		if err != nil {
			t.Fatalf("step %d %q: %v", i, s.sql, err)
		}
		if d.Pass != s.pass || !slices.Equal(d.DDLs, s.want) {
			t.Fatalf("step %d %q: pass %v DDLs %q, want pass %v DDLs %q", i, s.sql, d.Pass, d.DDLs, s.pass, s.want)
		}
	}
}

func TestToolRunsBecomeTheirALTER(t *testing.T) {
	r, err := NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs := Runs{}
	play(t, r, runs, ghostRun, 1000)
	play(t, r, runs, ptRun, 5000)
	// a plain ALTER and the real tables' DML pass
	if d, _ := r.Decide(runs, mustParse("ALTER TABLE t_1 ADD COLUMN c INT"), "db_3", pos(9000)); !d.Pass {
		t.Fatal("a plain ALTER must pass")
	}
}

// TestReadAgainGivesTheSameAnswer: a restart or a re-sync reads statements again from an earlier
// position, with the runs as they were persisted (possibly later than the position): nothing is
// recorded twice and the cut-over gives the same DDLs.
func TestReadAgainGivesTheSameAnswer(t *testing.T) {
	r, _ := NewRules(nil, nil)
	for from := range ghostRun {
		runs := Runs{}
		play(t, r, runs, ghostRun, 1000)
		loaded := persisted(t, runs)
		play(t, r, loaded, ghostRun[from:], 1000+uint32(from)*100)
		if len(loaded[vocab.TableName{Schema: "db_1", Name: "t_1"}].DDLs) != 1 {
			t.Fatalf("re-read from step %d recorded the ALTER twice: %+v", from, loaded)
		}
	}
	// a restart between the ALTER and the cut-over, with the runs persisted at that point
	runs := Runs{}
	play(t, r, runs, ghostRun[:5], 1000)
	play(t, r, persisted(t, runs), ghostRun[5:], 1500)
}

// persisted is runs written to the checkpoint and read again.
func persisted(t *testing.T, runs Runs) Runs {
	t.Helper()
	out := Runs{}
	for rt, run := range runs {
		got, err := Decode(Encode(run))
		if err != nil {
			t.Fatal(err)
		}
		out[rt] = got
	}
	return out
}

func TestAbortedRunLeavesNothing(t *testing.T) {
	r, _ := NewRules(nil, nil)
	runs := Runs{}
	play(t, r, runs, []step{
		{sql: "create table `db_1`.`_t_1_gho` like `db_1`.`t_1`"},
		{sql: "alter table `db_1`.`_t_1_gho` add column c int"},
		{sql: "drop table if exists `db_1`.`_t_1_gho`"},
		// the next run with another ALTER
		{sql: "create table `db_1`.`_t_1_gho` like `db_1`.`t_1`"},
		{sql: "alter table `db_1`.`_t_1_gho` add index i (v)"},
		{sql: "rename table `db_1`.`t_1` to `db_1`.`_t_1_del`, `db_1`.`_t_1_gho` to `db_1`.`t_1`",
			want: []string{"ALTER TABLE `db_1`.`t_1` ADD INDEX `i`(`v`)"}},
	}, 100)
}

func TestCustomRulesAndRefusals(t *testing.T) {
	if _, err := NewRules([]string{"^tmp_.*$"}, nil); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("a shadow rule without a group: %v", err)
	}
	if _, err := NewRules([]string{"("}, nil); err == nil || !strings.Contains(err.Error(), "shadow-table-rules") {
		t.Fatalf("a bad regexp: %v", err)
	}
	r, err := NewRules([]string{`^(.+)_shadow$`}, []string{`^(.+)_trash$`})
	if err != nil {
		t.Fatal(err)
	}
	runs := Runs{}
	play(t, r, runs, []step{
		{sql: "create table t_1_shadow like t_1"},
		{sql: "alter table t_1_shadow add column c int"},
		{sql: "rename table t_1 to t_1_trash, t_1_shadow to t_1", want: []string{"ALTER TABLE `db`.`t_1` ADD COLUMN `c` INT"}},
	}, 100)
	if k, _ := r.Classify("_t_1_gho"); k != Real {
		t.Fatal("custom rules replace the defaults")
	}
	if _, err := r.Decide(runs, mustParse("rename table t_1_shadow to other"), "db", pos(900)); err == nil {
		t.Fatal("renaming a ghost table to another table is no cut-over: refused")
	}
	if _, err := r.Decide(runs, mustParse("drop table t_1_trash, t_2"), "db", pos(901)); err == nil {
		t.Fatal("a statement mixing tool and user tables is refused")
	}
}

// TestTwoStepCutOver: gh-ost's --cut-over=two-step renames the real table away and the ghost table in
// with two statements.
func TestTwoStepCutOver(t *testing.T) {
	r, _ := NewRules(nil, nil)
	play(t, r, Runs{}, []step{
		{sql: "create table `db_1`.`_t_1_gho` like `db_1`.`t_1`"},
		{sql: "alter table `db_1`.`_t_1_gho` drop column v"},
		{sql: "rename table `db_1`.`t_1` to `db_1`.`_t_1_del`"},
		{sql: "rename table `db_1`.`_t_1_gho` to `db_1`.`t_1`", want: []string{"ALTER TABLE `db_1`.`t_1` DROP COLUMN `v`"}},
		{sql: "drop table if exists `db_1`.`_t_1_del`"},
	}, 100)
}

// TestReadAgainFromBeforeAnEarlierRun: two runs of the tool on one table, then a restart (runs as
// persisted after the second) or a re-sync from before the first: the first run's cut-over swaps in
// the first run's ALTER, the second's the second's, and nothing is recorded twice (the chaos soak,
// seed 18: the first run's statements were taken for re-reads of the second, its cut-over swapped in
// nothing, and the shard's group paused on an inconsistent DDL sequence). An aborted third run leaves
// the second as the table's latest; Prune drops what no restart reads again.
func TestReadAgainFromBeforeAnEarlierRun(t *testing.T) {
	r, _ := NewRules(nil, nil)
	second := slices.Clone(ptRun)
	second[1] = step{sql: "ALTER TABLE `db_2`.`_t_1_new` ADD COLUMN d INT NOT NULL DEFAULT 0"}
	second[3].want = []string{"ALTER TABLE `db_2`.`t_1` ADD COLUMN `d` INT NOT NULL DEFAULT 0"}
	rt := vocab.TableName{Schema: "db_2", Name: "t_1"}
	for from := range ptRun {
		runs := Runs{}
		play(t, r, runs, ptRun, 1000)
		play(t, r, runs, second, 5000)
		loaded := persisted(t, runs)
		play(t, r, loaded, ptRun[from:], 1000+uint32(from)*100)
		play(t, r, loaded, second, 5000)
		got := loaded[rt]
		if len(got.DDLs) != 1 || len(got.Past) != 1 || len(got.Past[0].DDLs) != 1 || len(got.Past[0].Past) != 0 {
			t.Fatalf("re-read from step %d of the first run: %+v", from, got)
		}
	}
	runs := Runs{}
	play(t, r, runs, ptRun, 1000)
	play(t, r, runs, second, 5000)
	play(t, r, runs, []step{
		{sql: "CREATE TABLE `db_2`.`_t_1_new` (`id` int(11) NOT NULL, PRIMARY KEY (`id`))"},
		{sql: "ALTER TABLE `db_2`.`_t_1_new` ADD COLUMN e INT"},
		{sql: "DROP TABLE IF EXISTS `db_2`.`_t_1_new`"},
	}, 9000)
	if got := runs[rt]; got == nil || got.Created != pos(5000) || len(got.Past) != 1 || got.Past[0].Created != pos(1000) {
		t.Fatalf("after an aborted third run the second is the latest, the first past: %+v", got)
	}
	play(t, r, persisted(t, runs), ptRun, 1000)
	run := runs[rt].Clone()
	if run.Prune(pos(1300)) || len(run.Past) != 1 {
		t.Fatalf("pruned a run swapped in at the restart's position: %+v", run)
	}
	if !run.Prune(pos(1301)) || len(run.Past) != 0 || len(runs[rt].Past) != 1 {
		t.Fatalf("prune after the first cut-over: %+v (the original: %+v)", run, runs[rt])
	}
}

// mustParse parses a statement of a test, as the usual path does before the rules read it. One the
// parser cannot read (a stored program) has no statements for the rules: the usual path decides it.
func mustParse(sql string) *ddl.Parsed {
	p, err := ddl.Parse(sql)
	if err != nil {
		return &ddl.Parsed{SQL: sql}
	}
	return p
}
