package ddl

import "testing"

func TestWithDefaultCollation(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CREATE TABLE `db`.`p` (`id` INT PRIMARY KEY,`c` VARCHAR(8))",
			"CREATE TABLE `db`.`p` (`id` INT PRIMARY KEY,`c` VARCHAR(8)) DEFAULT COLLATE = LATIN1_SWEDISH_CI"},
		{"CREATE TABLE `db`.`p` (`id` INT) ENGINE = InnoDB PARTITION BY HASH (`id`) PARTITIONS 2",
			"CREATE TABLE `db`.`p` (`id` INT) ENGINE = InnoDB DEFAULT COLLATE = LATIN1_SWEDISH_CI PARTITION BY HASH (`id`) PARTITIONS 2"},
		{"CREATE TABLE `db`.`p` (`id` INT) CHARSET utf8mb4", "CREATE TABLE `db`.`p` (`id` INT) CHARSET utf8mb4"}, // its own: as it is
		{"CREATE TABLE `db`.`p` (`id` INT) COLLATE utf8mb4_bin", "CREATE TABLE `db`.`p` (`id` INT) COLLATE utf8mb4_bin"},
		{"CREATE TABLE `db`.`p` LIKE `db`.`q`", "CREATE TABLE `db`.`p` LIKE `db`.`q`"},
		{"ALTER TABLE `db`.`p` ADD COLUMN `x` INT", "ALTER TABLE `db`.`p` ADD COLUMN `x` INT"},
	} {
		got, err := WithDefaultCollation(c.in, "latin1_swedish_ci")
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.in, got, err, c.want)
		}
	}
}
