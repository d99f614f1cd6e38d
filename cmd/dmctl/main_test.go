package main

import (
	"slices"
	"strings"
	"testing"

	pb "github.com/tributary-db/tributary/proto"
)

func source(name string, subs ...*pb.SubTaskStatus) *pb.QueryStatusResponse {
	return &pb.QueryStatusResponse{Result: true, SourceStatus: &pb.SourceStatus{Source: name}, SubTaskStatus: subs}
}

func sub(task, stage string, errs int) *pb.SubTaskStatus {
	s := &pb.SubTaskStatus{Name: task, Stage: stage}
	if errs > 0 {
		s.Result = &pb.ProcessResult{Errors: make([]*pb.ProcessError, errs)}
	}
	return s
}

// query-status without a task name prints DM's list of tasks, with DM's rule for a task's status.
func TestSummarize(t *testing.T) {
	errStatus := "Error - Some error occurred in subtask. Please run `query-status b` to get more details."
	for _, c := range []struct {
		name    string
		sources []*pb.QueryStatusResponse
		want    map[string]string
	}{
		{"all running", []*pb.QueryStatusResponse{source("s1", sub("a", "Running", 0)), source("s2", sub("a", "Running", 0))}, map[string]string{"a": "Running"}},
		{"all new", []*pb.QueryStatusResponse{source("s1", sub("a", "New", 0)), source("s2", sub("a", "New", 0))}, map[string]string{"a": "New"}},
		{"new and running", []*pb.QueryStatusResponse{source("s1", sub("a", "New", 0)), source("s2", sub("a", "Running", 0))}, map[string]string{"a": "Running"}},
		{"one paused", []*pb.QueryStatusResponse{source("s1", sub("a", "Running", 0)), source("s2", sub("a", "Paused", 0))}, map[string]string{"a": "Paused"}},
		{"paused with an error wins over paused", []*pb.QueryStatusResponse{
			source("s1", sub("b", "Paused", 0), sub("a", "Finished", 0)), source("s2", sub("b", "Paused", 1), sub("a", "Finished", 0)), source("s3", sub("b", "Running", 0)),
		}, map[string]string{"a": "Finished", "b": errStatus}},
	} {
		got := summarize(&pb.QueryStatusListResponse{Result: true, Sources: c.sources})
		if !got.Result || len(got.Tasks) != len(c.want) {
			t.Errorf("%s: %+v", c.name, got)
			continue
		}
		for i, task := range got.Tasks {
			if i > 0 && got.Tasks[i-1].TaskName >= task.TaskName {
				t.Errorf("%s: tasks not in name order: %+v", c.name, got.Tasks)
			}
			if task.TaskStatus != c.want[task.TaskName] {
				t.Errorf("%s: task %s is %q, want %q", c.name, task.TaskName, task.TaskStatus, c.want[task.TaskName])
			}
		}
		if c.name == "paused with an error wins over paused" && !slices.Equal(got.Tasks[1].Sources, []string{"s1", "s2", "s3"}) {
			t.Errorf("task b's sources %q", got.Tasks[1].Sources)
		}
	}
	if got := summarize(&pb.QueryStatusListResponse{Result: true}); got.Tasks == nil || len(got.Tasks) != 0 {
		t.Errorf("no task: %+v (want an empty list, printed as [])", got)
	}
}

// dmctl's exit status follows the answer it prints: a result false anywhere a script looks (the
// answer's or one source's) is 1, so `dmctl check-task t.yaml && start` does what it says.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		printed string
		want    int
	}{
		{`{"result": true, "msg": "pre-check is passed. "}`, 0},
		{`{"result": false, "msg": "precheck failed"}`, 1},
		{`{"result": true, "sources": [{"result": true, "source": "s1"}, {"result": false, "source": "s2", "msg": "worker offline"}]}`, 1},
		{`{"result": true, "sources": [{"result": true, "source": "s1"}]}`, 0},
		{`{"op": "Pause", "result": false, "sources": []}`, 1},
		{`{"result": true, "msg": "", "tasks": [{"taskName": "t", "sources": ["s1"]}]}`, 0},
		{`{"msg": "no result field"}`, 0},
	} {
		if got := exitStatus([]byte(c.printed)); got != c.want {
			t.Errorf("exitStatus(%s) = %d, want %d", c.printed, got, c.want)
		}
	}
}

// A --start-time dmctl cannot read is a usage error naming the flag and the formats: nothing is sent
// (the master's address here answers nothing). check-task does not take it.
func TestStartTimeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start-task", "--start-time", "2026/12/06 17:00:00", "task.yaml"}, `--start-time "2026/12/06 17:00:00" is not a time`},
		{[]string{"start-task", "--start-time", "2026-12-06", "task.yaml"}, "YYYY-MM-DD HH:MM:SS"},
		{[]string{"check-task", "--start-time", "2026-12-06 17:00:00", "task.yaml"}, "check-task --start-time is not supported yet"},
	} {
		var out, errb strings.Builder
		code := run(append([]string{"--master-addr", "127.0.0.1:1", "--rpc-timeout", "1s"}, c.args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String()+out.String(), c.want) {
			t.Errorf("dmctl %v: exit %d, printed %s%s; want 2 and %q", c.args, code, out.String(), errb.String(), c.want)
		}
	}
}
