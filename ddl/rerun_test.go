package ddl

import (
	"slices"
	"testing"
)

// TestEffects: which DDLs an owner may run with no definition read first, and what each leaves on its
// table (worker's TestEffectsOnTheServer checks the claims against MariaDB).
func TestEffects(t *testing.T) {
	col := func(name string, present bool) Effect { return Effect{Name: name, Present: present} }
	idx := func(name string, present bool) Effect { return Effect{Index: true, Name: name, Present: present} }
	for _, c := range []struct {
		sql     string
		effects []Effect // nil: not ok
	}{
		{"ALTER TABLE `d`.`t` ADD COLUMN `c` INT", []Effect{col("c", true)}},
		{"ALTER TABLE d.t ADD COLUMN c INT NOT NULL DEFAULT 0 AFTER id, ADD COLUMN J JSON", []Effect{col("c", true), col("J", true)}},
		{"ALTER TABLE d.t ADD COLUMN (a INT, b VARCHAR(8))", []Effect{col("a", true), col("b", true)}},
		{"ALTER TABLE d.t ADD COLUMN g BIGINT AS (id * 2) VIRTUAL", []Effect{col("g", true)}},
		{"ALTER TABLE d.t ADD COLUMN u INT UNIQUE", []Effect{col("u", true)}}, // the column's own error comes first
		{"ALTER TABLE d.t DROP COLUMN c", []Effect{col("c", false)}},
		{"ALTER TABLE d.t ADD INDEX i (c), ADD UNIQUE KEY u (c, id), ADD FULLTEXT INDEX f (s)", []Effect{idx("i", true), idx("u", true), idx("f", true)}},
		{"ALTER TABLE d.t DROP INDEX i, DROP PRIMARY KEY", []Effect{idx("i", false), idx("PRIMARY", false)}},
		{"ALTER TABLE d.t DROP KEY `PRIMARY`", []Effect{idx("PRIMARY", false)}},
		{"ALTER TABLE d.t ADD COLUMN c INT, MODIFY COLUMN v BIGINT UNSIGNED NULL, ALTER COLUMN w SET DEFAULT 'x'", []Effect{col("c", true)}},
		{"ALTER TABLE d.t DROP COLUMN c, ALTER COLUMN v DROP DEFAULT", []Effect{col("c", false)}},
		{"ALTER TABLE d.t ADD COLUMN c INT, ALGORITHM=INSTANT, LOCK=NONE", []Effect{col("c", true)}},

		{"ALTER TABLE d.t MODIFY COLUMN c BIGINT", nil}, // harmless twice, but nothing tells whether it ran
		{"ALTER TABLE d.t ALTER COLUMN v DROP DEFAULT", nil},
		{"ALTER TABLE d.t ADD COLUMN IF NOT EXISTS c INT", nil},
		{"ALTER TABLE d.t DROP COLUMN IF EXISTS c", nil},
		{"ALTER TABLE d.t ADD INDEX IF NOT EXISTS i (c)", nil},
		{"ALTER TABLE d.t DROP INDEX IF EXISTS i", nil},
		{"ALTER TABLE d.t DROP COLUMN IF EXISTS c, ADD COLUMN c INT", nil}, // a second run drops c's values again
		{"ALTER TABLE d.t ADD INDEX (c)", nil},                             // a second run adds c_2
		{"ALTER TABLE d.t ADD COLUMN c INT, ADD INDEX (c)", nil},
		{"ALTER TABLE d.t ADD PRIMARY KEY (id)", nil},                                // 1068, not "already applied"
		{"ALTER TABLE d.t ADD CONSTRAINT ck CHECK (c > 0)", nil},                     // MariaDB 1826, MySQL 8 3822
		{"ALTER TABLE d.t ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES p (id)", nil}, // names a second table
		{"ALTER TABLE d.t DROP FOREIGN KEY fk", nil},
		{"ALTER TABLE d.t RENAME COLUMN a TO b", nil},
		{"ALTER TABLE d.t CHANGE a b INT", nil},
		{"ALTER TABLE d.t RENAME INDEX i TO j", nil},
		{"ALTER TABLE d.t RENAME TO d.u", nil},
		{"ALTER TABLE d.t COMMENT 'x'", nil},
		{"ALTER TABLE d.t ENGINE = InnoDB", nil},
		{"ALTER TABLE d.t AUTO_INCREMENT = 100", nil},
		{"ALTER TABLE d.t DROP PARTITION p0", nil},
		{"ALTER TABLE d.t ADD PARTITION (PARTITION p9 VALUES LESS THAN (900))", nil},
		{"CREATE TABLE d.t (id INT)", nil},
		{"DROP TABLE d.t", nil},
		{"TRUNCATE TABLE d.t", nil},
		{"RENAME TABLE d.t TO d.u", nil},
		{"CREATE INDEX i ON d.t (c)", nil},
		{"ALTER TABLE d.t ADD COLUMN c INT; ALTER TABLE d.t ADD COLUMN e INT", nil},
		{"ALTER TABLE d.t ADD COLUMN c INT,", nil}, // does not parse
		{"", nil},
	} {
		effects, ok := Effects(c.sql)
		if ok != (c.effects != nil) || !slices.Equal(effects, c.effects) {
			t.Errorf("Effects(%q) = %+v %v, want %+v", c.sql, effects, ok, c.effects)
		}
	}
}
