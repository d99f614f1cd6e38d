package ddl

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/tributary-db/tributary/vocab"
)

// A DDL is parsed where it enters (the binlog: Parse; an operation read back, an operator's
// statements, a statement Tributary writes: ParseStatement) and travels parsed: the schema tracker,
// the online DDL rules and the splitter read one tree, and each part the splitter writes carries the
// tree its restored text parsed into (the check that the downstream can read it), from which the
// executor reads tables and effects. A shard DDL is so parsed twice between its binlog event and the
// downstream statement (TestShardDDLIsParsedTwice counts it).

// parses counts the texts parsed by this package (Parses).
var parses atomic.Int64

// Parses is how many statement texts this process has parsed with the TiDB parser.
func Parses() int64 { return parses.Load() }

// Parsed is a query event's statement text read by the parser, for the schema tracker
// (TrackColumns), the online DDL rules (Pieces) and the splitter (Split) to read in turn. Split
// rewrites the tree in place: it comes last, once.
type Parsed struct {
	SQL   string
	stmts []ast.StmtNode
	spent bool
}

// Parse parses sql, one or more statements. Statements that define stored programs, which the parser
// does not always read, give ErrNotDDL (wrapped); text that is not valid UTF-8 is refused (the parser
// would turn it into '?', renaming tables).
func Parse(sql string) (p *Parsed, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("parse DDL %q: parser panic: %v", truncate(sql), r)
		}
	}()
	if !utf8.ValidString(sql) {
		return nil, fmt.Errorf("DDL %q is not valid UTF-8", truncate(sql))
	}
	stmts, err := parse(sql)
	if err != nil && storedProgram.MatchString(sql) {
		return nil, fmt.Errorf("%w: stored program %q", ErrNotDDL, truncate(sql))
	}
	if err != nil {
		return nil, fmt.Errorf("parse DDL %q: %w", truncate(sql), err)
	}
	if len(stmts) == 0 {
		return nil, fmt.Errorf("parse DDL %q: no statement", truncate(sql))
	}
	return &Parsed{SQL: sql, stmts: stmts}, nil
}

var errSpent = errors.New("ddl: the statement was split already; its tree holds the routed names")

// Piece is one single-table part of a statement as the binlog has it (no name routed): its kind,
// its table and, for a rename, the new name.
type Piece struct {
	Kind      Kind
	Source    vocab.TableName
	RenamedTo vocab.TableName
}

// Pieces returns the single-table parts of the statements, with upstream names; the tree is left as
// it is.
func (p *Parsed) Pieces(defaultSchema string) (out []Piece, err error) {
	if p.spent {
		return nil, errSpent
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("split DDL %q: parser panic: %v", truncate(p.SQL), r)
		}
	}()
	for _, stmt := range p.stmts {
		pcs, err := splitStmt(stmt, defaultSchema)
		if err != nil {
			return nil, fmt.Errorf("split DDL %q: %w", truncate(p.SQL), err)
		}
		for _, pc := range pcs {
			out = append(out, Piece{Kind: pc.kind, Source: pc.source, RenamedTo: pc.renamedTo})
		}
	}
	return out, nil
}

// Statement is one statement with the tree it was parsed into. A Statement built with its SQL alone
// (one to run as it is, such as a server's own CREATE TABLE that the parser cannot read) is parsed
// only when its tables or effects are asked for.
type Statement struct {
	SQL  string
	node ast.StmtNode
}

// ParseStatement parses sql, which must be one statement.
func ParseStatement(sql string) (Statement, error) {
	stmts, err := parse(sql)
	if err != nil {
		return Statement{}, fmt.Errorf("parse %q: %w", truncate(sql), err)
	}
	if len(stmts) != 1 {
		return Statement{}, fmt.Errorf("parse %q: %d statements, want one", truncate(sql), len(stmts))
	}
	return Statement{SQL: sql, node: stmts[0]}, nil
}

// ParseStatements parses each of sqls (ParseStatement).
func ParseStatements(sqls []string) ([]Statement, error) {
	out := make([]Statement, len(sqls))
	for i, q := range sqls {
		s, err := ParseStatement(q)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// Texts returns the SQL of each statement.
func Texts(stmts []Statement) []string {
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = s.SQL
	}
	return out
}

// tree is the statement's tree, parsed now if it was built by hand.
func (s Statement) tree() (ast.StmtNode, error) {
	if s.node != nil {
		return s.node, nil
	}
	p, err := ParseStatement(s.SQL)
	return p.node, err
}

// Tables is TablesOf the statement.
func (s Statement) Tables(defaultSchema string) ([]vocab.TableName, error) {
	n, err := s.tree()
	if err != nil {
		return nil, err
	}
	return tablesOf([]ast.StmtNode{n}, defaultSchema), nil
}

// Effects is Effects of the statement.
func (s Statement) Effects() ([]Effect, bool) {
	n, err := s.tree()
	if err != nil {
		return nil, false
	}
	return effectsOf(n)
}

// CompareWithDownstream is CompareWithDownstream of the statement.
func (s Statement) CompareWithDownstream(down Downstream) Comparison {
	n, err := s.tree()
	if err != nil {
		return unknown("the statement cannot be read: %v", err)
	}
	return compareWithDownstream(n, down)
}

// IfNotExists is the statement, a CREATE TABLE or CREATE DATABASE, with IF NOT EXISTS set (in the
// tree, which s shares: s is spent).
func (s Statement) IfNotExists() (Statement, error) {
	n, err := s.tree()
	if err != nil {
		return Statement{}, err
	}
	return ifNotExists(n, s.SQL)
}

// WithDefaultCollation is WithDefaultCollation of the statement (in the tree, which s shares: s is
// spent when it changes).
func (s Statement) WithDefaultCollation(collation string) (Statement, error) {
	n, err := s.tree()
	if err != nil {
		return Statement{}, err
	}
	return withDefaultCollation(Statement{SQL: s.SQL, node: n}, collation)
}
