package session

import (
	"encoding/binary"
	"strings"
	"testing"
)

// statusVars builds status variables: each argument is a code followed by its value's bytes.
func statusVars(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u16(code byte, vs ...uint16) []byte {
	b := []byte{code}
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func u32(code byte, v uint32) []byte { return binary.LittleEndian.AppendUint32([]byte{code}, v) }
func u64(code byte, v uint64) []byte { return binary.LittleEndian.AppendUint64([]byte{code}, v) }
func lstr(code byte, s string) []byte {
	return append([]byte{code, byte(len(s))}, s...)
}

var cat = Catalog{8: {"latin1_swedish_ci", "latin1"}, 45: {"utf8mb4_general_ci", "utf8mb4"}, 33: {"utf8mb3_general_ci", "utf8mb3"}}

func TestDecodeMariaDBEvent(t *testing.T) {
	mode := uint64(1<<21 | 1<<26 | 1<<28 | 1<<30) // Debian's default
	raw := statusVars(
		u32(codeFlags2, optionNoForeignKeyChecks),
		u64(codeSQLMode, mode),
		lstr(codeCatalogNZ, "std"),
		u16(codeAutoIncrement, 5, 3),
		u16(codeCharset, 8, 8, 45),
		lstr(codeTimeZone, "+08:00"),
		u16(codeLCTimeNames, 0),
		u16(codeCharsetDatabase, 33),
		[]byte{codeUpdatedDBNames, 2}, []byte("db_1\x00db_2\x00"),
		[]byte{codeInvoker, 4}, []byte("root"), []byte{9}, []byte("localhost"),
		[]byte{codeMicroseconds, 1, 2, 3},
		[]byte{codeMariaHRNow, 1, 2, 3},
		u64(codeMariaXID, 77),
		[]byte{codeMariaGTIDFlags3, 1},
	)
	v, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Vars{has: hasFlags2 | hasSQLMode | hasAutoIncrement | hasCharset | hasTimeZone | hasDatabaseCollation,
		Flags2: optionNoForeignKeyChecks, SQLMode: mode, AutoIncrementIncrement: 5, AutoIncrementOffset: 3,
		ClientCollation: 8, ConnectionCollation: 8, ServerCollation: 45, TimeZone: "+08:00", DatabaseCollation: 33}
	if v != want {
		t.Fatalf("decoded\n%+v, want\n%+v", v, want)
	}
	s, notes := v.Settings("mariadb", cat)
	if len(notes) != 0 {
		t.Fatalf("notes %q", notes)
	}
	got := s.String()
	wantS := "time_zone='+08:00', sql_mode='STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION', " +
		"character_set_client='latin1', collation_connection='latin1_swedish_ci', collation_server='utf8mb4_general_ci', " +
		"auto_increment_increment=5, auto_increment_offset=3, foreign_key_checks=0, unique_checks=1"
	if got != wantS {
		t.Fatalf("settings\n%s, want\n%s", got, wantS)
	}
}

func TestDecodeStopsWhereItCannotRead(t *testing.T) {
	// Truncated: the variables before are kept, the error names the code.
	v, err := Decode(statusVars(u64(codeSQLMode, 1<<21), []byte{codeCharset, 8, 0}))
	if err == nil || !strings.Contains(err.Error(), "0x04") || v.has != hasSQLMode || v.SQLMode != 1<<21 {
		t.Fatalf("truncated: %+v %v", v, err)
	}
	// An unknown code ends the decode there.
	v, err = Decode(statusVars(lstr(codeTimeZone, "UTC"), []byte{0x7f, 1, 2}, u64(codeSQLMode, 1)))
	if err == nil || !strings.Contains(err.Error(), "0x7f at byte 5 is not known") || v.has != hasTimeZone || v.TimeZone != "UTC" {
		t.Fatalf("unknown code: %+v %v", v, err)
	}
	// A length byte past the end.
	if _, err := Decode([]byte{codeTimeZone, 9, 'U'}); err == nil {
		t.Fatal("a time zone longer than the bytes left was read")
	}
	// No database names (254) and MySQL's variables.
	v, err = Decode(statusVars([]byte{codeUpdatedDBNames, 254}, []byte{codeExplicitDefaults, 1}, u16(codeDefaultCollation, 255), []byte{codeRequirePrimaryKey, 0}))
	if err != nil || !v.ExplicitDefaultsForTimestamp || v.has != hasExplicitDefaults {
		t.Fatalf("mysql: %+v %v", v, err)
	}
	if v, err := Decode(nil); err != nil || v != (Vars{}) {
		t.Fatalf("empty: %+v %v", v, err)
	}
}

func TestModeNames(t *testing.T) {
	names, unknown := ModeNames(1<<32|1<<21|1<<40, "mariadb")
	if strings.Join(names, ",") != "STRICT_TRANS_TABLES,EMPTY_STRING_IS_NULL" || unknown != 1<<40 {
		t.Fatalf("mariadb: %v %x", names, unknown)
	}
	names, unknown = ModeNames(1<<32|1<<4|1<<5, "mysql")
	if strings.Join(names, ",") != "ONLY_FULL_GROUP_BY,TIME_TRUNCATE_FRACTIONAL" || unknown != 1<<4 {
		t.Fatalf("mysql: %v %x", names, unknown)
	}
	// An unnamed bit is said in the notes and left out.
	s, notes := Vars{has: hasSQLMode, SQLMode: 1<<21 | 1<<40}.Settings("mariadb", cat)
	if s.String() != "sql_mode='STRICT_TRANS_TABLES'" || len(notes) != 1 {
		t.Fatalf("%s %q", s, notes)
	}
}

func TestAgainstSetsOnlyWhatDiffers(t *testing.T) {
	v := Vars{has: hasSQLMode | hasCharset | hasTimeZone | hasExplicitDefaults, SQLMode: 1<<30 | 1<<21,
		ClientCollation: 8, ConnectionCollation: 8, ServerCollation: 99, TimeZone: "it's", ExplicitDefaultsForTimestamp: true}
	s, notes := v.Settings("mariadb", cat)
	if len(notes) != 1 || !strings.Contains(notes[0], "collation id 99") {
		t.Fatalf("notes %q", notes)
	}
	base := map[string]string{TimeZone: "+00:00", SQLMode: "no_engine_substitution,STRICT_TRANS_TABLES",
		CharacterSetClient: "utf8mb4", CollationConnection: "LATIN1_swedish_ci"}
	ch := s.Against(base)
	if ch.Set != "SET SESSION time_zone='it''s', character_set_client='latin1'" ||
		ch.Restore != "SET SESSION time_zone='+00:00', character_set_client='utf8mb4'" || len(ch.Vars) != 2 {
		t.Fatalf("%+v", ch)
	}
	if ch := s.Without(TimeZone, CharacterSetClient).Against(base); ch.Set != "" || ch.Restore != "" {
		t.Fatalf("nothing differs: %+v", ch)
	}
	if _, notes := (Vars{has: hasTimeZone, TimeZone: `a\b`}).Settings("mariadb", cat); len(notes) != 1 {
		t.Fatal("a backslash in a value is carried")
	}
}
