package sink

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// workerDB opens root's pool to the downstream on port with the session a dm-worker's syncers have
// (session: the task's target-database.session), closed when the test ends.
func workerDB(t testing.TB, port int, session map[string]any, opts ...func(*mysql.Config)) *sql.DB {
	t.Helper()
	db, err := dbutil.OpenDB(config.Database{Host: "127.0.0.1", Port: port, User: "root", Session: DownstreamSession(session)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// body is e2e.DefinitionBody, failing the test on error.
func body(t testing.TB, db *sql.DB, table string) string {
	t.Helper()
	body, err := e2e.DefinitionBody(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// stmts parses the statements a test runs through the executor (they are the test's own, and parse).
func stmts(qs ...string) []ddl.Statement {
	out, err := ddl.ParseStatements(qs)
	if err != nil {
		panic(err)
	}
	return out
}
