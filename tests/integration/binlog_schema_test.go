package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-db/tributary/tests/framework/e2e"
)

// TestE2EBinlogSchemaRepairsSkippedDDL is the case binlog-schema exists for. The upstreams write
// binlogs without column names (binlog_row_metadata=MINIMAL, MariaDB's default), so rows are decoded
// with the tracked schema. A DDL of db_1.t_1 is skipped with binlog skip (the DBA runs it downstream
// by hand); rows with the new shape then no longer fit the tracked schema and the subtask pauses,
// naming binlog-schema. binlog-schema update --from-source and resume-task go on, nothing lost;
// binlog-schema list shows the repaired schema after the worker restarts, and a paused subtask's
// query-status keeps its positions.
func TestE2EBinlogSchemaRepairsSkippedDDL(t *testing.T) {
	c := startWith(t, e2e.Options{Workers: 2, MasterArgs: []string{"--openapi"}, MariaDBArgs: []string{"--binlog-row-metadata=MINIMAL"}}, true)
	c.up(0, insertRows("db_1.t_1", 1, 11, ""))
	c.up(1, insertRows("db_2.t_1", 1001, 1011, ""))
	c.waitRow(1010)
	c.waitRow(10)

	c.ok("pause-task", c.task)
	c.until("source 1 paused, its positions shown", func(r e2e.Result) bool {
		for _, s := range r.List("sources") {
			for _, st := range s.List("subTaskStatus") {
				if s.Get("sourceStatus").Str("source") == s1 {
					return st.Str("stage") == "Paused" && st.Get("sync").Str("syncerBinlog") != "" && st.Get("sync").Str("masterBinlog") != ""
				}
			}
		}
		return false
	}, "query-status", c.task)
	c.up(0, "ALTER TABLE db_1.t_1 ADD COLUMN c INT")
	pos := alterPosition(t, c, "ADD COLUMN c")
	c.ok("binlog", "skip", c.task, "-b", pos, "-s", s1)
	c.down("ALTER TABLE db.t ADD COLUMN c INT") // what the DBA who skipped it does by hand
	c.up(0, insertRows("db_1.t_1", 100, 110, ", 7"))
	c.up(1, insertRows("db_2.t_1", 1100, 1110, ""))
	c.ok("resume-task", c.task)

	r := c.until("source 1 paused on rows its tracked schema does not fit", func(r e2e.Result) bool {
		for _, st := range subtasks(r) {
			for _, e := range st.Get("result").List("errors") {
				if st.Str("stage") == "Paused" && strings.Contains(e.Str("RawCause")+e.Str("Message"), "binlog-schema update") {
					return true
				}
			}
		}
		return false
	}, "query-status", c.task)
	msg := fmt.Sprint(r)
	for _, want := range []string{"binlog-schema update " + c.task + " db_1 t_1 --from-source -s " + s1, "resume-task " + c.task} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the error does not say %q: %s", want, msg)
		}
	}
	c.waitRow(1109) // source 2 goes on meanwhile

	// list shows what is tracked: no column c.
	l := c.ok("binlog-schema", "list", c.task, "db_1", "t_1", "-s", s1)
	if sql := l.List("sources")[0].Str("msg"); !strings.Contains(sql, "CREATE TABLE `db_1`.`t_1`") || !strings.Contains(sql, "`v` varchar(32)") || strings.Contains(sql, "`c`") {
		t.Fatalf("binlog-schema list before the repair: %s", sql)
	}
	// Bad requests change nothing, and dmctl says so in its exit status (checked by Dmctl).
	for _, args := range [][]string{
		{"binlog-schema", "update", c.task, "db_1", "t_1", "-s", s1},                                         // no schema given
		{"binlog-schema", "update", c.task, "db_1", "nosuch", "--from-source", "-s", s1},                     // no such table
		{"binlog-schema", "update", c.task, "db_1", "t_1", "--from-source", "-s", s2},                        // s2 runs: refused
		{"binlog-schema", "update", c.task, "db_1", "t_1", c.writeFile("bad.sql", "DROP TABLE x"), "-s", s1}, // not a CREATE TABLE
	} {
		if r, out, err := c.Dmctl(args...); err == nil && r.Bool("result") {
			t.Fatalf("dmctl %s worked: %s", strings.Join(args, " "), out)
		}
	}
	c.ok("binlog-schema", "update", c.task, "db_1", "t_1", "--from-source", "-s", s1)
	l = c.ok("binlog-schema", "list", c.task, "db_1", "t_1", "-s", s1)
	if sql := l.List("sources")[0].Str("msg"); !strings.Contains(sql, "`c` int(11)") {
		t.Fatalf("binlog-schema list after the repair: %s", sql)
	}
	c.ok("resume-task", c.task)
	c.waitRow(109)
	c.waitSynced()
	if n := c.converge("id, v"); n != 40 {
		t.Fatalf("%d rows downstream, want 40", n)
	}
	downC, err := e2e.Rows(c.DownDB, "SELECT id, c FROM db.t WHERE c IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	want, err := e2e.Rows(c.UpDBs[0], "SELECT id, c FROM db_1.t_1 WHERE c IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(downC, ";") != strings.Join(want, ";") || len(want) != 10 {
		t.Fatalf("column c downstream %v, upstream %v", downC, want)
	}
	// While the subtask runs, update is refused (the syncer holds its own copy).
	if r, _, _ := c.Dmctl("binlog-schema", "update", c.task, "db_1", "t_1", "--from-source", "-s", s1); r.Bool("result") ||
		!strings.Contains(fmt.Sprint(r), "needs the subtask paused") {
		t.Fatalf("update while running: %v", r)
	}

	// The repaired schema is in the checkpoint: a restarted worker shows it (and uses it).
	w := c.Worker(c.workerOf(s1))
	w.Stop()
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	c.up(0, insertRows("db_1.t_1", 200, 205, ", 8"))
	c.waitRow(204)
	c.until("binlog-schema list after the restart", func(r e2e.Result) bool {
		ss := r.List("sources")
		return r.Bool("result") && len(ss) == 1 && strings.Contains(ss[0].Str("msg"), "`c` int(11)")
	}, "binlog-schema", "list", c.task, "db_1", "t_1", "-s", s1)

	// The OpenAPI answers the same: GET the tracked schema; PUT while the subtask runs is refused,
	// as is a body with a field DM does not have.
	url := "http://" + c.Master.Addr + "/api/v1/tasks/" + c.task + "/sources/" + s1 + "/schemas/db_1/t_1"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema string `json:"schema_name"`
		Table  string `json:"table_name"`
		SQL    string `json:"schema_create_sql"`
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || got.Schema != "db_1" || got.Table != "t_1" || !strings.Contains(got.SQL, "`c` int(11)") {
		t.Fatalf("GET %s: %s %+v %v", url, resp.Status, got, err)
	}
	for body, want := range map[string]string{`{"from_source": true}`: "needs the subtask paused", `{"from_sourc": true}`: "unknown field"} {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Fatalf("PUT %s %s: %s %s", url, body, resp.Status, b)
		}
	}
}

// alterPosition finds the binlog position (FILE:POS, as SHOW BINLOG EVENTS' Pos) of the query event on
// upstream 1 that contains what.
func alterPosition(t *testing.T, c *e2eCluster, what string) string {
	t.Helper()
	rows, err := c.UpDBs[0].Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for rows.Next() {
		var name string
		var size any
		if err := rows.Scan(&name, &size); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, name)
	}
	rows.Close()
	for i := len(logs) - 1; i >= 0; i-- {
		evs, err := c.UpDBs[0].Query("SHOW BINLOG EVENTS IN '" + logs[i] + "'")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := evs.Columns()
		found := ""
		for evs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for j := range vals {
				ptrs[j] = &vals[j]
			}
			if err := evs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			// Log_name, Pos, Event_type, Server_id, End_log_pos, Info
			if fmt.Sprintf("%s", vals[2]) == "Query" && strings.Contains(fmt.Sprintf("%s", vals[5]), what) {
				found = fmt.Sprintf("%s:%v", vals[0], vals[1])
			}
		}
		evs.Close()
		if found != "" {
			return found
		}
	}
	t.Fatalf("no query event with %q in the binlog of upstream 1", what)
	return ""
}
