package ddl

import "testing"

func TestNormalizeMariaDB(t *testing.T) {
	cases := map[string]string{
		"ALTER TABLE t ADD c INT AS (a+1) PERSISTENT":                      "ALTER TABLE t ADD c INT AS (a+1) STORED",
		"ALTER TABLE t ADD c INT AS (a+1) persistent COMMENT 'persistent'": "ALTER TABLE t ADD c INT AS (a+1) STORED COMMENT 'persistent'",
		"ALTER TABLE `persistent` ADD c INT DEFAULT 'it''s PERSISTENT'":    "ALTER TABLE `persistent` ADD c INT DEFAULT 'it''s PERSISTENT'",
		"ALTER TABLE t ADD c INT /* PERSISTENT */ -- PERSISTENT\n":         "ALTER TABLE t ADD c INT /* PERSISTENT */ -- PERSISTENT\n",
		"ALTER TABLE t ADD persistent_x INT":                               "ALTER TABLE t ADD persistent_x INT",
	}
	for in, want := range cases {
		got, _ := normalizeMariaDB(in)
		if got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
	parts, err := Split("ALTER TABLE db_1.t_1 ADD COLUMN c INT AS (id+1) PERSISTENT", "", nil)
	if err != nil || len(parts) != 1 || parts[0].SQL != "ALTER TABLE `db_1`.`t_1` ADD COLUMN `c` INT GENERATED ALWAYS AS(`id`+1) STORED" {
		t.Fatalf("MariaDB's PERSISTENT: %+v %v", parts, err)
	}
}
