package ddl

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser; no I/O
	"github.com/tributary-db/tributary/vocab"
)

// Kind is the statement type of a split DDL part.
type Kind string

// The statement types Split understands.
const (
	KindCreateDatabase Kind = "CREATE DATABASE"
	KindAlterDatabase  Kind = "ALTER DATABASE"
	KindDropDatabase   Kind = "DROP DATABASE"
	KindCreateTable    Kind = "CREATE TABLE"
	KindAlterTable     Kind = "ALTER TABLE"
	KindDropTable      Kind = "DROP TABLE"
	KindRenameTable    Kind = "RENAME TABLE"
	KindTruncateTable  Kind = "TRUNCATE TABLE"
	KindCreateIndex    Kind = "CREATE INDEX"
	KindDropIndex      Kind = "DROP INDEX"
)

// Part is one single-table piece of a DDL statement.
type Part struct {
	Kind Kind
	// Source is the upstream table the part concerns (for RENAME, the old name). For a database
	// statement only Schema is set.
	Source vocab.TableName
	// Target is Source after routing.
	Target vocab.TableName
	// Statement is the single-table statement with every table name routed, restored from the AST,
	// with the tree its text parsed into.
	Statement
	// RenamedTo is, for RENAME TABLE and ALTER TABLE RENAME, the upstream table's new name.
	RenamedTo vocab.TableName
	// AlsoAlters: an ALTER TABLE RENAME that changes the table besides its name.
	AlsoAlters bool
}

// ErrNotDDL is returned (wrapped) by Split for statements that change no table or database (GRANT,
// CREATE USER, FLUSH, ...): a replicator skips them.
var ErrNotDDL = errors.New("not a table or database DDL")

// Route maps an upstream table (or schema, with an empty Name) to its downstream name.
type Route func(vocab.TableName) vocab.TableName

var parsers = sync.Pool{New: func() any { return parser.New() }}

// parse parses with a pooled parser. The parser is third-party code fed with user input: a panic in
// it becomes an error (and that parser is not reused).
func parse(sql string) (stmts []ast.StmtNode, err error) {
	parses.Add(1)
	p := parsers.Get().(*parser.Parser)
	defer func() {
		if r := recover(); r != nil {
			stmts, err = nil, fmt.Errorf("parser panic: %v", r)
			return
		}
		parsers.Put(p)
	}()
	stmts, _, err = p.Parse(sql, "", "")
	if err != nil {
		if alt, ok := normalizeMariaDB(sql); ok {
			if st, _, err2 := p.Parse(alt, "", ""); err2 == nil {
				return st, nil
			}
		}
	}
	return stmts, err
}

// Split parses a DDL statement (one binlog query event) and returns one Part per affected table, in
// statement order. Unqualified table names take defaultSchema. route may be nil (names are kept).
// Statements that are not DDL, or DDL that Split does not handle, give an error naming the statement.
func Split(sql, defaultSchema string, route Route) ([]Part, error) {
	p, err := Parse(sql)
	if err != nil {
		return nil, err
	}
	return p.Split(defaultSchema, route)
}

// Split is Split of the parsed statements. It routes the names in the tree itself, so p is spent:
// read it (TrackColumns, Pieces) before.
func (p *Parsed) Split(defaultSchema string, route Route) (parts []Part, err error) {
	if p.spent {
		return nil, errSpent
	}
	p.spent = true
	sql := p.SQL
	// The parser is third-party code fed with user input; a panic in it must become an error, not
	// a dead worker.
	defer func() {
		if r := recover(); r != nil {
			parts, err = nil, fmt.Errorf("parse DDL %q: parser panic: %v", truncate(sql), r)
		}
	}()
	if route == nil {
		route = func(t vocab.TableName) vocab.TableName { return t }
	}
	if !utf8.ValidString(defaultSchema) {
		return nil, fmt.Errorf("DDL %q (default database %q) is not valid UTF-8", truncate(sql), defaultSchema)
	}
	for _, stmt := range p.stmts {
		pieces, err := splitStmt(stmt, defaultSchema)
		if err != nil {
			return nil, fmt.Errorf("split DDL %q: %w", truncate(sql), err)
		}
		for _, pc := range pieces {
			p, err := rewrite(pc, defaultSchema, route)
			if err != nil {
				return nil, fmt.Errorf("rewrite DDL %q: %w", truncate(sql), err)
			}
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// piece is a single-table statement node that may share sub-nodes with the original statement.
type piece struct {
	kind       Kind
	source     vocab.TableName
	node       ast.StmtNode
	renamedTo  vocab.TableName
	alsoAlters bool
}

func splitStmt(stmt ast.StmtNode, defaultSchema string) ([]piece, error) {
	name := func(tn *ast.TableName) (vocab.TableName, error) { return qualify(tn, defaultSchema) }
	one := func(kind Kind, tn *ast.TableName, node ast.StmtNode) ([]piece, error) {
		src, err := name(tn)
		if err != nil {
			return nil, err
		}
		return []piece{{kind: kind, source: src, node: node}}, nil
	}
	switch s := stmt.(type) {
	case *ast.CreateDatabaseStmt:
		return []piece{{kind: KindCreateDatabase, source: vocab.TableName{Schema: s.Name.O}, node: s}}, nil
	case *ast.AlterDatabaseStmt:
		db := s.Name.O
		if s.AlterDefaultDatabase || db == "" {
			db = defaultSchema
		}
		if db == "" {
			return nil, fmt.Errorf("ALTER DATABASE without a database name and no default database")
		}
		s.Name.O, s.Name.L = db, strings.ToLower(db)
		s.AlterDefaultDatabase = false
		return []piece{{kind: KindAlterDatabase, source: vocab.TableName{Schema: db}, node: s}}, nil
	case *ast.DropDatabaseStmt:
		return []piece{{kind: KindDropDatabase, source: vocab.TableName{Schema: s.Name.O}, node: s}}, nil
	case *ast.CreateTableStmt:
		if s.Select != nil {
			return nil, fmt.Errorf("CREATE TABLE ... SELECT is not supported")
		}
		if s.ReferTable != nil {
			return one(KindCreateTableLike, s.Table, s)
		}
		return one(KindCreateTable, s.Table, s)
	case *ast.AlterTableStmt:
		pcs, err := one(alterKind(s), s.Table, s)
		if err == nil && pcs[0].kind == KindAlterTableRename {
			pcs[0].alsoAlters = len(s.Specs) > 1
			for _, spec := range s.Specs {
				if spec.Tp == ast.AlterTableRenameTable && spec.NewTable != nil {
					if pcs[0].renamedTo, err = name(spec.NewTable); err != nil {
						return nil, err
					}
				}
			}
		}
		return pcs, err
	case *ast.CreateViewStmt:
		return one(KindView, s.ViewName, s)
	case *ast.CreateSequenceStmt:
		return one(KindSequence, s.Name, s)
	case *ast.AlterSequenceStmt:
		return one(KindSequence, s.Name, s)
	case *ast.DropSequenceStmt:
		if len(s.Sequences) == 0 {
			return nil, fmt.Errorf("DROP SEQUENCE without a name")
		}
		return one(KindSequence, s.Sequences[0], s)
	case *ast.TruncateTableStmt:
		return one(KindTruncateTable, s.Table, s)
	case *ast.CreateIndexStmt:
		return one(KindCreateIndex, s.Table, s)
	case *ast.DropIndexStmt:
		return one(KindDropIndex, s.Table, s)
	case *ast.DropTableStmt:
		if s.IsView {
			if len(s.Tables) == 0 {
				return nil, fmt.Errorf("DROP VIEW without a name")
			}
			return one(KindView, s.Tables[0], s)
		}
		out := make([]piece, 0, len(s.Tables))
		for _, tn := range s.Tables {
			src, err := name(tn)
			if err != nil {
				return nil, err
			}
			out = append(out, piece{kind: KindDropTable, source: src, node: &ast.DropTableStmt{
				IfExists: s.IfExists, Tables: []*ast.TableName{tn}, TemporaryKeyword: s.TemporaryKeyword,
			}})
		}
		return out, nil
	case *ast.RenameTableStmt:
		out := make([]piece, 0, len(s.TableToTables))
		for _, tt := range s.TableToTables {
			src, err := name(tt.OldTable)
			if err != nil {
				return nil, err
			}
			dst, err := name(tt.NewTable)
			if err != nil {
				return nil, err
			}
			out = append(out, piece{kind: KindRenameTable, source: src, node: &ast.RenameTableStmt{TableToTables: []*ast.TableToTable{tt}}, renamedTo: dst})
		}
		return out, nil
	default:
		if _, ok := stmt.(ast.DDLNode); !ok {
			return nil, ErrNotDDL
		}
		return nil, fmt.Errorf("statement %T is not a supported DDL", stmt)
	}
}

// alterKind tells apart the ALTER TABLE statements the safety table treats differently; a statement
// with several specs takes the most dangerous one's kind.
func alterKind(s *ast.AlterTableStmt) Kind {
	kind := KindAlterTable
	for _, spec := range s.Specs {
		switch spec.Tp {
		case ast.AlterTableRenameTable:
			return KindAlterTableRename
		case ast.AlterTableExchangePartition:
			kind = KindExchangePartition
		case ast.AlterTableDropPartition, ast.AlterTableTruncatePartition:
			if kind == KindAlterTable {
				kind = KindDropPartition
			}
		}
	}
	return kind
}

// storedProgram matches the statements that define stored programs, which the TiDB parser does not
// always read (CREATE TRIGGER, CREATE FUNCTION ... RETURNS, CREATE EVENT): they change no table.
var storedProgram = regexp.MustCompile(`(?is)^\s*(/\*.*?\*/\s*)*(CREATE|DROP|ALTER)\s+(OR\s+REPLACE\s+)?(DEFINER\s*=\s*\S+\s+)?(SQL\s+SECURITY\s+\w+\s+)?(AGGREGATE\s+)?(TRIGGER|PROCEDURE|FUNCTION|EVENT|PACKAGE)\b`)

func qualify(tn *ast.TableName, defaultSchema string) (vocab.TableName, error) {
	if tn == nil {
		return vocab.TableName{}, fmt.Errorf("statement has no table name")
	}
	schema := tn.Schema.O
	if schema == "" {
		schema = defaultSchema
	}
	if schema == "" {
		return vocab.TableName{}, fmt.Errorf("table %s has no database and there is no default database", vocab.Quote(tn.Name.O))
	}
	return vocab.TableName{Schema: schema, Name: tn.Name.O}, nil
}

// rewrite routes every table name of a piece, in its tree, and restores it. The restored text is
// parsed once more: the downstream must never receive a statement that does not parse (routed names
// or the default schema may not be valid identifiers), and that tree travels with the part.
func rewrite(pc piece, defaultSchema string, route Route) (Part, error) {
	orig, err := restore(pc.node) // refuses what the parser reads without keeping; drops TiDB-only options
	if err != nil {
		return Part{}, err
	}
	if pc.kind == KindView || pc.kind == KindSequence {
		// Never run downstream (the safety table ignores them): named, not rewritten.
		return Part{Kind: pc.kind, Source: pc.source, Target: route(pc.source), Statement: Statement{SQL: orig}}, nil
	}
	stmt := pc.node
	v := &renamer{defaultSchema: defaultSchema, route: route}
	stmt.Accept(v)
	if v.err != nil {
		return Part{}, v.err
	}
	target := route(pc.source)
	switch s := stmt.(type) {
	case *ast.CreateDatabaseStmt:
		s.Name.O, s.Name.L = target.Schema, strings.ToLower(target.Schema)
	case *ast.AlterDatabaseStmt:
		s.Name.O, s.Name.L = target.Schema, strings.ToLower(target.Schema)
	case *ast.DropDatabaseStmt:
		s.Name.O, s.Name.L = target.Schema, strings.ToLower(target.Schema)
	}
	sql, err := restore(stmt)
	if err != nil {
		return Part{}, err
	}
	parsed, err := parse(sql)
	if err != nil {
		return Part{}, fmt.Errorf("rewritten DDL %q is not valid: %w", sql, err)
	}
	if len(parsed) != 1 {
		return Part{}, fmt.Errorf("rewritten DDL %q: %d statements", sql, len(parsed))
	}
	return Part{Kind: pc.kind, Source: pc.source, Target: target, Statement: Statement{SQL: sql, node: parsed[0]},
		RenamedTo: pc.renamedTo, AlsoAlters: pc.alsoAlters}, nil
}

// renamer routes every table name of a statement.
type renamer struct {
	defaultSchema string
	route         Route
	err           error
	done          map[*ast.TableName]bool
}

func (r *renamer) Enter(n ast.Node) (ast.Node, bool) {
	if cd, ok := n.(*ast.ColumnDef); ok {
		// The AST walk does not enter a column's REFERENCES (MariaDB makes it a foreign key).
		for _, o := range cd.Options {
			if o.Tp == ast.ColumnOptionReference && o.Refer != nil && o.Refer.Table != nil {
				r.rename(o.Refer.Table)
			}
		}
		return n, false
	}
	tn, ok := n.(*ast.TableName)
	if !ok {
		return n, false
	}
	r.rename(tn)
	return n, true
}

// rename routes one table name, once (a node reached twice keeps its first routing).
func (r *renamer) rename(tn *ast.TableName) {
	if r.done == nil {
		r.done = map[*ast.TableName]bool{}
	}
	if r.done[tn] {
		return
	}
	r.done[tn] = true
	src, err := qualify(tn, r.defaultSchema)
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return
	}
	dst := r.route(src)
	if !utf8.ValidString(dst.Schema) || !utf8.ValidString(dst.Name) {
		if r.err == nil {
			r.err = fmt.Errorf("route of %s gives a name that is not valid UTF-8: %q", src, dst.String())
		}
		return
	}
	tn.Schema.O, tn.Schema.L = dst.Schema, strings.ToLower(dst.Schema)
	tn.Name.O, tn.Name.L = dst.Name, strings.ToLower(dst.Name)
}

func (r *renamer) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func truncate(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// CreateIfNotExists returns a CREATE TABLE or CREATE DATABASE statement with IF NOT EXISTS set,
// restored from the AST.
func CreateIfNotExists(sql string) (string, error) {
	stmts, err := parse(sql)
	if err != nil {
		return "", err
	}
	if len(stmts) != 1 {
		return "", fmt.Errorf("%q: want one statement, got %d", truncate(sql), len(stmts))
	}
	st, err := ifNotExists(stmts[0], sql)
	return st.SQL, err
}

func ifNotExists(node ast.StmtNode, sql string) (Statement, error) {
	switch ct := node.(type) {
	case *ast.CreateTableStmt:
		ct.IfNotExists = true
	case *ast.CreateDatabaseStmt:
		ct.IfNotExists = true
	default:
		return Statement{}, fmt.Errorf("%q is not CREATE TABLE or CREATE DATABASE", truncate(sql))
	}
	out, err := restore(node)
	return Statement{SQL: out, node: node}, err
}

// TablesOf returns the tables a statement names (qualified with defaultSchema where it names none),
// sorted and without duplicates: what a DDL can change.
func TablesOf(sql, defaultSchema string) ([]vocab.TableName, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, err
	}
	return tablesOf(stmts, defaultSchema), nil
}

func tablesOf(stmts []ast.StmtNode, defaultSchema string) []vocab.TableName {
	c := &tableCollector{schema: defaultSchema, seen: map[vocab.TableName]bool{}}
	for _, st := range stmts {
		st.Accept(c)
	}
	out := make([]vocab.TableName, 0, len(c.seen))
	for t := range c.seen {
		out = append(out, t)
	}
	vocab.SortTables(out)
	return out
}

type tableCollector struct {
	schema string
	seen   map[vocab.TableName]bool
}

func (c *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		t := vocab.TableName{Schema: tn.Schema.O, Name: tn.Name.O}
		if t.Schema == "" {
			t.Schema = c.schema
		}
		c.seen[t] = true
	}
	return n, false
}

func (c *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

var showCreatePrefix = regexp.MustCompile("^CREATE TABLE `(?:[^`]|``)+` \\(")

// RetargetShowCreate turns a server's SHOW CREATE TABLE output into CREATE TABLE IF NOT EXISTS of
// target, replacing only the table name the server writes first. It is for definitions the parser cannot
// read (spatial columns, INVISIBLE columns, expression defaults...), which a downstream of the same
// flavor runs as the upstream wrote them. Table names inside the definition (foreign keys) are kept.
func RetargetShowCreate(create string, target vocab.TableName) (string, error) {
	loc := showCreatePrefix.FindStringIndex(create)
	if loc == nil {
		return "", fmt.Errorf("not a SHOW CREATE TABLE output: %q", truncate(create))
	}
	return "CREATE TABLE IF NOT EXISTS " + target.String() + " (" + create[loc[1]:], nil
}

// TargetDefinition is the CREATE TABLE IF NOT EXISTS of target from the upstream's SHOW CREATE TABLE
// of t: restored through the parser with every name routed, or, for a definition the parser cannot
// read (spatial and INVISIBLE columns, expression defaults...), the server's own text with the target's
// name, which a downstream of the same flavor runs as the upstream did.
func TargetDefinition(create string, t, target vocab.TableName, route Route) (string, error) {
	parts, err := Split(create, t.Schema, route)
	if err == nil && len(parts) == 1 {
		st, err := parts[0].IfNotExists()
		return st.SQL, err
	}
	stmt, rerr := RetargetShowCreate(create, target)
	if rerr != nil {
		return "", fmt.Errorf("%v (and %v)", err, rerr)
	}
	return stmt, nil
}

// WithDefaultCollation is a CREATE TABLE that names no character set or collation of its own (as a
// table option), with DEFAULT COLLATE=collation added (which says its character set too): what the
// table took upstream from its database. Any other statement, or one that names either, is returned as
// it is. A CREATE TABLE ... LIKE has its source's.
func WithDefaultCollation(sql, collation string) (string, error) {
	stmts, err := parse(sql)
	if err != nil {
		return "", err
	}
	if len(stmts) != 1 {
		return "", fmt.Errorf("%q: want one statement, got %d", truncate(sql), len(stmts))
	}
	st, err := withDefaultCollation(Statement{SQL: sql, node: stmts[0]}, collation)
	return st.SQL, err
}

func withDefaultCollation(s Statement, collation string) (Statement, error) {
	ct, ok := s.node.(*ast.CreateTableStmt)
	if !ok || ct.ReferTable != nil {
		return s, nil
	}
	for _, o := range ct.Options {
		if o.Tp == ast.TableOptionCharset || o.Tp == ast.TableOptionCollate {
			return s, nil
		}
	}
	ct.Options = append(ct.Options, &ast.TableOption{Tp: ast.TableOptionCollate, StrValue: collation})
	out, err := restore(ct)
	return Statement{SQL: out, node: ct}, err
}

// WithTableComment is a CREATE TABLE statement (TargetDefinition's) with its table comment replaced by
// comment, which must hold no quote or backslash. A statement the parser reads is restored with the
// option changed; a server's SHOW CREATE TABLE text (RetargetShowCreate's) gets COMMENT='comment' at
// the end of its table options line, the first that starts with ")", after any COMMENT of its own
// (the servers take the last one).
func WithTableComment(sql, comment string) (string, error) {
	if strings.ContainsAny(comment, `'\`) {
		return "", fmt.Errorf("table comment %q holds a quote or a backslash", comment)
	}
	if stmts, err := parse(sql); err == nil && len(stmts) == 1 {
		if ct, ok := stmts[0].(*ast.CreateTableStmt); ok && ct.ReferTable == nil {
			ct.Options = slices.DeleteFunc(ct.Options, func(o *ast.TableOption) bool { return o.Tp == ast.TableOptionComment })
			ct.Options = append(ct.Options, &ast.TableOption{Tp: ast.TableOptionComment, StrValue: comment})
			if out, err := restore(ct); err == nil {
				return out, nil
			}
		}
	}
	lines := strings.Split(sql, "\n")
	for i, l := range lines {
		if i > 0 && strings.HasPrefix(l, ")") {
			lines[i] = l + " COMMENT='" + comment + "'"
			return strings.Join(lines, "\n"), nil
		}
	}
	return "", fmt.Errorf("cannot set the table comment of %q", truncate(sql))
}
