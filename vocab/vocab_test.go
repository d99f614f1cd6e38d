package vocab

import "testing"

func TestPositionCompare(t *testing.T) {
	cases := []struct {
		a, b Position
		want int
	}{
		{Position{File: "mysql-bin.000009", Pos: 500}, Position{File: "mysql-bin.000010", Pos: 4}, -1},
		{Position{File: "mysql-bin.999999", Pos: 5}, Position{File: "mysql-bin.1000000", Pos: 4}, -1},
		{Position{File: "b.000001", Pos: 5}, Position{File: "b.000001", Pos: 5}, 0},
		{Position{File: "b.000002", Pos: 5}, Position{File: "b.000001", Pos: 9}, 1},
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%s vs %s: %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestParseBinlogPos(t *testing.T) {
	p, err := ParseBinlogPos("mysql-bin.000003:1234")
	if err != nil || p != (Position{File: "mysql-bin.000003", Pos: 1234}) || p.BinlogPos() != "mysql-bin.000003:1234" {
		t.Fatalf("got %v, %v", p, err)
	}
	for _, bad := range []string{"", "mysql-bin.000003", ":4", "f:", "f:x", "f:4294967296"} {
		if _, err := ParseBinlogPos(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestTableNameQuotes(t *testing.T) {
	if got := (TableName{Schema: "d`b", Name: "t"}).String(); got != "`d``b`.`t`" {
		t.Fatalf("got %s", got)
	}
	if got := (TableName{Schema: "db"}).String(); got != "`db`" {
		t.Fatalf("got %s", got)
	}
}
