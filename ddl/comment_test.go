package ddl

import (
	"strings"
	"testing"
)

func TestWithTableComment(t *testing.T) {
	parsed, err := WithTableComment("CREATE TABLE IF NOT EXISTS `db`.`h` (`id` INT PRIMARY KEY) ENGINE = InnoDB COMMENT = 'the user''s' PARTITION BY HASH (`id`) PARTITIONS 2", "mark")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(parsed, "COMMENT") != 1 || !strings.Contains(parsed, "COMMENT = 'mark'") || strings.Index(parsed, "mark") > strings.Index(parsed, "PARTITION") {
		t.Fatalf("parsed: %s", parsed)
	}
	show := "CREATE TABLE IF NOT EXISTS `db`.`h` (\n  `id` int(11) NOT NULL,\n  `p` point NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='x'\n PARTITION BY HASH (`id`)\nPARTITIONS 2"
	got, err := WithTableComment(show, "mark")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(show, "COMMENT='x'", "COMMENT='x' COMMENT='mark'", 1); got != want && !strings.Contains(got, "COMMENT = 'mark'") {
		t.Fatalf("show create:\n%s\nwant\n%s", got, want)
	}
	if _, err := WithTableComment(show, "it's"); err == nil {
		t.Fatal("a quote in the comment was accepted")
	}
}
