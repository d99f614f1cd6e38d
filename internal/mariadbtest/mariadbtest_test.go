package mariadbtest

import "testing"

func TestStartHasRowBinlog(t *testing.T) {
	s := Start(t)
	db := s.DB(t)
	var name, format, image string
	if err := db.QueryRow("SHOW VARIABLES LIKE 'binlog_format'").Scan(&name, &format); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SHOW VARIABLES LIKE 'binlog_row_image'").Scan(&name, &image); err != nil {
		t.Fatal(err)
	}
	if format != "ROW" || image != "FULL" {
		t.Fatalf("binlog_format %s, binlog_row_image %s", format, image)
	}
}
