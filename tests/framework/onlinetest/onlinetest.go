// Package onlinetest holds the statement sequences of online schema change tools that the tests replay:
// gh-ost is not served by the module proxy (github.com/github/gh-ost: 403), so no real run could be
// recorded here; its sequence follows gh-ost's documented statements (doc/cut-over.md, DM's description of
// gh-ost's SQL). pt-online-schema-change runs for real in the integration tests.
package onlinetest

// Ghost is what gh-ost writes to the binlog for `--alter` on schema.table (a table with columns id and
// v), row copy and cut-over included: [:4] creates the ghost table and alters it; [4:6] is the row
// copy; [6:] the cut-over and the clean-up.
func Ghost(schema, table, alter string) []string {
	g, c, d := "`"+schema+"`.`_"+table+"_gho`", "`"+schema+"`.`_"+table+"_ghc`", "`"+schema+"`.`_"+table+"_del`"
	real := "`" + schema + "`.`" + table + "`"
	return []string{
		"drop /* gh-ost */ table if exists " + g,
		"create /* gh-ost */ table " + c + " (id bigint auto_increment, last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256",
		"create /* gh-ost */ table " + g + " like " + real,
		"alter /* gh-ost */ table " + g + " " + alter,
		"replace /* gh-ost */ into " + c + " (id, hint, value) values (NULLIF(2, 0), 'state', 'migrating')",
		"insert /* gh-ost */ ignore into " + g + " (id, v) (select id, v from " + real + " force index (`PRIMARY`))",
		"create /* gh-ost */ table " + d + " (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'",
		"drop /* gh-ost */ table if exists " + d,
		"rename /* gh-ost */ table " + real + " to " + d + ", " + g + " to " + real,
		"drop /* gh-ost */ table if exists " + c,
		"drop /* gh-ost */ table if exists " + d,
	}
}

// PT is what pt-online-schema-change writes for `--alter` on schema.table (triggers keep the new
// table in step), as a replay.
func PT(schema, table, alter string) []string {
	n, o := "`"+schema+"`.`_"+table+"_new`", "`"+schema+"`.`_"+table+"_old`"
	real := "`" + schema + "`.`" + table + "`"
	trig := "`" + schema + "`.`pt_osc_" + schema + "_" + table + "_ins`"
	return []string{
		"CREATE TABLE " + n + " LIKE " + real,
		"ALTER TABLE " + n + " " + alter,
		"CREATE TRIGGER " + trig + " AFTER INSERT ON " + real + " FOR EACH ROW REPLACE INTO " + n + " (id, v) VALUES (NEW.id, NEW.v)",
		"INSERT LOW_PRIORITY IGNORE INTO " + n + " (id, v) SELECT id, v FROM " + real + " LOCK IN SHARE MODE",
		"RENAME TABLE " + real + " TO " + o + ", " + n + " TO " + real,
		"DROP TABLE IF EXISTS " + o,
		"DROP TRIGGER IF EXISTS " + trig,
	}
}
