package sink

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/session"
	"github.com/tributary-db/tributary/vocab"
)

// DDLExecutor runs DDL downstream exactly once, across crashes: the DDL markers around it (package
// meta's), the definition reads they are checked against, the one-query forms that save round trips
// on a lock's path, and the DDL's session settings (ddlsession.go). Each call ends with the
// checkpoint update it is given, committed through the source's sink. It holds no DML.
type DDLExecutor struct {
	db *sql.DB
	// ddlDB, when set, is a pool to the same downstream that takes multi-statement queries: a lock's
	// DDL goes there in one round trip with its "started" marker. nil: two statements.
	ddlDB   *sql.DB
	meta    *meta.Store
	sink    *Sink // commits the checkpoint update after the DDLs, and forgets its cached keys
	session ddlSession
	log     *zap.Logger
	// collations: the downstream's names for collations it lacks (MySQL 8's 0900 ones on MariaDB),
	// read once.
	collations struct {
		sync.Mutex
		read bool
		m    map[string]string
	}
}

// NewDDLExecutor returns the DDL executor of the source whose sink is sink (its pool, meta store and
// epoch fence). ddlDB is a pool to the same downstream opened with dbutil.MultiStatements, or nil; log
// is for what it cannot carry of a DDL's session (nil: none).
func NewDDLExecutor(sink *Sink, ddlDB *sql.DB, log *zap.Logger) *DDLExecutor {
	if log == nil {
		log = zap.NewNop()
	}
	return &DDLExecutor{db: sink.db, ddlDB: ddlDB, meta: sink.meta, sink: sink, session: ddlSession{log: log}, log: log}
}

// alreadyApplied are the errors of a DDL whose object is there already, or gone already: duplicate
// column (1060), duplicate key name (1061), table exists (1050), can't drop a missing column or key
// (1091), database exists (1007), duplicate foreign key (1826), dropping a missing database (1008) or
// table (1051). The DDL did not run (MariaDB runs a statement whole or not at all); it is taken as
// applied only when the downstream already is what it would have made (checkApplied).
var alreadyApplied = map[uint16]bool{1060: true, 1061: true, 1050: true, 1091: true, 1007: true, 1826: true, 1008: true, 1051: true}

// ExecDDL runs DDLs that are idempotent by themselves (CREATE ... IF NOT EXISTS), treating "already
// applied" errors as success when the downstream is what the DDL would make (checkApplied), then
// commits the checkpoint update.
//
// Each of the ExecDDL functions runs the DDLs in the session settings in, those of the binlog event
// they come from (nil: the sink's own; ddlsession.go).
func (s *DDLExecutor) ExecDDL(ctx context.Context, ddls []ddl.Statement, in session.Settings, up meta.CheckpointUpdate) error {
	return s.ExecDDLOnce(ctx, "", ddls, in, up)
}

// ExecDDLOnce runs each DDL downstream exactly once for lockID, across crashes, then commits the
// checkpoint update. A DDL is not transactional, so a marker row brackets it: "started" with the
// definition of the tables it names before it runs, "done" with their definition after. On a re-run,
// a DDL marked done whose tables still have the after-definition is skipped; one marked started
// whose tables no longer have the before-definition took effect before a crash and is only marked
// done; otherwise it runs. This holds because only the lock's owner changes those tables while the
// lock is held, with one exception: after a DDL the downstream refused, the user changes the table to
// let it through. So a started marker whose tables changed counts as "took effect" only when they do
// not show that the DDL did not (ddl.CompareWithDownstream). An "already applied" error is
// accepted only when the downstream already is what the DDL would make (checkApplied).
//
// A marker "running" (see ExecDDLFirst) holds no definition: its DDL ran if its tables are what it
// makes of them (ddl.CompareWithDownstream), else it runs.
//
// An empty lockID runs the DDLs without markers.
func (s *DDLExecutor) ExecDDLOnce(ctx context.Context, lockID string, ddls []ddl.Statement, in session.Settings, up meta.CheckpointUpdate) error {
	return s.execDDLs(ctx, lockID, false, ddls, in, up)
}

// ExecDDLFirst is ExecDDLOnce for DDLs that nobody can have run for lockID yet: the owner's exec was
// written by the put of its own info that completed the lock, so no earlier exec of this lock exists.
// Each DDL whose effect on its table can be read off the table (ddl.Effects: ADD or DROP
// COLUMN, a named index, with MODIFY beside them; the common case) then goes downstream behind a
// marker "running" in one query (execRunning): no read before it, a round trip less on a lock's path
// to a downstream that is usually idle when a lock resolves. The others go as in ExecDDLOnce.
func (s *DDLExecutor) ExecDDLFirst(ctx context.Context, lockID string, ddls []ddl.Statement, in session.Settings, up meta.CheckpointUpdate) error {
	return s.execDDLs(ctx, lockID, true, ddls, in, up)
}

func (s *DDLExecutor) execDDLs(ctx context.Context, lockID string, first bool, ddls []ddl.Statement, in session.Settings, up meta.CheckpointUpdate) error {
	for _, st := range ddls {
		st, err := s.withCollations(ctx, st)
		if err != nil {
			return err
		}
		if err := s.execOnce(ctx, lockID, st, first && lockID != "", in); err != nil {
			return err
		}
	}
	s.sink.ForgetKeys()
	return s.sink.Flush(ctx, nil, up)
}

func (s *DDLExecutor) execOnce(ctx context.Context, lockID string, st ddl.Statement, first bool, in session.Settings) error {
	q := st.SQL
	var tables []vocab.TableName
	if lockID != "" {
		var err error
		if tables, err = st.Tables(""); err != nil {
			return fmt.Errorf("DDL %q: %w", q, err)
		}
	}
	// The "started" marker must be committed before q runs. With ddlDB both go in one query: the
	// server runs its statements in order, each INSERT commits on its own (autocommit), and it stops at
	// the first error, so q runs only after the marker is in. Only for a q without ";": the query is
	// then exactly these two statements. The same holds for the "running" marker of execRunning.
	together := len(tables) > 0 && s.ddlDB != nil && !strings.Contains(q, ";")
	if first && together && len(tables) == 1 {
		if _, ok := st.Effects(); ok {
			decided, err := s.execRunning(ctx, lockID, st, tables, in)
			if decided || err != nil {
				return err
			}
		}
	}
	cur, m, ok, err := s.before(ctx, lockID, q, tables)
	if err != nil {
		return err
	}
	if len(tables) > 0 {
		switch {
		case !ok:
		case m.State == "done" && cur.is(m.After):
			return nil // ran before a restart; its tables are as it left them
		case m.State == "started" && !cur.is(m.Before):
			c, err := s.compare(ctx, st)
			if err != nil {
				return err
			}
			if !c.Known || c.Same {
				return s.mark(ctx, lockID, q, "done", m.Before, cur.hash) // took effect before a crash
			}
			// The tables changed, but not as q changes them: q was refused, and the user changed
			// them since (dropped a hand-made column of the same name). It runs.
			s.log.Info("DDL marked started did not take effect (its tables changed otherwise since): it runs",
				zap.String("lock", lockID), zap.String("ddl", q), zap.String("found", c.Reason))
		case m.State == meta.MarkerRunning && len(tables) == 1:
			c, err := s.compare(ctx, st)
			if err != nil {
				return err
			}
			if c.Known && c.Same {
				return s.mark(ctx, lockID, q, "done", "", cur.hash) // took effect before a crash
			}
			// It did not run (or the table does not say): it runs.
		}
	}
	if len(tables) > 0 && !together {
		if err := s.mark(ctx, lockID, q, "started", cur.hash, ""); err != nil {
			return err
		}
	}
	traceStep(ctx, "ddl prepared")
	if together {
		err = s.runDDL(ctx, s.ddlDB, s.meta.MarkSQL(lockID, q, meta.Marker{State: "started", Before: cur.hash}), q, in)
	} else {
		err = s.runDDL(ctx, s.db, "", q, in)
	}
	if err != nil {
		// An "already applied" error is q's: the marker's INSERT has none of those.
		var me *mysql.MySQLError
		if !errors.As(err, &me) || !alreadyApplied[me.Number] {
			if together {
				return fmt.Errorf("write the started marker of lock %s and execute DDL %q downstream: %w", lockID, q, err)
			}
			return fmt.Errorf("execute DDL %q downstream: %w", q, err)
		}
		if err := s.checkApplied(ctx, lockID, st, me); err != nil {
			return err
		}
	}
	traceStep(ctx, "ddl executed")
	if len(tables) == 0 {
		return nil
	}
	return s.markDone(ctx, lockID, q, cur.hash, tables)
}

// execRunning runs q (ddl.Effects), which nobody ran in this round of the lock, in one query
// behind a marker in state "running" that the server writes only while the checkpoint belongs to this
// binding (meta.Store.MarkRunningSQL; a marker of q from an earlier round is overwritten): the fence,
// the marker and the DDL in one round trip, with no definition read before it. When that query fails,
// whatever failed (a newer binding, q itself, the connection), it reports decided false and no error, and
// execOnce goes the way that reads first: a running marker, if the server wrote one, says to run q
// unless the table shows it ran, and the same error, if it lasts, is reported from there. An "already
// applied" error is q's (the marker's INSERT has none of those), so q did not run: it is decided on
// here (checkApplied): decided, with the error that refuses it or marked done.
func (s *DDLExecutor) execRunning(ctx context.Context, lockID string, st ddl.Statement, tables []vocab.TableName, in session.Settings) (decided bool, err error) {
	q := st.SQL
	traceStep(ctx, "ddl prepared")
	if err := s.runDDL(ctx, s.ddlDB, s.meta.MarkRunningSQL(lockID, q), q, in); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || !alreadyApplied[me.Number] {
			return false, nil // the reading way meets the same error again, if it lasts, and reports it
		}
		if err := s.checkApplied(ctx, lockID, st, me); err != nil {
			return true, err
		}
	}
	traceStep(ctx, "ddl executed")
	return true, s.markDone(ctx, lockID, q, "", tables)
}

// markDone marks q done with the definition its tables have now (before is the one recorded before it
// ran, "" when none was).
func (s *DDLExecutor) markDone(ctx context.Context, lockID, q, before string, tables []vocab.TableName) error {
	if !strings.HasPrefix(lockID, "source:") {
		failpoint.Inject("worker-after-ddl") // a lock's DDL ran downstream; no marker, checkpoint or done yet
	}
	after, err := s.definition(ctx, tables)
	if err != nil {
		return err
	}
	if err := s.mark(ctx, lockID, q, "done", before, after.hash); err != nil {
		return err
	}
	traceStep(ctx, "marked done")
	return nil
}

// checkApplied decides on q, which the downstream answered with an "already applied" error (me): q did
// not run, and it is taken as applied (nil, logged) only when the downstream already is what q would
// make of it. Otherwise the error says what is there and what q would make; it wraps me, so the
// subtask pauses on it (downstreamPermanent). The downstream's object is left as it is.
func (s *DDLExecutor) checkApplied(ctx context.Context, lockID string, st ddl.Statement, me *mysql.MySQLError) error {
	q := st.SQL
	c, err := s.compare(ctx, st)
	if err != nil {
		return err
	}
	if !c.Known || !c.Same {
		s.log.Warn("DDL refused downstream: the object is there (or gone) but not as the DDL would make it; the subtask pauses",
			zap.String("lock", lockID), zap.String("ddl", q), zap.Uint16("code", me.Number), zap.String("found", c.Reason),
			zap.String("downstream", c.Have), zap.String("ddl's", c.Want))
		return &NotAppliedError{DDL: q, Comparison: c, Cause: me}
	}
	s.log.Info("DDL already in effect downstream: the downstream is what it would make, so it is taken as applied",
		zap.String("lock", lockID), zap.String("ddl", q), zap.Uint16("code", me.Number), zap.String("found", c.Reason))
	return nil
}

// NotAppliedError is a DDL the downstream refused as "already applied" (a duplicate column, a key that
// exists, a column that cannot be dropped...) although what is there is not what the DDL would make,
// or cannot be compared with it: a column of the same name added by hand with another type.
type NotAppliedError struct {
	DDL        string
	Comparison ddl.Comparison
	Cause      *mysql.MySQLError
}

func (e *NotAppliedError) Unwrap() error { return e.Cause }

func (e *NotAppliedError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "DDL %q did not run: %v; ", clip(e.DDL, 300), e.Cause)
	if e.Comparison.Known {
		fmt.Fprintf(&sb, "it is not taken as applied because the downstream differs from what it would make: %s", e.Comparison.Reason)
	} else {
		fmt.Fprintf(&sb, "it is not taken as applied because the downstream cannot be compared with what it would make: %s", e.Comparison.Reason)
	}
	if e.Comparison.Have != "" {
		fmt.Fprintf(&sb, "; downstream: %s", e.Comparison.Have)
	}
	if e.Comparison.Want != "" {
		fmt.Fprintf(&sb, "; the DDL would make: %s", e.Comparison.Want)
	}
	// The caller's StatementError adds the ways out (resume-task, binlog skip and replace).
	sb.WriteString(". Tributary leaves the downstream object as it is; once it is changed or dropped, resume-task runs the DDL")
	return sb.String()
}

// compare reads the downstream objects q names (the tables' SHOW CREATE TABLE, the databases) and
// compares them with what q would make (ddl.CompareWithDownstream).
func (s *DDLExecutor) compare(ctx context.Context, st ddl.Statement) (ddl.Comparison, error) {
	tables, err := st.Tables("")
	if err != nil {
		return ddl.Comparison{Reason: err.Error()}, nil // the comparison says it cannot read q
	}
	down := ddl.Downstream{Tables: map[vocab.TableName]string{}, Databases: map[string]bool{}}
	for _, t := range tables {
		def, err := s.showCreate(ctx, s.db, t)
		if err != nil {
			return ddl.Comparison{}, err
		}
		if def != "absent" {
			down.Tables[t] = def
		}
	}
	rows, err := s.db.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
	if err != nil {
		return ddl.Comparison{}, fmt.Errorf("databases downstream: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return ddl.Comparison{}, fmt.Errorf("databases downstream: %w", err)
		}
		down.Databases[name] = true
	}
	if err := rows.Err(); err != nil {
		return ddl.Comparison{}, fmt.Errorf("databases downstream: %w", err)
	}
	return st.CompareWithDownstream(down), nil
}

// before reads what execOnce decides on before it runs q: the epoch fence, which stops a worker whose
// binding was taken away before it runs any DDL; and, when q names tables, their definition and q's
// marker. With a DDL connection (ddlDB) all of it is one multi-statement query there: one round trip,
// and the connection the marker and q go on next is awake (on a VM, waking an idle connection costs
// more than the round trip). Without one, the reads run at once, each on its own connection.
func (s *DDLExecutor) before(ctx context.Context, lockID, q string, tables []vocab.TableName) (cur definition, m meta.Marker, ok bool, err error) {
	if s.ddlDB != nil && len(tables) > 0 {
		return s.beforeInOneQuery(ctx, lockID, q, tables)
	}
	var wg sync.WaitGroup
	var defErr, markErr error
	if len(tables) > 0 {
		wg.Add(2)
		go func() { defer wg.Done(); cur, defErr = s.definition(ctx, tables) }()
		go func() { defer wg.Done(); m, ok, markErr = s.meta.Marker(ctx, lockID, q) }()
	}
	err = s.meta.CheckEpoch(ctx, s.db, false)
	wg.Wait()
	for _, e := range []error{err, defErr, markErr} {
		if e != nil {
			return definition{}, meta.Marker{}, false, e
		}
	}
	return cur, m, ok, nil
}

// beforeInOneQuery is before's one query on ddlDB: the fence's SELECT (when there is an epoch), the
// marker's, and SHOW CREATE TABLE of each table, in that order. The server stops at the first error: a
// table that does not exist is "absent", and the tables after it are read one query each.
func (s *DDLExecutor) beforeInOneQuery(ctx context.Context, lockID, q string, tables []vocab.TableName) (cur definition, m meta.Marker, ok bool, err error) {
	fail := func(err error) (definition, meta.Marker, bool, error) { return definition{}, meta.Marker{}, false, err }
	epoch := s.meta.EpochSQL()
	stmts := make([]string, 0, len(tables)+2)
	if epoch != "" {
		stmts = append(stmts, epoch)
	}
	stmts = append(stmts, s.meta.MarkerSQL(lockID, q))
	for _, t := range tables {
		stmts = append(stmts, "SHOW CREATE TABLE "+t.String())
	}
	rows, err := s.ddlDB.QueryContext(ctx, strings.Join(stmts, ";\n"))
	if err != nil {
		return fail(fmt.Errorf("read what lock %s's DDL is checked against (epoch, marker, definitions): %w", lockID, err))
	}
	defer rows.Close()
	// next moves to the next statement's result; false with rows.Err() nil cannot happen while
	// statements are left, so it is reported as a short answer.
	next := func() error {
		if rows.NextResultSet() {
			return nil
		}
		return cmp.Or(rows.Err(), errors.New("the server answered fewer statements than were sent"))
	}
	row := oneRow(rows)
	if epoch != "" {
		if err := s.meta.ScanOwner(row); err != nil {
			return fail(err)
		}
		if err := next(); err != nil {
			return fail(fmt.Errorf("read DDL marker of %s: %w", lockID, err))
		}
	}
	switch m, err = meta.ScanMarker(row); {
	case err == nil:
		ok = true
	case !errors.Is(err, sql.ErrNoRows):
		return fail(fmt.Errorf("read DDL marker of %s: %w", lockID, err))
	}
	defs := make([]string, len(tables))
	for i, t := range tables {
		err := next()
		if dbutil.IsNoSuchTable(err) {
			// The server stopped here: this table is absent, the rest are read one by one.
			defs[i] = "absent"
			for j := i + 1; j < len(tables); j++ {
				if defs[j], err = s.showCreate(ctx, s.ddlDB, tables[j]); err != nil {
					return fail(err)
				}
			}
			break
		}
		var name string
		if err == nil {
			err = row(&name, &defs[i])
		}
		if err != nil {
			return fail(fmt.Errorf("definition of %s: %w", t, err))
		}
	}
	return definitionOf(tables, defs), m, ok, nil
}

func (s *DDLExecutor) mark(ctx context.Context, lockID, q, state, before, after string) error {
	return s.meta.Mark(ctx, lockID, q, meta.Marker{State: state, Before: before, After: after})
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// definition is what a DDL marker compares: the SHOW CREATE TABLE of each table the DDL names
// (without the AUTO_INCREMENT counter, which DML moves), or "absent".
type definition struct {
	text string
	hash string // "sha256:" and the hex SHA-256 of text: what markers store (a definition may hold
	// bytes that are not text, such as a BINARY column's DEFAULT)
}

// is reports whether a marker's stored definition is this one (markers written before hashing hold the
// text itself).
func (d definition) is(stored string) bool { return stored == d.hash || stored == d.text }

func (s *DDLExecutor) definition(ctx context.Context, tables []vocab.TableName) (definition, error) {
	defs := make([]string, len(tables))
	for i, t := range tables {
		var err error
		if defs[i], err = s.showCreate(ctx, s.db, t); err != nil {
			return definition{}, err
		}
	}
	return definitionOf(tables, defs), nil
}

// showCreate is SHOW CREATE TABLE of t, or "absent".
func (s *DDLExecutor) showCreate(ctx context.Context, db *sql.DB, t vocab.TableName) (string, error) {
	var name, def string
	err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.String()).Scan(&name, &def)
	if dbutil.IsNoSuchTable(err) {
		return "absent", nil
	}
	if err != nil {
		return "", fmt.Errorf("definition of %s: %w", t, err)
	}
	return def, nil
}

// definitionOf is the definition of tables whose SHOW CREATE TABLE (or "absent") are defs.
func definitionOf(tables []vocab.TableName, defs []string) definition {
	var sb strings.Builder
	for i, t := range tables {
		sb.WriteString(t.String() + ": " + autoIncrement.ReplaceAllString(defs[i], "") + "\n")
	}
	return definition{text: sb.String(), hash: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(sb.String())))}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// withCollations renames in st the collations the downstream lacks (ddl.WithCollations): a MySQL 8
// upstream's utf8mb4_0900_* become a MariaDB downstream's UCA 14.0 ones (10.10+), or on an older
// MariaDB the nearest it has. A downstream that has them (MySQL 8, MariaDB 11.4.5+) gets them as they are.
func (s *DDLExecutor) withCollations(ctx context.Context, st ddl.Statement) (ddl.Statement, error) {
	if !strings.Contains(strings.ToLower(st.SQL), "_0900_") {
		return st, nil // the downstream is not asked until a statement names one
	}
	c := &s.collations
	c.Lock()
	defer c.Unlock()
	if !c.read {
		has, err := downstreamCollations(ctx, s.db)
		if err != nil {
			return st, fmt.Errorf("read the downstream's collations: %w", err)
		}
		switch {
		case has["utf8mb4_0900_ai_ci"]:
		case has["utf8mb4_uca1400_ai_ci"]:
			c.m = ddl.MariaDBCollations
		default:
			c.m = ddl.OldMariaDBCollations
		}
		c.read = true
		if c.m != nil {
			s.log.Info("the downstream lacks MySQL 8's utf8mb4_0900 collations: DDL names them as it does", zap.Any("collations", c.m))
		}
	}
	if c.m == nil {
		return st, nil
	}
	return st.WithCollations(c.m)
}

// downstreamCollations says which of the collations withCollations decides by the downstream has.
func downstreamCollations(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('utf8mb4_0900_ai_ci', 'utf8mb4_uca1400_ai_ci')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	has := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		has[name] = true
	}
	return has, rows.Err()
}
