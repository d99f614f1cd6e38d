package ddl

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
)

// A column definition normalized for CompareWithDownstream: what the statement writes and what SHOW
// CREATE TABLE shows of the same column compare equal.

// column is what counts of a column's definition, normalized: two definitions that make the same
// column give the same column.
type column struct {
	typ              string // "int unsigned", "varchar(5)", "decimal(10,0)", "enum('a','b')", ...
	numeric          bool
	str              bool // a character column: its charset and collation count
	charset, collate string
	null             bool
	dflt             string // "" none, "NULL", a value, or an expression
	onUpdate         string
	autoIncrement    bool
	generated        string
}

// normalized normalizes def, a column of a table whose default charset and collation are cs and coll
// ("" unknown).
func normalized(def *ast.ColumnDef, cs, coll string) column {
	tp := def.Tp
	c := column{null: true}
	c.typ, c.numeric, c.str = typeOf(tp)
	var stated, statedColl string
	if c.str {
		stated, statedColl = normalizeCharset(tp.GetCharset()), normalizeCharset(tp.GetCollate())
	}
	for _, o := range def.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull, ast.ColumnOptionPrimaryKey:
			c.null = false
		case ast.ColumnOptionNull:
			c.null = true
		case ast.ColumnOptionDefaultValue:
			c.dflt = defaultOf(o.Expr)
		case ast.ColumnOptionOnUpdate:
			c.onUpdate = defaultOf(o.Expr)
		case ast.ColumnOptionAutoIncrement:
			c.autoIncrement = true
		case ast.ColumnOptionGenerated:
			c.generated = canonicalFuncs(strings.ToLower(restoreNode(unparen(o.Expr))))
			if o.Stored {
				c.generated += " STORED"
			}
		case ast.ColumnOptionCollate:
			statedColl = normalizeCharset(o.StrValue)
		}
	}
	if tp.GetType() == mysql.TypeJSON {
		// MariaDB's JSON is LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin with a CHECK.
		c.str, stated, statedColl = true, "utf8mb4", "utf8mb4_bin"
	}
	if c.str {
		switch {
		case stated == "" && statedColl == "":
			c.charset, c.collate = cs, coll
		case stated == "":
			c.charset, c.collate = charsetOfCollation(statedColl), statedColl
		default:
			c.charset, c.collate = stated, statedColl // a charset alone: its default collation, not known here
		}
	}
	if c.dflt == "" && c.null && !c.autoIncrement && c.generated == "" {
		c.dflt = "NULL" // a column that takes NULL and names no default has DEFAULT NULL
	}
	return c
}

// differs names the first difference between c (the downstream's) and w (the statement's).
func (c column) differs(w column) string {
	switch {
	case c.typ != w.typ:
		return "type " + c.typ + " downstream, " + w.typ + " in the statement"
	case c.str && c.charset != "" && w.charset != "" && c.charset != w.charset:
		return "character set " + c.charset + " downstream, " + w.charset + " in the statement"
	case c.str && c.collate != "" && w.collate != "" && c.collate != w.collate:
		return "collation " + c.collate + " downstream, " + w.collate + " in the statement"
	case c.null != w.null:
		return map[bool]string{true: "NULL downstream, NOT NULL in the statement", false: "NOT NULL downstream, NULL in the statement"}[c.null]
	case !sameValue(c.dflt, w.dflt, c.numeric):
		return "default " + orNone(c.dflt) + " downstream, " + orNone(w.dflt) + " in the statement"
	case c.onUpdate != w.onUpdate:
		return "ON UPDATE " + orNone(c.onUpdate) + " downstream, " + orNone(w.onUpdate) + " in the statement"
	case c.autoIncrement != w.autoIncrement:
		return "AUTO_INCREMENT differs"
	case c.generated != w.generated:
		return "generated " + orNone(c.generated) + " downstream, " + orNone(w.generated) + " in the statement"
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// sameDefault: the column c has the default dflt would set (nil: DROP DEFAULT, no default).
func sameDefault(c column, dflt ast.ExprNode) bool {
	if dflt == nil {
		return c.dflt == "" || (c.dflt == "NULL" && c.null)
	}
	return sameValue(c.dflt, defaultOf(dflt), c.numeric)
}

// sameValue compares two normalized defaults; numbers by value for a numeric column (DEFAULT '5' and
// DEFAULT 5, 1.5 and 1.50).
func sameValue(a, b string, numeric bool) bool {
	if a == b {
		return true
	}
	if !numeric {
		return false
	}
	x, okx := new(big.Rat).SetString(strings.Trim(a, "'"))
	y, oky := new(big.Rat).SetString(strings.Trim(b, "'"))
	return okx && oky && x.Cmp(y) == 0
}

// defaultOf normalizes a DEFAULT or ON UPDATE expression: NULL, a value as a quoted string (numbers
// bare), CURRENT_TIMESTAMP and its synonyms as current_timestamp with its precision when not 0, any
// other expression as written.
func defaultOf(e ast.ExprNode) string {
	switch x := e.(type) {
	case ast.ValueExpr:
		switch v := x.GetValue().(type) {
		case nil:
			return "NULL"
		case string:
			return "'" + v + "'"
		case []byte:
			return fmt.Sprintf("0x%x", v)
		default:
			return fmt.Sprint(v)
		}
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case "now", "current_timestamp", "localtime", "localtimestamp":
			if len(x.Args) == 1 {
				if v, ok := x.Args[0].(ast.ValueExpr); ok && fmt.Sprint(v.GetValue()) != "0" {
					return fmt.Sprintf("current_timestamp(%v)", v.GetValue())
				}
			}
			return "current_timestamp"
		}
	}
	return strings.ToLower(restoreNode(e))
}

func normalizeCharset(s string) string {
	s = strings.ToLower(s)
	if s == "utf8" || strings.HasPrefix(s, "utf8_") {
		s = "utf8mb3" + s[len("utf8"):]
	}
	return s
}

func charsetOfCollation(coll string) string {
	if i := strings.IndexByte(coll, '_'); i > 0 {
		return coll[:i]
	}
	return coll
}

// typeOf normalizes a column type: what MariaDB would show for it, without an integer's display width
// (which changes nothing but ZEROFILL's padding).
func typeOf(tp *types.FieldType) (name string, numeric, str bool) {
	flen, dec := tp.GetFlen(), tp.GetDecimal()
	unsigned, zerofill := mysql.HasUnsignedFlag(tp.GetFlag()), mysql.HasZerofillFlag(tp.GetFlag())
	binary := strings.EqualFold(tp.GetCharset(), "binary")
	sign := func(s string) string {
		if zerofill {
			return s + " unsigned zerofill"
		}
		if unsigned {
			return s + " unsigned"
		}
		return s
	}
	size := func(n, dflt int) string {
		if n <= 0 {
			n = dflt
		}
		return fmt.Sprintf("(%d)", n)
	}
	fsp := func(s string) string {
		if dec > 0 {
			return fmt.Sprintf("%s(%d)", s, dec)
		}
		return s
	}
	ints := map[byte]struct {
		name          string
		width, uwidth int
	}{mysql.TypeTiny: {"tinyint", 4, 3}, mysql.TypeShort: {"smallint", 6, 5}, mysql.TypeInt24: {"mediumint", 9, 8},
		mysql.TypeLong: {"int", 11, 10}, mysql.TypeLonglong: {"bigint", 20, 20}}
	switch t := tp.GetType(); t {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		n := ints[t].name
		if zerofill {
			n += size(flen, ints[t].uwidth)
		}
		return sign(n), true, false
	case mysql.TypeFloat, mysql.TypeDouble:
		n := map[byte]string{mysql.TypeFloat: "float", mysql.TypeDouble: "double"}[t]
		if flen > 0 && dec >= 0 {
			n += fmt.Sprintf("(%d,%d)", flen, dec)
		}
		return sign(n), true, false
	case mysql.TypeNewDecimal:
		if flen <= 0 {
			flen = 10
		}
		return sign(fmt.Sprintf("decimal(%d,%d)", flen, max(dec, 0))), true, false
	case mysql.TypeVarchar, mysql.TypeVarString:
		if binary {
			return "varbinary" + size(flen, 1), false, false
		}
		return "varchar" + size(flen, 1), false, true
	case mysql.TypeString:
		if binary {
			return "binary" + size(flen, 1), false, false
		}
		return "char" + size(flen, 1), false, true
	case mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		n := map[byte]string{mysql.TypeTinyBlob: "tiny", mysql.TypeBlob: "", mysql.TypeMediumBlob: "medium", mysql.TypeLongBlob: "long"}[t]
		if t == mysql.TypeBlob && flen > 0 { // TEXT(n), BLOB(n): the smallest that holds n
			switch {
			case flen < 1<<8:
				n = "tiny"
			case flen < 1<<16:
				n = ""
			case flen < 1<<24:
				n = "medium"
			default:
				n = "long"
			}
		}
		if binary {
			return n + "blob", false, false
		}
		return n + "text", false, true
	case mysql.TypeJSON:
		return "longtext", false, true
	case mysql.TypeEnum, mysql.TypeSet:
		elems := make([]string, len(tp.GetElems()))
		for i, e := range tp.GetElems() {
			elems[i] = "'" + strings.ReplaceAll(e, "'", "''") + "'"
		}
		return map[byte]string{mysql.TypeEnum: "enum", mysql.TypeSet: "set"}[t] + "(" + strings.Join(elems, ",") + ")", false, true
	case mysql.TypeDate:
		return "date", false, false
	case mysql.TypeDatetime:
		return fsp("datetime"), false, false
	case mysql.TypeTimestamp:
		return fsp("timestamp"), false, false
	case mysql.TypeDuration:
		return fsp("time"), false, false
	case mysql.TypeYear:
		return "year", true, false
	case mysql.TypeBit:
		return "bit" + size(flen, 1), false, false
	}
	return strings.ToLower(tp.String()), false, false
}

// funcSynonyms are functions the server writes under another of their names (MariaDB's SHOW CREATE
// TABLE turns UPPER(x) into ucase(x)): a generated expression is compared under one name each.
var funcSynonyms = regexp.MustCompile("(^|[^a-z0-9_$`])(ucase|lcase|substring|mid|character_length|octet_length|pow|ceiling|now|localtime|localtimestamp|day)\\(")

var funcCanonical = map[string]string{"ucase": "upper", "lcase": "lower", "substring": "substr", "mid": "substr",
	"character_length": "char_length", "octet_length": "length", "pow": "power", "ceiling": "ceil", "now": "current_timestamp",
	"localtime": "current_timestamp", "localtimestamp": "current_timestamp", "day": "dayofmonth"}

// canonicalFuncs writes every function of a lower-cased expression under its canonical name.
func canonicalFuncs(expr string) string {
	return funcSynonyms.ReplaceAllStringFunc(expr, func(m string) string {
		i := strings.IndexFunc(m, func(r rune) bool { return r >= 'a' && r <= 'z' })
		return m[:i] + funcCanonical[m[i:len(m)-1]] + "("
	})
}

// unparen strips the parentheses around a whole expression: the statement's `AS ((a IS NULL))` is
// the server's `AS (a IS NULL)`.
func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}
