package session

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Setting is one session variable and its value, as SELECT @@session.name shows it.
type Setting struct {
	Name, Value string
	quote       bool // the value is a string: quoted in SET
}

func (s Setting) literal() string {
	if !s.quote {
		return s.Value
	}
	return "'" + strings.ReplaceAll(s.Value, "'", "''") + "'"
}

// Settings are the session settings a DDL runs with, in the order they are set.
type Settings []Setting

// String is the settings as one SET would write them (for logs and for comparing two events').
func (s Settings) String() string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = v.Name + "=" + v.literal()
	}
	return strings.Join(parts, ", ")
}

// Collation is one of the upstream's collations (information_schema.COLLATIONS).
type Collation struct{ Name, Charset string }

// Catalog names the upstream's collations by id: the ids of the status variables are the upstream
// server's, and another server (MySQL beside MariaDB, or another version) may give an id to another
// collation, so the downstream is told the names.
type Catalog map[uint16]Collation

// Names returned by Settings: the variables in the order they are set.
const (
	TimeZone                     = "time_zone"
	SQLMode                      = "sql_mode"
	CharacterSetClient           = "character_set_client"
	CollationConnection          = "collation_connection"
	CollationServer              = "collation_server"
	AutoIncrementIncrement       = "auto_increment_increment"
	AutoIncrementOffset          = "auto_increment_offset"
	ForeignKeyChecks             = "foreign_key_checks"
	UniqueChecks                 = "unique_checks"
	ExplicitDefaultsForTimestamp = "explicit_defaults_for_timestamp"
)

// Names are all the variables Settings may set.
var Names = []string{TimeZone, SQLMode, CharacterSetClient, CollationConnection, CollationServer,
	AutoIncrementIncrement, AutoIncrementOffset, ForeignKeyChecks, UniqueChecks, ExplicitDefaultsForTimestamp}

// Settings are the downstream settings that give a DDL the meaning it had in v's session: flavor is
// the upstream's ("mysql" or "mariadb"), cat names its collations. What cannot be carried (a collation
// id cat does not name, a value that cannot be written safely) is left out, and said in notes.
func (v Vars) Settings(flavor string, cat Catalog) (out Settings, notes []string) {
	str := func(name, value string) {
		if strings.ContainsAny(value, "\\\x00") {
			notes = append(notes, fmt.Sprintf("%s %q is not carried", name, value))
			return
		}
		out = append(out, Setting{Name: name, Value: value, quote: true})
	}
	num := func(name string, value uint64) {
		out = append(out, Setting{Name: name, Value: strconv.FormatUint(value, 10)})
	}
	collation := func(name string, id uint16, charset bool) {
		c, ok := cat[id]
		switch {
		case !ok:
			notes = append(notes, fmt.Sprintf("%s: collation id %d is not known upstream", name, id))
		case charset:
			str(name, c.Charset)
		default:
			str(name, c.Name)
		}
	}
	if v.has&hasTimeZone != 0 {
		str(TimeZone, v.TimeZone)
	}
	if v.has&hasSQLMode != 0 {
		names, unknown := ModeNames(v.SQLMode, flavor)
		if unknown != 0 {
			notes = append(notes, fmt.Sprintf("sql_mode bits 0x%x have no name in %s", unknown, flavor))
		}
		str(SQLMode, strings.Join(names, ","))
	}
	if v.has&hasCharset != 0 {
		collation(CharacterSetClient, v.ClientCollation, true)
		collation(CollationConnection, v.ConnectionCollation, false)
		collation(CollationServer, v.ServerCollation, false)
	}
	if v.has&hasAutoIncrement != 0 {
		num(AutoIncrementIncrement, uint64(v.AutoIncrementIncrement))
		num(AutoIncrementOffset, uint64(v.AutoIncrementOffset))
	}
	if v.has&hasFlags2 != 0 {
		num(ForeignKeyChecks, b2u(v.Flags2&optionNoForeignKeyChecks == 0))
		num(UniqueChecks, b2u(v.Flags2&optionRelaxedUniqueChecks == 0))
	}
	if v.has&hasExplicitDefaults != 0 {
		num(ExplicitDefaultsForTimestamp, b2u(v.ExplicitDefaultsForTimestamp))
	}
	return out, notes
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// sqlModes are the names of the sql_mode bits, bit 0 first, as MariaDB 10.11 shows them (checked
// against the server: SET sql_mode = 1<<n). MySQL 8 has no bits 4, 8-17, 28, 33, 34 and calls bit 32
// TIME_TRUNCATE_FRACTIONAL (mysqlModes).
var sqlModes = []string{
	"REAL_AS_FLOAT", "PIPES_AS_CONCAT", "ANSI_QUOTES", "IGNORE_SPACE", "IGNORE_BAD_TABLE_OPTIONS",
	"ONLY_FULL_GROUP_BY", "NO_UNSIGNED_SUBTRACTION", "NO_DIR_IN_CREATE", "POSTGRESQL", "ORACLE", "MSSQL",
	"DB2", "MAXDB", "NO_KEY_OPTIONS", "NO_TABLE_OPTIONS", "NO_FIELD_OPTIONS", "MYSQL323", "MYSQL40",
	"ANSI", "NO_AUTO_VALUE_ON_ZERO", "NO_BACKSLASH_ESCAPES", "STRICT_TRANS_TABLES", "STRICT_ALL_TABLES",
	"NO_ZERO_IN_DATE", "NO_ZERO_DATE", "ALLOW_INVALID_DATES", "ERROR_FOR_DIVISION_BY_ZERO", "TRADITIONAL",
	"NO_AUTO_CREATE_USER", "HIGH_NOT_PRECEDENCE", "NO_ENGINE_SUBSTITUTION", "PAD_CHAR_TO_FULL_LENGTH",
	"EMPTY_STRING_IS_NULL", "SIMULTANEOUS_ASSIGNMENT", "TIME_ROUND_FRACTIONAL",
}

// mysqlModes are MySQL's differences from sqlModes: "" is a bit MySQL 8 does not have (MySQL 5.7 has
// bits 8-17 and 28 under MariaDB's names; a 5.7 event with them is read with those).
var mysqlModes = map[int]string{4: "", 32: "TIME_TRUNCATE_FRACTIONAL", 33: "", 34: ""}

// ModeNames are the names of the sql_mode bits of mask in flavor's order, and the bits that have none.
func ModeNames(mask uint64, flavor string) (names []string, unknown uint64) {
	for bit := range 64 {
		if mask&(1<<bit) == 0 {
			continue
		}
		name := ""
		if bit < len(sqlModes) {
			name = sqlModes[bit]
		}
		if flavor == "mysql" {
			if n, ok := mysqlModes[bit]; ok {
				name = n
			}
		}
		if name == "" {
			unknown |= 1 << bit
			continue
		}
		names = append(names, name)
	}
	return names, unknown
}

// Change is how a session whose values are a base gets to settings and back.
type Change struct {
	Set     string // SET SESSION ... of the variables that differ; "" when none does
	Restore string // SET SESSION ... of the same variables back to the base
	Vars    Settings
}

// Against is the change from base (name -> value, as SELECT @@session.name shows it) to s. A variable
// base does not have is left out: the downstream has no such variable (MySQL's
// explicit_defaults_for_timestamp on an older MariaDB), so it cannot mean anything there.
func (s Settings) Against(base map[string]string) Change {
	var set, restore []string
	var vars Settings
	for _, v := range s {
		b, ok := base[v.Name]
		if !ok || same(v.Name, v.Value, b) {
			continue
		}
		vars = append(vars, v)
		set = append(set, v.Name+"="+v.literal())
		restore = append(restore, v.Name+"="+Setting{Value: b, quote: v.quote}.literal())
	}
	if len(set) == 0 {
		return Change{}
	}
	return Change{Set: "SET SESSION " + strings.Join(set, ", "), Restore: "SET SESSION " + strings.Join(restore, ", "), Vars: vars}
}

func same(name, a, b string) bool {
	if name == SQLMode {
		return modeSet(a) == modeSet(b)
	}
	return strings.EqualFold(a, b)
}

func modeSet(s string) string {
	seen := map[string]bool{}
	for _, m := range strings.Split(strings.ToUpper(s), ",") {
		if m = strings.TrimSpace(m); m != "" {
			seen[m] = true
		}
	}
	var out []string
	for _, m := range sqlModes {
		if seen[m] {
			out = append(out, m)
			delete(seen, m)
		}
	}
	rest := make([]string, 0, len(seen))
	for m := range seen {
		rest = append(rest, m) // names only MySQL has
	}
	slices.Sort(rest)
	return strings.Join(append(out, rest...), ",")
}

// With is s with the value of the variable name replaced by value.
func (s Settings) With(name, value string) Settings {
	out := slices.Clone(s)
	for i := range out {
		if out[i].Name == name {
			out[i].Value = value
		}
	}
	return out
}

// Without is s without the variables named.
func (s Settings) Without(names ...string) Settings {
	var out Settings
	for _, v := range s {
		drop := false
		for _, n := range names {
			drop = drop || v.Name == n
		}
		if !drop {
			out = append(out, v)
		}
	}
	return out
}
