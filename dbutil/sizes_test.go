package dbutil

import (
	"context"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

// TestTableEstimatesFollowTheFile: InnoDB's persistent statistics taken at 1000 rows and not
// recalculated since, read back after a restart, say 1000 rows of a table that holds 200 000; the
// estimate scaled to the table's file is near the truth.
func TestTableEstimatesFollowTheFile(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB(t)
	s.Exec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, j JSON, v VARCHAR(40)) STATS_AUTO_RECALC = 0",
		"INSERT INTO d.t SELECT seq, JSON_OBJECT('k', seq), REPEAT('é', 20) FROM d.seq_1_to_1000", "ANALYZE TABLE d.t",
		"INSERT INTO d.t SELECT seq, JSON_OBJECT('k', seq), REPEAT('é', 20) FROM d.seq_1001_to_200000")
	s.Restart(t, 0) // the statistics come back from the persistent ones of 1000 rows
	var stat int64
	if err := db.QueryRow("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't'").Scan(&stat); err != nil || stat > 10000 {
		t.Skipf("the statistics were recalculated (%d rows, %v): nothing to scale", stat, err)
	}
	es, err := TableEstimates(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Table.Schema == "d" && e.Table.Name == "t" {
			if e.Rows < 100_000 || e.Rows > 400_000 || e.Bytes < 4_000_000 {
				t.Fatalf("estimate %+v for 200000 rows of about 60 bytes (statistics: %d rows)", e, stat)
			}
			return
		}
	}
	t.Fatalf("d.t not listed: %+v", es)
}
