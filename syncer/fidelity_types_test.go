package syncer

// The column types of the fidelity tests (fidelity_test.go): their SQL, values at their boundaries,
// random values, key values, and an exact text form to compare upstream and downstream values with.

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributary-db/tributary/vocab"
)

type fkind int

const (
	kTinyInt fkind = iota
	kSmallInt
	kMediumInt
	kInt
	kBigInt
	kDecimal
	kFloat
	kDouble
	kBit
	kDate
	kDatetime
	kTimestamp
	kTime
	kYear
	kChar
	kVarchar
	kTinyText
	kText
	kMediumText
	kLongText
	kBinary
	kVarbinary
	kTinyBlob
	kBlob
	kMediumBlob
	kLongBlob
	kEnum
	kSet
	kJSON
	kGeometry
	kPoint
	kLineString
	kPolygon
	kMultiPoint
	kMultiLineString
	kMultiPolygon
	kGeometryCollection
	numKinds
)

// ftype is a column type.
type ftype struct {
	kind      fkind
	unsigned  bool
	n         int // length (CHAR, VARCHAR, BINARY, VARBINARY), bits (BIT), precision (DECIMAL), fsp (DATETIME, TIMESTAMP, TIME)
	scale     int // DECIMAL
	charset   string
	collation string
	elems     []string // ENUM, SET
}

var intBits = map[fkind]uint{kTinyInt: 8, kSmallInt: 16, kMediumInt: 24, kInt: 32, kBigInt: 64}

func (t ftype) isInt() bool     { _, ok := intBits[t.kind]; return ok }
func (t ftype) isText() bool    { return t.kind >= kTinyText && t.kind <= kLongText }
func (t ftype) isBlob() bool    { return t.kind >= kTinyBlob && t.kind <= kLongBlob }
func (t ftype) isSpatial() bool { return t.kind >= kGeometry && t.kind <= kGeometryCollection }
func (t ftype) isString() bool  { return t.kind == kChar || t.kind == kVarchar || t.isText() }
func (t ftype) isBinary() bool  { return t.kind == kBinary || t.kind == kVarbinary || t.isBlob() }

// keyable types have values whose SQL literal, as generated, is equal to another's exactly when the
// server says so (no collation folding, no rounding): they can be primary and unique key columns.
func (t ftype) keyable() bool {
	return t.isInt() || t.kind == kDecimal || t.kind == kDate || t.kind == kDatetime ||
		t.kind == kChar || t.kind == kVarchar || t.kind == kBinary || t.kind == kVarbinary
}

// indexable without a prefix length.
func (t ftype) needsPrefix() bool { return t.isText() || t.isBlob() || t.kind == kJSON }

func (t ftype) sql() string {
	s := ""
	switch t.kind {
	case kTinyInt, kSmallInt, kMediumInt, kInt, kBigInt:
		s = map[fkind]string{kTinyInt: "TINYINT", kSmallInt: "SMALLINT", kMediumInt: "MEDIUMINT", kInt: "INT", kBigInt: "BIGINT"}[t.kind]
		if t.unsigned {
			s += " UNSIGNED"
		}
	case kDecimal:
		s = fmt.Sprintf("DECIMAL(%d,%d)", t.n, t.scale)
	case kFloat:
		s = "FLOAT"
	case kDouble:
		s = "DOUBLE"
	case kBit:
		s = fmt.Sprintf("BIT(%d)", t.n)
	case kDate:
		s = "DATE"
	case kDatetime, kTimestamp, kTime:
		s = map[fkind]string{kDatetime: "DATETIME", kTimestamp: "TIMESTAMP", kTime: "TIME"}[t.kind]
		if t.n > 0 {
			s += fmt.Sprintf("(%d)", t.n)
		}
	case kYear:
		s = "YEAR"
	case kChar:
		s = fmt.Sprintf("CHAR(%d)", t.n)
	case kVarchar:
		s = fmt.Sprintf("VARCHAR(%d)", t.n)
	case kTinyText:
		s = "TINYTEXT"
	case kText:
		s = "TEXT"
	case kMediumText:
		s = "MEDIUMTEXT"
	case kLongText:
		s = "LONGTEXT"
	case kBinary:
		s = fmt.Sprintf("BINARY(%d)", t.n)
	case kVarbinary:
		s = fmt.Sprintf("VARBINARY(%d)", t.n)
	case kTinyBlob:
		s = "TINYBLOB"
	case kBlob:
		s = "BLOB"
	case kMediumBlob:
		s = "MEDIUMBLOB"
	case kLongBlob:
		s = "LONGBLOB"
	case kEnum, kSet:
		q := make([]string, len(t.elems))
		for i, e := range t.elems {
			q[i] = quoteString(e)
		}
		s = map[fkind]string{kEnum: "ENUM", kSet: "SET"}[t.kind] + "(" + strings.Join(q, ", ") + ")"
	case kJSON:
		s = "JSON"
	case kGeometry:
		s = "GEOMETRY"
	case kPoint:
		s = "POINT"
	case kLineString:
		s = "LINESTRING"
	case kPolygon:
		s = "POLYGON"
	case kMultiPoint:
		s = "MULTIPOINT"
	case kMultiLineString:
		s = "MULTILINESTRING"
	case kMultiPolygon:
		s = "MULTIPOLYGON"
	case kGeometryCollection:
		s = "GEOMETRYCOLLECTION"
	}
	if t.charset != "" {
		s += " CHARACTER SET " + t.charset
		if t.collation != "" {
			s += " COLLATE " + t.collation
		}
	}
	return s
}

// name is a short name of the type, for table and column names.
func (t ftype) name() string {
	r := strings.NewReplacer(" CHARACTER SET ", "_", " COLLATE ", "_", " ", "_", "(", "", ")", "", ",", "_")
	s := t.sql()
	if t.kind == kEnum || t.kind == kSet {
		s = map[fkind]string{kEnum: "ENUM", kSet: "SET"}[t.kind] + strconv.Itoa(len(t.elems))
	}
	return strings.ToLower(r.Replace(s))
}

// strLiteral is a string literal of exact bytes in charset (utf8mb4, latin1 or "" for binary).
func strLiteral(charset, s string) string {
	switch charset {
	case "":
		return "X'" + strings.ToUpper(hex.EncodeToString([]byte(s))) + "'"
	case "latin1":
		b := make([]byte, 0, len(s))
		for _, r := range s {
			b = append(b, byte(r)) // callers only use runes below 256
		}
		return "_latin1 X'" + strings.ToUpper(hex.EncodeToString(b)) + "'"
	default:
		return "_" + charset + " X'" + strings.ToUpper(hex.EncodeToString([]byte(s))) + "'"
	}
}

// quoteString is a quoted string literal in the connection's character set (utf8mb4).
func quoteString(s string) string {
	return "'" + strings.NewReplacer("\\", "\\\\", "'", "''", "\x00", "\\0").Replace(s) + "'"
}

// compareExpr is an exact text form of column c's value: what the comparison of upstream and
// downstream reads (NULL stays NULL).
func (t ftype) compareExpr(c string) string {
	q := vocab.Quote(c)
	switch {
	case t.kind == kFloat:
		return "CAST(" + q + " AS DOUBLE)"
	case t.kind == kBit || t.isString() || t.isBinary() || t.kind == kJSON || t.isSpatial():
		return "HEX(" + q + ")"
	case t.kind == kEnum || t.kind == kSet:
		return "CONCAT(" + q + ", ' #', " + q + " + 0)"
	}
	return q
}

// literalExpr reads a keyable column's value back as an SQL literal of the same value.
func (t ftype) literalExpr(c string) string {
	q := vocab.Quote(c)
	switch {
	case t.isInt() || t.kind == kDecimal:
		return "CAST(" + q + " AS CHAR)"
	case t.kind == kBinary || t.kind == kVarbinary:
		return "CONCAT('X''', HEX(" + q + "), '''')"
	case t.isString():
		return "CONCAT('_" + t.charset + " X''', HEX(" + q + "), '''')"
	default: // dates: their text, exactly as generated
		return "CONCAT('''', " + q + ", '''')"
	}
}

func (t ftype) intRange() (min, max string) {
	bits := intBits[t.kind]
	if t.unsigned {
		return "0", strconv.FormatUint(1<<bits-1, 10)
	}
	return strconv.FormatInt(-1<<(bits-1), 10), strconv.FormatInt(1<<(bits-1)-1, 10)
}

func (t ftype) randInt(rng *rand.Rand) string {
	bits := intBits[t.kind]
	v := rng.Uint64()
	switch rng.Intn(3) {
	case 0:
		v &= 0xFF // small values
	case 1:
		v >>= uint(rng.Intn(64))
	}
	if t.unsigned {
		if bits < 64 {
			v &= 1<<bits - 1
		}
		return strconv.FormatUint(v, 10)
	}
	s := int64(v<<(64-bits)) >> (64 - bits) // the low bits, sign-extended
	if rng.Intn(2) == 0 && s != -1<<(bits-1) {
		s = -s
	}
	return strconv.FormatInt(s, 10)
}

func nines(n int) string { return strings.Repeat("9", n) }

// decimal formats a decimal of t's precision and scale: integer digits (no leading zeros), then
// exactly scale fractional digits; never a negative zero. This is the server's own text form.
func (t ftype) decimal(neg bool, intDigits, frac string) string {
	intDigits = strings.TrimLeft(intDigits, "0")
	if intDigits == "" {
		intDigits = "0"
	}
	s := intDigits
	if t.scale > 0 {
		s += "." + frac
	}
	if neg && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	return s
}

func randDigits(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + rng.Intn(10))
	}
	return string(b)
}

func (t ftype) randDecimal(rng *rand.Rand) string {
	id := t.n - t.scale
	return t.decimal(rng.Intn(2) == 0, randDigits(rng, rng.Intn(id+1)), randDigits(rng, t.scale))
}

func floatLit(f float64) string { return strconv.FormatFloat(f, 'e', -1, 64) }

const (
	minDatetimeUnix = -30610224000 // 1000-01-01 00:00:00 UTC
	maxDatetimeUnix = 253402300799 // 9999-12-31 23:59:59 UTC
)

func fracDigits(rng *rand.Rand, fsp int) string {
	if fsp == 0 {
		return ""
	}
	return "." + randDigits(rng, fsp)
}

func (t ftype) randDatetime(rng *rand.Rand, lo, hi int64) string {
	sec := lo + rng.Int63n(hi-lo+1)
	s := unixUTC(sec)
	if t.kind == kDate {
		return "'" + s[:10] + "'"
	}
	return "'" + s + fracDigits(rng, t.n) + "'"
}

func unixUTC(sec int64) string {
	// time.Unix handles the whole range; formatted without the time package's zone logic.
	days := floorDiv(sec, 86400)
	rem := sec - days*86400
	y, m, d := civil(days)
	return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, m, d, rem/3600, rem%3600/60, rem%60)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civil converts days since 1970-01-01 to a date (Howard Hinnant's algorithm).
func civil(z int64) (int64, int64, int64) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func (t ftype) fsp(s string) string { // s with t.n fractional digits of "999999"
	if t.n == 0 {
		return s
	}
	return s + "." + strings.Repeat("9", t.n)
}

func (t ftype) zeroFrac() string {
	if t.n == 0 {
		return ""
	}
	return "." + strings.Repeat("0", t.n)
}

// Alphabets of string values: ASCII with quotes, backslash, NUL and spaces; Latin-1 letters; and
// multi-byte UTF-8 up to 4-byte characters (emoji, musical symbols, CJK).
var (
	asciiRunes   = []rune("abcXYZ019 '\"\\%_\x00\t\n")
	latin1Runes  = []rune("éÿÀß£µ\u00a0")
	utf8mb4Runes = []rune("é中😀𝄞🀄ﬀ\u200b")
)

func (t ftype) maxChars() (chars, bytes int) {
	switch t.kind {
	case kChar, kVarchar:
		return t.n, 1 << 30
	case kTinyText, kTinyBlob:
		return 1 << 30, 255
	case kText, kBlob:
		return 1 << 30, 65535
	case kBinary, kVarbinary:
		return t.n, t.n
	}
	return 1 << 30, 1 << 24 // MEDIUM and LONG: well within max_allowed_packet
}

func (t ftype) randString(rng *rand.Rand, long bool) string {
	chars, bytes := t.maxChars()
	n := rng.Intn(12)
	if long || rng.Intn(8) == 0 {
		n = rng.Intn(min(chars, 300) + 1)
	}
	var sb strings.Builder
	for i := 0; i < n && i < chars; i++ {
		var r rune
		switch x := rng.Intn(10); {
		case x < 5 || t.charset == "":
			r = asciiRunes[rng.Intn(len(asciiRunes))]
		case t.charset == "latin1":
			r = latin1Runes[rng.Intn(len(latin1Runes))]
		default:
			r = utf8mb4Runes[rng.Intn(len(utf8mb4Runes))]
		}
		if sb.Len()+runeLen(t.charset, r) > bytes {
			break
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

func runeLen(charset string, r rune) int {
	if charset == "latin1" {
		return 1
	}
	return utf8.RuneLen(r)
}

// fit cuts s to the type's length in characters and bytes.
func (t ftype) fit(s string) string {
	chars, bytes := t.maxChars()
	if t.charset == "" {
		return s[:min(len(s), chars, bytes)]
	}
	n, size := 0, 0
	for i, r := range s {
		l := runeLen(t.charset, r)
		if n == chars || size+l > bytes {
			return s[:i]
		}
		n, size = n+1, size+l
	}
	return s
}

// defaultLiteral is lit (a random value of the type) as a DEFAULT: strings as quoted literals in
// the connection's character set rather than hex with an introducer.
func (t ftype) defaultLiteral(lit string) string {
	cs, h, ok := strings.Cut(lit, " X'")
	if !ok || !strings.HasPrefix(cs, "_") {
		return lit
	}
	b, err := hex.DecodeString(strings.TrimSuffix(h, "'"))
	if err != nil {
		panic(err)
	}
	if cs == "_latin1" {
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return quoteString(string(r))
	}
	return quoteString(string(b))
}

// fill is a string of the type's full length, in its widest characters.
func (t ftype) fill() string {
	chars, bytes := t.maxChars()
	r := '😀'
	if t.charset == "latin1" {
		r = 'ÿ'
	}
	n := min(chars, bytes/runeLen(t.charset, r))
	if n > 70000 {
		n = 70000 / runeLen(t.charset, r) // past 64 KiB: a 3-byte length in the binlog
	}
	return strings.Repeat(string(r), n)
}

func randBytes(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		switch rng.Intn(4) {
		case 0:
			b[i] = 0
		case 1:
			b[i] = 0xFF
		default:
			b[i] = byte(rng.Intn(256))
		}
	}
	return string(b)
}

func (t ftype) randBinary(rng *rand.Rand, long bool) string {
	chars, bytes := t.maxChars()
	n := rng.Intn(min(chars, 16) + 1)
	if long || rng.Intn(8) == 0 {
		n = rng.Intn(min(chars, bytes, 400) + 1)
	}
	return randBytes(rng, n)
}

var jsonValues = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-1.5e300`, `18446744073709551615`, `"😀 \u0000 \" \\"`,
	`{"a": 1, "b": [1, 2, {"c": null}], "é": "中"}`, `[1, "x", null, true, false, 1.0, -0]`,
	`{"deep": {"deeper": {"deepest": [[[[]]]]}}}`, `"\ud83d\ude00"`, `""`,
}

var wkts = map[fkind][]string{
	kPoint:              {"POINT(0 0)", "POINT(-1.5 2.25)", "POINT(1e300 -1e-300)", "POINT(-180 90)"},
	kLineString:         {"LINESTRING(0 0,1 1)", "LINESTRING(0 0,1 1,2 0,-5 7.5)"},
	kPolygon:            {"POLYGON((0 0,10 0,10 10,0 10,0 0))", "POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))"},
	kMultiPoint:         {"MULTIPOINT(0 0,1 1)", "MULTIPOINT(5 5)"},
	kMultiLineString:    {"MULTILINESTRING((0 0,1 1),(2 2,3 3))"},
	kMultiPolygon:       {"MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((2 2,3 2,3 3,2 2)))"},
	kGeometryCollection: {"GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))", "GEOMETRYCOLLECTION EMPTY"},
}

func geomLit(wkt string, srid int) string {
	if srid != 0 {
		return fmt.Sprintf("ST_GeomFromText('%s', %d)", wkt, srid)
	}
	return fmt.Sprintf("ST_GeomFromText('%s')", wkt)
}

func (t ftype) wktChoices() []string {
	if t.kind == kGeometry {
		var all []string
		for k := kPoint; k <= kGeometryCollection; k++ {
			all = append(all, wkts[k]...)
		}
		return all
	}
	return wkts[t.kind]
}

// boundaries are literals of the type's limits and special values (not NULL).
func (t ftype) boundaries(o *fidOptions) []string {
	switch {
	case t.isInt():
		lo, hi := t.intRange()
		out := []string{lo, hi, "0", "1"}
		if t.unsigned {
			out = append(out, strconv.FormatUint(1<<(intBits[t.kind]-1), 10), decString(hi, 1))
		} else {
			out = append(out, "-1", incString(lo), decString(hi, 1))
		}
		return out
	}
	switch t.kind {
	case kDecimal:
		id := t.n - t.scale
		max := t.decimal(false, nines(id), nines(t.scale))
		out := []string{max, t.decimal(true, nines(id), nines(t.scale)), t.decimal(false, "0", strings.Repeat("0", t.scale))}
		if t.scale > 0 {
			tiny := strings.Repeat("0", t.scale-1) + "1"
			out = append(out, t.decimal(false, "0", tiny), t.decimal(true, "0", tiny))
		}
		if id > 0 {
			out = append(out, t.decimal(true, "1", strings.Repeat("0", t.scale)))
		}
		return out
	case kFloat:
		return []string{floatLit(math.MaxFloat32), floatLit(-math.MaxFloat32), floatLit(math.SmallestNonzeroFloat32),
			floatLit(-math.SmallestNonzeroFloat32), floatLit(float64(float32(1.1754943508222875e-38))), "0e0", "-0e0",
			floatLit(float64(float32(1.1))), floatLit(float64(float32(16777217)))}
	case kDouble:
		return []string{floatLit(math.MaxFloat64), floatLit(-math.MaxFloat64), floatLit(math.SmallestNonzeroFloat64),
			floatLit(-math.SmallestNonzeroFloat64), floatLit(2.2250738585072014e-308), "0e0", "-0e0",
			floatLit(0.1 + 0.2), floatLit(9007199254740993), floatLit(1 / 3.0)}
	case kBit:
		out := []string{"0", strconv.FormatUint(1<<t.n-1, 10)}
		if t.n == 64 {
			out[1] = strconv.FormatUint(math.MaxUint64, 10)
		}
		if t.n > 1 {
			out = append(out, strconv.FormatUint(1<<(t.n-1), 10), "1")
		}
		return out
	case kDate:
		return []string{"'1000-01-01'", "'9999-12-31'", "'0000-00-00'", "'1969-12-31'", "'1970-01-01'", "'2024-02-29'", "'0001-01-01'",
			"'2024-00-15'", "'2024-05-00'", "'0000-01-01'"}
	case kDatetime:
		out := []string{"'1000-01-01 00:00:00" + t.zeroFrac() + "'", "'" + t.fsp("9999-12-31 23:59:59") + "'", "'0000-00-00 00:00:00" + t.zeroFrac() + "'",
			"'" + t.fsp("1969-12-31 23:59:59") + "'", "'1970-01-01 00:00:00" + t.zeroFrac() + "'", "'" + t.fsp("2038-01-19 03:14:07") + "'",
			"'0001-01-01 00:00:00" + t.zeroFrac() + "'", "'2024-00-15 10:00:00" + t.zeroFrac() + "'", "'2024-05-00 00:00:01" + t.zeroFrac() + "'",
			"'0000-01-01 00:00:00" + t.zeroFrac() + "'"}
		return out
	case kTimestamp:
		return []string{"'1970-01-01 00:00:01" + t.zeroFrac() + "'", "'" + t.fsp("2038-01-19 03:14:07") + "'", "'0000-00-00 00:00:00" + t.zeroFrac() + "'",
			"'2000-02-29 12:00:00" + t.zeroFrac() + "'"}
	case kTime:
		out := []string{"'-838:59:59" + t.zeroFrac() + "'", "'838:59:59" + t.zeroFrac() + "'", "'00:00:00" + t.zeroFrac() + "'",
			"'-00:00:01" + t.zeroFrac() + "'", "'" + t.fsp("23:59:59") + "'", "'" + t.fsp("-23:59:59") + "'"}
		if t.n > 0 {
			one := strings.Repeat("0", t.n-1) + "1"
			out = append(out, "'-00:00:00."+one+"'", "'00:00:00."+one+"'", "'-00:00:00.5"+strings.Repeat("0", t.n-1)+"'",
				"'"+t.fsp("-838:59:58")+"'")
		}
		return out
	case kYear:
		return []string{"1901", "2155", "0", "2000", "1970", "1999"}
	case kChar, kVarchar, kTinyText, kText, kMediumText, kLongText:
		vals := []string{"", "a", t.fill(), "x\x00y", "'\\\"", "A"}
		if t.charset == "latin1" {
			vals = append(vals, "éÿ")
		} else {
			vals = append(vals, "😀", "𝄞中é")
		}
		if t.kind != kChar {
			vals = append(vals, "trailing  ", " ")
		}
		var out []string
		for _, v := range vals {
			if lit := strLiteral(t.charset, t.fit(v)); !slices.Contains(out, lit) {
				out = append(out, lit)
			}
		}
		return out
	case kBinary, kVarbinary, kTinyBlob, kBlob, kMediumBlob, kLongBlob:
		chars, _ := t.maxChars()
		full := randBytes(rand.New(rand.NewSource(int64(chars))), min(chars, 70000))
		var out []string
		for _, v := range []string{"", "\x00", strings.Repeat("\xff", min(chars, 300)), full, "a\x00", "\x00\x00a", "ab"} {
			if lit := strLiteral("", t.fit(v)); !slices.Contains(out, lit) {
				out = append(out, lit)
			}
		}
		return out
	case kEnum:
		var out []string
		for _, e := range t.elems {
			out = append(out, strLiteral(t.charset, e))
		}
		return out
	case kSet:
		out := []string{strLiteral(t.charset, ""), strLiteral(t.charset, t.elems[0])}
		out = append(out, strLiteral(t.charset, strings.Join(t.elems, ",")))
		if len(t.elems) > 1 {
			out = append(out, strLiteral(t.charset, t.elems[len(t.elems)-1]))
		}
		return out
	case kJSON:
		var out []string
		for _, j := range jsonValues {
			out = append(out, strLiteral("utf8mb4", j))
		}
		return out
	}
	if t.isSpatial() {
		var out []string
		for i, w := range t.wktChoices() {
			out = append(out, geomLit(w, []int{0, 4326, 3857}[i%3]))
		}
		return out
	}
	panic(fmt.Sprintf("no boundaries for %s", t.sql()))
}

// incString and decString add to a decimal integer string (only used at int limits).
func incString(s string) string {
	v, _ := strconv.ParseInt(s, 10, 64)
	return strconv.FormatInt(v+1, 10)
}

func decString(s string, d uint64) string {
	v, _ := strconv.ParseUint(s, 10, 64)
	return strconv.FormatUint(v-d, 10)
}

// random is a random literal of the type (sometimes a boundary).
func (t ftype) random(rng *rand.Rand, o *fidOptions) string {
	if rng.Intn(4) == 0 {
		b := t.boundaries(o)
		return b[rng.Intn(len(b))]
	}
	switch {
	case t.isInt():
		return t.randInt(rng)
	case t.isString():
		return strLiteral(t.charset, t.randString(rng, false))
	case t.isBinary():
		return strLiteral("", t.randBinary(rng, false))
	case t.isSpatial():
		w := t.wktChoices()
		return geomLit(w[rng.Intn(len(w))], []int{0, 0, 4326}[rng.Intn(3)])
	}
	switch t.kind {
	case kDecimal:
		return t.randDecimal(rng)
	case kFloat:
		for {
			f := math.Float32frombits(rng.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				return floatLit(float64(f))
			}
		}
	case kDouble:
		for {
			f := math.Float64frombits(rng.Uint64())
			if rng.Intn(2) == 0 {
				f = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.Intn(40)-20))
			}
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return floatLit(f)
			}
		}
	case kBit:
		v := rng.Uint64()
		if t.n < 64 {
			v &= 1<<t.n - 1
		}
		return strconv.FormatUint(v, 10)
	case kDate, kDatetime:
		return t.randDatetime(rng, minDatetimeUnix, maxDatetimeUnix)
	case kTimestamp:
		return t.randDatetime(rng, 1, 1<<31-1)
	case kTime:
		h := rng.Intn(839)
		sign := ""
		if rng.Intn(2) == 0 {
			sign = "-"
		}
		return fmt.Sprintf("'%s%d:%02d:%02d%s'", sign, h, rng.Intn(60), rng.Intn(60), fracDigits(rng, t.n))
	case kYear:
		return strconv.Itoa(1901 + rng.Intn(255))
	case kEnum:
		return strLiteral(t.charset, t.elems[rng.Intn(len(t.elems))])
	case kSet:
		var members []string
		for _, e := range t.elems {
			if rng.Intn(3) == 0 {
				members = append(members, e)
			}
		}
		return strLiteral(t.charset, strings.Join(members, ","))
	case kJSON:
		return strLiteral("utf8mb4", jsonValues[rng.Intn(len(jsonValues))])
	}
	panic(fmt.Sprintf("no random value for %s", t.sql()))
}

// keyValue is a literal of a keyable type whose text is canonical (two are equal exactly when their
// values are), in the form literalExpr reads back.
func (t ftype) keyValue(rng *rand.Rand) string {
	switch {
	case t.isInt():
		if rng.Intn(6) == 0 {
			lo, hi := t.intRange()
			return []string{lo, hi}[rng.Intn(2)]
		}
		return t.randInt(rng)
	case t.kind == kDecimal:
		if rng.Intn(6) == 0 {
			return t.decimal(rng.Intn(2) == 0, nines(t.n-t.scale), nines(t.scale))
		}
		return t.randDecimal(rng)
	case t.kind == kDate || t.kind == kDatetime:
		if rng.Intn(8) == 0 {
			if t.kind == kDate {
				return "'0000-00-00'"
			}
			return "'0000-00-00 00:00:00" + t.zeroFrac() + "'"
		}
		return t.randDatetime(rng, minDatetimeUnix, maxDatetimeUnix)
	case t.kind == kChar || t.kind == kVarchar:
		// Lower-case letters and digits, no trailing space: no collation makes two of them equal.
		n := 1 + rng.Intn(min(t.n, 10))
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.Intn(36)]
		}
		return strLiteral(t.charset, string(b))
	case t.kind == kBinary:
		return strLiteral("", randBytes(rng, t.n))
	case t.kind == kVarbinary:
		return strLiteral("", randBytes(rng, 1+rng.Intn(min(t.n, 8))))
	}
	panic("not keyable: " + t.sql())
}

// canDefault: the type takes a literal DEFAULT.
func (t ftype) canDefault() bool { return !t.isSpatial() }

var (
	utf8mb4Collations = []string{"", "utf8mb4_general_ci", "utf8mb4_bin", "utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci"}
	latin1Collations  = []string{"", "latin1_swedish_ci", "latin1_bin"}
	enumElems         = []string{"a", "b", "😀", " c", "x,y", "Z", "é", "dup"}
)

func randCharset(rng *rand.Rand) (string, string) {
	if rng.Intn(5) == 0 {
		return "latin1", latin1Collations[rng.Intn(len(latin1Collations))]
	}
	return "utf8mb4", utf8mb4Collations[rng.Intn(len(utf8mb4Collations))]
}

// randType is a random column type; key: only keyable types.
func randType(rng *rand.Rand, key bool, o *fidOptions) ftype {
	for {
		t := ftype{kind: fkind(rng.Intn(int(numKinds)))}
		if key && !t.keyable() || t.isSpatial() && !o.spatial {
			continue
		}
		switch {
		case t.isInt():
			t.unsigned = rng.Intn(2) == 0
		case t.kind == kDecimal:
			t.n = 1 + rng.Intn(65)
			t.scale = rng.Intn(min(t.n, 30) + 1)
			if rng.Intn(4) == 0 {
				t.n, t.scale = 65, 30
			}
		case t.kind == kBit:
			t.n = []int{1, 1 + rng.Intn(64), 64}[rng.Intn(3)]
		case t.kind == kDatetime || t.kind == kTimestamp || t.kind == kTime:
			t.n = rng.Intn(7)
		case t.kind == kChar:
			t.n = 1 + rng.Intn(30)
			t.charset, t.collation = randCharset(rng)
		case t.kind == kVarchar:
			t.n = 1 + rng.Intn(200)
			t.charset, t.collation = randCharset(rng)
		case t.isText():
			t.charset, t.collation = randCharset(rng)
		case t.kind == kBinary:
			t.n = 1 + rng.Intn(16)
		case t.kind == kVarbinary:
			t.n = 1 + rng.Intn(300)
		case t.kind == kEnum:
			t.charset = "utf8mb4"
			p := rng.Perm(len(enumElems))
			for _, i := range p[:1+rng.Intn(len(p))] {
				if e := enumElems[i]; o.wideShowCreate || !wide(e) {
					t.elems = append(t.elems, e)
				}
			}
			if len(t.elems) == 0 {
				t.elems = []string{"a"}
			}
			if rng.Intn(4) == 0 {
				t.elems = append(t.elems, "") // an empty member, which is not the error value
			}
		case t.kind == kSet:
			t.charset = "utf8mb4"
			n := 1 + rng.Intn(8)
			if rng.Intn(4) == 0 {
				n = 64
			}
			for i := 0; i < n; i++ {
				t.elems = append(t.elems, fmt.Sprintf("m%d", i))
			}
			if n < 64 && rng.Intn(2) == 0 {
				t.elems[0] = "ü"
				if o.wideShowCreate {
					t.elems[0] = "😀"
				}
			}
		}
		return t
	}
}

// boundaryTypes are the types of the deterministic boundary test: each at its limits.
func boundaryTypes() []ftype {
	var out []ftype
	for k := kTinyInt; k <= kBigInt; k++ {
		out = append(out, ftype{kind: k}, ftype{kind: k, unsigned: true})
	}
	out = append(out,
		ftype{kind: kDecimal, n: 65, scale: 30}, ftype{kind: kDecimal, n: 65, scale: 0}, ftype{kind: kDecimal, n: 30, scale: 30},
		ftype{kind: kDecimal, n: 10, scale: 2}, ftype{kind: kDecimal, n: 1, scale: 0},
		ftype{kind: kFloat}, ftype{kind: kDouble},
		ftype{kind: kBit, n: 1}, ftype{kind: kBit, n: 7}, ftype{kind: kBit, n: 8}, ftype{kind: kBit, n: 33}, ftype{kind: kBit, n: 63}, ftype{kind: kBit, n: 64},
		ftype{kind: kDate}, ftype{kind: kDatetime}, ftype{kind: kDatetime, n: 3}, ftype{kind: kDatetime, n: 6},
		ftype{kind: kTimestamp}, ftype{kind: kTimestamp, n: 6}, ftype{kind: kTime}, ftype{kind: kTime, n: 1}, ftype{kind: kTime, n: 3}, ftype{kind: kTime, n: 6},
		ftype{kind: kYear},
		ftype{kind: kChar, n: 10, charset: "utf8mb4"}, ftype{kind: kChar, n: 255, charset: "utf8mb4", collation: "utf8mb4_bin"},
		ftype{kind: kVarchar, n: 255, charset: "utf8mb4"}, ftype{kind: kVarchar, n: 20, charset: "utf8mb4", collation: "utf8mb4_unicode_520_ci"},
		ftype{kind: kVarchar, n: 300, charset: "latin1"}, ftype{kind: kChar, n: 5, charset: "latin1", collation: "latin1_bin"},
		ftype{kind: kTinyText, charset: "utf8mb4"}, ftype{kind: kText, charset: "utf8mb4"}, ftype{kind: kMediumText, charset: "utf8mb4", collation: "utf8mb4_bin"},
		ftype{kind: kLongText, charset: "latin1"},
		ftype{kind: kBinary, n: 1}, ftype{kind: kBinary, n: 8}, ftype{kind: kVarbinary, n: 1}, ftype{kind: kVarbinary, n: 400},
		ftype{kind: kTinyBlob}, ftype{kind: kBlob}, ftype{kind: kMediumBlob}, ftype{kind: kLongBlob},
		ftype{kind: kEnum, charset: "utf8mb4", elems: enumElems}, ftype{kind: kEnum, charset: "utf8mb4", elems: []string{"", "a"}},
		ftype{kind: kSet, charset: "utf8mb4", elems: []string{"a", "b", "😀"}},
		ftype{kind: kJSON},
	)
	set64 := ftype{kind: kSet, charset: "utf8mb4"}
	for i := 0; i < 64; i++ {
		set64.elems = append(set64.elems, fmt.Sprintf("m%d", i))
	}
	out = append(out, set64)
	for k := kGeometry; k <= kGeometryCollection; k++ {
		out = append(out, ftype{kind: k})
	}
	return out
}
