package dbutil

import "testing"

// TestComparableType: MySQL 8's INT and 5.7's or MariaDB's INT(11) compare equal; ZEROFILL widths and
// other types' lengths stay.
func TestComparableType(t *testing.T) {
	for in, want := range map[string]string{
		"int(11)":                  "int",
		"INT":                      "int",
		"bigint(20) unsigned":      "bigint unsigned",
		"tinyint(1)":               "tinyint",
		"int(5) unsigned zerofill": "int(5) unsigned zerofill",
		"varchar(11)":              "varchar(11)",
		"decimal(10,2)":            "decimal(10,2)",
		"mediumint(9)":             "mediumint",
		"enum('int(11)','b')":      "enum('int(11)','b')",
	} {
		if got := ComparableType(in); got != want {
			t.Errorf("ComparableType(%q) = %q, want %q", in, got, want)
		}
	}
}
