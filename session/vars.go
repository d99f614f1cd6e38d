// Package session reads the session settings a binlog query event carries (its status variables) and
// turns the ones that change what a DDL does into the settings of the downstream connection that runs
// it: a replica of MySQL or MariaDB runs each statement in the session its event describes, and so does
// Tributary for every DDL it sends downstream because of an event. It is pure: no I/O.
//
// The status variables are a sequence of one-byte codes, each followed by a value whose length the code
// decides (MySQL's and MariaDB's replication protocol, QUERY_EVENT). An unknown code ends the decode:
// nothing says how long its value is, so what follows cannot be read.
package session

import (
	"encoding/binary"
	"fmt"
)

// Vars are the status variables of one query event that Tributary carries downstream.
type Vars struct {
	has field

	Flags2                 uint32 // OPTION_* bits: foreign_key_checks, unique_checks
	SQLMode                uint64 // the sql_mode bitmask
	AutoIncrementIncrement uint16
	AutoIncrementOffset    uint16
	// Collation ids: character_set_client (the client collation's charset), collation_connection,
	// collation_server.
	ClientCollation, ConnectionCollation, ServerCollation uint16
	TimeZone                                              string // written only when the statement used the zone
	DatabaseCollation                                     uint16 // the default database's collation (character_set_database)
	ExplicitDefaultsForTimestamp                          bool   // MySQL only
}

type field uint16

const (
	hasFlags2 field = 1 << iota
	hasSQLMode
	hasAutoIncrement
	hasCharset
	hasTimeZone
	hasDatabaseCollation
	hasExplicitDefaults
)

// The codes (MySQL's log_event.h, MariaDB's log_event.h).
const (
	codeFlags2             = 0x00
	codeSQLMode            = 0x01
	codeCatalog            = 0x02
	codeAutoIncrement      = 0x03
	codeCharset            = 0x04
	codeTimeZone           = 0x05
	codeCatalogNZ          = 0x06
	codeLCTimeNames        = 0x07
	codeCharsetDatabase    = 0x08
	codeTableMapForUpdate  = 0x09
	codeMasterDataWritten  = 0x0a
	codeInvoker            = 0x0b
	codeUpdatedDBNames     = 0x0c
	codeMicroseconds       = 0x0d
	codeCommitTS2          = 0x0f
	codeExplicitDefaults   = 0x10
	codeDDLLoggedWithXID   = 0x11
	codeDefaultCollation   = 0x12
	codeRequirePrimaryKey  = 0x13
	codeDefaultEncryption  = 0x14
	codeMariaHRNow         = 0x80
	codeMariaXID           = 0x81
	codeMariaGTIDFlags3    = 0x82
	codeMariaCharsetCollat = 0x83
)

// fixed is the length of the values of fixed length.
var fixed = map[byte]int{
	codeFlags2: 4, codeSQLMode: 8, codeAutoIncrement: 4, codeCharset: 6, codeLCTimeNames: 2,
	codeCharsetDatabase: 2, codeTableMapForUpdate: 8, codeMasterDataWritten: 4, codeMicroseconds: 3,
	codeCommitTS2: 8, codeExplicitDefaults: 1, codeDDLLoggedWithXID: 8, codeDefaultCollation: 2,
	codeRequirePrimaryKey: 1, codeDefaultEncryption: 1, codeMariaHRNow: 3, codeMariaXID: 8, codeMariaGTIDFlags3: 1,
}

// Decode reads raw, a query event's status variables (go-mysql's QueryEvent.StatusVars). The error
// names what could not be read; the variables before it are decoded and returned with it.
func Decode(raw []byte) (Vars, error) {
	var v Vars
	for i := 0; i < len(raw); {
		code := raw[i]
		i++
		short := func(n int) error {
			return fmt.Errorf("status variable 0x%02x at byte %d: %d bytes left, it needs %d", code, i-1, len(raw)-i, n)
		}
		if n, ok := fixed[code]; ok {
			if len(raw)-i < n {
				return v, short(n)
			}
			b := raw[i : i+n]
			switch code {
			case codeFlags2:
				v.Flags2, v.has = binary.LittleEndian.Uint32(b), v.has|hasFlags2
			case codeSQLMode:
				v.SQLMode, v.has = binary.LittleEndian.Uint64(b), v.has|hasSQLMode
			case codeAutoIncrement:
				v.AutoIncrementIncrement = binary.LittleEndian.Uint16(b)
				v.AutoIncrementOffset = binary.LittleEndian.Uint16(b[2:])
				v.has |= hasAutoIncrement
			case codeCharset:
				v.ClientCollation = binary.LittleEndian.Uint16(b)
				v.ConnectionCollation = binary.LittleEndian.Uint16(b[2:])
				v.ServerCollation = binary.LittleEndian.Uint16(b[4:])
				v.has |= hasCharset
			case codeCharsetDatabase:
				v.DatabaseCollation, v.has = binary.LittleEndian.Uint16(b), v.has|hasDatabaseCollation
			case codeExplicitDefaults:
				v.ExplicitDefaultsForTimestamp, v.has = b[0] != 0, v.has|hasExplicitDefaults
			}
			i += n
			continue
		}
		switch code {
		case codeTimeZone, codeCatalogNZ:
			if i >= len(raw) || len(raw)-i-1 < int(raw[i]) {
				return v, short(1)
			}
			n := int(raw[i])
			if code == codeTimeZone {
				v.TimeZone, v.has = string(raw[i+1:i+1+n]), v.has|hasTimeZone
			}
			i += 1 + n
		case codeCatalog: // length, name, a terminating NUL (servers before 5.0.4)
			if i >= len(raw) || len(raw)-i-2 < int(raw[i]) {
				return v, short(2)
			}
			i += 2 + int(raw[i])
		case codeInvoker: // user and host, each length-prefixed
			for range 2 {
				if i >= len(raw) || len(raw)-i-1 < int(raw[i]) {
					return v, short(1)
				}
				i += 1 + int(raw[i])
			}
		case codeUpdatedDBNames: // a count (254: none follow), then NUL-terminated names
			if i >= len(raw) {
				return v, short(1)
			}
			count := int(raw[i])
			i++
			if count == 254 {
				continue
			}
			for range count {
				for i < len(raw) && raw[i] != 0 {
					i++
				}
				if i >= len(raw) {
					return v, short(1)
				}
				i++
			}
		case codeMariaCharsetCollat: // a count, then pairs of 2-byte charset and collation ids
			if i >= len(raw) || len(raw)-i-1 < 4*int(raw[i]) {
				return v, short(1)
			}
			i += 1 + 4*int(raw[i])
		default:
			return v, fmt.Errorf("status variable 0x%02x at byte %d is not known: the %d bytes after it are not read", code, i-1, len(raw)-i)
		}
	}
	return v, nil
}

// The OPTION_* bits of flags2 carried downstream (MySQL's and MariaDB's sql_priv.h).
const (
	optionNoForeignKeyChecks  = 1 << 26
	optionRelaxedUniqueChecks = 1 << 27
)
