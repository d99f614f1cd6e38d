package ddl

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Restoring the AST for the downstream.
//
// Every statement Tributary sends downstream is the TiDB parser's restore of a parsed statement. That
// restore writes TiDB's dialect; the downstream is MariaDB or MySQL 8. restore gives SQL that means
// what the upstream executed and that both accept, or an error naming what cannot be restored:
//
//   - CHECK (expr) comes back as CHECK(expr) ENFORCED, MySQL 8 syntax that MariaDB refuses (Error
//     1064; MariaDB's JSON columns are LONGTEXT ... CHECK (json_valid(`c`))). ENFORCED is the default
//     on MySQL: it is left out. A NOT ENFORCED the user wrote is kept (only MySQL has it).
//   - ALTER TABLE ... DROP CONSTRAINT c comes back as DROP CHECK c, which MariaDB refuses: it is
//     written as DROP CONSTRAINT (MySQL 8.0.19+ and MariaDB).
//   - Strings are written with backslashes escaped: the parser unescapes 'a\\b' to a\b and, without
//     the flag, writes 'a\b' back, which the server reads as 'ab' (a comment, a DEFAULT, an ENUM value
//     or a CHECK changed silently).
//   - String literals lose the _utf8mb4 introducer the parser gives every literal (the connection's
//     charset): in a generated column or CHECK the server keeps it, so the definition would differ.
//     An introducer of another charset (_latin1'x') is kept.
//   - TiDB-only syntax ([NON]CLUSTERED, AUTO_RANDOM, SHARD_ROW_ID_BITS, PLACEMENT POLICY, TTL, FORCE
//     AUTO_INCREMENT, global indexes, TiFlash replicas, cache, ...) is dropped. MariaDB and MySQL
//     refuse it bare, so a statement in their binlog has it only inside a /*T! ... */ comment, which
//     they ignored: the parser reads those comments, the upstream did not.
//   - ALTER TABLE ... FORCE comes back with a "not supported" comment after FORCE: the comment is
//     dropped.
//   - Hexadecimal literals come back as X'..', which MariaDB reads as a string even where a number
//     is expected (INT DEFAULT X'10' is Error 1067): they are written 0x.. (the parser does not
//     tell 0x10 from X'10'; 0x10 is what users write).
//   - ENUM and SET come back without their CHARACTER SET (the column would take the table's): it is
//     written after the type.
//   - Control characters in strings are written as escapes (\0, \n, \r, \Z); floats as 1.5e10 and
//     1e-5 rather than Go's 1.5e+10 and 1e-05 (an expression keeps its literals' text).
//
// Refused (an error rather than a statement that differs from what the upstream executed):
//
//   - STATS_PERSISTENT=n and PACK_KEYS=n: the parser drops the value (it would restore DEFAULT).
//   - ALTER IGNORE TABLE: the parser drops IGNORE (MariaDB then deletes duplicate rows for a new
//     unique key; the downstream would fail on them instead).
//   - MariaDB's executable comments /*M!NNNNNN ... */ (SHOW CREATE TABLE writes BLOB
//     /*M!100301 COMPRESSED*/): the parser skips them as comments, MariaDB executed them.
//   - NATIONAL CHAR, NCHAR, NVARCHAR: the parser drops the national charset (utf8mb3).
//   - TiDB's INTERVAL partitioning, and anything else the parser writes as a "not supported" comment.
//
// Statements the parser cannot read at all (CREATE OR REPLACE, system versioning, UUID/INET6 and
// spatial types, INVISIBLE columns, IGNORED indexes, expression defaults such as DEFAULT (1 + 2),
// charsets and collations TiDB does not know, Aria's PAGE_CHECKSUM, ...) fail in the parser before
// they get here.

// restoreFlags: single-quoted strings with backslashes escaped, upper-case keywords, back-quoted
// names, no introducer for the default (utf8mb4) charset.
const restoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes | format.RestoreStringWithoutDefaultCharset

// restore writes node as SQL for a MariaDB or MySQL 8 downstream (see above). It may change node: the
// TiDB-only options are removed from it.
func restore(node ast.Node) (string, error) {
	if err := checkText(node); err != nil {
		return "", err
	}
	if err := forDownstream(node); err != nil {
		return "", err
	}
	w := &flavorWriter{}
	if err := node.Restore(format.NewRestoreCtx(restoreFlags, w)); err != nil {
		return "", fmt.Errorf("restore %T: %w", node, err)
	}
	if w.err != nil {
		return "", fmt.Errorf("restore %T: %w", node, w.err)
	}
	return string(w.buf), nil
}

// checkText refuses what the parser reads from a statement's text without keeping it in the AST.
// Only parsed statements have a text; restore is also called for built pieces (one table of a DROP
// TABLE or RENAME TABLE) and re-parsed restores, which have none or a restored one.
func checkText(node ast.Node) error {
	stmt, ok := node.(ast.StmtNode)
	if !ok {
		return nil
	}
	sc := scanSQL(stmt.Text())
	if sc.mariadbComment != "" {
		return fmt.Errorf("MariaDB executable comment %s: the parser skips it, MariaDB executed it; run the statement without it, or as plain SQL", truncate(sc.mariadbComment))
	}
	switch stmt.(type) {
	case *ast.AlterTableStmt, *ast.CreateTableStmt:
	default:
		return nil
	}
	if len(sc.words) >= 2 && strings.EqualFold(sc.words[0], "ALTER") && strings.EqualFold(sc.words[1], "IGNORE") {
		return fmt.Errorf("ALTER IGNORE TABLE: the parser drops IGNORE, and without it the downstream would keep the duplicate rows the upstream deleted (or fail on them)")
	}
	for i, w := range sc.words {
		w = strings.ToUpper(w)
		next := ""
		if i+1 < len(sc.words) {
			next = strings.ToUpper(sc.words[i+1])
		}
		if w == "NCHAR" || w == "NVARCHAR" || w == "NATIONAL" && (next == "CHAR" || next == "CHARACTER" || next == "VARCHAR" || next == "VARCHARACTER") {
			return fmt.Errorf("%s: the parser drops the national charset (utf8mb3) and the column would take the table's; write CHAR/VARCHAR CHARACTER SET utf8mb3", w)
		}
	}
	return nil
}

// sqlScan is what scanSQL finds in a statement's text outside strings, names and comments.
type sqlScan struct {
	words          []string // the words (keywords and unquoted names)
	mariadbComment string   // the first /*M! ... */ comment
}

// scanSQL reads the words of sql and looks for MariaDB's executable comments, skipping quoted
// strings and names and (non-executable) comments. The content of a MySQL executable comment /*!
// is read as code, as the servers and the parser do.
func scanSQL(sql string) sqlScan {
	var sc sqlScan
	inExec := false // inside /*! ... */
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i++
			for i < len(sql) {
				if sql[i] == '\\' && c != '`' {
					i += 2
					continue
				}
				if sql[i] == c {
					if i+1 < len(sql) && sql[i+1] == c { // doubled quote
						i += 2
						continue
					}
					break
				}
				i++
			}
			i++
		case strings.HasPrefix(sql[i:], "/*M!"):
			end := strings.Index(sql[i:], "*/")
			if end < 0 {
				end = len(sql) - i - 2
			}
			if sc.mariadbComment == "" {
				sc.mariadbComment = sql[i : i+end+2]
			}
			i += end + 2
		case strings.HasPrefix(sql[i:], "/*!"):
			i += 3
			for i < len(sql) && sql[i] >= '0' && sql[i] <= '9' {
				i++
			}
			inExec = true
		case inExec && strings.HasPrefix(sql[i:], "*/"):
			inExec = false
			i += 2
		case strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return sc
			}
			i += end + 4
		case c == '#' || strings.HasPrefix(sql[i:], "-- ") || strings.HasPrefix(sql[i:], "--\t") || strings.HasPrefix(sql[i:], "--\n"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return sc
			}
			i += end + 1
		case restoreWordByte(c):
			j := i
			for j < len(sql) && restoreWordByte(sql[j]) {
				j++
			}
			sc.words = append(sc.words, sql[i:j])
			i = j
		default:
			i++
		}
	}
	return sc
}

// charsetPlaceholder starts the text of a COLLATE option that stands for CHARACTER SET (the rest of
// the text), which the AST has no option for. A collation name never has a NUL.
const charsetPlaceholder = "\x00CHARACTER SET "

// forDownstream removes the TiDB-only parts of a statement and refuses the values the parser lost.
func forDownstream(node ast.Node) error {
	switch s := node.(type) {
	case *ast.CreateTableStmt:
		for _, col := range s.Cols {
			if err := columnForDownstream(col); err != nil {
				return err
			}
		}
		for _, c := range s.Constraints {
			if err := constraintForDownstream(c); err != nil {
				return err
			}
		}
		var err error
		if s.Options, err = tableOptionsForDownstream(s.Options); err != nil {
			return err
		}
		return partitionForDownstream(s.Partition)
	case *ast.AlterTableStmt:
		specs := s.Specs[:0]
		for _, spec := range s.Specs {
			keep, err := alterSpecForDownstream(spec)
			if err != nil {
				return err
			}
			if keep {
				specs = append(specs, spec)
			}
		}
		// Only TiDB options (in a /*T! */ comment): the upstream ran a plain ALTER TABLE t, which
		// the servers accept as a no-op.
		s.Specs = specs
	case *ast.CreateIndexStmt:
		if s.KeyType == ast.IndexKeyTypeVector {
			return fmt.Errorf("VECTOR INDEX is TiDB syntax")
		}
		return indexOptionForDownstream(s.IndexOption)
	case *ast.CreateDatabaseStmt:
		s.Options = databaseOptionsForDownstream(s.Options)
	case *ast.AlterDatabaseStmt:
		s.Options = databaseOptionsForDownstream(s.Options)
		if len(s.Options) == 0 {
			return fmt.Errorf("ALTER DATABASE has only TiDB options (placement, TiFlash replica)")
		}
	}
	return nil
}

func columnForDownstream(col *ast.ColumnDef) error {
	if col.Tp != nil && (col.Tp.GetType() == mysql.TypeEnum || col.Tp.GetType() == mysql.TypeSet) &&
		col.Tp.GetCharset() != "" && col.Tp.GetCharset() != charset.CharsetBin {
		// The parser restores the CHARACTER SET of CHAR and TEXT types only: an ENUM or SET would
		// take the table's charset. (A COLLATE is a column option, restored.) The option's text is
		// a placeholder the writer turns into CHARACTER SET; its collation is the server's default
		// for the charset, as upstream (TiDB's defaults differ from MySQL's and MariaDB's).
		hasCharset := false
		for _, o := range col.Options {
			hasCharset = hasCharset || o.Tp == ast.ColumnOptionCollate && strings.HasPrefix(o.StrValue, charsetPlaceholder)
		}
		if !hasCharset {
			col.Options = append([]*ast.ColumnOption{{Tp: ast.ColumnOptionCollate, StrValue: charsetPlaceholder + col.Tp.GetCharset()}}, col.Options...)
		}
	}
	opts := col.Options[:0]
	for _, o := range col.Options {
		switch o.Tp {
		case ast.ColumnOptionAutoRandom:
			continue
		case ast.ColumnOptionPrimaryKey, ast.ColumnOptionUniqKey:
			o.PrimaryKeyTp = ast.PrimaryKeyTypeDefault // [NON]CLUSTERED
			if o.StrValue == "Global" {
				o.StrValue = "" // global index
			}
		}
		opts = append(opts, o)
	}
	col.Options = opts
	return nil
}

func constraintForDownstream(c *ast.Constraint) error {
	if c == nil {
		return nil
	}
	if c.Tp == ast.ConstraintVector {
		return fmt.Errorf("VECTOR INDEX is TiDB syntax")
	}
	return indexOptionForDownstream(c.Option)
}

func indexOptionForDownstream(o *ast.IndexOption) error {
	if o == nil {
		return nil
	}
	o.PrimaryKeyTp = ast.PrimaryKeyTypeDefault
	o.Global = false
	switch o.Tp {
	case ast.IndexTypeInvalid, ast.IndexTypeBtree, ast.IndexTypeHash, ast.IndexTypeRtree:
	default:
		return fmt.Errorf("index type %s is TiDB syntax", o.Tp)
	}
	return nil
}

// tableOptionsForDownstream drops TiDB's table options and refuses the options whose value the
// parser does not keep.
func tableOptionsForDownstream(opts []*ast.TableOption) ([]*ast.TableOption, error) {
	out := opts[:0]
	for _, o := range opts {
		switch o.Tp {
		case ast.TableOptionStatsPersistent:
			return nil, fmt.Errorf("STATS_PERSISTENT: the parser does not keep its value")
		case ast.TableOptionPackKeys:
			return nil, fmt.Errorf("PACK_KEYS: the parser does not keep its value")
		case ast.TableOptionAutoIdCache, ast.TableOptionAutoRandomBase, ast.TableOptionShardRowID,
			ast.TableOptionPreSplitRegion, ast.TableOptionTTL, ast.TableOptionTTLEnable,
			ast.TableOptionTTLJobInterval, ast.TableOptionPlacementPolicy, ast.TableOptionStatsBuckets,
			ast.TableOptionStatsTopN, ast.TableOptionStatsColsChoice, ast.TableOptionStatsColList,
			ast.TableOptionStatsSampleRate:
			continue
		case ast.TableOptionAutoIncrement:
			o.BoolValue = false // FORCE AUTO_INCREMENT
		}
		out = append(out, o)
	}
	return out, nil
}

func partitionForDownstream(p *ast.PartitionOptions) error {
	if p == nil {
		return nil
	}
	if p.Interval != nil || p.Sub != nil && p.Sub.Interval != nil {
		return fmt.Errorf("INTERVAL partitioning is TiDB syntax")
	}
	p.UpdateIndexes = nil
	return partitionDefinitionsForDownstream(p.Definitions)
}

func partitionDefinitionsForDownstream(defs []*ast.PartitionDefinition) error {
	for _, d := range defs {
		var err error
		if d.Options, err = tableOptionsForDownstream(d.Options); err != nil {
			return err
		}
		for _, sub := range d.Sub {
			if sub.Options, err = tableOptionsForDownstream(sub.Options); err != nil {
				return err
			}
		}
	}
	return nil
}

// alterSpecForDownstream reports whether an ALTER TABLE spec stays, without its TiDB parts.
func alterSpecForDownstream(spec *ast.AlterTableSpec) (bool, error) {
	switch spec.Tp {
	case ast.AlterTableSetTiFlashReplica, ast.AlterTableAddStatistics, ast.AlterTableDropStatistics,
		ast.AlterTableAttributes, ast.AlterTablePartitionAttributes, ast.AlterTablePartitionOptions,
		ast.AlterTableCache, ast.AlterTableNoCache, ast.AlterTableStatsOptions, ast.AlterTableRemoveTTL,
		ast.AlterTableDropFirstPartition, ast.AlterTableAddLastPartition,
		ast.AlterTableReorganizeFirstPartition, ast.AlterTableReorganizeLastPartition,
		ast.AlterTableWriteable:
		return false, nil
	}
	for _, col := range spec.NewColumns {
		if err := columnForDownstream(col); err != nil {
			return false, err
		}
	}
	for _, c := range spec.NewConstraints {
		if err := constraintForDownstream(c); err != nil {
			return false, err
		}
	}
	if spec.Tp == ast.AlterTableAddConstraint {
		if err := constraintForDownstream(spec.Constraint); err != nil {
			return false, err
		}
	}
	if len(spec.Options) > 0 {
		var err error
		if spec.Options, err = tableOptionsForDownstream(spec.Options); err != nil {
			return false, err
		}
		if spec.Tp == ast.AlterTableOption && len(spec.Options) == 0 {
			return false, nil
		}
	}
	if err := partitionForDownstream(spec.Partition); err != nil {
		return false, err
	}
	return true, partitionDefinitionsForDownstream(spec.PartDefinitions)
}

func databaseOptionsForDownstream(opts []*ast.DatabaseOption) []*ast.DatabaseOption {
	out := opts[:0]
	for _, o := range opts {
		if o.Tp == ast.DatabaseOptionPlacementPolicy || o.Tp == ast.DatabaseSetTiFlashReplica {
			continue
		}
		out = append(out, o)
	}
	return out
}

// flavorWriter receives the parser's restore, one write per keyword, punctuation, name or string,
// and rewrites the few TiDB forms that the AST cannot avoid. format.RestoreCtx writes a quoted string
// or name as three writes (quote, text, quote), so the text of strings and names is never taken for
// a keyword.
type flavorWriter struct {
	buf    []byte
	prev   string // the previous write outside quoted text
	quote  byte   // the quote of an open quoted token
	inText bool   // the next write is the text of the open quoted token
	err    error
}

// stringEscapes are the escapes for the characters that are hard to read raw in a string. The text
// has its backslashes already doubled (RestoreStringEscapeBackslash).
var stringEscapes = strings.NewReplacer("\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)

func (w *flavorWriter) Write(p []byte) (int, error) { return w.WriteString(string(p)) }

func (w *flavorWriter) WriteString(s string) (int, error) {
	n := len(s)
	switch {
	case w.quote != 0 && w.inText:
		w.inText = false
		if w.quote == '\'' {
			// Control characters as escapes, not raw bytes in the statement (and the logs).
			s = stringEscapes.Replace(s)
		}
		w.buf = append(w.buf, s...)
		return n, nil
	case w.quote != 0:
		if s != string(w.quote) && w.err == nil {
			w.err = fmt.Errorf("restore: unexpected write %q after a quoted token", s)
		}
		w.quote = 0
	case s == "'" || s == "`" || s == `"`:
		w.quote, w.inText = s[0], true
	case s == " ENFORCED" && w.prev == ")":
		// ColumnOption CHECK(expr) ENFORCED: ENFORCED is the default; MariaDB has no such word.
		s = ""
	case s == "ENFORCED" && w.prev == ") ":
		// Constraint CHECK(expr) ENFORCED (table level).
		w.buf = w.buf[:len(w.buf)-1]
		s = ""
	case s == "DROP CHECK " && (w.prev == " " || w.prev == ", "):
		s = "DROP CONSTRAINT "
	case s == " /* AlterTableForce is not supported */ " && w.prev == "FORCE":
		s = ""
	case strings.HasPrefix(s, charsetPlaceholder) && w.prev == "COLLATE ":
		w.buf = w.buf[:len(w.buf)-len(w.prev)]
		s = "CHARACTER SET " + s[len(charsetPlaceholder):]
	case hexString(s):
		// x'..' is the parser's hexadecimal literal. MySQL reads X'10' as 0x10, MariaDB reads it
		// as a string even in a number's place: INT DEFAULT X'10' is Error 1067, X'10'+0 is 0.
		// 0x10 is a number to both where a number is expected and a string elsewhere.
		s = "0x" + s[2:len(s)-1]
	case floatLiteral.MatchString(s):
		// The parser writes floats as Go does (1.5e+10, 1e-05); the servers keep an expression's
		// text as written, and users write 1.5e10 and 1e-5.
		m := floatLiteral.FindStringSubmatch(s)
		s = m[1] + "e" + strings.TrimPrefix(m[2], "+") + strings.TrimLeft(m[3], "0")
	case strings.Contains(s, "/*") && !strings.HasPrefix(s, "/*+ "): // optimizer hints of a view's SELECT are the user's
		// The parser writes what it cannot restore as a comment: the statement would not be the one
		// the upstream ran.
		if w.err == nil {
			w.err = fmt.Errorf("the parser cannot restore this statement: it wrote %q", strings.TrimSpace(s))
		}
	}
	w.buf = append(w.buf, s...)
	w.prev = s
	return n, nil
}

func restoreWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// floatLiteral is a float as the parser writes it: mantissa, exponent sign, exponent digits.
var floatLiteral = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)e([+-])(0*[1-9][0-9]*)$`)

// hexString reports whether s is a hexadecimal literal x'..' with at least one digit.
func hexString(s string) bool {
	if len(s) < 4 || !strings.HasPrefix(s, "x'") || s[len(s)-1] != '\'' {
		return false
	}
	for _, c := range s[2 : len(s)-1] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
