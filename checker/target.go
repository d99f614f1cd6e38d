package checker

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/router"
)

// ItemTargetPrivilege (DM's name): the target user may create, change and drop what Tributary creates
// in the target databases and the meta schema, and write and read the rows there.
const ItemTargetPrivilege = "target_privilege"

// targetPrivileges are what the target user needs on each target database: the rows' and the
// CREATE of the targets (CREATE DATABASE IF NOT EXISTS needs it even where the database exists) always;
// ALTER and DROP for the replicated DDL and the load's cut-over (its RENAME), INDEX for index DDL.
var targetPrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX"}

// needed reports whether the task cannot run at all without privilege p: the rows' and CREATE; ALTER
// and DROP too for a task that loads (the cut-over renames the hidden tables into place). Without the
// others the DDL that needs them pauses the subtask when it comes: a warning.
func needed(p string, loads bool) bool {
	switch p {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "CREATE":
		return true
	case "ALTER", "DROP":
		return loads
	}
	return false
}

// grant is one line of SHOW GRANTS that gives privileges on *.* or on a database (a pattern).
type grant struct {
	db    string // "*" for *.*, else the database (or LIKE pattern) as written, unquoted
	privs map[string]bool
	all   bool
}

var grantLine = regexp.MustCompile("^GRANT (.+?) ON (\\*|`(?:[^`]|``)+`|[A-Za-z0-9_$%\\\\]+)\\.\\* TO ")

// parseGrants reads SHOW GRANTS lines: the grants on *.* and on databases, and whether some line could
// not be read for what it gives (a role granted, a proxy): then what is missing cannot be told.
func parseGrants(lines []string) (grants []grant, unsure bool) {
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "GRANT PROXY ON"), strings.HasPrefix(line, "GRANT USAGE ON"):
			continue
		case strings.Contains(line, " ON `") && strings.Contains(line, "`.`"):
			continue // a table's or a column's: not enough to create or drop tables
		}
		m := grantLine.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "GRANT ") && !strings.Contains(line, " ON ") {
				unsure = true // a role (GRANT `r` TO `u`): its privileges are not on this list
			}
			continue
		}
		g := grant{db: m[2], privs: map[string]bool{}}
		if strings.HasPrefix(g.db, "`") {
			g.db = strings.ReplaceAll(g.db[1:len(g.db)-1], "``", "`")
		}
		for _, p := range strings.Split(m[1], ",") {
			p = strings.ToUpper(strings.TrimSpace(p))
			if p == "ALL" || p == "ALL PRIVILEGES" {
				g.all = true
			}
			g.privs[p] = true
		}
		grants = append(grants, g)
	}
	return grants, unsure
}

// likeMatch reports whether name matches a grant's database pattern (% and _ wildcards, \ escapes).
func likeMatch(pattern, name string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			if i+1 < len(pattern) {
				i++
				re.WriteString(regexp.QuoteMeta(string(pattern[i])))
			}
		case '%':
			re.WriteString(".*")
		case '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	ok, _ := regexp.MatchString(re.String(), name)
	return ok
}

// missingOn is what of targetPrivileges the grants do not give on database db.
func missingOn(grants []grant, db string) []string {
	have := map[string]bool{}
	for _, g := range grants {
		if g.db != "*" && !likeMatch(g.db, db) && !strings.EqualFold(g.db, db) {
			continue
		}
		for _, p := range targetPrivileges {
			if g.all || g.privs[p] {
				have[p] = true
			}
		}
	}
	var missing []string
	for _, p := range targetPrivileges {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// targetSchemas adds to schemas the target databases of the tables of inst on source db.
func targetSchemas(ctx context.Context, db *sql.DB, task *config.Task, inst config.Instance, schemas map[string]bool) error {
	ba, rules := task.Rules(inst)
	rt, err := router.NewRouter(ba, rules)
	if err != nil {
		return err
	}
	tables, err := listTables(ctx, db, rt)
	if err != nil {
		return err
	}
	for _, t := range tables {
		schemas[t.target.Schema] = true
	}
	return nil
}

// checkTargetPrivileges checks that the target user has targetPrivileges on every target database,
// naming the grant that would give what is missing (the meta schema is probed by ItemMetaSchema).
func checkTargetPrivileges(ctx context.Context, r report, down *sql.DB, task *config.Task, schemas map[string]bool) {
	rows, err := down.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		r.warn(ItemTargetPrivilege, "", "SHOW GRANTS on the target database: %v; the target user's privileges are not checked", err)
		return
	}
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			r.warn(ItemTargetPrivilege, "", "SHOW GRANTS on the target database: %v", err)
			return
		}
		lines = append(lines, line)
	}
	rows.Close()
	grants, unsure := parseGrants(lines)
	for _, db := range slices.Sorted(maps.Keys(schemas)) {
		if db == task.MetaSchema {
			continue
		}
		missing := missingOn(grants, db)
		if len(missing) == 0 {
			continue
		}
		blocking := slices.ContainsFunc(missing, func(p string) bool { return needed(p, task.Dumps()) })
		msg := fmt.Sprintf("the target user lacks %s on target database %s (GRANT %s ON `%s`.* TO the target user)",
			strings.Join(missing, ", "), db, strings.Join(missing, ", "), strings.ReplaceAll(db, "`", "``"))
		switch {
		case unsure:
			r.warn(ItemTargetPrivilege, "", "%s; the user also has roles, whose privileges are not read: check them", msg)
		case blocking:
			r.fail(ItemTargetPrivilege, "", "%s: the task writes and creates its tables there", msg)
		default:
			r.warn(ItemTargetPrivilege, "", "%s: a replicated DDL that needs it pauses the subtask", msg)
		}
	}
}
