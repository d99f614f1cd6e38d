package ddl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every kind Split yields has a row in the safety table, and the statements that would destroy or
// rewrite other shards' rows never run downstream as they are for a shard or a merged schema.
func TestSplitKindsAndPolicy(t *testing.T) {
	cases := []struct {
		sql  string
		kind Kind
	}{
		{"CREATE DATABASE d", KindCreateDatabase},
		{"ALTER DATABASE d CHARACTER SET utf8mb4", KindAlterDatabase},
		{"DROP DATABASE d", KindDropDatabase},
		{"CREATE TABLE d.t (a INT)", KindCreateTable},
		{"CREATE TABLE d.t LIKE d.u", KindCreateTableLike},
		{"ALTER TABLE d.t ADD COLUMN c INT", KindAlterTable},
		{"ALTER TABLE d.t ADD COLUMN c INT, RENAME TO d.u", KindAlterTableRename},
		{"ALTER TABLE d.t RENAME TO d.u", KindAlterTableRename},
		{"ALTER TABLE d.t DROP PARTITION p0", KindDropPartition},
		{"ALTER TABLE d.t TRUNCATE PARTITION p0", KindDropPartition},
		{"ALTER TABLE d.t EXCHANGE PARTITION p0 WITH TABLE d.u", KindExchangePartition},
		{"ALTER TABLE d.t ADD PARTITION (PARTITION p9 VALUES LESS THAN (900))", KindAlterTable},
		{"DROP TABLE d.t", KindDropTable},
		{"TRUNCATE TABLE d.t", KindTruncateTable},
		{"RENAME TABLE d.t TO d.u", KindRenameTable},
		{"CREATE INDEX i ON d.t (a)", KindCreateIndex},
		{"DROP INDEX i ON d.t", KindDropIndex},
		{"CREATE VIEW d.v AS SELECT a FROM d.t", KindView},
		{"CREATE OR REPLACE VIEW d.v AS SELECT a FROM d.t", KindView},
		{"DROP VIEW d.v", KindView},
		{"CREATE SEQUENCE d.s", KindSequence},
		{"DROP SEQUENCE d.s", KindSequence},
	}
	for _, c := range cases {
		parts, err := Split(c.sql, "", nil)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if parts[0].Kind != c.kind {
			t.Errorf("%s: kind %q, want %q", c.sql, parts[0].Kind, c.kind)
		}
		if Decide(parts[0].Kind, Unsharded) == Decide(KindUnknown, Unsharded) && c.kind != KindUnknown {
			t.Errorf("%s: kind %q has no row in the safety table", c.sql, c.kind)
		}
	}
	for _, q := range []string{
		"CREATE TRIGGER d.tr BEFORE INSERT ON d.t FOR EACH ROW SET NEW.a = 1",
		"CREATE DEFINER=`root`@`localhost` TRIGGER tr AFTER UPDATE ON t FOR EACH ROW BEGIN END",
		"CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC RETURN x + 1",
		"CREATE DEFINER='root'@'%' EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM d.t",
		"DROP TRIGGER IF EXISTS d.tr",
		"/* comment */ CREATE OR REPLACE DEFINER=root@localhost SQL SECURITY INVOKER FUNCTION f() RETURNS INT RETURN 1",
	} {
		if _, err := Split(q, "d", nil); !errors.Is(err, ErrNotDDL) {
			t.Errorf("%s: %v, want ErrNotDDL (stored programs are not replicated)", q, err)
		}
	}
	destructive := []Kind{KindDropDatabase, KindDropTable, KindTruncateTable, KindDropPartition, KindExchangePartition, KindRenameTable, KindAlterTableRename, KindAlterDatabase}
	for _, k := range destructive {
		for _, scope := range []Scope{Shard, MergedSchema} {
			if k == KindDropPartition && scope == Shard {
				// Partition maintenance every shard of the group runs (monthly retention) is the
				// group's decision: through the lock, it runs once when all have reached it.
				if a := Decide(k, scope).Action; a != Lock {
					t.Errorf("%s on a table %s: %s, want %s", k, scope, a, Lock)
				}
				continue
			}
			switch a := Decide(k, scope).Action; a {
			case Ignore, Refuse, LeaveGroup, FollowRename:
			default:
				t.Errorf("%s on a table %s: %s; it must never run downstream as it is", k, scope, a)
			}
		}
	}
	for _, r := range Policy {
		for _, d := range []Decision{r.Unsharded, r.Shard, r.Merged} {
			if d.Action != Run && d.Action != RunIfNotExists && d.Why == "" {
				t.Errorf("%s: %s without a reason", r.Kind, d.Action)
			}
		}
	}
}

// docs/ddl.md shows the safety table as the code has it.
func TestPolicyTableInDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "ddl.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- ddl-safety-table -->\n", "<!-- /ddl-safety-table -->"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/ddl.md has no %q ... %q block", begin, end)
	}
	if got, want := s[i+len(begin):j], PolicyMarkdown(); got != want {
		t.Fatalf("docs/ddl.md's DDL safety table differs from ddl.Policy; put this between the markers:\n%s", want)
	}
}
