package checker

import (
	"strings"
	"testing"

	"github.com/tributary-db/tributary/vocab"
)

func shard(source, table string, offset, increment int64, values ...int64) autoIncShard {
	schema, name, _ := strings.Cut(table, ".")
	s := autoIncShard{source: source, table: vocab.TableName{Schema: schema, Name: name}, column: "id", key: "PRIMARY", offset: offset, increment: increment}
	if len(values) == 2 {
		s.rows, s.min, s.max, s.next = true, values[0], values[1], values[1]+1
	}
	return s
}

func TestSequencesMeet(t *testing.T) {
	cases := []struct {
		a, b autoIncShard
		meet bool
	}{
		{shard("s1", "db_1.t_1", 1, 1), shard("s1", "db_1.t_2", 1, 1), true}, // both count from 1
		{shard("s1", "db.t", 1, 2), shard("s2", "db.t", 2, 2), false},        // odd and even
		{shard("s1", "db.t", 1, 4), shard("s2", "db.t", 3, 4), false},        // 1, 5, 9 and 3, 7, 11
		{shard("s1", "db.t", 1, 4), shard("s2", "db.t", 1, 4), true},         // the same offset
		{shard("s1", "db.t", 1, 2), shard("s2", "db.t", 1, 3), true},         // 1, 3, 5, 7 and 1, 4, 7
		{shard("s1", "db.t", 2, 4), shard("s2", "db.t", 1, 2), false},        // 2, 6, 10 and odd numbers
		{shard("s1", "db.t", 2, 4), shard("s2", "db.t", 2, 6), true},         // 2, 6, 10 and 2, 8, 14
		{shard("s1", "db.t", 5, 2), shard("s2", "db.t", 1, 2), true},         // an offset over the increment counts as 1
		{shard("s1", "db.t", 2, 2), shard("s2", "db.t", 1, 1), true},         // increment 1 meets everything
		{shard("s1", "db.t", 0, 0), shard("s2", "db.t", 1, 1), true},         // nonsense settings read as 1, 1
	}
	for i, c := range cases {
		if got := sequencesMeet(c.a, c.b); got != c.meet {
			t.Errorf("case %d: sequencesMeet(%d/%d, %d/%d) = %v", i, c.a.offset, c.a.increment, c.b.offset, c.b.increment, got)
		}
		if got := sequencesMeet(c.b, c.a); got != c.meet {
			t.Errorf("case %d: not symmetric", i)
		}
	}
}

func TestAutoIncCollisions(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	other := vocab.TableName{Schema: "db", Name: "u"}
	single := vocab.TableName{Schema: "db", Name: "single"}
	byTarget := map[vocab.TableName][]autoIncShard{
		// Two shards of one server count from 1: they collide; the third, on a server whose values
		// are apart from both of theirs (auto_increment_increment 3 on all), does not.
		target: {shard("s1", "db_1.t_1", 1, 3, 1, 7), shard("s1", "db_1.t_2", 1, 3, 1, 10), shard("s2", "db_2.t_1", 2, 3, 2, 1001)},
		// Servers set apart (odd, even) but the rows they hold overlap and are not all of the
		// server's class: written before the settings.
		other: {shard("s1", "db_1.u", 1, 2, 1, 50), shard("s2", "db_2.u", 2, 2, 40, 90)},
		// One table alone is not merged.
		single: {shard("s1", "db_1.single", 1, 1, 1, 5)},
	}
	got := autoIncCollisions(byTarget)
	if len(got) != 2 {
		t.Fatalf("%d collisions, want 2: %+v", len(got), got)
	}
	if got[0].target != target || !got[0].future || len(got[0].shards) != 2 || got[0].shards[0].table.Name != "t_1" || got[0].shards[1].table.Name != "t_2" {
		t.Errorf("db.t: %+v", got[0])
	}
	if got[1].target != other || got[1].future || len(got[1].shards) != 2 {
		t.Errorf("db.u: %+v", got[1])
	}
	msg := got[0].message()
	for _, want := range []string{"`db_1`.`t_1` on source s1", "`db_1`.`t_2` on source s1", "merged into `db`.`t`", "id 1 to 10", "auto_increment_offset 1, auto_increment_increment 3",
		"its own auto_increment_offset", "composite", "extract-table"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "db_2") {
		t.Errorf("message names a shard that does not collide: %s", msg)
	}
	if msg := got[1].message(); !strings.Contains(msg, "the values these shards hold overlap") {
		t.Errorf("db.u: %s", msg)
	}

	// Shards set apart with values apart: nothing to say. Empty shards counting from 1 collide.
	apart := map[vocab.TableName][]autoIncShard{target: {shard("s1", "a.t", 1, 2, 1, 99), shard("s2", "b.t", 2, 2, 2, 100)}}
	if got := autoIncCollisions(apart); len(got) != 0 {
		t.Errorf("shards set apart collide: %+v", got)
	}
	empty := map[vocab.TableName][]autoIncShard{target: {shard("s1", "a.t", 1, 1), shard("s2", "b.t", 1, 1)}}
	if got := autoIncCollisions(empty); len(got) != 1 || !got[0].future {
		t.Errorf("empty shards counting from 1: %+v", got)
	}
}
