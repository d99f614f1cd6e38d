package ddl

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/vocab"
)

var shardTable = regexp.MustCompile(`^t_[0-9]+$`)

func routeShards(t vocab.TableName) vocab.TableName {
	// db_* -> db, t_* -> t
	if strings.HasPrefix(t.Schema, "db_") {
		t.Schema = "db"
		if shardTable.MatchString(t.Name) {
			t.Name = "t"
		}
	}
	return t
}

// TestSplit's cases are scripts: testdata/split (TestSplitScripts).

func TestSplitWithoutRouteKeepsNames(t *testing.T) {
	got, err := Split("alter table t add column c int", "db_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SQL != "ALTER TABLE `db_1`.`t` ADD COLUMN `c` INT" || got[0].Target != got[0].Source {
		t.Fatalf("got %+v", got)
	}
}

func TestSplitErrors(t *testing.T) {
	cases := []struct{ sql, schema, want string }{
		{"ALTER TABLE t ADD COLUMN", "db", "parse DDL"},
		{"ALTER TABLE t ADD c INT", "", "table `t` has no database"},
		{"INSERT INTO db.t VALUES (1)", "", "not a table or database DDL"},
		{"GRANT ALL ON *.* TO u", "", "not a table or database DDL"},
		{"FLASHBACK TABLE db.t", "", "not a supported DDL"},
		{"CREATE TABLE db.t2 SELECT * FROM db.t", "", "CREATE TABLE ... SELECT"},
		{"CREATE OR REPLACE TABLE db.t (a INT)", "", "parse DDL"},
		{"CREATE TABLE db.t (a UUID)", "", "parse DDL"},
		{"", "db", "no statement"},
	}
	for _, c := range cases {
		_, err := Split(c.sql, c.schema, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Split(%q): err %v, want it to contain %q", c.sql, err, c.want)
		}
	}
}

func TestItemsAttributeEachTable(t *testing.T) {
	parts, err := Split("RENAME TABLE db_1.t_1 TO db_1.t_1_old, db_1.t_1_new TO db_1.t_1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pos := vocab.Position{File: "bin.000001", Pos: 42}
	items := Items(parts, pos)
	if len(items) != 2 {
		t.Fatalf("got %d items, want 2: %+v", len(items), items)
	}
	if items[0].Source != (vocab.TableName{Schema: "db_1", Name: "t_1"}) || items[1].Source != (vocab.TableName{Schema: "db_1", Name: "t_1_new"}) {
		t.Fatalf("sources %s, %s", items[0].Source, items[1].Source)
	}
	for _, it := range items {
		if len(it.DDLs) != 1 || it.Pos != pos {
			t.Fatalf("item %+v", it)
		}
	}
	// Two parts of one table in one event become one item with both DDLs.
	merged := Items([]Part{{Source: vocab.TableName{Schema: "a", Name: "b"}, Statement: Statement{SQL: "x"}}, {Source: vocab.TableName{Schema: "a", Name: "b"}, Statement: Statement{SQL: "y"}}}, pos)
	if len(merged) != 1 || len(merged[0].DDLs) != 2 {
		t.Fatalf("merged %+v", merged)
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"ALTER TABLE t ADD c1 INT, ADD c2 INT",
		"RENAME TABLE a TO a_old, a_new TO a",
		"DROP TABLE IF EXISTS t1, db.t2",
		"CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10) DEFAULT 'x') ENGINE=InnoDB",
		"CREATE TABLE t LIKE u",
		"ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u(b)",
		"CREATE INDEX i ON t (a(10), b DESC)",
		"TRUNCATE t",
		"ALTER DATABASE CHARACTER SET utf8mb4",
		"CREATE OR REPLACE TABLE t (a INT)",
	} {
		f.Add(s, "db")
	}
	f.Fuzz(func(t *testing.T, sql, schema string) {
		parts, err := Split(sql, schema, routeShards)
		if err != nil {
			return
		}
		for _, p := range parts {
			// Every part must be a single statement that parses again and splits to itself.
			again, err := Split(p.SQL, "", nil)
			if err != nil {
				t.Fatalf("part %q of %q does not parse again: %v", p.SQL, sql, err)
			}
			if len(again) != 1 || again[0].SQL != p.SQL {
				t.Fatalf("part %q of %q splits again into %+v", p.SQL, sql, again)
			}
		}
	})
}

func TestCreateIfNotExists(t *testing.T) {
	got, err := CreateIfNotExists("CREATE TABLE `db`.`t` (`a` INT)")
	if err != nil || got != "CREATE TABLE IF NOT EXISTS `db`.`t` (`a` INT)" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := CreateIfNotExists("DROP TABLE t"); err == nil {
		t.Fatal("not a CREATE TABLE")
	}
}

func TestTablesOf(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"ALTER TABLE `db`.`t` ADD COLUMN c INT", "[`db`.`t`]"},
		{"RENAME TABLE db.a TO db.a_old", "[`db`.`a` `db`.`a_old`]"},
		{"CREATE TABLE t2 LIKE t1", "[`d`.`t1` `d`.`t2`]"},
		{"ALTER TABLE t ADD FOREIGN KEY (a) REFERENCES p (id)", "[`d`.`p` `d`.`t`]"},
	} {
		got, err := TablesOf(c.sql, "d")
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Fatalf("%s: %s, want %s", c.sql, s, c.want)
		}
	}
	if _, err := TablesOf("ALTER TABLE", "d"); err == nil {
		t.Fatal("no error for a broken statement")
	}
}

func TestSplitRoutesColumnReferences(t *testing.T) {
	route := func(tb vocab.TableName) vocab.TableName { return vocab.TableName{Schema: "dst", Name: tb.Name} }
	parts, err := Split("CREATE TABLE src.child (id INT PRIMARY KEY, pid INT REFERENCES src.parent (id), FOREIGN KEY (id) REFERENCES parent (id))", "src", route)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(parts[0].SQL, "`src`") || strings.Count(parts[0].SQL, "`dst`.`parent`") != 2 {
		t.Fatalf("references not routed: %s", parts[0].SQL)
	}
}

func TestRetargetShowCreate(t *testing.T) {
	got, err := RetargetShowCreate("CREATE TABLE `t``1` (\n  `g` point NOT NULL,\n  SPATIAL KEY `g` (`g`)\n) ENGINE=InnoDB", vocab.TableName{Schema: "db", Name: "t"})
	if err != nil || got != "CREATE TABLE IF NOT EXISTS `db`.`t` (\n  `g` point NOT NULL,\n  SPATIAL KEY `g` (`g`)\n) ENGINE=InnoDB" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := RetargetShowCreate("CREATE VIEW `v` AS SELECT 1", vocab.TableName{Schema: "db", Name: "t"}); err == nil {
		t.Fatal("a view's definition must be refused")
	}
}

func TestDMLTables(t *testing.T) {
	cases := map[string][]string{
		"insert into shardddl1.tb1 values (3)":             {"shardddl1.tb1"},
		"INSERT INTO t(id,v) VALUES (50,50)":               {"d.t"},
		"REPLACE INTO x.t SELECT * FROM y.u":               {"x.t"},
		"update t set v=v+1 where id=50":                   {"d.t"},
		"UPDATE a.t JOIN b.u ON t.id = u.id SET t.v = u.v": {"a.t", "b.u"},
		"DELETE FROM t WHERE id = 1":                       {"d.t"},
		"DELETE a FROM x.a JOIN x.b ON a.id = b.id":        {"d.a", "x.a", "x.b"},
		"LOAD DATA INFILE '/tmp/f' INTO TABLE z.t":         {"z.t"},
	}
	for q, want := range cases {
		got, err := DMLTables(q, "d")
		if err != nil {
			t.Errorf("%q: %v", q, err)
			continue
		}
		var names []string
		for _, tn := range got {
			names = append(names, tn.Schema+"."+tn.Name)
		}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Errorf("%q: %v, want %v", q, names, want)
		}
	}
	for _, q := range []string{"ALTER TABLE t ADD c INT", "insert into", "SELECT 1"} {
		if _, err := DMLTables(q, "d"); err == nil {
			t.Errorf("%q: no error", q)
		}
	}
}
