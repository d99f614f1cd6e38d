package checker

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/tests/framework/mysqlprimary"
)

// mysqlSource starts an emulated MySQL 8 primary (no MySQL server can be had here) and returns a pool
// to it.
func mysqlSource(t *testing.T, opts mysqlprimary.Options) *sql.DB {
	t.Helper()
	opts.Password = "pw"
	p, err := mysqlprimary.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	db, err := sql.Open("mysql", fmt.Sprintf("root:pw@tcp(%s)/?allowPublicKeyRetrieval=true", p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMySQLSourceItems: the items a MySQL 8 source adds: GTID mode for enable-gtid, partial JSON row
// values, and replication privileges that come through roles, active or not.
func TestMySQLSourceItems(t *testing.T) {
	ctx := context.Background()
	const user = "`root`@`%`"
	for _, tc := range []struct {
		name string
		opts mysqlprimary.Options
		want []string // item: part of the message; none: every item passes
	}{
		{name: "as MySQL 8 is set up for DM", opts: mysqlprimary.Options{}},
		{name: "8.4", opts: mysqlprimary.Options{Version: "8.4.3"}},
		{name: "gtid_mode OFF", opts: mysqlprimary.Options{Variables: map[string]string{"gtid_mode": "OFF_PERMISSIVE"}},
			want: []string{ItemGTIDMode + ": gtid_mode=ON and enforce_gtid_consistency=ON on a MySQL source (they are OFF_PERMISSIVE and ON)"}},
		{name: "partial JSON", opts: mysqlprimary.Options{Variables: map[string]string{"binlog_row_value_options": "PARTIAL_JSON"}},
			want: []string{ItemBinlogRowImage + ": binlog_row_value_options is PARTIAL_JSON"}},
		{name: "privileges through an active role", opts: mysqlprimary.Options{
			Grants:      []string{"GRANT USAGE ON *.* TO " + user, "GRANT `repl`@`%` TO " + user},
			CurrentRole: "`repl`@`%`",
			RoleGrants:  []string{"GRANT USAGE ON *.* TO " + user, "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO " + user, "GRANT `repl`@`%` TO " + user}}},
		{name: "privileges through a role not active at login", opts: mysqlprimary.Options{
			Grants:     []string{"GRANT USAGE ON *.* TO " + user, "GRANT `repl`@`%`,`ro`@`%` TO " + user},
			RoleGrants: []string{"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO " + user}},
			want: []string{ItemReplPrivilege + ": the user lacks REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*; its roles `repl`@`%`,`ro`@`%` are not active when it logs in"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := mysqlSource(t, tc.opts)
			var got []string
			r := report(func(level Level, item, source, format string, args ...any) {
				got = append(got, item+": "+fmt.Sprintf(format, args...))
			})
			checkBinlog(ctx, db, "s1", r, true)
			checkGTIDMode(ctx, db, "s1", r)
			grants, inactive, err := globalGrants(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			checkPrivileges(grants, inactive, "s1", r)
			if len(got) != len(tc.want) {
				t.Fatalf("results %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				item, part, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(got[i], item+": ") || !strings.Contains(got[i], part) {
					t.Errorf("result %q, want %s with %q", got[i], item, part)
				}
			}
		})
	}
}
