package syncer

import (
	"testing"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/onlineddl"
	"github.com/tributary-db/tributary/pessimist"
	"github.com/tributary-db/tributary/vocab"
)

// TestShardDDLIsParsedTwice counts the parser's runs (ddl.Parses) on a shard DDL's way from its
// binlog events to the statement the owner sends downstream: each event's text is parsed once where
// it enters (the online rules, the schema tracker and the splitter read that tree), and once more as
// the routed statement the splitter restores (the check that the downstream can read it, whose tree
// travels with it). Resolving the lock and reading the statement's tables and effects, as the
// executor does before it runs it, parse nothing. The online DDL rules are on, as by default.
func TestShardDDLIsParsedTwice(t *testing.T) {
	target := vocab.TableName{Schema: "db", Name: "t"}
	d := newTestDDLPath(t)
	rules, err := onlineddl.NewRules(nil, nil) // DM's default rules
	if err != nil {
		t.Fatal(err)
	}
	d.online = rules
	before := ddl.Parses()
	for i, q := range []string{"ALTER TABLE db_1.t_1 ADD COLUMN c INT, ADD INDEX idx_c (c)", "ALTER TABLE db_1.t_2 ADD COLUMN c INT, ADD INDEX idx_c (c)"} {
		if _, err := d.decide(q, "", evAt(uint32(1000*(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := ddl.Parses() - before; n != 4 {
		t.Fatalf("two shard DDL events parsed %d times, want 4 (each: its text, and its routed statement)", n)
	}
	ddls, _ := d.infoOf(target)
	d.shard.pending[target] = true
	res := opResult{target: target, info: pessimist.Info{Task: "task", Source: "s1", Target: target.String(), DDLs: ddls},
		op: pessimist.Operation{DDLs: ddls, Exec: true}}
	lr, err := d.resolve(res, lockView{lastPos: evAt(2000).end})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.ddls) != 1 || lr.ddls[0].SQL != ddls[0] {
		t.Fatalf("the owner runs %q, want %q", ddl.Texts(lr.ddls), ddls)
	}
	if tables, err := lr.ddls[0].Tables(""); err != nil || len(tables) != 1 || tables[0] != target {
		t.Fatalf("tables of the statement: %v %v", tables, err)
	}
	if effects, ok := lr.ddls[0].Effects(); !ok || len(effects) != 2 {
		t.Fatalf("effects of the statement: %v %v", effects, ok)
	}
	if n := ddl.Parses() - before; n != 4 {
		t.Fatalf("resolving the lock and reading the statement parsed %d more times, want none", n-4)
	}

	// After a restart the operation may come back for DDLs whose events were not read again: they are
	// parsed then, once.
	d = newTestDDLPath(t)
	for i, q := range []string{"ALTER TABLE db_1.t_1 ADD COLUMN c INT", "ALTER TABLE db_1.t_2 ADD COLUMN c INT"} {
		if _, err := d.decide(q, "", evAt(uint32(1000*(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	ddls, _ = d.infoOf(target)
	clear(d.shard.ddlStart[target])
	d.shard.pending[target] = true
	res.info.DDLs, res.op.DDLs = ddls, ddls
	before = ddl.Parses()
	if lr, err = d.resolve(res, lockView{lastPos: evAt(2000).end}); err != nil || len(lr.ddls) != 1 || lr.ddls[0].SQL != ddls[0] {
		t.Fatalf("resolved after a restart: %q %v", ddl.Texts(lr.ddls), err)
	}
	if n := ddl.Parses() - before; n != 1 {
		t.Fatalf("an operation read back parsed its DDL %d times, want once", n)
	}
}
