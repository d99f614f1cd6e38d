package checker

import (
	"context"
	"slices"
	"testing"
)

func TestParseGrants(t *testing.T) {
	grants, unsure := parseGrants([]string{
		"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*X'",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON *.* TO `u`@`%`",
		"GRANT ALL PRIVILEGES ON `dm\\_meta`.* TO `u`@`%`",
		"GRANT CREATE, DROP ON `db%`.* TO `u`@`%`",
		"GRANT ALTER ON `db`.`t` TO `u`@`%`",
	})
	if unsure {
		t.Fatal("unsure without a role")
	}
	if m := missingOn(grants, "dm_meta"); len(m) != 0 {
		t.Fatalf("dm_meta: missing %v", m)
	}
	if m := missingOn(grants, "dmxmeta"); !slices.Equal(m, []string{"CREATE", "DROP", "ALTER", "INDEX"}) {
		t.Fatalf("dmxmeta (the escaped _ is no wildcard): missing %v", m)
	}
	if m := missingOn(grants, "db_2"); !slices.Equal(m, []string{"ALTER", "INDEX"}) {
		t.Fatalf("db_2: missing %v (a table's ALTER does not count)", m)
	}
	if _, unsure := parseGrants([]string{"GRANT `writer` TO `u`@`%`", "SET DEFAULT ROLE `writer` FOR `u`@`%`"}); !unsure {
		t.Fatal("a role is not noticed")
	}
}

// TestTargetPrivilege: a target user that may not create tables in the target database fails the
// precheck, naming the grant that is missing; with it, the item passes.
func TestTargetPrivilege(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.down.Exec(t, e.downDB, "CREATE USER 'tgt'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON *.* TO 'tgt'@'127.0.0.1'",
		"GRANT ALL PRIVILEGES ON `dm_meta`.* TO 'tgt'@'127.0.0.1'")
	task, srcs := e.task("all", "root", "")
	task.TargetDatabase.User, task.TargetDatabase.Password = "tgt", "pw"
	mustContain(t, find(Check(ctx, task, srcs, false), ItemTargetPrivilege, Error), "lacks CREATE, DROP, ALTER, INDEX on target database db", "GRANT CREATE, DROP, ALTER, INDEX ON `db`.* TO")
	// An incremental task can run without the DDL privileges: a warning.
	e.down.Exec(t, e.downDB, "GRANT CREATE ON `db`.* TO 'tgt'@'127.0.0.1'")
	inc, incSrcs := e.task("incremental", "root", "")
	inc.TargetDatabase.User, inc.TargetDatabase.Password = "tgt", "pw"
	fs := Check(ctx, inc, incSrcs, false)
	if len(find(fs, ItemTargetPrivilege, Error)) != 0 {
		t.Fatalf("incremental without ALTER, DROP, INDEX: %s", Report(fs))
	}
	mustContain(t, find(fs, ItemTargetPrivilege, Warning), "lacks DROP, ALTER, INDEX", "pauses the subtask")
	// A load needs ALTER and DROP for its cut-over.
	mustContain(t, find(Check(ctx, task, srcs, false), ItemTargetPrivilege, Error), "lacks DROP, ALTER, INDEX")
	e.down.Exec(t, e.downDB, "GRANT DROP, ALTER, INDEX ON `db`.* TO 'tgt'@'127.0.0.1'")
	if fs := find(Check(ctx, task, srcs, false), ItemTargetPrivilege, Error); len(fs) != 0 {
		t.Fatalf("with the grants: %s", Report(fs))
	}
}
