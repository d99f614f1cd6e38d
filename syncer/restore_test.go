package syncer

import (
	"database/sql"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
	"github.com/tributary-db/tributary/vocab"
)

// The restore of DDL checked against real servers: every table form a user has is created on an
// upstream MariaDB, its SHOW CREATE TABLE (what a syncer reads at start) and the statement itself (what
// the binlog carries) go through ddl.Split with a route to other names, then
// ddl.CreateIfNotExists, and run on a downstream MariaDB with a dm-worker's session. Both
// definitions must then be equal but for the names. ALTER TABLE forms run upstream, are split and run
// downstream, and the definitions are compared after each. The forms the parser cannot read, or that
// cannot be restored faithfully, must give an error from Split.

// restoreCreates are the table forms. They run in this order (foreign keys need their parents).
var restoreCreates = []struct{ name, table, sql string }{
	{"integers", "ints", "CREATE TABLE ints (id int NOT NULL AUTO_INCREMENT, t tinyint, tu tinyint unsigned, tz tinyint(3) unsigned zerofill, s smallint DEFAULT -32768, su smallint unsigned DEFAULT 65535, sz smallint(5) zerofill, m mediumint, mu mediumint unsigned, i int(11) DEFAULT -1, iu int unsigned, iz int(8) zerofill DEFAULT 42, b bigint DEFAULT -9223372036854775808, bu bigint unsigned DEFAULT 18446744073709551615, bz bigint(20) unsigned zerofill, bo boolean DEFAULT true, hx int DEFAULT 0x10, PRIMARY KEY (id)) AUTO_INCREMENT=1000"},
	{"decimals, floats and bits", "nums", "CREATE TABLE nums (id int PRIMARY KEY, d decimal(65,30) DEFAULT 0.000000000000000000000000000001, d2 decimal(10,2) unsigned DEFAULT '12.50', d3 decimal DEFAULT -1.5, f float, f2 float(7,3) DEFAULT 1.5, f3 float DEFAULT 0.1, dbl double DEFAULT 1.5e300, dbl2 double(16,4) DEFAULT -2.5e10, dbl3 double DEFAULT 1e-5, r real, bt bit(1) DEFAULT b'1', bt8 bit(8) DEFAULT b'10100101', bt64 bit(64) DEFAULT b'0')"},
	{"temporal", "times", "CREATE TABLE times (id int PRIMARY KEY, dt date DEFAULT '2020-01-01', dtt datetime(6) NOT NULL DEFAULT current_timestamp(6) ON UPDATE current_timestamp(6), dt0 datetime DEFAULT '0000-00-00 00:00:00', dtn datetime DEFAULT now(), ts timestamp(6) NOT NULL DEFAULT current_timestamp(6) ON UPDATE current_timestamp(6), ts2 timestamp NULL DEFAULT NULL, ts3 timestamp NOT NULL DEFAULT '2020-01-01 00:00:00', tm time(3) DEFAULT '12:34:56.789', tm0 time DEFAULT '-838:59:59', y year DEFAULT 2024, cd date DEFAULT curdate())"},
	{"character strings", "strs", "CREATE TABLE strs (id int PRIMARY KEY, c char(10) CHARACTER SET latin1 COLLATE latin1_general_cs DEFAULT 'abc', c0 char(0), v varchar(255) COLLATE utf8mb4_bin NOT NULL DEFAULT '', v2 varchar(100) CHARACTER SET latin1 DEFAULT 'café', v3 varchar(60) DEFAULT 'back\\\\slash, ''single'' and \"double\"', v4 varchar(10) DEFAULT 'a\\0b', v5 varchar(20) DEFAULT 'line\\nbreak\\ttab\\r', v6 varchar(20) CHARACTER SET utf8mb4 DEFAULT '日本語 ✓', v7 varchar(20) CHARACTER SET ascii COLLATE ascii_bin, v8 varchar(20) CHARACTER SET utf8mb3, v9 varchar(20) COLLATE utf8mb4_unicode_ci, v10 varchar(10) CHARACTER SET binary, v11 varchar(20) DEFAULT ' ENFORCED', t text, tt tinytext CHARACTER SET latin1, mt mediumtext COLLATE utf8mb4_unicode_520_ci, lt longtext, td text DEFAULT 'x''y', cb char(5) BINARY) DEFAULT CHARSET=latin1"},
	{"binary strings", "bins", "CREATE TABLE bins (id int PRIMARY KEY, b binary(4) DEFAULT 'ab', b0 binary(3) DEFAULT 0x4142, vb varbinary(16) DEFAULT 'xyz', bl blob, tb tinyblob, mb mediumblob, lb longblob, bd blob DEFAULT 'q')"},
	{"enum and set", "enums", "CREATE TABLE enums (id int PRIMARY KEY, e enum('a','b''s','c\\\\d','x,y','') NOT NULL DEFAULT 'b''s', s set('r','w','x') DEFAULT 'r,w', e2 enum('é','ü') CHARACTER SET latin1 DEFAULT 'ü', e3 enum('ENFORCED',' ENFORCED','DROP CHECK ') COLLATE utf8mb4_bin)"},
	{"JSON", "jsons", "CREATE TABLE jsons (id int PRIMARY KEY, js json, js2 json NOT NULL DEFAULT '{}', js3 longtext CHECK (json_valid(js3)), js4 longtext COLLATE utf8mb4_bin CHECK (js4 IS NULL OR json_valid(js4)))"},
	{"generated columns", "gens", "CREATE TABLE gens (id int PRIMARY KEY, a int, s varchar(20), dt date, js json, b int GENERATED ALWAYS AS (a * 2) VIRTUAL, c varchar(40) AS (concat(s, '-', a)) STORED, d varchar(20) AS (json_unquote(json_extract(js, '$.name'))) VIRTUAL, e int AS (json_extract(js, '$.n')) STORED, f varchar(10) AS (upper(left(s, 3))) VIRTUAL, g date AS (dt + interval 1 day) VIRTUAL, h int AS (if(a > 0, 1, 0)) VIRTUAL, i varchar(10) AS (case when a > 1 then 'big' else 'small' end) VIRTUAL, j int AS (a div 2 + a mod 3) PERSISTENT, k varchar(20) AS (substr(s, 2, 3)) VIRTUAL, l varchar(20) AS (s collate utf8mb4_bin) VIRTUAL, m varchar(30) AS (concat(s, _latin1'x', 'back\\\\slash')) VIRTUAL, n varchar(20) AS (cast(a as char)) VIRTUAL, o double AS (a / 3) VIRTUAL, p int AS (a << 2 | 1) VIRTUAL, q varchar(20) AS (replace(trim(s), 'a', 'b')) VIRTUAL, r varchar(20) AS (date_format(dt, '%Y-%m')) VIRTUAL, KEY kb (b), KEY ke (e))"},
	{"comments", "comments", "CREATE TABLE comments (id int PRIMARY KEY COMMENT 'it''s a \"quote\" and a back\\\\slash', b int COMMENT 'ünïcødé ✓ 日本', c int COMMENT '', d int COMMENT '/* not a comment */ -- nor this', e int COMMENT 'ENFORCED') COMMENT='table ''comment'' ✓'"},
	{"defaults", "defs", "CREATE TABLE defs (id int PRIMARY KEY, a varchar(36) DEFAULT uuid(), b double DEFAULT rand(), c varchar(10) DEFAULT concat('a', 'b'), d int DEFAULT abs(-3), e varchar(10) DEFAULT lcase('X'), f int NOT NULL, g varchar(5) DEFAULT NULL, h datetime DEFAULT current_timestamp() ON UPDATE current_timestamp())"},
	{"indexes", "idx", "CREATE TABLE idx (a int NOT NULL, b int NOT NULL, c varchar(100), d varchar(200), e int, t text, bl blob, PRIMARY KEY (a, b), UNIQUE KEY uc (c), KEY kde (d, e), KEY kp (d(10)), KEY kdesc (a DESC, b ASC), FULLTEXT KEY ft (t), FULLTEXT KEY ft2 (c, d), KEY kcomment (e) COMMENT 'idx ''comment''', KEY kbtree (e, a) USING BTREE, UNIQUE KEY ulong (bl), UNIQUE KEY uhash (t) USING HASH, KEY `ENFORCED` (c))"},
	{"no primary key", "nopk", "CREATE TABLE nopk (a int, b varchar(10), KEY (a))"},
	{"foreign key parent", "parent", "CREATE TABLE parent (id int PRIMARY KEY, code varchar(10) NOT NULL, UNIQUE KEY (code))"},
	{"foreign keys", "child", "CREATE TABLE child (id int PRIMARY KEY, pid int, pcode varchar(10), self int, CONSTRAINT fk_parent FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE ON UPDATE SET NULL, FOREIGN KEY (pcode) REFERENCES parent (code) ON UPDATE CASCADE, CONSTRAINT fk_self FOREIGN KEY (self) REFERENCES child (id) ON DELETE RESTRICT)"},
	{"table options compressed", "opts1", "CREATE TABLE opts1 (id int PRIMARY KEY) ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_bin COMMENT='opts' ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"},
	{"table options redundant", "opts2", "CREATE TABLE opts2 (id int PRIMARY KEY, v varchar(10)) ENGINE=InnoDB ROW_FORMAT=REDUNDANT DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci STATS_AUTO_RECALC=0 STATS_SAMPLE_PAGES=10"},
	{"table options MyISAM", "opts3", "CREATE TABLE opts3 (id int PRIMARY KEY, v varchar(10)) ENGINE=MyISAM CHECKSUM=1 DELAY_KEY_WRITE=1 MAX_ROWS=1000 MIN_ROWS=10 AVG_ROW_LENGTH=100 ROW_FORMAT=FIXED"},
	{"table options charset only", "opts4", "CREATE TABLE opts4 (id int PRIMARY KEY, v varchar(10) CHARACTER SET utf8mb4) CHARSET=utf8mb3"},
	{"check constraints", "checks", "CREATE TABLE checks (id int PRIMARY KEY, a int CHECK (a >= 0), b int, s varchar(20) CHECK (s <> 'ENFORCED'), r varchar(20) CHECK (r regexp '^[a-z]+$'), u varchar(10) CHECK (u like 'x\\\\_%'), CONSTRAINT c_ab CHECK (a < b), CHECK (a + b < 100), CONSTRAINT `) ` CHECK (b <> 0), CONSTRAINT `ENFORCED` CHECK (b IS NOT NULL))"},
	{"partition by range", "prange", "CREATE TABLE prange (id int NOT NULL, d date NOT NULL, PRIMARY KEY (id, d)) PARTITION BY RANGE (year(d)) (PARTITION p2020 VALUES LESS THAN (2021) COMMENT 'old', PARTITION p2021 VALUES LESS THAN (2022), PARTITION pmax VALUES LESS THAN MAXVALUE)"},
	{"partition by range columns", "prangec", "CREATE TABLE prangec (a int NOT NULL, s varchar(10) NOT NULL) PARTITION BY RANGE COLUMNS (a, s) (PARTITION p0 VALUES LESS THAN (10, 'm'), PARTITION p1 VALUES LESS THAN (MAXVALUE, MAXVALUE))"},
	{"partition by list", "plist", "CREATE TABLE plist (id int, region int) PARTITION BY LIST (region) (PARTITION pa VALUES IN (1, 2, 3), PARTITION pb VALUES IN (4, 5, NULL))"},
	{"partition by list columns", "plistc", "CREATE TABLE plistc (id int, c varchar(5)) PARTITION BY LIST COLUMNS (c) (PARTITION pa VALUES IN ('a', 'b'), PARTITION pb VALUES IN ('c''d'))"},
	{"partition by hash", "phash", "CREATE TABLE phash (id int PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4"},
	{"partition by linear hash", "plhash", "CREATE TABLE plhash (id int PRIMARY KEY) PARTITION BY LINEAR HASH (id mod 7) PARTITIONS 3"},
	{"partition by key", "pkey", "CREATE TABLE pkey (id int PRIMARY KEY, v int) PARTITION BY KEY (id) PARTITIONS 2"},
	{"subpartitions", "psub", "CREATE TABLE psub (id int NOT NULL, d date NOT NULL) PARTITION BY RANGE (year(d)) SUBPARTITION BY HASH (id) SUBPARTITIONS 2 (PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE)"},
	{"inline keys", "inline", "CREATE TABLE inline (id serial, a int UNIQUE KEY, b int PRIMARY KEY, d varchar(5) UNIQUE)"},
	{"expressions", "exprs", "CREATE TABLE exprs (id int PRIMARY KEY, a int, b int, s varchar(20), d date, dt datetime(3), " +
		"g1 int AS (a <=> b) VIRTUAL, g2 int AS (a IS NOT TRUE) VIRTUAL, g3 int AS (NOT (a BETWEEN 1 AND 2)) VIRTUAL, g4 int AS (a IN (1, 2) OR b NOT IN (3)) VIRTUAL, " +
		"g5 int AS (s NOT LIKE 'x%' AND s LIKE 'a\\_b' AND s LIKE '%|%%' ESCAPE '|') VIRTUAL, g6 int AS (-a + ~b ^ (a XOR b)) VIRTUAL, g7 int AS (s REGEXP '^a.*' OR s RLIKE 'b$') VIRTUAL, " +
		"g8 int AS (coalesce(a, ifnull(b, nullif(a, 0)))) VIRTUAL, g9 int AS (greatest(a, b) - least(a, b)) VIRTUAL, g10 decimal(10,2) AS (round(a / 3, 2) + truncate(b, 1)) VIRTUAL, " +
		"g11 bigint AS (cast(a AS unsigned) + cast(b AS signed)) VIRTUAL, g12 decimal(10,2) AS (cast(s AS decimal(10,2))) VIRTUAL, g13 date AS (cast(dt AS date)) VIRTUAL, g14 datetime(6) AS (cast(d AS datetime(6))) VIRTUAL, " +
		"g15 varbinary(20) AS (cast(s AS binary)) VIRTUAL, g16 varchar(20) AS (convert(s, char)) VIRTUAL, g17 varchar(20) AS (convert(s USING latin1)) VIRTUAL, g18 varchar(20) AS (s COLLATE utf8mb4_bin) VIRTUAL, " +
		"g19 int AS (char_length(s) + locate('a', s) + position('b' IN s)) VIRTUAL, g20 varchar(40) AS (concat_ws(',', lpad(s, 5, '0'), trim(LEADING 'x' FROM s), substring(s FROM 2 FOR 3))) VIRTUAL, " +
		"g21 int AS (extract(YEAR FROM d) + timestampdiff(DAY, d, dt)) VIRTUAL, g22 date AS (date_add(d, INTERVAL 1 MONTH) - INTERVAL 2 DAY) VIRTUAL, g23 varchar(100) AS (json_object('a', a, 'b', json_array(a, b))) VIRTUAL, " +
		"g24 varchar(64) AS (concat(md5(s), sha2(s, 256), hex(s), crc32(s))) VIRTUAL, g25 int AS (weekday(d) + dayofweek(d)) VIRTUAL, g26 varchar(10) AS (case a when 1 then 'one' when 2 then 'two' end) VIRTUAL, " +
		"g27 int AS (interval(a, 1, 10, 100) + field(s, 'a', 'b') + find_in_set(s, 'a,b') + strcmp(s, 'x')) VIRTUAL, g28 varchar(10) AS (elt(a, 'x', 'y')) VIRTUAL, g29 varchar(20) AS (format(a, 2)) VIRTUAL, " +
		"g30 int AS (a DIV b + a % b + (a & b) + (a | b) + (a << 1) + (a >> 1)) VIRTUAL, g31 varchar(20) AS (if(s IS NULL, 'null', s)) VIRTUAL, g32 double AS (1.5e10 + 0.25 + -3 + 1e-5 + 2.5e300) VIRTUAL, g33 varchar(10) AS (_latin1 'x' COLLATE latin1_bin) VIRTUAL, " +
		"g34 varchar(20) AS (date_format(dt, '%Y-%m-%d %H:%i:%s.%f')) VIRTUAL, g35 int AS (json_contains(json_array(a), '1')) VIRTUAL, g36 varchar(20) AS (json_unquote(json_extract(json_object('k', s), '$.k'))) VIRTUAL, " +
		"CONSTRAINT ce1 CHECK (char_length(s) BETWEEN 1 AND 10), CONSTRAINT ce2 CHECK (d > '2000-01-01'), CONSTRAINT ce3 CHECK (a IN (1, 2, 3) OR a IS NULL), CONSTRAINT ce4 CHECK (coalesce(a, 0) >= 0 AND s NOT LIKE '%\\'%'))"},
	{"list partition with DEFAULT", "plistd", "CREATE TABLE plistd (id int PRIMARY KEY) PARTITION BY LIST (id) (PARTITION p1 VALUES IN (1, 2), PARTITION pd DEFAULT)"},
	{"linear key with algorithm", "pkeyalg", "CREATE TABLE pkeyalg (id int PRIMARY KEY) PARTITION BY LINEAR KEY ALGORITHM=2 (id) PARTITIONS 3"},
	{"partition options", "popts", "CREATE TABLE popts (id int PRIMARY KEY) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10) ENGINE=InnoDB COMMENT='c''s' MAX_ROWS=100 MIN_ROWS=1, PARTITION p1 VALUES LESS THAN (20) ENGINE=InnoDB)"},
	{"names needing quotes", "we`ird name ✓", "CREATE TABLE `we``ird name ✓` (`col with space` int, `ünï` varchar(5), `back``tick` int, `select` int, `ENFORCED` int CHECK (`ENFORCED` > 0), KEY `idx ✓` (`col with space`), KEY `KEY` (`select`))"},
	{"like", "ints_like", "CREATE TABLE ints_like LIKE ints"},
	{"TiDB syntax in comments is what MariaDB ran: none", "tidb", "CREATE TABLE tidb (id bigint PRIMARY KEY /*T![clustered_index] CLUSTERED */, r bigint /*T![auto_rand] AUTO_RANDOM(5) */) /*T! SHARD_ROW_ID_BITS=4 PRE_SPLIT_REGIONS=2 */ /*T![auto_id_cache] AUTO_ID_CACHE=1 */"},
}

// restoreAlters are ALTER TABLE sequences, each on a table of its own. A step's table is the table's
// name after the step (after a rename), empty for unchanged.
var restoreAlters = []struct {
	name, table, create string
	steps               []struct{ sql, table string }
}{
	{"columns", "alt", "CREATE TABLE alt (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, a int, s varchar(20), js json)", []struct{ sql, table string }{
		{"ALTER TABLE alt ADD COLUMN b int NOT NULL DEFAULT 5 AFTER a", ""},
		{"ALTER TABLE alt ADD COLUMN g int AS (a + b) VIRTUAL, ADD COLUMN gs varchar(30) AS (concat(s, 'x')) STORED, ADD COLUMN gj varchar(20) AS (json_value(js, '$.k')) VIRTUAL", ""},
		{"ALTER TABLE alt ADD COLUMN first_col int FIRST", ""},
		{"ALTER TABLE alt ADD COLUMN (c1 int, c2 varchar(5) DEFAULT 'q''')", ""},
		{"ALTER TABLE alt ADD COLUMN IF NOT EXISTS c1 int", ""},
		{"ALTER TABLE alt ADD COLUMN js2 json CHECK (json_length(js2) < 10)", ""},
		{"ALTER TABLE alt MODIFY COLUMN s varchar(40) CHARACTER SET latin1 NOT NULL DEFAULT 'x\\\\y'", ""},
		{"ALTER TABLE alt CHANGE COLUMN c2 c3 varchar(10) COMMENT 'renamed'", ""},
		{"ALTER TABLE alt CHANGE c3 c3 varchar(12) NULL", ""},
		{"ALTER TABLE alt RENAME COLUMN c3 TO c4", ""},
		{"ALTER TABLE alt MODIFY g int AS (a * b) VIRTUAL", ""},
		{"ALTER TABLE alt MODIFY gs varchar(30) AS (concat(s, 'y')) PERSISTENT AFTER g", ""},
		{"ALTER TABLE alt DROP COLUMN first_col", ""},
		{"ALTER TABLE alt DROP COLUMN IF EXISTS nope", ""},
		{"ALTER TABLE alt ALTER COLUMN b SET DEFAULT 7", ""},
		{"ALTER TABLE alt ALTER COLUMN b DROP DEFAULT", ""},
		{"ALTER TABLE alt ALGORITHM=INSTANT, ADD COLUMN z int", ""},
		{"ALTER TABLE alt ADD COLUMN ts timestamp(6) NOT NULL DEFAULT current_timestamp(6) ON UPDATE current_timestamp(6), ALGORITHM=COPY", ""},
		{"ALTER TABLE alt DROP COLUMN js2, DROP COLUMN z", ""},
	}},
	{"indexes and constraints", "alti", "CREATE TABLE alti (id int PRIMARY KEY, a int, b int, c varchar(30), t text, pid int)", []struct{ sql, table string }{
		{"ALTER TABLE alti ADD INDEX ia (a), ADD UNIQUE KEY ub (b, a), ALGORITHM=INPLACE, LOCK=NONE", ""},
		{"ALTER TABLE alti ADD FULLTEXT INDEX ft (t)", ""},
		{"ALTER TABLE alti DROP INDEX ia", ""},
		{"ALTER TABLE alti RENAME INDEX ub TO ub2", ""},
		{"ALTER TABLE alti RENAME KEY ub2 TO ub3", ""},
		{"CREATE INDEX ic ON alti (c(3), a DESC)", ""},
		{"CREATE UNIQUE INDEX iu ON alti (c) ALGORITHM=INPLACE LOCK=NONE", ""},
		{"CREATE INDEX IF NOT EXISTS ic ON alti (c)", ""},
		{"DROP INDEX ic ON alti", ""},
		{"DROP INDEX IF EXISTS nope ON alti", ""},
		{"ALTER TABLE alti DROP INDEX iu, ADD INDEX iu2 (c) COMMENT 'again'", ""},
		{"ALTER TABLE alti ADD CONSTRAINT ck CHECK (a > -100)", ""},
		{"ALTER TABLE alti ADD CHECK (b < 1000)", ""},
		{"ALTER TABLE alti ADD CONSTRAINT `ENFORCED` CHECK (c <> ' ENFORCED')", ""},
		{"ALTER TABLE alti DROP CONSTRAINT ck", ""},
		{"ALTER TABLE alti ADD COLUMN k int CHECK (k <> 0)", ""},
		{"ALTER TABLE alti ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE SET NULL", ""},
		{"ALTER TABLE alti DROP FOREIGN KEY fk", ""},
		{"ALTER TABLE alti ADD CONSTRAINT fk2 FOREIGN KEY IF NOT EXISTS (pid) REFERENCES parent (id)", ""},
		{"ALTER TABLE alti DROP FOREIGN KEY fk2, DROP INDEX IF EXISTS fk2", ""},
		{"ALTER TABLE alti DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)", ""},
		{"ALTER TABLE alti ADD INDEX IF NOT EXISTS ia2 (a)", ""},
	}},
	{"table options and renames", "altt", "CREATE TABLE altt (id int PRIMARY KEY, v varchar(10))", []struct{ sql, table string }{
		{"ALTER TABLE altt COMMENT = 'new ''comment'' \\\\ ✓'", ""},
		{"ALTER TABLE altt ENGINE=InnoDB", ""},
		{"ALTER TABLE altt FORCE", ""},
		{"ALTER TABLE altt ROW_FORMAT=DYNAMIC", ""},
		{"ALTER TABLE altt CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ""},
		{"ALTER TABLE altt DEFAULT CHARSET=latin1", ""},
		{"ALTER TABLE altt CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", ""},
		{"ALTER TABLE altt AUTO_INCREMENT=500", ""},
		{"ALTER TABLE altt KEY_BLOCK_SIZE=0, STATS_AUTO_RECALC=1", ""},
		{"ALTER TABLE altt /*T! SHARD_ROW_ID_BITS=4 */", ""},
		{"ALTER TABLE altt RENAME TO altt2", "altt2"},
		{"ALTER TABLE altt2 RENAME altt3, ADD COLUMN w int", "altt3"},
		{"RENAME TABLE altt3 TO altt", "altt"},
		{"ALTER TABLE altt ORDER BY v", ""},
		{"TRUNCATE TABLE altt", ""},
	}},
	{"MariaDB forms", "altm", "CREATE TABLE altm (id int PRIMARY KEY, a int, b varchar(10)) ENGINE=MyISAM", []struct{ sql, table string }{
		{"ALTER TABLE altm CHANGE COLUMN IF EXISTS a a2 bigint", ""},
		{"ALTER TABLE altm MODIFY COLUMN IF EXISTS b varchar(20)", ""},
		{"ALTER TABLE altm ADD COLUMN e enum('x','ÿ') CHARACTER SET latin1 DEFAULT 'ÿ', ADD COLUMN st set('a','b') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ""},
		{"ALTER TABLE altm MODIFY e enum('x','ÿ','z') CHARACTER SET latin1", ""},
		{"ALTER TABLE altm DISABLE KEYS", ""},
		{"ALTER TABLE altm ENABLE KEYS", ""},
		{"ALTER TABLE altm ADD COLUMN h int DEFAULT 0x20, ADD COLUMN hb varbinary(4) DEFAULT 0x414243", ""},
		{"CREATE FULLTEXT INDEX ft ON altm (b)", ""},
		{"CREATE INDEX ib USING BTREE ON altm (a2) COMMENT 'c'", ""},
		{"ALTER TABLE altm ENGINE=InnoDB", ""},
	}},
	{"partitions", "palt", "CREATE TABLE palt (id int NOT NULL, d date NOT NULL, PRIMARY KEY (id, d)) PARTITION BY RANGE (year(d)) (PARTITION p2020 VALUES LESS THAN (2021), PARTITION p2021 VALUES LESS THAN (2022))", []struct{ sql, table string }{
		{"ALTER TABLE palt ADD PARTITION (PARTITION p2022 VALUES LESS THAN (2023), PARTITION pmax VALUES LESS THAN MAXVALUE)", ""},
		{"ALTER TABLE palt DROP PARTITION p2020", ""},
		{"ALTER TABLE palt TRUNCATE PARTITION p2021", ""},
		{"ALTER TABLE palt REORGANIZE PARTITION pmax INTO (PARTITION p2023 VALUES LESS THAN (2024) COMMENT 'x', PARTITION pmax VALUES LESS THAN MAXVALUE)", ""},
		{"ALTER TABLE palt REBUILD PARTITION p2021", ""},
		{"ALTER TABLE palt OPTIMIZE PARTITION p2021", ""},
		{"ALTER TABLE palt REMOVE PARTITIONING", ""},
		{"ALTER TABLE palt PARTITION BY HASH (id) PARTITIONS 4", ""},
		{"ALTER TABLE palt COALESCE PARTITION 2", ""},
		{"ALTER TABLE palt ADD PARTITION PARTITIONS 3", ""},
		{"ALTER TABLE palt PARTITION BY KEY (id) PARTITIONS 2", ""},
		{"ALTER TABLE palt PARTITION BY LIST (id) (PARTITION a VALUES IN (1, 2, 3), PARTITION b VALUES IN (4, 5, NULL))", ""},
		{"ALTER TABLE palt ADD PARTITION (PARTITION c VALUES IN (6))", ""},
		{"ALTER TABLE palt ADD PARTITION IF NOT EXISTS (PARTITION c VALUES IN (6))", ""},
		{"ALTER TABLE palt DROP PARTITION IF EXISTS nope", ""},
		{"CREATE TABLE palt_x (id int NOT NULL, d date NOT NULL, PRIMARY KEY (id, d))", ""},
		{"ALTER TABLE palt EXCHANGE PARTITION c WITH TABLE palt_x", ""},
		{"ALTER TABLE palt PARTITION BY RANGE COLUMNS (d) (PARTITION p0 VALUES LESS THAN ('2020-01-01'), PARTITION p1 VALUES LESS THAN (MAXVALUE))", ""},
	}},
}

// restoreRefused are statements MariaDB runs that Split must refuse with an error that names the
// statement ("DDL") and contains want; "-" when the statement itself is restored faithfully. table is
// the table the statement creates: its SHOW CREATE TABLE must be refused with showWant (want when
// empty).
var restoreRefused = []struct{ name, sql, want, table, showWant string }{
	{"CREATE OR REPLACE", "CREATE OR REPLACE TABLE r_cor (a int)", "parse DDL", "", ""},
	{"system versioning", "CREATE TABLE r_ver (a int) WITH SYSTEM VERSIONING", "parse DDL", "r_ver", ""},
	{"UUID type", "CREATE TABLE r_uuid (u uuid)", "parse DDL", "r_uuid", ""},
	{"INET6 type", "CREATE TABLE r_inet6 (ip inet6)", "parse DDL", "r_inet6", ""},
	{"INET4 type", "CREATE TABLE r_inet4 (ip inet4)", "parse DDL", "r_inet4", ""},
	{"spatial types", "CREATE TABLE r_geo (g geometry NOT NULL, p point, l linestring, po polygon, SPATIAL KEY (g))", "parse DDL", "r_geo", ""},
	{"invisible column", "CREATE TABLE r_inv (a int, b int INVISIBLE)", "parse DDL", "r_inv", ""},
	{"ignored index", "CREATE TABLE r_ign (a int, KEY k (a) IGNORED)", "parse DDL", "r_ign", ""},
	{"expression default", "CREATE TABLE r_dexpr (a int DEFAULT (1 + 2))", "parse DDL", "r_dexpr", ""},
	{"interval default", "CREATE TABLE r_dint (d date DEFAULT (curdate() + interval 1 day))", "parse DDL", "r_dint", ""},
	{"USER() default", "CREATE TABLE r_duser (u varchar(100) DEFAULT user())", "parse DDL", "r_duser", ""},
	{"compressed column", "CREATE TABLE r_cmp (b blob COMPRESSED)", "parse DDL", "r_cmp", "/*M!100301 COMPRESSED*/"},
	{"STATS_PERSISTENT", "CREATE TABLE r_sp (a int) STATS_PERSISTENT=0", "STATS_PERSISTENT", "r_sp", ""},
	{"PACK_KEYS", "CREATE TABLE r_pk (a int) ENGINE=MyISAM PACK_KEYS=1", "PACK_KEYS", "r_pk", ""},
	{"Aria (PAGE_CHECKSUM in SHOW CREATE TABLE: read since the TiDB parser of 2026-05)", "CREATE TABLE r_aria (a int) ENGINE=Aria", "-", "r_aria", ""},
	{"charset TiDB does not know", "CREATE TABLE r_cs (a varchar(5)) CHARSET=cp1251", "Unknown character set", "r_cs", ""},
	{"collation TiDB does not know", "CREATE TABLE r_coll (a varchar(5) COLLATE utf8mb4_nopad_bin)", "Unknown collation", "r_coll", ""},
	{"binary default that is not UTF-8 in SHOW CREATE TABLE", "CREATE TABLE r_bin (b binary(2) DEFAULT 0xFFFE)", "-", "r_bin", "not valid UTF-8"},
	{"MariaDB executable comment", "CREATE TABLE r_mcomment (a int) /*M!100100 COMMENT='m' */", "/*M!100100", "", ""},
	{"ALTER IGNORE", "ALTER IGNORE TABLE r_base ADD UNIQUE KEY (a)", "ALTER IGNORE", "", ""},
	{"ALTER ONLINE", "ALTER ONLINE TABLE r_base ADD COLUMN q int", "parse DDL", "", ""},
	{"ALGORITHM=NOCOPY", "ALTER TABLE r_base ADD COLUMN q2 int, ALGORITHM=NOCOPY", "ALGORITHM", "", ""},
	{"WAIT", "ALTER TABLE r_base WAIT 5 ADD COLUMN q3 int", "parse DDL", "", ""},
	{"ALTER INDEX IGNORED", "ALTER TABLE r_base ALTER INDEX ka IGNORED", "parse DDL", "", ""},
	{"ADD invisible column", "ALTER TABLE r_base ADD COLUMN q4 int INVISIBLE", "parse DDL", "", ""},
	{"ADD spatial column", "ALTER TABLE r_base ADD COLUMN q5 point", "parse DDL", "", ""},
	{"DROP CONSTRAINT IF EXISTS", "ALTER TABLE r_base DROP CONSTRAINT IF EXISTS nope", "parse DDL", "", ""},
	{"DROP FOREIGN KEY IF EXISTS", "ALTER TABLE r_base DROP FOREIGN KEY IF EXISTS nope", "parse DDL", "", ""},
	{"NATIONAL CHAR", "CREATE TABLE r_nchar (a national char(3), b nvarchar(5), c nchar varchar(2))", "national charset", "", ""},
	{"STATS_PERSISTENT in ALTER", "ALTER TABLE r_base STATS_PERSISTENT=1", "STATS_PERSISTENT", "", ""},
}

var autoIncrementOption = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// restoreRoute routes src.x to <schema>.x_r.
func restoreRoute(schema string) ddl.Route {
	return func(t vocab.TableName) vocab.TableName {
		if t.Schema == "srcdb" {
			t.Schema = "dstdb"
			return t
		}
		if t.Schema != "src" {
			return t
		}
		t.Schema = schema
		if t.Name != "" {
			t.Name += "_r"
		}
		return t
	}
}

type restoreEnv struct {
	t            *testing.T
	up, down     *mariadbtest.Server
	upDB, downDB *sql.DB
	tables       []string // upstream tables created so far (names mapped back in definitions)
}

func (e *restoreEnv) showCreate(t *testing.T, db *sql.DB, table vocab.TableName) string {
	t.Helper()
	var name, create string
	if err := db.QueryRow("SHOW CREATE TABLE "+table.String()).Scan(&name, &create); err != nil {
		t.Fatalf("SHOW CREATE TABLE %s: %v", table, err)
	}
	return create
}

// definition is a SHOW CREATE TABLE without AUTO_INCREMENT=N, with routed names mapped back.
func (e *restoreEnv) definition(create string, routed bool) string {
	create = autoIncrementOption.ReplaceAllString(create, "")
	if routed {
		for _, tb := range e.tables {
			create = strings.ReplaceAll(create, quote(tb+"_r"), quote(tb))
			// names the server made from the table's name
			create = strings.ReplaceAll(create, "`"+tb+"_r_ibfk_", "`"+tb+"_ibfk_")
		}
	}
	return create
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// split runs ddl.Split and checks what no restored statement may contain.
func (e *restoreEnv) split(t *testing.T, stmt, schema string) ([]ddl.Part, error) {
	t.Helper()
	parts, err := ddl.Split(stmt, "src", restoreRoute(schema))
	if err != nil {
		if strings.Contains(err.Error(), "panic") {
			t.Fatalf("Split(%q) panicked: %v", stmt, err)
		}
		return nil, err
	}
	for _, p := range parts {
		checkFlavorFree(t, p.SQL)
	}
	return parts, nil
}

// quotedToken is a quoted string or name of a restored statement (backslash escapes, doubled quotes).
var quotedToken = regexp.MustCompile("'(?:[^'\\\\]|\\\\.|'')*'|`(?:[^`]|``)*`")

// checkFlavorFree fails on TiDB syntax (outside strings and names) in a restored statement.
func checkFlavorFree(t *testing.T, sql string) {
	t.Helper()
	code := quotedToken.ReplaceAllString(sql, "?")
	for _, bad := range []string{"ENFORCED", "/*", "CLUSTERED", "AUTO_RANDOM", "SHARD_ROW_ID_BITS", "PRE_SPLIT_REGIONS", "AUTO_ID_CACHE", "DROP CHECK", "x'"} {
		if strings.Contains(code, bad) {
			t.Errorf("restored statement has %q: %s", bad, sql)
		}
	}
}

// create replicates a table created upstream to the downstream schema, the way a syncer does.
func (e *restoreEnv) create(t *testing.T, stmt, schema string) error {
	t.Helper()
	parts, err := e.split(t, stmt, schema)
	if err != nil {
		return err
	}
	if len(parts) != 1 {
		t.Fatalf("Split(%q): %d parts", stmt, len(parts))
	}
	ddl, err := ddl.CreateIfNotExists(parts[0].SQL)
	if err != nil {
		return err
	}
	checkFlavorFree(t, ddl)
	if _, err := e.downDB.Exec(ddl); err != nil {
		t.Errorf("downstream refuses the restore of\n%s\nas\n%s\n%v", stmt, ddl, err)
	}
	return nil
}

func (e *restoreEnv) compare(t *testing.T, table, schema, what string) {
	t.Helper()
	up := e.definition(e.showCreate(t, e.upDB, vocab.TableName{Schema: "src", Name: table}), false)
	down := e.definition(e.showCreate(t, e.downDB, vocab.TableName{Schema: schema, Name: table + "_r"}), true)
	if up != down {
		t.Errorf("%s: definitions differ\nupstream:\n%s\ndownstream:\n%s", what, up, down)
	}
}

func TestRestoreDefinitions(t *testing.T) {
	if os.Getenv("TRIBUTARY_TEST_CHARSET") == "latin1" {
		t.Skip("generates utf8mb4 schemas and values (4-byte characters in definitions): needs utf8mb4 servers")
	}
	e := &restoreEnv{t: t, up: mariadbtest.Start(t), down: mariadbtest.Start(t)}
	var err error
	// The test's sessions: one time zone for TIMESTAMP defaults written as text, the sql_mode of
	// the servers (the dm-worker's on the downstream).
	e.up.Exec(t, e.up.DB(t), "CREATE DATABASE src")
	e.upDB, err = sql.Open("mysql", e.up.DSN("src")+"&time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.upDB.Close() })
	e.downDB = workerDB(t, e.down.Port, nil)
	// dst: tables created from SHOW CREATE TABLE (a syncer's start); dst2: from the statement as the
	// binlog carries it.
	e.down.Exec(t, e.downDB, "CREATE DATABASE dst", "CREATE DATABASE dst2")

	t.Run("create", func(t *testing.T) {
		for _, c := range restoreCreates {
			t.Run(c.name, func(t *testing.T) {
				e.up.Exec(t, e.upDB, c.sql)
				e.tables = append(e.tables, c.table)
				show := e.showCreate(t, e.upDB, vocab.TableName{Schema: "src", Name: c.table})
				if err := e.create(t, show, "dst"); err != nil {
					t.Fatalf("SHOW CREATE TABLE:\n%s\n%v", show, err)
				}
				e.compare(t, c.table, "dst", "from SHOW CREATE TABLE")
				if err := e.create(t, c.sql, "dst2"); err != nil {
					t.Fatalf("statement:\n%s\n%v", c.sql, err)
				}
				e.compare(t, c.table, "dst2", "from the statement")
			})
		}
	})

	t.Run("alter", func(t *testing.T) {
		for _, c := range restoreAlters {
			t.Run(c.name, func(t *testing.T) {
				e.up.Exec(t, e.upDB, c.create)
				e.tables = append(e.tables, c.table)
				if err := e.create(t, c.create, "dst"); err != nil {
					t.Fatal(err)
				}
				table := c.table
				for _, step := range c.steps {
					e.up.Exec(t, e.upDB, step.sql)
					if step.table != "" {
						table = step.table
						e.tables = append(e.tables, table)
					}
					parts, err := e.split(t, step.sql, "dst")
					if err != nil {
						t.Fatalf("Split(%q): %v", step.sql, err)
					}
					for _, p := range parts {
						if _, err := e.downDB.Exec(p.SQL); err != nil {
							t.Fatalf("downstream refuses the restore of\n%s\nas\n%s\n%v", step.sql, p.SQL, err)
						}
					}
					e.compare(t, table, "dst", step.sql)
				}
			})
		}
	})

	t.Run("database", func(t *testing.T) {
		for _, stmt := range []string{
			"CREATE DATABASE srcdb CHARACTER SET latin1 COLLATE latin1_general_ci",
			"ALTER DATABASE srcdb CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
			"ALTER DATABASE srcdb DEFAULT CHARACTER SET = utf8mb3",
		} {
			e.up.Exec(t, e.upDB, stmt)
			parts, err := e.split(t, stmt, "dst")
			if err != nil || len(parts) != 1 {
				t.Fatalf("Split(%q): %+v %v", stmt, parts, err)
			}
			e.down.Exec(t, e.downDB, parts[0].SQL)
			var name, up, down string
			if err := e.upDB.QueryRow("SHOW CREATE DATABASE srcdb").Scan(&name, &up); err != nil {
				t.Fatal(err)
			}
			if err := e.downDB.QueryRow("SHOW CREATE DATABASE dstdb").Scan(&name, &down); err != nil {
				t.Fatal(err)
			}
			if strings.Replace(down, "`dstdb`", "`srcdb`", 1) != up {
				t.Errorf("%s: upstream %s, downstream %s", stmt, up, down)
			}
		}
	})

	t.Run("inline REFERENCES", func(t *testing.T) {
		// MariaDB (10.5+) makes a column's REFERENCES a foreign key. The parser's AST visitor does
		// not enter a column option's REFERENCES: Split's renamer routes it itself.
		stmt := "CREATE TABLE inline_ref (id int PRIMARY KEY, c int REFERENCES parent (id))"
		e.up.Exec(t, e.upDB, stmt)
		e.tables = append(e.tables, "inline_ref")
		if err := e.create(t, stmt, "dst2"); err != nil {
			t.Fatal(err)
		}
		e.compare(t, "inline_ref", "dst2", "from the statement")
	})

	t.Run("refused", func(t *testing.T) {
		e.up.Exec(t, e.upDB, "CREATE TABLE r_base (id int PRIMARY KEY, a int, KEY ka (a))")
		for _, c := range restoreRefused {
			t.Run(c.name, func(t *testing.T) {
				e.up.Exec(t, e.upDB, c.sql) // MariaDB runs it
				type attempt struct{ stmt, want string }
				attempts := []attempt{{c.sql, c.want}}
				if c.table != "" {
					want := c.showWant
					if want == "" {
						want = c.want
					}
					attempts = append(attempts, attempt{e.showCreate(t, e.upDB, vocab.TableName{Schema: "src", Name: c.table}), want})
				}
				for _, a := range attempts {
					parts, err := e.split(t, a.stmt, "dst")
					if a.want == "-" {
						if err != nil {
							t.Errorf("Split(%q): %v", a.stmt, err)
						}
						continue
					}
					if err == nil {
						t.Errorf("Split(%q) = %+v, want an error", a.stmt, parts)
						continue
					}
					if !strings.Contains(err.Error(), "DDL") || !strings.Contains(err.Error(), a.want) {
						t.Errorf("Split(%q): %v; want an error naming the statement and %q", a.stmt, err, a.want)
					}
					t.Logf("%s\n  -> %v", a.stmt, err)
				}
			})
		}
	})
}
