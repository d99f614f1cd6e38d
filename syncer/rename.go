package syncer

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// shardRenames follows RENAME TABLE of shard tables within their groups (the safety table's
// FollowRename): the shard's sequence, held-back DML and steps go with it to the new name, and
// nothing runs downstream. Everything keyed by upstream name (table checkpoints, tracked schemas,
// online DDL runs, which the new name gets a copy of) stays keyed by the name an event carries: the
// binlog names a table by its name at that event, and a re-read (re-sync, restart) reads the old name
// before the rename and the new one after it.
//
// Two things make that safe. A rename read again by a re-sync, whose groups already follow it, is
// recognised by its position (at). And a name a shard left while DML of it was held back (it had
// passed its group's pending step) must not be taken by another table before that step resolves:
// the held-back rows, read again under that name, would be judged by the other table's checkpoint.
// Such a rename (a swap through a third name while one of the two waits behind the lock) is refused.
// On a restart the groups are rebuilt from the tables at the resume position and every rename after
// it is read again, so none of this needs to be persisted.
type shardRenames struct {
	at      vocab.Position                               // end of the last rename applied to the groups
	vacated map[vocab.TableName]map[vocab.TableName]bool // per target: names left with DML held back behind the pending step
}

// rename carries out one RENAME part of a shard ending at end in the groups, or returns why it is
// refused (nothing changed then but group state a refused statement's restart rebuilds). The row
// shapes cached under either name are the unit's to forget (ddlReady.forgetShapes).
func (d *ddlPath) rename(p ddl.Part, end vocab.Position) (why string, err error) {
	src, dst := p.Source, p.RenamedTo
	r := d.router
	target := r.Route(src)
	g, ok := d.shard.groups[target]
	switch {
	case p.AlsoAlters:
		return "an ALTER TABLE RENAME that also changes the table cannot keep the shard's DDL sequence; " +
			"run the rename and the other changes as two statements", nil
	case !r.Sharded(src) || !ok || !g.Member(src):
		return fmt.Sprintf("it would bring %s into the shard group of %s: its rows were never replicated there", dst, r.Route(dst)), nil
	case r.Skip(dst):
		return fmt.Sprintf("its new name %s is not replicated by the task: the shard would leave %s", dst, target), nil
	case !r.Sharded(dst) || r.Route(dst) != target:
		return fmt.Sprintf("its new name %s routes to %s, not to %s: the shard would leave its merged table", dst, r.Route(dst), target), nil
	case g.Holds(dst) || d.shard.renames.vacated[target][dst]:
		return fmt.Sprintf("rows of an earlier table named %s wait behind the pending lock of %s; rename after the lock resolves", dst, target), nil
	}
	if g.Blocked(src, end) {
		if d.shard.renames.vacated == nil {
			d.shard.renames.vacated = map[vocab.TableName]map[vocab.TableName]bool{}
		}
		if d.shard.renames.vacated[target] == nil {
			d.shard.renames.vacated[target] = map[vocab.TableName]bool{}
		}
		d.shard.renames.vacated[target][src] = true
	}
	if err := g.RenameTable(src, dst, end, d.applied.resolvedAt(dst)); err != nil {
		return "", fmt.Errorf("source %s: %w", d.source, err)
	}
	if run, ok := d.runs[src]; ok {
		// The run stays under the old name too, as a tracked schema does: a restart from before the
		// rename reads the tool's cut-over again under that name and must find the ALTERs it swaps in
		// (the chaos soak, seed 5: the run moved, the re-read cut-over ran nothing, and the shard's
		// rows with the new column reached the downstream before it had the column).
		d.runs[dst] = run.Clone()
		d.onlineDirty[dst] = true
	}
	d.log.Info("shard table renamed within its group", zap.Stringer("table", src), zap.Stringer("to", dst),
		zap.Stringer("target", target), zap.Stringer("pos", end))
	return "", nil
}

// renameSettled forgets the names left behind in target's group once it has no pending step.
func (d *ddlPath) renameSettled(target vocab.TableName, g *shardgroup.ShardingGroup) {
	if !g.InSharding() {
		delete(d.shard.renames.vacated, target)
	}
}
