package ddl

import (
	"strings"
	"testing"
)

// TestWithCollationsMapsMySQL8Collations: MySQL 8's 0900 collations become MariaDB's wherever a
// definition names them; a statement that names none, and a string that only spells one, stay.
func TestWithCollationsMapsMySQL8Collations(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"CREATE TABLE `t` (`id` int NOT NULL, `v` varchar(32) COLLATE utf8mb4_0900_bin DEFAULT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
			"CREATE TABLE `t` (`id` INT NOT NULL,`v` VARCHAR(32) COLLATE utf8mb4_bin DEFAULT NULL,PRIMARY KEY(`id`)) ENGINE = InnoDB DEFAULT CHARACTER SET = UTF8MB4 DEFAULT COLLATE = UTF8MB4_UCA1400_AI_CI"},
		{"ALTER TABLE t ADD COLUMN c varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci COMMENT 'utf8mb4_0900_ai_ci'",
			"ALTER TABLE `t` ADD COLUMN `c` VARCHAR(10) CHARACTER SET UTF8MB4 COLLATE utf8mb4_uca1400_ai_ci COMMENT 'utf8mb4_0900_ai_ci'"},
		{"ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci",
			"ALTER TABLE `t` CONVERT TO CHARACTER SET UTF8MB4 COLLATE UTF8MB4_UCA1400_AI_CI"},
		{"CREATE DATABASE d DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci",
			"CREATE DATABASE `d` CHARACTER SET = utf8mb4 COLLATE = utf8mb4_uca1400_ai_ci"},
		{"ALTER TABLE t ADD COLUMN c INT", "ALTER TABLE t ADD COLUMN c INT"},
	} {
		st, err := ParseStatement(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.WithCollations(MariaDBCollations)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got.SQL != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got.SQL, tc.want)
		}
		if strings.Contains(strings.ToLower(got.SQL), "0900") && !strings.Contains(got.SQL, "'utf8mb4_0900_ai_ci'") {
			t.Errorf("a 0900 collation is left: %s", got.SQL)
		}
	}
}

// TestWithCollationsInTextTheParserCannotRead: a MySQL 8 definition with invisible columns (which
// the parser does not read) has its collations renamed in its text, strings and names left alone.
func TestWithCollationsInTextTheParserCannotRead(t *testing.T) {
	in := "CREATE TABLE `t` (\n  `my_row_id` bigint unsigned NOT NULL AUTO_INCREMENT /*!80023 INVISIBLE */,\n  `v` varchar(9) COLLATE utf8mb4_0900_bin DEFAULT 'utf8mb4_0900_bin',\n  `utf8mb4_0900_ai_ci` int,\n  PRIMARY KEY (`my_row_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=UTF8MB4_0900_AI_CI COMMENT 'it''s utf8mb4_0900_ai_ci'"
	want := "CREATE TABLE `t` (\n  `my_row_id` bigint unsigned NOT NULL AUTO_INCREMENT /*!80023 INVISIBLE */,\n  `v` varchar(9) COLLATE utf8mb4_bin DEFAULT 'utf8mb4_0900_bin',\n  `utf8mb4_0900_ai_ci` int,\n  PRIMARY KEY (`my_row_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_uca1400_ai_ci COMMENT 'it''s utf8mb4_0900_ai_ci'"
	got, err := Statement{SQL: in}.WithCollations(MariaDBCollations)
	if err != nil {
		t.Fatal(err)
	}
	if got.SQL != want {
		t.Errorf("\n got %s\nwant %s", got.SQL, want)
	}
}
