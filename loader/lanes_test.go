package loader

import (
	"encoding/json"
	"math/big"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

var tb = vocab.TableName{Schema: "db_1", Name: "t_1"}

func TestSplitLanesCoverTheKeySpace(t *testing.T) {
	for _, c := range []struct {
		min, max int64
		n, want  int
	}{
		{1, 1000, 4, 4}, {1, 3, 8, 2}, {5, 5, 4, 1}, {-100, 100, 3, 3}, {0, 1, 2, 1},
	} {
		lanes := splitLanes(tb, big.NewInt(c.min), big.NewInt(c.max), c.n)
		if len(lanes) != c.want {
			t.Fatalf("[%d,%d] in %d: %d lanes, want %d", c.min, c.max, c.n, len(lanes), c.want)
		}
		if lanes[0].From != "" || lanes[len(lanes)-1].To != "" {
			t.Fatalf("[%d,%d]: the first lane must be open below and the last above: %+v", c.min, c.max, lanes)
		}
		for i := 1; i < len(lanes); i++ {
			if lanes[i].From != lanes[i-1].To || lanes[i].N != i {
				t.Fatalf("[%d,%d]: lanes %d and %d do not join: %+v", c.min, c.max, i-1, i, lanes)
			}
		}
	}
	if l := splitLanes(tb, nil, nil, 4); len(l) != 1 || l[0].From != "" || l[0].To != "" {
		t.Fatalf("an empty table is one open lane: %+v", l)
	}
	// unsigned BIGINT bounds above the signed range
	max, _ := new(big.Int).SetString("18446744073709551615", 10)
	lanes := splitLanes(tb, big.NewInt(0), max, 3)
	if len(lanes) != 3 || lanes[1].To != "12297829382473034410" {
		t.Fatalf("unsigned range split: %+v", lanes)
	}
}

func TestLaneCommitKeepsOneSegmentPerSnapshot(t *testing.T) {
	p1, p2 := vocab.Position{File: "b.1", Pos: 100}, vocab.Position{File: "b.1", Pos: 900}
	l := &lane{Table: tb, From: "", To: "1000"}
	l.commit("10", p1, false, 10, 100)
	l.commit("20", p1, false, 10, 100)
	l.commit("30", p2, false, 10, 100)
	l.commit("", p2, true, 5, 50)
	want := []seg{{"20", p1}, {"1000", p2}}
	if len(l.Segs) != 2 || l.Segs[0] != want[0] || l.Segs[1] != want[1] || !l.Done || l.Rows != 35 || l.Bytes != 350 {
		t.Fatalf("lane after commits: %+v", l)
	}
	if l.next() != "1000" {
		t.Fatalf("next: %q", l.next())
	}
}

// state builds the load rows of a header and lanes as the checkpoint table holds them.
func state(t *testing.T, h header, lanes ...*lane) map[string]meta.LoadRow {
	t.Helper()
	rows := map[string]meta.LoadRow{}
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	rows[meta.LoadPrefix] = meta.LoadRow{ID: meta.LoadPrefix, Pos: h.Pos, Data: string(data)}
	for _, l := range lanes {
		data, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		rows[l.id()] = meta.LoadRow{ID: l.id(), Data: string(data)}
	}
	return rows
}

// TestKeyRangesDecideEachKeyBySnapshot checks Copied against a direct model: a key's row was copied
// from the snapshot of the segment holding it, so an event is in the copy exactly when it ends at or
// before that snapshot.
func TestKeyRangesDecideEachKeyBySnapshot(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	for run := 0; run < 200; run++ {
		lanes := splitLanes(tb, big.NewInt(0), big.NewInt(1000), 1+rnd.Intn(4))
		snaps := []vocab.Position{{File: "b.1", Pos: 100}, {File: "b.1", Pos: 500}, {File: "b.2", Pos: 4}}
		// each lane is cut at random points, each part from a later snapshot than the one before
		for _, l := range lanes {
			lo, hi := int64(-1), int64(2000)
			if l.From != "" {
				lo = mustInt(l.From)
			}
			if l.To != "" {
				hi = mustInt(l.To)
			}
			s := 0
			at := lo
			for !l.Done {
				if s == len(snaps)-1 || rnd.Intn(3) == 0 || at+1 >= hi {
					l.commit("", snaps[s], true, 0, 0)
					break
				}
				at += 1 + rnd.Int63n(max(hi-at-1, 1))
				if at >= hi {
					l.commit("", snaps[s], true, 0, 0)
					break
				}
				l.commit(big.NewInt(at).String(), snaps[s], false, 0, 0)
				s += rnd.Intn(2)
			}
		}
		h := header{Pos: snaps[0], Tables: []tableInfo{{Src: tb, Key: "id", KeyOrdinal: 1}}}
		ranges, from, err := Segments(state(t, h, lanes...))
		if err != nil {
			t.Fatal(err)
		}
		if from[tb] != snaps[0] {
			t.Fatalf("from: %v, want the first snapshot %v", from[tb], snaps[0])
		}
		kr := ranges[tb]
		mixed := false
		for _, l := range lanes {
			for _, s := range l.Segs {
				mixed = mixed || s.Pos != snaps[0]
			}
		}
		if (kr != nil) != mixed {
			t.Fatalf("ranges present %v, but lanes from more than one snapshot %v", kr != nil, mixed)
		}
		if kr == nil {
			continue
		}
		for probe := 0; probe < 300; probe++ {
			key := rnd.Int63n(1100) - 50
			end := vocab.Position{File: "b.1", Pos: uint32(rnd.Intn(1000))}
			if rnd.Intn(4) == 0 {
				end = vocab.Position{File: "b.2", Pos: uint32(rnd.Intn(8))}
			}
			want := end.Compare(modelSnapshot(lanes, key)) <= 0
			if got := kr.Copied([]any{"x", int32(key)}, end); got != want {
				t.Fatalf("run %d key %d event %v: Copied %v, want %v; lanes %+v", run, key, end, got, want, lanes)
			}
		}
	}
}

func mustInt(s string) int64 {
	n, _ := new(big.Int).SetString(s, 10)
	return n.Int64()
}

// modelSnapshot is the snapshot the copy of key came from, by scanning the lanes' segments.
func modelSnapshot(lanes []*lane, key int64) vocab.Position {
	for _, l := range lanes {
		prev := l.From
		for _, s := range l.Segs {
			inLow := prev == "" || key > mustInt(prev)
			inHigh := s.Upto == "" || key <= mustInt(s.Upto)
			if inLow && inHigh {
				return s.Pos
			}
			prev = s.Upto
		}
	}
	panic("key not covered")
}

func TestKeyRangesUnsignedAndWidths(t *testing.T) {
	p1, p2 := vocab.Position{File: "b.1", Pos: 100}, vocab.Position{File: "b.1", Pos: 200}
	l := &lane{Table: tb}
	l.commit("9223372036854775807", p1, false, 0, 0) // up to the signed maximum from p1, the rest from p2
	l.commit("", p2, true, 0, 0)
	h := header{Pos: p1, Tables: []tableInfo{{Src: tb, Key: "id", KeyOrdinal: 0, KeyUnsigned: true}}}
	ranges, _, err := Segments(state(t, h, l))
	if err != nil {
		t.Fatal(err)
	}
	kr := ranges[tb]
	end := vocab.Position{File: "b.1", Pos: 150} // between the snapshots
	// -1 as a BIGINT UNSIGNED is 18446744073709551615: in the part copied at p2, which holds the event
	if !kr.Copied([]any{int64(-1)}, end) {
		t.Fatal("unsigned -1 (2^64-1) must fall in the part copied after the event")
	}
	if kr.Copied([]any{int64(5)}, end) {
		t.Fatal("key 5 was copied at p1, before the event")
	}
	// an INT UNSIGNED arrives as int32: -1 is 4294967295, still below the signed BIGINT maximum
	if kr.Copied([]any{int32(-1)}, end) {
		t.Fatal("unsigned int32 -1 is 4294967295, copied at p1")
	}
	if kr.Copied([]any{"not an int"}, end) {
		t.Fatal("a non-integer key is never taken as copied")
	}
}

func TestHiddenNameFits(t *testing.T) {
	short := HiddenName("task", vocab.TableName{Schema: "db", Name: "t"})
	if short != HiddenPrefix+meta.Hash("task")[:8]+"_t" {
		t.Fatalf("short: %q", short)
	}
	// Two tasks loading one target never share its hidden table.
	if other := HiddenName("other", vocab.TableName{Schema: "db", Name: "t"}); other == short {
		t.Fatalf("tasks task and other share %q", short)
	}
	long := vocab.TableName{Schema: "db", Name: strings.Repeat("ü", 64)}
	a, b := HiddenName("task", long), HiddenName("task", vocab.TableName{Schema: "db2", Name: long.Name})
	if utf8.RuneCountInString(a) > meta.MaxIdentifier || !strings.HasPrefix(a, HiddenPrefix+meta.Hash("task")[:8]+"_üü") || a == b {
		t.Fatalf("long names: %q, %q", a, b)
	}
}
