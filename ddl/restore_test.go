package ddl

import (
	"strings"
	"testing"
)

// The restore of the forms whose TiDB restore MariaDB refuses or reads differently (issue 9). The
// real-server check of every form is worker's TestRestoreDefinitions.
func TestRestoreForDownstream(t *testing.T) {
	cases := []struct{ name, sql, want string }{
		{
			name: "MariaDB JSON column: CHECK without ENFORCED",
			sql:  "CREATE TABLE `t` (\n  `js` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`js`))\n) ENGINE=InnoDB",
			want: "CREATE TABLE `db`.`t` (`js` LONGTEXT CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin DEFAULT NULL CHECK(JSON_VALID(`js`))) ENGINE = InnoDB",
		},
		{
			name: "table-level CHECK, named and not, ENFORCED written or not",
			sql:  "CREATE TABLE t (a int, CONSTRAINT c1 CHECK (a > 0) ENFORCED, CHECK (a < 10), CONSTRAINT `c 3` CHECK (a <> 5))",
			want: "CREATE TABLE `db`.`t` (`a` INT,CONSTRAINT `c1` CHECK(`a`>0),CHECK(`a`<10),CONSTRAINT `c 3` CHECK(`a`!=5))",
		},
		{
			name: "ADD CONSTRAINT CHECK",
			sql:  "ALTER TABLE t ADD CONSTRAINT ck CHECK (a > -100), ADD COLUMN k int CHECK (k <> 0)",
			want: "ALTER TABLE `db`.`t` ADD CONSTRAINT `ck` CHECK(`a`>-100), ADD COLUMN `k` INT CHECK(`k`!=0)",
		},
		{
			name: "NOT ENFORCED is the user's (MySQL only): kept",
			sql:  "CREATE TABLE t (a int CHECK (a > 0) NOT ENFORCED, CONSTRAINT c CHECK (a < 9) NOT ENFORCED)",
			want: "CREATE TABLE `db`.`t` (`a` INT CHECK(`a`>0) NOT ENFORCED,CONSTRAINT `c` CHECK(`a`<9) NOT ENFORCED)",
		},
		{
			name: "ENFORCED, DROP CHECK and comments in strings and names are left alone",
			sql:  "CREATE TABLE t (a varchar(20) DEFAULT ' ENFORCED' COMMENT 'DROP CHECK /* x */', ` ENFORCED` int CHECK (` ENFORCED` > 0), e enum(')',' ENFORCED','ENFORCED'), CONSTRAINT `) ` CHECK (a <> 'ENFORCED'))",
			want: "CREATE TABLE `db`.`t` (`a` VARCHAR(20) DEFAULT ' ENFORCED' COMMENT 'DROP CHECK /* x */',` ENFORCED` INT CHECK(` ENFORCED`>0),`e` ENUM(')',' ENFORCED','ENFORCED'),CONSTRAINT `) ` CHECK(`a`!='ENFORCED'))",
		},
		{
			name: "DROP CONSTRAINT (the parser says DROP CHECK, which MariaDB refuses)",
			sql:  "ALTER TABLE t DROP CONSTRAINT c1, DROP CHECK c2",
			want: "ALTER TABLE `db`.`t` DROP CONSTRAINT `c1`, DROP CONSTRAINT `c2`",
		},
		{
			name: "FORCE without the parser's comment",
			sql:  "ALTER TABLE t FORCE",
			want: "ALTER TABLE `db`.`t` FORCE",
		},
		{
			name: "backslashes stay escaped",
			sql:  `CREATE TABLE t (a varchar(10) DEFAULT 'x\\y''z' COMMENT 'C:\\p', e enum('c\\d'), s varchar(5) CHECK (s LIKE 'a\\_%'))`,
			want: "CREATE TABLE `db`.`t` (`a` VARCHAR(10) DEFAULT 'x\\\\y''z' COMMENT 'C:\\\\p',`e` ENUM('c\\\\d'),`s` VARCHAR(5) CHECK(`s` LIKE 'a\\\\_%'))",
		},
		{
			name: "control characters as escapes",
			sql:  `CREATE TABLE t (a varchar(10) DEFAULT 'a\0b\nc\rd\Ze	f')`,
			want: "CREATE TABLE `db`.`t` (`a` VARCHAR(10) DEFAULT 'a\\0b\\nc\\rd\\Ze\tf')",
		},
		{
			name: "no _utf8mb4 introducer (the server would keep it in an expression); others kept",
			sql:  "CREATE TABLE t (a int, c varchar(20) AS (concat(a, 'x', _latin1'y', _binary'z')) STORED)",
			want: "CREATE TABLE `db`.`t` (`a` INT,`c` VARCHAR(20) GENERATED ALWAYS AS(CONCAT(`a`, 'x', _LATIN1'y', _BINARY'z')) STORED)",
		},
		{
			name: "hexadecimal literals as 0x (MariaDB reads X'10' as a string even for an INT)",
			sql:  "CREATE TABLE t (a int DEFAULT 0x10, b int DEFAULT X'20', c varbinary(4) DEFAULT 0x414243, d varchar(2) DEFAULT x'', e bit(3) DEFAULT b'101')",
			want: "CREATE TABLE `db`.`t` (`a` INT DEFAULT 0x10,`b` INT DEFAULT 0x20,`c` VARBINARY(4) DEFAULT 0x414243,`d` VARCHAR(2) DEFAULT x'',`e` BIT(3) DEFAULT b'101')",
		},
		{
			name: "floats as written",
			sql:  "CREATE TABLE t (a double DEFAULT 1.5e300, b double AS (a * 1e-5 + 2.5e10) VIRTUAL)",
			want: "CREATE TABLE `db`.`t` (`a` DOUBLE DEFAULT 1.5e300,`b` DOUBLE GENERATED ALWAYS AS(`a`*1e-5+2.5e10) VIRTUAL)",
		},
		{
			name: "ENUM and SET keep their charset",
			sql:  "CREATE TABLE t (e enum('é','ü') CHARACTER SET latin1 DEFAULT 'ü', s set('a') CHARSET utf8mb4 COLLATE utf8mb4_bin, f enum('x') COLLATE latin1_bin, g enum('y') BINARY)",
			want: "CREATE TABLE `db`.`t` (`e` ENUM('é','ü') CHARACTER SET latin1 DEFAULT 'ü',`s` SET('a') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,`f` ENUM('x') COLLATE latin1_bin,`g` ENUM('y') BINARY)",
		},
		{
			name: "ENUM charset in ALTER TABLE",
			sql:  "ALTER TABLE t ADD COLUMN e enum('x') CHARACTER SET latin1, MODIFY s set('a','b') CHARACTER SET ascii NOT NULL",
			want: "ALTER TABLE `db`.`t` ADD COLUMN `e` ENUM('x') CHARACTER SET latin1, MODIFY COLUMN `s` SET('a','b') CHARACTER SET ascii NOT NULL",
		},
		{
			name: "TiDB syntax in /*T! */ comments, which MariaDB and MySQL ignored",
			sql:  "CREATE TABLE t (id bigint PRIMARY KEY /*T![clustered_index] CLUSTERED */, r bigint /*T![auto_rand] AUTO_RANDOM(5) */, KEY k (r) /*T![global_index] GLOBAL */) /*T! SHARD_ROW_ID_BITS=4 PRE_SPLIT_REGIONS=2 */ /*T![auto_id_cache] AUTO_ID_CACHE=1 */ /*T![placement] PLACEMENT POLICY=p1 */ COMMENT='c'",
			want: "CREATE TABLE `db`.`t` (`id` BIGINT PRIMARY KEY,`r` BIGINT,INDEX `k`(`r`)) COMMENT = 'c'",
		},
		{
			name: "table-level NONCLUSTERED primary key",
			sql:  "CREATE TABLE t (id int, PRIMARY KEY (id) /*T![clustered_index] NONCLUSTERED */)",
			want: "CREATE TABLE `db`.`t` (`id` INT,PRIMARY KEY(`id`))",
		},
		{
			name: "TTL",
			sql:  "CREATE TABLE t (ts datetime) /*T![ttl] TTL=`ts` + INTERVAL 1 DAY TTL_ENABLE='OFF' */",
			want: "CREATE TABLE `db`.`t` (`ts` DATETIME)",
		},
		{
			name: "ALTER TABLE with TiDB options only: the no-op the upstream ran",
			sql:  "ALTER TABLE t /*T! SHARD_ROW_ID_BITS=4 */",
			want: "ALTER TABLE `db`.`t`",
		},
		{
			name: "ALTER TABLE keeps its other options",
			sql:  "ALTER TABLE t COMMENT='x' /*T! SHARD_ROW_ID_BITS=4 */, /*T![force_inc] FORCE */ AUTO_INCREMENT = 10",
			want: "ALTER TABLE `db`.`t` COMMENT = 'x', AUTO_INCREMENT = 10",
		},
		{
			name: "CREATE DATABASE with a placement policy",
			sql:  "CREATE DATABASE d CHARACTER SET latin1 /*T![placement] PLACEMENT POLICY=p1 */",
			want: "CREATE DATABASE `d` CHARACTER SET = latin1",
		},
		{
			name: "MariaDB's own forms pass through",
			sql:  "ALTER TABLE t ADD COLUMN IF NOT EXISTS a int, DROP COLUMN IF EXISTS b, DROP INDEX IF EXISTS i, ALGORITHM=INPLACE, LOCK=NONE",
			want: "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `a` INT, DROP COLUMN IF EXISTS `b`, DROP INDEX IF EXISTS `i`, ALGORITHM = INPLACE, LOCK = NONE",
		},
		{
			name: "a /*M! comment in a string is a string",
			sql:  "CREATE TABLE t (a int COMMENT '/*M!100100 x */')",
			want: "CREATE TABLE `db`.`t` (`a` INT COMMENT '/*M!100100 x */')",
		},
		{
			name: "national in a quoted name is a name",
			sql:  "CREATE TABLE t (`national` char(3), `nchar` int)",
			want: "CREATE TABLE `db`.`t` (`national` CHAR(3),`nchar` INT)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts, err := Split(c.sql, "db", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 1 || parts[0].SQL != c.want {
				t.Fatalf("Split(%+v):\n got %+v\nwant %+v", c.sql, parts, c.want)
			}
			// A restored statement restores to itself.
			again, err := Split(parts[0].SQL, "", nil)
			if err != nil || len(again) != 1 || again[0].SQL != c.want {
				t.Fatalf("Split of the restore %q: %+v %v", c.want, again, err)
			}
			if strings.HasPrefix(c.want, "CREATE TABLE") {
				got, err := CreateIfNotExists(c.sql)
				want := "CREATE TABLE IF NOT EXISTS " + strings.TrimPrefix(c.want, "CREATE TABLE ")
				want = strings.Replace(want, "`db`.", "", 1)
				if err != nil || got != want {
					t.Fatalf("CreateIfNotExists(%q):\n got %q %v\nwant %q", c.sql, got, err, want)
				}
			}
		})
	}
}

// Forms that cannot be restored as the upstream ran them: an error that names the statement.
func TestRestoreRefuses(t *testing.T) {
	cases := []struct{ sql, want string }{
		{"CREATE TABLE t (a int) STATS_PERSISTENT=0", "STATS_PERSISTENT"},
		{"ALTER TABLE t STATS_PERSISTENT=1", "STATS_PERSISTENT"},
		{"CREATE TABLE t (a int) PACK_KEYS=1", "PACK_KEYS"},
		{"ALTER IGNORE TABLE t ADD UNIQUE KEY (a)", "ALTER IGNORE"},
		{"alter /* x */ ignore table t add column c int", "ALTER IGNORE"},
		{"CREATE TABLE t (bl blob /*M!100301 COMPRESSED*/ DEFAULT NULL)", "/*M!100301 COMPRESSED*/"},
		{"CREATE TABLE t (a int) /*M!100100 COMMENT='m' */", "/*M!100100"},
		{"CREATE TABLE t (a national char(3))", "national charset"},
		{"CREATE TABLE t (a nvarchar(3))", "national charset"},
		{"ALTER TABLE t ADD COLUMN a nchar(3)", "national charset"},
		{"CREATE TABLE t (id int) PARTITION BY RANGE (id) INTERVAL (10) FIRST PARTITION LESS THAN (10) LAST PARTITION LESS THAN (100)", "INTERVAL partitioning"},
	}
	for _, c := range cases {
		_, err := Split(c.sql, "db", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "DDL") {
			t.Errorf("Split(%q): %v; want an error naming the statement and %q", c.sql, err, c.want)
		}
	}
	if _, err := CreateIfNotExists("CREATE TABLE t (a int) STATS_PERSISTENT=0"); err == nil || !strings.Contains(err.Error(), "STATS_PERSISTENT") {
		t.Errorf("CreateIfNotExists with STATS_PERSISTENT: %v", err)
	}
}

// The writer's rewrites apply to the parser's writes only, never to the text of a string or a name.
func TestFlavorWriter(t *testing.T) {
	w := &flavorWriter{}
	for _, s := range []string{"CHECK", "(", "`", " ENFORCED", "`", ")", " ENFORCED", ", ", "'", "DROP CHECK ", "'", " ", "DROP CHECK ", "`", "x'41'", "`", " ", "x'41'"} {
		w.WriteString(s)
	}
	if got, want := string(w.buf), "CHECK(` ENFORCED`), 'DROP CHECK ' DROP CONSTRAINT `x'41'` 0x41"; got != want || w.err != nil {
		t.Fatalf("got %q (%v), want %q", got, w.err, want)
	}
	w = &flavorWriter{}
	w.WriteString("STATS_PERSISTENT = DEFAULT")
	w.WriteString(" /* TableOptionStatsPersistent is not supported */ ")
	if w.err == nil {
		t.Fatal("a \"not supported\" comment must be an error")
	}
}
