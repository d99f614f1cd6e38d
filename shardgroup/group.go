package shardgroup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// DDLItem is one sharding DDL step of one source table: the split DDLs of one binlog event that
// concern that table, already rewritten to the target.
type DDLItem struct {
	Source vocab.TableName `json:"source"`
	Target vocab.TableName `json:"target"`
	DDLs   []string        `json:"ddls"`
	Pos    vocab.Position  `json:"pos"`
}

func (it DDLItem) String() string {
	return fmt.Sprintf("%s %s %q", it.Source, it.Pos, it.DDLs)
}

// ShardingSequence is the DDL history of one source table within its group: the items not yet
// trimmed (index-aligned with the group's steps) and the last position seen, for re-entrancy.
type ShardingSequence struct {
	Table   vocab.TableName
	Items   []DDLItem
	LastPos vocab.Position
	// Gone: the table was dropped upstream after it passed the active step. It stays until that
	// step and any later one it reached are resolved, because the DML it wrote after them was held
	// back and must be read again; it never blocks a step.
	Gone bool
}

// InconsistentError reports two tables with different DDLs at the same step of one group.
type InconsistentError struct {
	Target          vocab.TableName
	Step            int
	Table, Other    vocab.TableName
	DDLs, OtherDDLs []string
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("detect inconsistent DDL sequence for target %s at step %d: table %s has DDLs %q, but table %s has %q",
		e.Target, e.Step, e.Table, e.DDLs, e.Other, e.OtherDDLs)
}

// SyncResult is what TrySync and RemoveTable report.
type SyncResult struct {
	// Duplicate: the item was already known (re-read binlog); nothing changed.
	Duplicate bool
	// Resolved: for a duplicate, its step has already been resolved downstream.
	Resolved bool
	// Active: the item is the group's active step (not a later, queued one).
	Active bool
	// Synced: every table of the group has reached the active step.
	Synced bool
	// ActiveDDLs are the DDLs of the active step (nil when nothing is pending).
	ActiveDDLs []string
	// Remaining are the tables that have not reached the active step, sorted.
	Remaining []vocab.TableName
}

// ShardingGroup is the set of source tables of one source that route to one target table.
type ShardingGroup struct {
	target vocab.TableName
	tables map[vocab.TableName]*ShardingSequence
	steps  []DDLItem // the first item seen at each step
	active int       // index of the oldest unresolved step
	// dropped: tables removed from the group, with the position of their removal; their DDLs read
	// again before it (a re-sync or a restart reads them again) are duplicates.
	dropped map[vocab.TableName]vocab.Position
	// renamed: tables renamed within the group, to their new name and the rename's position; their
	// DDLs read again before it are the renamed sequence's duplicates.
	renamed map[vocab.TableName]renaming
}

type renaming struct {
	to vocab.TableName
	at vocab.Position
}

// NewShardingGroup returns an empty group for target.
func NewShardingGroup(target vocab.TableName) *ShardingGroup {
	return &ShardingGroup{target: target, tables: map[vocab.TableName]*ShardingSequence{}, dropped: map[vocab.TableName]vocab.Position{}, renamed: map[vocab.TableName]renaming{}}
}

// Target is the group's target table.
func (g *ShardingGroup) Target() vocab.TableName { return g.target }

// InSharding reports whether a sharding DDL step is pending.
func (g *ShardingGroup) InSharding() bool { return g.active < len(g.steps) }

// Tables returns the group's tables, sorted (not those dropped upstream).
func (g *ShardingGroup) Tables() []vocab.TableName {
	out := make([]vocab.TableName, 0, len(g.tables))
	for t, seq := range g.tables {
		if !seq.Gone {
			out = append(out, t)
		}
	}
	vocab.SortTables(out)
	return out
}

// AddTable adds a source table. resolved is the position up to which the table's DDLs are already
// applied downstream (its checkpoint; zero for none): items at or before it are duplicates. Adding a
// table while a step is pending is refused, since the new table's schema relative to that step is
// unknown. Adding a member again only moves its resolved position forward.
func (g *ShardingGroup) AddTable(table vocab.TableName, resolved vocab.Position) error {
	if seq, ok := g.tables[table]; ok && !seq.Gone {
		if resolved.Compare(seq.LastPos) > 0 && len(seq.Items) == 0 {
			seq.LastPos = resolved
		}
		return nil
	}
	if g.InSharding() {
		return fmt.Errorf("cannot add table %s to the sharding group of %s while DDLs %q are in progress",
			table, g.target, g.steps[g.active].DDLs)
	}
	delete(g.dropped, table)
	delete(g.renamed, table)
	g.tables[table] = &ShardingSequence{Table: table, LastPos: resolved}
	return nil
}

// RemoveTable removes a source table dropped upstream at pos. The group may become synced by it. A
// table that had passed the active step stays, as gone, until the steps it reached are resolved: its
// DML after them is held back, and the resolution must name it for that DML to be read again.
func (g *ShardingGroup) RemoveTable(table vocab.TableName, pos vocab.Position) SyncResult {
	seq, ok := g.tables[table]
	if !ok || seq.Gone {
		return g.status() // read again, or never a member
	}
	if prev, ok := g.dropped[table]; !ok || pos.Compare(prev) > 0 {
		g.dropped[table] = pos
	}
	if len(seq.Items) > g.active {
		seq.Gone = true
	} else {
		delete(g.tables, table)
	}
	if len(g.tables) == 0 {
		g.steps, g.active = nil, 0
	}
	return g.status()
}

// RenameTable gives member from the name to (RENAME TABLE of a shard to a name that routes to the
// same target): its DDL sequence, and with it the steps it has reached and the DML held back behind
// them, follow it. resolved is the position up to which DDLs of the new name are already applied
// downstream (its checkpoint after a restart that read the rename again; zero for none). Nothing
// else changes: the group neither gains nor loses a member.
func (g *ShardingGroup) RenameTable(from, to vocab.TableName, at, resolved vocab.Position) error {
	seq, ok := g.tables[from]
	if !ok || seq.Gone {
		return fmt.Errorf("cannot rename %s to %s: %s is not in the sharding group of %s", from, to, from, g.target)
	}
	if _, ok := g.tables[to]; ok {
		// A member, or a dropped table whose DML is held back under that name.
		return fmt.Errorf("cannot rename %s to %s: %s is already in the sharding group of %s", from, to, to, g.target)
	}
	delete(g.tables, from)
	delete(g.dropped, to)
	delete(g.renamed, to)
	g.renamed[from] = renaming{to: to, at: at}
	seq.Table = to
	for i := range seq.Items {
		seq.Items[i].Source = to
	}
	if resolved.Compare(seq.LastPos) > 0 {
		seq.LastPos = resolved
	}
	g.tables[to] = seq
	return nil
}

// Member reports whether table is in the group (not dropped).
func (g *ShardingGroup) Member(table vocab.TableName) bool {
	seq, ok := g.tables[table]
	return ok && !seq.Gone
}

// Holds reports whether the group keeps a sequence under table's name: a member, or a table dropped
// upstream whose held-back DML is still to be read again.
func (g *ShardingGroup) Holds(table vocab.TableName) bool {
	_, ok := g.tables[table]
	return ok
}

// TrySync adds item to its table's sequence and reports the group's state. An item at or before the
// table's last position is a duplicate. An item that differs from the group's DDLs at its step is an
// *InconsistentError and changes nothing.
func (g *ShardingGroup) TrySync(item DDLItem) (SyncResult, error) {
	seq, ok := g.tables[item.Source]
	if r, was := g.renamed[item.Source]; !ok && was && item.Pos.Compare(r.at) < 0 {
		// Read again (a re-sync) from before the rename: the item is in the sequence under its new name.
		item.Source = r.to
		return g.TrySync(item)
	}
	if !ok || seq.Gone {
		if at, was := g.dropped[item.Source]; was && item.Pos.Compare(at) < 0 {
			if ok {
				return g.duplicate(seq, item)
			}
			res := g.status()
			res.Duplicate, res.Resolved = true, true // every step it reached before its drop is resolved
			return res, nil
		}
		return SyncResult{}, fmt.Errorf("table %s is not in the sharding group of target %s", item.Source, g.target)
	}
	if len(item.DDLs) == 0 {
		return SyncResult{}, fmt.Errorf("DDL item of table %s at %s has no DDLs", item.Source, item.Pos)
	}
	if !seq.LastPos.IsZero() && item.Pos.Compare(seq.LastPos) <= 0 {
		return g.duplicate(seq, item)
	}
	step := len(seq.Items)
	if step < len(g.steps) && !slices.Equal(g.steps[step].DDLs, item.DDLs) {
		first := g.steps[step]
		return SyncResult{}, &InconsistentError{
			Target: g.target, Step: g.stepNumber(step),
			Table: item.Source, DDLs: item.DDLs, Other: first.Source, OtherDDLs: first.DDLs,
		}
	}
	item.DDLs = slices.Clone(item.DDLs)
	seq.Items = append(seq.Items, item)
	seq.LastPos = item.Pos
	if step == len(g.steps) {
		g.steps = append(g.steps, item)
	}
	res := g.status()
	res.Active = step == g.active
	return res, nil
}

// stepNumber counts steps from 1 for messages.
func (g *ShardingGroup) stepNumber(i int) int { return i + 1 }

func (g *ShardingGroup) duplicate(seq *ShardingSequence, item DDLItem) (SyncResult, error) {
	res := g.status()
	res.Duplicate = true
	for i, it := range seq.Items {
		if it.Pos.Compare(item.Pos) != 0 {
			continue
		}
		if !slices.Equal(it.DDLs, item.DDLs) {
			return SyncResult{}, fmt.Errorf("table %s at %s: DDLs %q differ from %q read there before",
				item.Source, item.Pos, item.DDLs, it.DDLs)
		}
		res.Resolved = i < g.active
		res.Active = i == g.active
		return res, nil
	}
	// Not among the kept items: it was resolved and trimmed, or it lies before the table's resolved
	// position. Either way it is done downstream.
	res.Resolved = true
	return res, nil
}

func (g *ShardingGroup) status() SyncResult {
	var res SyncResult
	if !g.InSharding() {
		return res
	}
	res.ActiveDDLs = slices.Clone(g.steps[g.active].DDLs)
	for t, seq := range g.tables {
		if len(seq.Items) <= g.active {
			res.Remaining = append(res.Remaining, t)
		}
	}
	vocab.SortTables(res.Remaining)
	res.Synced = len(res.Remaining) == 0
	return res
}

// Status reports the group's state without changing it.
func (g *ShardingGroup) Status() SyncResult { return g.status() }

// Resolution says where to re-read the binlog after a step is resolved.
type Resolution struct {
	// DDLs of the step that was resolved.
	DDLs []string
	// ResyncFrom is the earliest position of the resolved step among the group's tables: DML held back
	// behind it lies after this position.
	ResyncFrom vocab.Position
	// Tables that had passed the step, whose held-back DML must be replayed, sorted.
	Tables []vocab.TableName
	// Positions of the step's item in each of those tables, and under the names a table had when it
	// read the item, where it was renamed within the group since (what a restart reads again).
	Positions map[vocab.TableName]vocab.Position
}

// ResolveActive marks the active step as executed (or skipped) downstream. The group must be synced.
// When every step is resolved, the sequences are trimmed so memory does not grow with history.
func (g *ShardingGroup) ResolveActive() (Resolution, error) {
	st := g.status()
	if !g.InSharding() {
		return Resolution{}, fmt.Errorf("sharding group of %s has no pending DDL to resolve", g.target)
	}
	if !st.Synced {
		return Resolution{}, fmt.Errorf("sharding group of %s is not synced for DDLs %q: waiting for %s",
			g.target, st.ActiveDDLs, joinTables(st.Remaining))
	}
	res := Resolution{DDLs: st.ActiveDDLs, Positions: map[vocab.TableName]vocab.Position{}}
	for t, seq := range g.tables {
		pos := seq.Items[g.active].Pos
		res.Positions[t] = pos
		if len(res.Tables) == 0 || pos.Compare(res.ResyncFrom) < 0 {
			res.ResyncFrom = pos
		}
		res.Tables = append(res.Tables, t)
		g.oldNames(t, pos, res.Positions)
	}
	vocab.SortTables(res.Tables)
	g.active++
	for t, seq := range g.tables {
		if seq.Gone && len(seq.Items) <= g.active {
			delete(g.tables, t) // every step it reached is resolved
		}
	}
	if len(g.tables) == 0 || g.active == len(g.steps) {
		for _, seq := range g.tables {
			seq.Items = nil
		}
		g.steps, g.active = nil, 0
	}
	return res, nil
}

// oldNames adds to positions, for a step's item at pos of table t, the names t had before renames
// within the group that came after pos: the binlog names the item by the name it had then, and a
// restart that reads it again (from a resume point before the rename) must find it resolved under
// that name, as the table's other items are.
func (g *ShardingGroup) oldNames(t vocab.TableName, pos vocab.Position, positions map[vocab.TableName]vocab.Position) {
	for from, r := range g.renamed {
		if r.to == t && pos.Compare(r.at) < 0 {
			if _, member := g.tables[from]; !member {
				positions[from] = pos
				g.oldNames(from, pos, positions)
			}
		}
	}
}

// Blocked reports whether DML of table at pos must be held back: the table has an unresolved DDL
// before pos. DML read again (a re-sync) from before a rename within the group carries the old name:
// it is judged by the renamed sequence, as TrySync judges the DDLs read again so.
func (g *ShardingGroup) Blocked(table vocab.TableName, pos vocab.Position) bool {
	seq, ok := g.tables[table]
	if r, was := g.renamed[table]; !ok && was && pos.Compare(r.at) < 0 {
		return g.Blocked(r.to, pos)
	}
	if !ok || len(seq.Items) <= g.active {
		return false
	}
	return seq.Items[g.active].Pos.Compare(pos) < 0
}

// Unresolved describes the pending step for status output.
type Unresolved struct {
	Target        vocab.TableName
	DDLs          []string
	FirstPosition vocab.Position
	Synced        []vocab.TableName
	Unsynced      []vocab.TableName
}

// Unresolved returns the pending step, or false when there is none.
func (g *ShardingGroup) Unresolved() (Unresolved, bool) {
	if !g.InSharding() {
		return Unresolved{}, false
	}
	u := Unresolved{Target: g.target, DDLs: slices.Clone(g.steps[g.active].DDLs)}
	for t, seq := range g.tables {
		if len(seq.Items) > g.active {
			u.Synced = append(u.Synced, t)
			if pos := seq.Items[g.active].Pos; u.FirstPosition.IsZero() || pos.Compare(u.FirstPosition) < 0 {
				u.FirstPosition = pos
			}
		} else {
			u.Unsynced = append(u.Unsynced, t)
		}
	}
	vocab.SortTables(u.Synced)
	vocab.SortTables(u.Unsynced)
	return u, true
}

func joinTables(ts []vocab.TableName) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// SyncedAt is, when the group is synced, the latest position among its tables' items of the active
// step: a reader past it has read every table's DDL of the step. False when it is not synced.
func (g *ShardingGroup) SyncedAt() (vocab.Position, bool) {
	if !g.InSharding() || !g.status().Synced {
		return vocab.Position{}, false
	}
	var at vocab.Position
	for _, seq := range g.tables {
		if len(seq.Items) > g.active {
			if pos := seq.Items[g.active].Pos; pos.Compare(at) > 0 {
				at = pos
			}
		}
	}
	return at, true
}
