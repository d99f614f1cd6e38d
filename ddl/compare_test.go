package ddl

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/vocab"
)

// downT is a MariaDB 10.11 SHOW CREATE TABLE of `db`.`t`, the downstream table the cases compare with.
const downT = "CREATE TABLE `t` (\n" +
	"  `id` int(11) NOT NULL,\n" +
	"  `v` varchar(32) DEFAULT NULL,\n" +
	"  `c` varchar(5) DEFAULT NULL,\n" +
	"  `n` int(11) NOT NULL DEFAULT 5,\n" +
	"  `u` bigint(20) unsigned DEFAULT NULL,\n" +
	"  `d` decimal(10,2) DEFAULT 1.50,\n" +
	"  `l` varchar(5) CHARACTER SET latin1 COLLATE latin1_swedish_ci DEFAULT NULL,\n" +
	"  `b` varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,\n" +
	"  `ts` datetime(3) DEFAULT current_timestamp(3) ON UPDATE current_timestamp(3),\n" +
	"  `e` enum('a','b') NOT NULL DEFAULT 'a',\n" +
	"  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),\n" +
	"  `g` int(11) GENERATED ALWAYS AS (`id` + 1) VIRTUAL,\n" +
	"  `s` text DEFAULT NULL,\n" +
	"  `p` int(11) DEFAULT NULL,\n" +
	"  PRIMARY KEY (`id`),\n" +
	"  UNIQUE KEY `uv` (`v`),\n" +
	"  KEY `kc` (`c`(2),`n`),\n" +
	"  KEY `p` (`p`),\n" +
	"  FULLTEXT KEY `ft` (`s`),\n" +
	"  CONSTRAINT `fk` FOREIGN KEY (`p`) REFERENCES `parent` (`id`) ON DELETE CASCADE\n" +
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"

// TestCompareWithDownstream: each statement against downT (and the databases db, other), with what
// CompareWithDownstream must answer. known false means "cannot tell", never "applied".
func TestCompareWithDownstream(t *testing.T) {
	down := Downstream{
		Tables:    map[vocab.TableName]string{{Schema: "db", Name: "t"}: downT, {Schema: "db", Name: "other"}: "CREATE TABLE `other` (\n  `id` int(11) DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci"},
		Databases: map[string]bool{"db": true, "other": true},
	}
	const same, differs, unknown = "same", "differs", "unknown"
	for _, c := range []struct {
		ddl, want string
		says      []string // in the reason, Have or Want
	}{
		// ADD COLUMN: the case, and its identical twin.
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT", differs, []string{"column `c` differs", "type varchar(5) downstream, int in the statement", "`c` varchar(5) DEFAULT NULL", "`c` INT"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5)", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5) NULL DEFAULT NULL COMMENT 'x' AFTER `id`", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(6)", differs, []string{"varchar(5) downstream, varchar(6)"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5) NOT NULL", differs, []string{"NULL downstream, NOT NULL in the statement"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5) DEFAULT 'x'", differs, []string{"default NULL downstream, 'x'"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `C` varchar(5) CHARACTER SET utf8mb4", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5) CHARACTER SET latin1", differs, []string{"character set utf8mb4 downstream, latin1"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5) COLLATE utf8mb4_bin", differs, []string{"collation utf8mb4_general_ci downstream, utf8mb4_bin"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `l` VARCHAR(5) CHARACTER SET latin1", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `l` VARCHAR(5)", differs, []string{"character set latin1 downstream, utf8mb4"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `b` VARCHAR(5) COLLATE utf8mb4_bin", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `n` INT NOT NULL DEFAULT '5'", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `n` INT(4) NOT NULL DEFAULT 5", same, nil}, // display width does not count
		{"ALTER TABLE `db`.`t` ADD COLUMN `n` INT NOT NULL DEFAULT 6", differs, []string{"default 5 downstream, 6"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `n` INT NOT NULL", differs, []string{"default 5 downstream, none"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `n` INT UNSIGNED NOT NULL DEFAULT 5", differs, []string{"type int downstream, int unsigned"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `u` BIGINT UNSIGNED", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `u` BIGINT", differs, []string{"bigint unsigned downstream, bigint in"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `d` DECIMAL(10,2) DEFAULT 1.5", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `d` DECIMAL DEFAULT 1.5", differs, []string{"decimal(10,2) downstream, decimal(10,0)"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `ts` DATETIME(3) DEFAULT NOW(3) ON UPDATE CURRENT_TIMESTAMP(3)", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `ts` DATETIME(3) DEFAULT NOW(3)", differs, []string{"ON UPDATE"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `ts` DATETIME DEFAULT NOW() ON UPDATE NOW()", differs, []string{"datetime(3) downstream, datetime in"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `e` ENUM('a','b') NOT NULL DEFAULT 'a'", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `e` ENUM('a','b','c') NOT NULL DEFAULT 'a'", differs, []string{"enum('a','b') downstream"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `j` JSON", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `g` INT AS (id + 1) VIRTUAL", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `g` INT AS ((`ID` + 1)) VIRTUAL", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `g` INT AS (id + 2)", differs, []string{"generated"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `s` TEXT", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `s` TEXT(100)", differs, []string{"type text downstream, tinytext"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT UNIQUE", differs, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `v` VARCHAR(32) UNIQUE", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `c` INT, ADD COLUMN `v` VARCHAR(32)", same, nil},

		// A multi-part ALTER ran as a whole or not at all: every part must show.
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ADD COLUMN `x` INT", differs, []string{"column `x` is not there", "`x` INT"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `x` INT, ADD COLUMN `c` INT", differs, []string{"column `x` is not there"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ADD COLUMN `n` INT NOT NULL DEFAULT 5", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN (`c` VARCHAR(5), `p` INT)", same, nil},
		{"ALTER TABLE `db`.`t` DROP COLUMN `gone`, ADD COLUMN `x` INT", differs, []string{"column `x` is not there"}},
		{"ALTER TABLE `db`.`t` DROP COLUMN `gone`, ADD COLUMN `c` VARCHAR(5)", same, nil},
		{"ALTER TABLE `db`.`t` DROP COLUMN `c`, ADD COLUMN `c` VARCHAR(5)", same, nil}, // the later part decides
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ALGORITHM=INPLACE, LOCK=NONE", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ENGINE=InnoDB", unknown, []string{"not compared"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ADD CONSTRAINT `ck` CHECK (`n` > 0)", unknown, nil},

		// DROP: not there is applied.
		{"ALTER TABLE `db`.`t` DROP COLUMN `gone`", same, nil},
		{"ALTER TABLE `db`.`t` DROP COLUMN `gone`, DROP COLUMN `c`", differs, []string{"column `c` is there, the statement removes it", "`c` varchar(5) DEFAULT NULL"}},
		{"ALTER TABLE `db`.`t` DROP INDEX `gone`", same, nil},
		{"ALTER TABLE `db`.`t` DROP INDEX `gone`, DROP INDEX `kc`", differs, []string{"key `kc` is there", "KEY `kc` (`c`(2),`n`)"}},
		{"DROP INDEX `gone` ON `db`.`t`", same, nil},
		{"ALTER TABLE `db`.`t` DROP FOREIGN KEY `gone`", same, nil},
		{"ALTER TABLE `db`.`t` DROP FOREIGN KEY `fk`", differs, []string{"CONSTRAINT `fk` FOREIGN KEY"}},
		{"DROP TABLE `db`.`gone`", same, nil},
		{"DROP TABLE `db`.`gone`, `db`.`other`", differs, []string{"`db`.`other` is still there"}},
		{"DROP DATABASE `gone`", same, nil},

		// MODIFY, CHANGE, RENAME, defaults.
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), MODIFY COLUMN `n` INT NOT NULL DEFAULT 5", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), MODIFY COLUMN `n` BIGINT NOT NULL DEFAULT 5", differs, []string{"column `n` differs"}},
		{"ALTER TABLE `db`.`t` CHANGE COLUMN `gone` `c` VARCHAR(5)", same, nil},
		{"ALTER TABLE `db`.`t` CHANGE COLUMN `v` `c` VARCHAR(5)", differs, []string{"column `v` is there"}},
		{"ALTER TABLE `db`.`t` CHANGE COLUMN `gone` `c` INT", differs, []string{"column `c` differs"}},
		{"ALTER TABLE `db`.`t` RENAME COLUMN `gone` TO `c`", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ALTER COLUMN `n` SET DEFAULT 5", same, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ALTER COLUMN `n` SET DEFAULT 7", differs, []string{"default"}},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), ALTER COLUMN `c` DROP DEFAULT", unknown, nil},
		{"ALTER TABLE `db`.`t` ALTER COLUMN `n` DROP DEFAULT", differs, []string{"no default"}},
		{"ALTER TABLE `db`.`t` ALTER COLUMN `p` DROP DEFAULT", same, nil},

		// Keys.
		{"ALTER TABLE `db`.`t` ADD INDEX `kc` (`c`(2), `n`)", same, nil},
		{"ALTER TABLE `db`.`t` ADD INDEX `kc` (`c`)", differs, []string{"key `kc` differs", "KEY `kc` (`c`(2),`n`)", "KEY `kc` (`c`)"}},
		{"ALTER TABLE `db`.`t` ADD UNIQUE KEY `kc` (`c`(2), `n`)", differs, []string{"key `kc` differs"}},
		{"CREATE INDEX `kc` ON `db`.`t` (`c`(2), `N`)", same, nil},
		{"CREATE UNIQUE INDEX `uv` ON `db`.`t` (`v`)", same, nil},
		{"CREATE INDEX `uv` ON `db`.`t` (`v`)", differs, []string{"UNIQUE KEY `uv` (`v`)"}},
		{"ALTER TABLE `db`.`t` ADD FULLTEXT INDEX `ft` (`s`), ADD INDEX (`p`)", same, nil},
		{"ALTER TABLE `db`.`t` ADD PRIMARY KEY (`id`)", same, nil},
		{"ALTER TABLE `db`.`t` ADD PRIMARY KEY (`id`, `n`)", differs, []string{"PRIMARY KEY (`id`)"}},
		{"ALTER TABLE `db`.`t` ADD INDEX IF NOT EXISTS `kc` (`x`), ADD INDEX `p` (`p`)", same, nil},
		{"ALTER TABLE `db`.`t` RENAME INDEX `gone` TO `kc`", same, nil},
		{"ALTER TABLE `db`.`t` ADD CONSTRAINT `fk` FOREIGN KEY (`p`) REFERENCES `parent` (`id`) ON DELETE CASCADE", same, nil},
		{"ALTER TABLE `db`.`t` ADD CONSTRAINT `fk` FOREIGN KEY (`p`) REFERENCES `parent` (`id`)", differs, []string{"foreign key `fk` differs"}},

		// CREATE TABLE: the same columns and keys.
		{"CREATE TABLE `db`.`other` (`id` INT)", same, nil},
		{"CREATE TABLE `db`.`other` (`id` INT) DEFAULT CHARSET=latin1", same, nil},
		{"CREATE TABLE `db`.`other` (`id` INT, `v` INT)", differs, []string{"column `v` is not there"}},
		{"CREATE TABLE `db`.`other` (`id` INT PRIMARY KEY)", differs, []string{"NULL downstream, NOT NULL"}},
		{"CREATE TABLE `db`.`other` (`id` BIGINT)", differs, []string{"type int downstream, bigint"}},
		{"CREATE TABLE `db`.`other` (`id` INT, KEY (`id`))", differs, []string{"no KEY on (`id`)"}},
		{"CREATE TABLE `db`.`other` LIKE `db`.`t`", unknown, nil},
		{"CREATE TABLE `db`.`gone` (`id` INT)", differs, []string{"`db`.`gone` is not there"}},
		{"CREATE TABLE `db`.`t` (`id` INT NOT NULL PRIMARY KEY)", differs, []string{"column `v` is there, the statement does not define it"}},
		{"CREATE DATABASE `other`", same, nil},
		{"CREATE DATABASE `gone`", differs, nil},
		{"RENAME TABLE `db`.`gone` TO `db`.`other`", same, nil},
		{"RENAME TABLE `db`.`t` TO `db`.`other`", differs, []string{"`db`.`t` is still there"}},

		// What cannot be read is not "applied".
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` INT; ALTER TABLE `db`.`t` ADD COLUMN `d` INT", unknown, nil},
		{"ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(5), PARTITION BY HASH(id) PARTITIONS 2", unknown, nil},
		{"ALTER TABLE `db`.`nope` ADD COLUMN `c` VARCHAR(5)", differs, []string{"`db`.`nope` is not there"}},
		{"TRUNCATE TABLE `db`.`t`", unknown, nil},
	} {
		got := CompareWithDownstream(c.ddl, down)
		verdict := unknown
		if got.Known {
			verdict = map[bool]string{true: same, false: differs}[got.Same]
		}
		if verdict != c.want {
			t.Errorf("%s: %s (%s; have %q, want %q); want %s", c.ddl, verdict, got.Reason, got.Have, got.Want, c.want)
			continue
		}
		all := got.Reason + "\n" + got.Have + "\n" + got.Want
		for _, s := range c.says {
			if !strings.Contains(all, s) {
				t.Errorf("%s: the answer does not say %q:\n%s", c.ddl, s, all)
			}
		}
	}
}

// A definition the parser cannot read cannot be compared.
func TestCompareWithUnreadableDefinition(t *testing.T) {
	down := Downstream{Tables: map[vocab.TableName]string{{Schema: "db", Name: "t"}: "CREATE TABLE `t` (\n  `c` inet6 DEFAULT NULL\n) ENGINE=InnoDB"}}
	if got := CompareWithDownstream("ALTER TABLE `db`.`t` ADD COLUMN `c` INT", down); got.Known || !strings.Contains(got.Reason, "cannot be read") {
		t.Fatalf("%+v, want unknown: the definition cannot be read", got)
	}
}

// MariaDB writes UPPER(x) of a generated column as ucase(x): the same expression.
func TestCanonicalFuncs(t *testing.T) {
	for in, want := range map[string]string{
		"ucase(`c`)":                  "upper(`c`)",
		"upper(lcase(`a`))":           "upper(lower(`a`))",
		"concat(`ucase`, mid(`b`,1))": "concat(`ucase`, substr(`b`,1))",
		"`my_ucase`(`a`)":             "`my_ucase`(`a`)",
		"xucase(`a`)":                 "xucase(`a`)",
	} {
		if got := canonicalFuncs(in); got != want {
			t.Errorf("canonicalFuncs(%q) = %q, want %q", in, got, want)
		}
	}
}
