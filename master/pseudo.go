package master

import (
	"fmt"
	"slices"

	"github.com/tributary-db/tributary/ha"
	"github.com/tributary-db/tributary/pessimist"
	pb "github.com/tributary-db/tributary/proto"
)

// PseudoGroupNote is what DM's query-status shows, as the unsynced member of a pseudo sharding group,
// for a source that a lock waits for but that has no unresolved group of that target itself (it has
// not read the DDL yet). As in DM, the pseudo group lists no DDLs ("DDLs": []): the source has
// received none, and scripts that count a lock's DDL text in query-status count the sources that
// did.
const PseudoGroupNote = "this DM-worker doesn't receive any shard DDL of this group"

// addPseudoGroups adds DM's pseudo group to the sync status of every source that a lock of the
// subtask's task waits for and that shows no unresolved group for the lock's target.
func addPseudoGroups(resp *pb.QueryStatusListResponse, l *leaderState) {
	if l == nil || l.coord == nil {
		return
	}
	locks, err := l.coord.Locks()
	if err != nil {
		return
	}
	for _, src := range resp.Sources {
		if src.SourceStatus == nil {
			continue
		}
		for _, st := range src.SubTaskStatus {
			if st.Sync == nil {
				continue
			}
			for _, lk := range locks {
				if lk.Task != st.Name || !slices.Contains(lk.Unsynced, src.SourceStatus.Source) {
					continue
				}
				if slices.ContainsFunc(st.Sync.UnresolvedGroups, func(g *pb.ShardingGroup) bool { return g.Target == lk.Target }) {
					continue
				}
				st.Sync.UnresolvedGroups = append(st.Sync.UnresolvedGroups, &pb.ShardingGroup{
					Target: lk.Target, DDLs: []string{}, Synced: []string{}, Unsynced: []string{PseudoGroupNote}})
				st.Sync.Synced = false
				if st.UnresolvedDDLLockID == "" {
					st.UnresolvedDDLLockID = lk.ID
				}
			}
		}
	}
}

// waitNotes says, for each lock of task ("" for all) that waits for a source whose subtask is paused
// (pause-task -s) or that stop-task -s removed from the task, which source and what brings it back.
// A stopped task's locks are left out: its whole task is stopped.
func waitNotes(st ha.State, locks []pessimist.Lock, task string) []string {
	var out []string
	for _, lk := range locks {
		t, ok := st.Tasks[lk.Task]
		if !ok || (task != "" && lk.Task != task) {
			continue
		}
		for _, src := range lk.Unsynced {
			switch {
			case t.IsStopped(src):
				out = append(out, fmt.Sprintf("lock %s waits for source %s, which stop-task -s removed from task %s: start-task %s -s %s starts it again, "+
					"or shard-ddl-lock unlock %s resolves the lock without it", lk.ID, src, t.Name, t.Name, src, lk.ID))
			case t.StageOf(src) == ha.StagePaused:
				out = append(out, fmt.Sprintf("lock %s waits for source %s, whose subtask of task %s is paused: resume-task %s -s %s", lk.ID, src, t.Name, t.Name, src))
			}
		}
	}
	return out
}
