package worker

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tributary-db/tributary/meta"
)

// TestCursorGroupsAndResumePoints: the reader stage alone. A group's GTID joins the set only when the
// group ends; the resume point at the last complete group carries the set there, one at a DDL the set
// recorded there, and without GTID mode none.
func TestCursorGroupsAndResumePoints(t *testing.T) {
	at := func(p uint32) Position { return Position{File: "bin.000001", Pos: p} }
	c := cursor{gtidMode: true, gtids: mariadbGTIDs{}, gtidAt: map[Position]string{}}
	g := mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: 7}
	c.curGTID = &g
	if got := c.gtidFor(c.lastPos); got != "" {
		t.Fatalf("before the group ends: %q, want the empty set", got)
	}
	c.endGroup(at(400))
	if c.curGTID != nil || c.lastPos != at(400) {
		t.Fatalf("after endGroup: current %v, last %v", c.curGTID, c.lastPos)
	}
	if got := c.gtidFor(at(400)); got != "0-1-7" {
		t.Fatalf("resume point at the last group: %q, want 0-1-7", got)
	}
	c.gtidAt[at(200)] = "0-1-5"
	if got := c.gtidFor(at(200)); got != "0-1-5" {
		t.Fatalf("resume point at a DDL: %q, want the set recorded there", got)
	}
	if got := c.gtidFor(at(300)); got != "" {
		t.Fatalf("a position with nothing recorded: %q", got)
	}
	c.gtidMode = false
	if got := c.gtidFor(at(400)); got != "" {
		t.Fatalf("file/pos mode: %q, want no GTID set", got)
	}
}

// TestApplierClaimsAndHotTables: the applier stage alone, without a downstream. A table whose rows are
// all on one connection gets its table position there (the later of its own and its lane's); one on
// several gets a lane position on each and comes back as spread with its last position. A full batch
// makes a table hot when it holds more than twice a connection's share; a small one changes nothing.
func TestApplierClaimsAndHotTables(t *testing.T) {
	at := func(p uint32) Position { return Position{File: "bin.000001", Pos: p} }
	one, spread := TableName{Schema: "d", Name: "one"}, TableName{Schema: "d", Name: "spread"}
	a := applier{txnRows: 100}
	for i := 0; i < 4; i++ {
		a.parts = append(a.parts, &partition{idx: i})
	}
	a.resetBatch()
	if a.partitionOf(one) != a.partitionOf(one) {
		t.Fatal("a table's connection is not stable")
	}
	a.parts[0].pos[one] = at(100)
	a.parts[0].lanes[one] = laneClaim{pos: at(150)}
	a.parts[1].lanes[spread] = laneClaim{pos: at(300), cols: []string{"id"}, chunk: 1024}
	a.parts[2].lanes[spread] = laneClaim{pos: at(250), cols: []string{"id"}, chunk: 1024}
	a.parts[2].pos[spread] = at(200)
	tables, lanes, spreads := a.claims(a.parts[:3])
	if tables[0][one] != at(150) || len(lanes[0]) != 0 {
		t.Fatalf("one connection: table %v lanes %v, want the lane's later position 150 and no lanes", tables[0], lanes[0])
	}
	if want := []meta.Lane{{N: 4, Index: 1, Chunk: 1024, Cols: []string{"id"}, Pos: at(300)}}; len(lanes[1][spread]) != 1 || lanes[1][spread][0].Pos != want[0].Pos || lanes[1][spread][0].Index != 1 || lanes[1][spread][0].N != 4 {
		t.Fatalf("spread table's lane on connection 1: %+v, want %+v", lanes[1][spread], want)
	}
	if tables[2][spread] != at(200) || len(lanes[2][spread]) != 1 {
		t.Fatalf("spread table on connection 2: table %v lanes %v", tables[2], lanes[2])
	}
	if spreads[spread] != at(300) || len(spreads) != 1 {
		t.Fatalf("spread: %v, want %s at 300 only", spreads, spread)
	}
	a.tableRows[one], a.tableRows[spread] = 10, 90
	a.chooseHot(20) // under half of txnRows: says little
	if len(a.hot) != 0 || len(a.tableRows) != 0 {
		t.Fatalf("a small batch chose %v (rows %v)", a.hot, a.tableRows)
	}
	a.tableRows[one], a.tableRows[spread] = 40, 60 // 60 rows of 100 on 4 connections: over twice a share
	a.chooseHot(100)
	if !a.hot[spread] || a.hot[one] {
		t.Fatalf("hot after a full batch: %v, want %s only", a.hot, spread)
	}
	a.rows = 100
	if !a.batchFull() {
		t.Fatal("a batch of txnRows rows is not full")
	}
}
