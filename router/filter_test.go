package router

import (
	"testing"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/vocab"
)

func TestFilter(t *testing.T) {
	f, err := NewFilter([]config.FilterRule{
		{Name: "no-truncate", SchemaPattern: "db_*", TablePattern: "t_*", Events: []string{"truncate table", "Rename Table"}, Action: "Ignore"},
		{Name: "no-procs", SchemaPattern: "*", SQLPattern: []string{`^CREATE\s+OR\s+REPLACE\s+TABLE`}, Action: "Ignore"},
		{Name: "no-deletes", SchemaPattern: "audit", Events: []string{"delete"}, Action: "Ignore"},
		{Name: "only-inserts", SchemaPattern: "log", TablePattern: "events", Events: []string{"insert", "create table"}, Action: "Do"},
		{Name: "stop", SchemaPattern: "frozen", Events: []string{"all ddl"}, Action: "Error"},
		{Name: "no-dropdb", SchemaPattern: "keep", Events: []string{"drop database"}, Action: "Ignore"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		table  vocab.TableName
		events []string
		sql    string
		want   FilterAction
	}{
		{vocab.TableName{Schema: "db_1", Name: "t_1"}, []string{"truncate table"}, "TRUNCATE TABLE t_1", IgnoreEvent},
		{vocab.TableName{Schema: "db_1", Name: "t_1"}, []string{"alter table", "rename table"}, "ALTER TABLE t_1 RENAME TO x", IgnoreEvent},
		{vocab.TableName{Schema: "db_1", Name: "t_1"}, []string{"alter table"}, "ALTER TABLE t_1 ADD c INT", Replicate},
		{vocab.TableName{Schema: "db_1", Name: "other"}, []string{"truncate table"}, "TRUNCATE TABLE other", Replicate},
		{vocab.TableName{Schema: "db_1", Name: "t_1"}, []string{"insert"}, "", Replicate},
		{vocab.TableName{Schema: "audit", Name: "x"}, []string{"delete"}, "", IgnoreEvent},
		{vocab.TableName{Schema: "audit", Name: "x"}, []string{"update"}, "", Replicate},
		{vocab.TableName{Schema: "log", Name: "events"}, []string{"insert"}, "", Replicate},
		{vocab.TableName{Schema: "log", Name: "events"}, []string{"update"}, "", IgnoreEvent},
		{vocab.TableName{Schema: "log", Name: "events"}, []string{"alter table"}, "ALTER TABLE events ADD c INT", IgnoreEvent},
		{vocab.TableName{Schema: "log", Name: "other"}, []string{"update"}, "", Replicate},
		{vocab.TableName{Schema: "frozen", Name: "x"}, []string{"alter table"}, "ALTER TABLE x ADD c INT", FailEvent},
		{vocab.TableName{Schema: "frozen", Name: "x"}, []string{"insert"}, "", Replicate},
		{vocab.TableName{Schema: "keep", Name: ""}, []string{"drop database"}, "DROP DATABASE keep", IgnoreEvent},
		{vocab.TableName{Schema: "db_1", Name: ""}, []string{"drop database"}, "DROP DATABASE db_1", Replicate}, // table-pattern rules skip schema events
	}
	for _, c := range cases {
		if got, _ := f.Decide(c.table, c.events, c.sql); got != c.want {
			t.Errorf("%s %v %q: %v, want %v", c.table, c.events, c.sql, got, c.want)
		}
	}
	if got, rule := f.Statement("db_1", "CREATE OR REPLACE TABLE x (a INT)"); got != IgnoreEvent || rule != "no-procs" {
		t.Errorf("sql-pattern on an unparsable statement: %v %s", got, rule)
	}
	t2, err := NewFilter([]config.FilterRule{{Name: "one-table", SchemaPattern: "db_1", TablePattern: "t_1", SQLPattern: []string{"^ALTER"}, Action: "Ignore"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := t2.Statement("db_1", "ALTER TABLE t_2 ADD c INT"); got != Replicate {
		t.Error("a rule with a table-pattern decided for a statement whose tables are unknown")
	}
	if got, _ := t2.Decide(vocab.TableName{Schema: "db_1", Name: "t_2"}, []string{"alter table"}, "ALTER TABLE t_2 ADD c INT"); got != Replicate {
		t.Error("a rule for t_1 ignored t_2's ALTER")
	}
	if got, _ := f.Statement("db_1", "CREATE TABLE x (a INT)"); got != Replicate {
		t.Errorf("statement not matching any sql-pattern: %v", got)
	}
	var none *Filter
	if got, _ := none.Decide(vocab.TableName{Schema: "a", Name: "b"}, []string{"insert"}, ""); got != Replicate {
		t.Error("a nil filter must let everything through")
	}
	if _, err := NewFilter([]config.FilterRule{{Name: "bad", SchemaPattern: "x", SQLPattern: []string{"("}, Action: "Ignore"}}); err == nil {
		t.Error("a bad sql-pattern must be refused")
	}
}
