package eventclass

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Class is the class of the statement a query event carries.
type Class string

const (
	Begin               Class = "begin"
	Commit              Class = "commit"
	Rollback            Class = "rollback"
	Savepoint           Class = "savepoint"
	RollbackToSavepoint Class = "rollback-to-savepoint"
	ReleaseSavepoint    Class = "release-savepoint"
	XAStart             Class = "xa-start"
	XAEnd               Class = "xa-end"
	XAPrepare           Class = "xa-prepare"
	XACommit            Class = "xa-commit"
	XACommitOnePhase    Class = "xa-commit-one-phase"
	XARollback          Class = "xa-rollback"
	DDL                 Class = "ddl"
	DML                 Class = "dml"
	Maintenance         Class = "maintenance"
	Flush               Class = "flush"
	Account             Class = "account"
	StoredProgram       Class = "stored-program"
	View                Class = "view"
	Temporary           Class = "temporary-table"
	Tablespace          Class = "tablespace"
	Plugin              Class = "plugin"
	Server              Class = "server"
	Dummy               Class = "dummy"
	Empty               Class = "empty"
	Unknown             Class = "unknown"
)

var classRules = map[Class]Rule{
	Begin:               {"`BEGIN`, `START TRANSACTION`", Track, "starts a transaction whose rows events follow"},
	Commit:              {"`COMMIT`", Replicate, "ends a transaction (of a non-transactional table, or with statement-format DML): a resume point"},
	Rollback:            {"`ROLLBACK`", Stop, "a transaction that also changed a non-transactional table rolled back: which of its rows stay cannot be known from the binlog"},
	Savepoint:           {"`SAVEPOINT`", Replicate, "marks the transaction: from here its rows are held until it commits, so that a `ROLLBACK TO` can drop those after the mark (DM skips it)"},
	RollbackToSavepoint: {"`ROLLBACK TO SAVEPOINT`", Replicate, "written only when the transaction also changed a non-transactional table: the held rows after the savepoint are dropped, as upstream"},
	ReleaseSavepoint:    {"`RELEASE SAVEPOINT`", Track, "removes a mark; no change of data"},
	XAStart:             {"`XA START` (MySQL)", Replicate, "starts an XA transaction: its rows are held until its outcome"},
	XAEnd:               {"`XA END`", Replicate, "ends an XA transaction's statements; its `XA PREPARE` follows"},
	XAPrepare:           {"`XA PREPARE`", Replicate, "as XA_PREPARE_LOG_EVENT"},
	XACommit:            {"`XA COMMIT`", Replicate, "the held rows of the prepared XA transaction are written downstream, once, at this point of the binlog"},
	XACommitOnePhase:    {"`XA COMMIT ... ONE PHASE`", Replicate, "an ordinary transaction"},
	XARollback:          {"`XA ROLLBACK`", Replicate, "the held rows of the prepared XA transaction are dropped"},
	DDL:                 {"DDL of tables, indexes, databases, sequences (`CREATE/ALTER/DROP/RENAME/TRUNCATE ...`)", Replicate, "through the DDL path: the safety table, the shard groups and the pessimistic lock decide (tables outside the task: skipped)"},
	DML: {"`INSERT`, `REPLACE`, `UPDATE`, `DELETE`, `LOAD DATA`, `CALL` in statement format", Stop,
		"a session wrote `binlog_format` STATEMENT or MIXED: the rows cannot be known, and replaying the statement on a merged target would touch every shard's rows (on tables outside the task: skipped)"},
	Maintenance:   {"`ANALYZE/OPTIMIZE/REPAIR/CHECK/CHECKSUM TABLE`", Skip, "the source's maintenance of its own storage (DM skips these)"},
	Flush:         {"`FLUSH ...`", Skip, "the source's caches and logs (DM skips these)"},
	Account:       {"`GRANT`, `REVOKE`, `CREATE/ALTER/RENAME/DROP USER`, `CREATE/DROP ROLE`, `SET PASSWORD`, `SET DEFAULT ROLE`", Skip, "the source's accounts are not the downstream's (DM skips these); the log line leaves the statement out (it may hold a password)"},
	StoredProgram: {"`CREATE/ALTER/DROP TRIGGER, PROCEDURE, FUNCTION, EVENT, PACKAGE`", Skip, "their effects arrive as rows; a trigger or event created downstream would apply them twice (DM skips these)"},
	View:          {"`CREATE/ALTER/DROP VIEW`", Skip, "a view holds no rows; the downstream's views are the user's (DM skips these)"},
	Temporary:     {"`CREATE/DROP TEMPORARY TABLE`", Skip, "a session's scratch table: what is written from it into replicated tables arrives as rows (DM skips these)"},
	Tablespace:    {"`CREATE/ALTER/DROP TABLESPACE`, `LOGFILE GROUP`", Skip, "the source's storage layout (DM skips these)"},
	Plugin:        {"`INSTALL/UNINSTALL PLUGIN, SONAME, COMPONENT`", Skip, "the source server's own extensions"},
	Server:        {"`CREATE/ALTER/DROP SERVER`", Skip, "the source's federated connection definitions"},
	Dummy:         {"`# ...` (a comment only, MariaDB's dummy event)", Skip, "MariaDB writes it in place of an event the replica did not ask for (DM skips these)"},
	Empty:         {"only comments that the source's version did not run", Skip, "the source ran nothing (an executable comment for a newer version)"},
	Unknown:       {"any other statement", Stop, "a statement Tributary has no decision for: it may change data in ways the rows do not show"},
}

// classOrder is docs/ddl.md's order of the statement table.
var classOrder = []Class{DDL, Begin, Commit, XAStart, XAEnd, XAPrepare, XACommit, XACommitOnePhase, XARollback,
	Savepoint, RollbackToSavepoint, ReleaseSavepoint, Maintenance, Flush, Account, StoredProgram, View, Temporary,
	Tablespace, Plugin, Server, Dummy, Empty, Rollback, DML, Unknown}

// ClassRule returns the decision for a statement class.
func ClassRule(c Class) Rule {
	if r, ok := classRules[c]; ok {
		return r
	}
	return classRules[Unknown]
}

// Statement is a query event's statement as Query read it.
type Statement struct {
	Class
	Rule
	// Text is the statement as the source ran it: executable comments its version runs are expanded,
	// the others removed.
	Text string
	// XID is the XA transaction's id, canonical (gtrid and bqual in hex, formatID), for the XA classes.
	XID string
	// Savepoint is the savepoint's name, for the savepoint classes.
	Savepoint string
}

// Query reads a query event's statement as the source server read it (Expand) and returns its class
// and the decision for it.
func Query(q string, v Version) Statement {
	text := Expand(q, v)
	c, arg := classify(text)
	st := Statement{Class: c, Rule: ClassRule(c), Text: text}
	switch c {
	case XAStart, XAEnd, XAPrepare, XACommit, XACommitOnePhase, XARollback:
		xid, err := ParseXID(arg)
		if err != nil {
			st.Class, st.Rule = Unknown, Rule{Name: classRules[c].Name, Outcome: Stop, Why: "the XA transaction's id cannot be read: " + err.Error()}
		}
		st.XID = xid
	case Savepoint, RollbackToSavepoint, ReleaseSavepoint:
		st.Savepoint = unquoteIdent(arg)
	}
	return st
}

// classify returns the class of an expanded statement and, for XA and savepoints, the rest of it
// after the keywords (the xid, the savepoint's name).
func classify(text string) (Class, string) {
	t := strings.TrimSpace(text)
	if t == "" {
		return Empty, ""
	}
	if strings.HasPrefix(t, "#") {
		return Dummy, ""
	}
	w := words(t, 12)
	if len(w) == 0 {
		return Empty, ""
	}
	at := func(i int) string {
		if i < len(w) {
			return w[i].word
		}
		return ""
	}
	rest := func(i int) string {
		if i < len(w) {
			return strings.TrimSpace(t[w[i].at:])
		}
		return ""
	}
	switch at(0) {
	case "BEGIN":
		if len(w) == 1 || at(1) == "WORK" {
			return Begin, ""
		}
		return Unknown, ""
	case "START":
		if at(1) == "TRANSACTION" {
			return Begin, ""
		}
	case "COMMIT":
		return Commit, ""
	case "ROLLBACK":
		i := 1
		if at(i) == "WORK" {
			i++
		}
		if at(i) == "TO" {
			i++
			if at(i) == "SAVEPOINT" {
				i++
			}
			return RollbackToSavepoint, rest(i)
		}
		return Rollback, ""
	case "SAVEPOINT":
		return Savepoint, rest(1)
	case "RELEASE":
		if at(1) == "SAVEPOINT" {
			return ReleaseSavepoint, rest(2)
		}
	case "XA":
		switch at(1) {
		case "START", "BEGIN":
			return XAStart, rest(2)
		case "END":
			return XAEnd, rest(2)
		case "PREPARE":
			return XAPrepare, rest(2)
		case "COMMIT":
			arg := rest(2)
			if strings.HasSuffix(strings.ToUpper(arg), "ONE PHASE") {
				return XACommitOnePhase, strings.TrimSpace(arg[:len(arg)-len("ONE PHASE")])
			}
			return XACommit, arg
		case "ROLLBACK":
			return XARollback, rest(2)
		}
	case "INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "CALL", "WITH", "DO", "HANDLER":
		return DML, ""
	case "ANALYZE", "OPTIMIZE", "REPAIR", "CHECK", "CHECKSUM":
		i := 1
		if at(i) == "NO_WRITE_TO_BINLOG" || at(i) == "LOCAL" {
			i++
		}
		if at(i) == "TABLE" || at(i) == "TABLES" {
			return Maintenance, ""
		}
	case "FLUSH":
		return Flush, ""
	case "GRANT", "REVOKE":
		return Account, ""
	case "SET":
		switch at(1) {
		case "PASSWORD":
			return Account, ""
		case "DEFAULT":
			if at(2) == "ROLE" {
				return Account, ""
			}
		}
	case "RENAME":
		if at(1) == "USER" {
			return Account, ""
		}
		return DDL, ""
	case "INSTALL", "UNINSTALL":
		return Plugin, ""
	case "TRUNCATE":
		return DDL, ""
	case "CREATE", "ALTER", "DROP":
		return classifyObject(w[1:])
	}
	return Unknown, ""
}

// classifyObject reads what a CREATE, ALTER or DROP names, past its modifiers.
func classifyObject(w []word) (Class, string) {
	for _, x := range w {
		switch x.word {
		case "OR", "REPLACE", "IF", "NOT", "EXISTS", "AGGREGATE", "ONLINE", "OFFLINE", "IGNORE", "NONBLOCKING",
			"UNDEFINED", "MERGE", "TEMPTABLE", "INVOKER", "SECURITY", "SQL", "DEFINER", "ALGORITHM":
			continue // modifiers; DEFINER=... and ALGORITHM=... values are skipped below
		case "TEMPORARY":
			return Temporary, ""
		case "TABLE", "DATABASE", "SCHEMA", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "SEQUENCE":
			return DDL, ""
		case "USER", "ROLE":
			return Account, ""
		case "TRIGGER", "PROCEDURE", "FUNCTION", "EVENT", "PACKAGE":
			return StoredProgram, ""
		case "VIEW":
			return View, ""
		case "TABLESPACE", "LOGFILE", "UNDO":
			return Tablespace, ""
		case "SERVER":
			return Server, ""
		default:
			if x.value {
				continue // the value of DEFINER = `u`@`h`, ALGORITHM = MERGE, ...
			}
			return Unknown, ""
		}
	}
	return Unknown, ""
}

type word struct {
	word  string // upper case
	at    int    // byte offset in the statement
	value bool   // follows '=' (an option's value) or is quoted
}

// words returns up to n leading words of a statement, upper-cased, skipping comments; quoted names,
// strings and punctuation count as values.
func words(s string, n int) []word {
	var out []word
	afterEq := false
	for i := 0; i < len(s) && len(out) < n; {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=':
			afterEq = true
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '#' || (c == '-' && strings.HasPrefix(s[i:], "-- ")):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '`' || c == '\'' || c == '"':
			j := skipQuoted(s, i)
			out = append(out, word{word: s[i:j], at: i, value: true})
			afterEq = false
			i = j
		case isIdent(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			out = append(out, word{word: strings.ToUpper(s[i:j]), at: i, value: afterEq})
			afterEq = false
			i = j
		default:
			// '@' of user@host, '(' and the rest: part of a value
			if c == '@' {
				afterEq = true // the host of user@host is a value too
			}
			i++
		}
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// skipQuoted returns the index after the quoted token starting at s[i] (doubled quotes and, in
// strings, backslash escapes inside).
func skipQuoted(s string, i int) int {
	q := s[i]
	j := i + 1
	for j < len(s) {
		switch {
		case s[j] == '\\' && q != '`' && j+1 < len(s):
			j += 2
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j += 2
		case s[j] == q:
			return j + 1
		default:
			j++
		}
	}
	return len(s)
}

func unquoteIdent(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	if i := strings.IndexAny(s, " \t\n;"); i >= 0 {
		s = s[:i]
	}
	return s
}

// ParseXID reads an XA statement's xid (`'gtrid'[, 'bqual'[, formatID]]`, each string also as X'hex'
// or 0xhex) into the canonical form XIDOf returns.
func ParseXID(s string) (string, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), ";"))
	var parts [][]byte
	format := 1
	for n := 0; s != ""; n++ {
		if n > 0 {
			if s[0] != ',' {
				return "", fmt.Errorf("xid %q: want ',' at %q", s, s)
			}
			s = strings.TrimSpace(s[1:])
			if s == "" {
				return "", fmt.Errorf("xid: nothing after ','")
			}
		}
		if n == 2 {
			v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return "", fmt.Errorf("xid formatID %q: %w", s, err)
			}
			format, s = int(v), ""
			break
		}
		var b []byte
		var err error
		switch {
		case len(s) > 1 && (s[0] == 'X' || s[0] == 'x') && s[1] == '\'':
			j := strings.IndexByte(s[2:], '\'')
			if j < 0 {
				return "", fmt.Errorf("xid %q: unterminated X'...'", s)
			}
			if b, err = hex.DecodeString(s[2 : 2+j]); err != nil {
				return "", fmt.Errorf("xid %q: %w", s, err)
			}
			s = strings.TrimSpace(s[3+j:])
		case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
			j := 2
			for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
				j++
			}
			h := s[2:j]
			if len(h)%2 == 1 {
				h = "0" + h
			}
			if b, err = hex.DecodeString(h); err != nil {
				return "", fmt.Errorf("xid %q: %w", s, err)
			}
			s = strings.TrimSpace(s[j:])
		case s[0] == '\'' || s[0] == '"':
			j := skipQuoted(s, 0)
			raw := s[1 : j-1]
			raw = strings.ReplaceAll(raw, string(s[0])+string(s[0]), string(s[0]))
			raw = strings.ReplaceAll(raw, `\\`, `\`)
			b, s = []byte(raw), strings.TrimSpace(s[j:])
		default:
			return "", fmt.Errorf("xid %q: want a string", s)
		}
		parts = append(parts, b)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("no xid")
	}
	var bqual []byte
	if len(parts) > 1 {
		bqual = parts[1]
	}
	return XIDOf(format, parts[0], bqual), nil
}

// XIDOf is the canonical form of an xid, as MariaDB and MySQL write it in XA statements of the
// binlog: X'gtrid',X'bqual',formatID.
func XIDOf(format int, gtrid, bqual []byte) string {
	return fmt.Sprintf("X'%x',X'%x',%d", gtrid, bqual, format)
}

// ParseXAPrepare reads the xid of an XA_PREPARE_LOG_EVENT's body: one_phase (1 byte), formatID (4),
// gtrid length (4), bqual length (4), then gtrid and bqual.
func ParseXAPrepare(body []byte) (xid string, onePhase bool, err error) {
	if len(body) < 13 {
		return "", false, fmt.Errorf("XA_PREPARE_LOG_EVENT of %d bytes, want at least 13", len(body))
	}
	le := func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24 }
	format, gl, bl := le(body[1:]), le(body[5:]), le(body[9:])
	if gl < 0 || bl < 0 || gl > 64 || bl > 64 || 13+gl+bl > len(body) {
		return "", false, fmt.Errorf("XA_PREPARE_LOG_EVENT: gtrid %d and bqual %d bytes do not fit its %d bytes", gl, bl, len(body))
	}
	return XIDOf(int(uint32(format)), body[13:13+gl], body[13+gl:13+gl+bl]), body[0] != 0, nil
}
