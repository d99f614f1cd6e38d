package mariadbtest

import (
	"os"
	"strings"
	"testing"
)

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

func TestStartHasProductionDefaults(t *testing.T) {
	if os.Getenv("TRIBUTARY_TEST_CHARSET") == "latin1" {
		t.Skip("TRIBUTARY_TEST_CHARSET=latin1")
	}
	db := Start(t).DB(t)
	var charset, mode string
	if err := db.QueryRow("SELECT @@character_set_server, @@sql_mode").Scan(&charset, &mode); err != nil {
		t.Fatal(err)
	}
	if charset != "utf8mb4" || !strings.Contains(mode, "STRICT_TRANS_TABLES") {
		t.Fatalf("character_set_server %s, sql_mode %s: want utf8mb4 and strict", charset, mode)
	}
	db = Start(t, Latin1...).DB(t)
	if err := db.QueryRow("SELECT @@character_set_server").Scan(&charset); err != nil {
		t.Fatal(err)
	}
	if charset != "latin1" {
		t.Fatalf("latin1 variant: character_set_server %s", charset)
	}
}
