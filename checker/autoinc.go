package checker

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// ItemAutoIncrement (DM's auto_increment_ID) warns of shard tables merged into one target whose
// AUTO_INCREMENT column is, alone, their primary or a unique key, when the values the shards generate
// can be the same: the rows of two shards then collide in the target (one overwrites the other, or
// the load stops on a duplicate key). It is decided from the whole task: every shard of the target,
// on every source, with the auto_increment_offset and auto_increment_increment of its server.
const ItemAutoIncrement = "auto_increment_ID"

// autoIncShard is a shard table whose AUTO_INCREMENT column is a key on its own.
type autoIncShard struct {
	source string
	table  vocab.TableName
	column string
	key    string // PRIMARY or the unique key's name
	// rows says the table holds rows, with column values from min to max.
	rows     bool
	min, max int64
	next     int64 // information_schema's AUTO_INCREMENT: the next value (0: unknown)
	// offset and increment are the server's global auto_increment_offset and auto_increment_increment.
	offset, increment int64
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// residue is the class of the values the shard generates: v ≡ offset (mod increment). MySQL and
// MariaDB ignore an offset greater than the increment (it counts as 1).
func (s autoIncShard) residue() (off, inc int64) {
	inc = max(s.increment, 1)
	off = s.offset
	if off > inc || off < 1 {
		off = 1
	}
	return off % inc, inc
}

// sequencesMeet reports whether two shards can generate the same value: v ≡ o1 (mod i1) and
// v ≡ o2 (mod i2) have a common solution iff o1 ≡ o2 (mod gcd(i1, i2)). Both count up without
// bound, so two compatible classes always meet.
func sequencesMeet(a, b autoIncShard) bool {
	oa, ia := a.residue()
	ob, ib := b.residue()
	g := gcd(ia, ib)
	return (oa-ob)%g == 0
}

// conforms reports whether the lowest and highest values the shard holds are of the class its server
// generates now: then they are taken as generated under these settings.
func (s autoIncShard) conforms() bool {
	off, inc := s.residue()
	return (s.min-off)%inc == 0 && (s.max-off)%inc == 0
}

// rangesOverlap reports whether the values two shards hold may collide already (a load copies both):
// their ranges overlap, and one of them holds values of another class than its server generates now
// (written before the settings were set apart). Shards whose generated values meet are told by
// sequencesMeet.
func rangesOverlap(a, b autoIncShard) bool {
	return a.rows && b.rows && a.min <= b.max && b.min <= a.max && (!a.conforms() || !b.conforms())
}

// autoIncCollision is a target whose shards' AUTO_INCREMENT keys can collide.
type autoIncCollision struct {
	target vocab.TableName
	shards []autoIncShard // the shards that collide with another, in their order
	future bool           // the values they generate meet (else only the rows they hold overlap)
}

// autoIncCollisions decides, for each target of two or more shards with an AUTO_INCREMENT key, which
// shards collide with another: the values they generate meet (sequencesMeet), or the rows they hold
// overlap (rangesOverlap: values written before the servers' settings were set apart). Targets in
// order.
func autoIncCollisions(byTarget map[vocab.TableName][]autoIncShard) []autoIncCollision {
	var out []autoIncCollision
	targets := slices.Collect(maps.Keys(byTarget))
	vocab.SortTables(targets)
	for _, target := range targets {
		shards := byTarget[target]
		if len(shards) < 2 {
			continue
		}
		hit := make([]bool, len(shards))
		future := false
		for i := range shards {
			for j := i + 1; j < len(shards); j++ {
				meet := sequencesMeet(shards[i], shards[j])
				if meet || rangesOverlap(shards[i], shards[j]) {
					hit[i], hit[j] = true, true
					future = future || meet
				}
			}
		}
		c := autoIncCollision{target: target, future: future}
		for i, s := range shards {
			if hit[i] {
				c.shards = append(c.shards, s)
			}
		}
		if len(c.shards) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// message is the warning of a collision: the tables, their values and settings, and DM's remedies.
func (c autoIncCollision) message() string {
	var parts []string
	for _, s := range c.shards {
		held := "no rows"
		if s.rows {
			held = fmt.Sprintf("%s %d to %d", s.column, s.min, s.max)
		}
		next := ""
		if s.next > 0 {
			next = fmt.Sprintf(", AUTO_INCREMENT %d", s.next)
		}
		key := "primary key"
		if !strings.EqualFold(s.key, "PRIMARY") {
			key = "unique key " + s.key
		}
		parts = append(parts, fmt.Sprintf("%s on source %s (AUTO_INCREMENT column %s is its %s; %s%s; auto_increment_offset %d, auto_increment_increment %d)",
			s.table, s.source, s.column, key, held, next, s.offset, s.increment))
	}
	why := "the values these shards generate overlap"
	if !c.future {
		why = "the values these shards hold overlap (their servers' settings keep new values apart)"
	}
	return fmt.Sprintf("shards %s are merged into %s and %s: rows of two shards with the same %s collide there (one overwrites the other, or the load stops on a duplicate key). "+
		"Give each shard's server its own auto_increment_offset under one auto_increment_increment of at least the number of shards (and move ids written before apart), "+
		"or make the key composite so that the column is not unique alone (DM adds the shard's table, schema and source as columns with a route's extract-table, extract-schema and extract-source, "+
		"which Tributary does not have: change the key upstream, e.g. PRIMARY KEY (shard, %s))",
		strings.Join(parts, "; "), c.target, why, c.shards[0].column, c.shards[0].column)
}

// collectAutoInc reads, for the replicated tables of one source, those whose AUTO_INCREMENT column is
// a key alone (primary or unique), with their values and the server's auto_increment settings.
func collectAutoInc(ctx context.Context, db *sql.DB, source string, tables []srcTable, byTarget map[vocab.TableName][]autoIncShard) error {
	if len(tables) == 0 {
		return nil
	}
	var offset, increment int64
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.auto_increment_offset, @@GLOBAL.auto_increment_increment").Scan(&offset, &increment); err != nil {
		return fmt.Errorf("read auto_increment_offset and auto_increment_increment: %w", err)
	}
	// Only the schemas of the replicated tables are read: a server may hold many others.
	var schemas []any
	seen := map[string]bool{}
	for _, t := range tables {
		if !seen[t.table.Schema] {
			seen[t.table.Schema] = true
			schemas = append(schemas, t.table.Schema)
		}
	}
	in := "TABLE_SCHEMA IN (?" + strings.Repeat(", ?", len(schemas)-1) + ")"
	type col struct {
		name string
		next int64
	}
	cols := map[vocab.TableName]col{}
	rows, err := db.QueryContext(ctx, "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, COALESCE(t.AUTO_INCREMENT, 0) "+
		"FROM information_schema.COLUMNS c JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "+
		"WHERE c.EXTRA LIKE '%auto_increment%' AND c."+in, schemas...)
	if err != nil {
		return fmt.Errorf("read AUTO_INCREMENT columns: %w", err)
	}
	for rows.Next() {
		var t vocab.TableName
		var c col
		if err := rows.Scan(&t.Schema, &t.Name, &c.name, &c.next); err != nil {
			rows.Close()
			return err
		}
		cols[t] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(cols) == 0 {
		return nil
	}
	// Keys of one column: the AUTO_INCREMENT column is unique alone when it is one of them.
	keys := map[vocab.TableName]map[string]string{} // column (lower case) -> key name, PRIMARY first
	rows, err = db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, MAX(COLUMN_NAME) FROM information_schema.STATISTICS "+
		"WHERE NON_UNIQUE = 0 AND "+in+" GROUP BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME HAVING COUNT(*) = 1", schemas...)
	if err != nil {
		return fmt.Errorf("read unique keys: %w", err)
	}
	for rows.Next() {
		var t vocab.TableName
		var index, column string
		if err := rows.Scan(&t.Schema, &t.Name, &index, &column); err != nil {
			rows.Close()
			return err
		}
		if keys[t] == nil {
			keys[t] = map[string]string{}
		}
		if k := keys[t][strings.ToLower(column)]; k == "" || index == "PRIMARY" {
			keys[t][strings.ToLower(column)] = index
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		c, ok := cols[t.table]
		if !ok {
			continue
		}
		key := keys[t.table][strings.ToLower(c.name)]
		if key == "" {
			continue // the column is part of a composite key (or of none): shards do not collide on it
		}
		s := autoIncShard{source: source, table: t.table, column: c.name, key: key, next: c.next, offset: offset, increment: increment}
		var lo, hi sql.NullInt64
		q := fmt.Sprintf("SELECT MIN(%s), MAX(%s) FROM %s", vocab.Quote(c.name), vocab.Quote(c.name), t.table)
		if err := db.QueryRowContext(ctx, q).Scan(&lo, &hi); err != nil {
			return fmt.Errorf("read the values of %s.%s: %w", t.table, c.name, err)
		}
		s.rows, s.min, s.max = lo.Valid, lo.Int64, hi.Int64
		byTarget[t.target] = append(byTarget[t.target], s)
	}
	return nil
}
