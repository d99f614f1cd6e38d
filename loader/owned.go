package loader

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/vocab"
)

// A load's hidden tables are the task's own: named after the task (HiddenName), created with a mark
// in their table comment naming the task and the load (the load id of the source's load header that
// created it), and dropped or renamed only when that mark matches a load header of the task that
// names the table. Whatever else has such a name is someone else's and is left as it is. The cut-over
// gives the target the comment of its upstream table back.

// HiddenPrefix starts the name of a table that a load fills before the cut-over renames it into place.
const HiddenPrefix = "_tributary_load_"

// HiddenName is the name target is loaded under by task: HiddenPrefix, the first 8 hex digits of the
// task name's SHA-256, "_" and the target's name, e.g. `_tributary_load_1f2e3d4c_orders`, so two
// tasks never share one. A name longer than MySQL's 64 characters keeps the first characters of the
// target's name and ends with "_" and 8 hex digits of the target's SHA-256.
//
// Loads planned by older versions used HiddenPrefix+name for every task; their load headers record
// that name, and a resumed load keeps using it.
func HiddenName(task string, target vocab.TableName) string {
	name := HiddenPrefix + meta.Hash(task)[:8] + "_" + target.Name
	if utf8.RuneCountInString(name) <= meta.MaxIdentifier {
		return name
	}
	tag := "_" + meta.Hash(target.String())[:8]
	r := []rune(name)
	return string(r[:meta.MaxIdentifier-len(tag)]) + tag
}

const markPrefix, markTask = "tributary load ", " of task "

// hiddenMark is the table comment of a hidden table created by the load loadID of task. Load ids are
// hex and task names letters, digits, '_', '-' and '.': no quoting is needed.
func hiddenMark(task, loadID string) string { return markPrefix + loadID + markTask + task }

// parseMark reads a hidden table's mark.
func parseMark(comment string) (task, loadID string, ok bool) {
	rest, ok := strings.CutPrefix(comment, markPrefix)
	if !ok {
		return "", "", false
	}
	loadID, task, ok = strings.Cut(rest, markTask)
	return task, loadID, ok && loadID != "" && task != ""
}

func newLoadID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// ownership is whose a downstream table of a hidden name is.
type ownership int

const (
	hiddenAbsent  ownership = iota
	hiddenOurs              // marked by a load of the task whose header names it (or an older version's, below)
	hiddenEarlier           // marked by a load of the task that no header names: its checkpoint is gone
	hiddenOther             // anything else: not this task's
)

// hiddenTable is a hidden table as the downstream shows it, and who owns it.
type hiddenTable struct {
	owner   ownership
	comment string
	by      *header // the header of the load that created it (hiddenOurs)
}

// inspectHidden judges table t against the task's load headers. A header written by an older version
// has no load id, and the tables it created have no mark: a table it names that carries no mark is
// taken as that load's (the older version created it or refused to start; it checked that no table of
// that name existed when it planned).
func inspectHidden(ctx context.Context, db *sql.DB, task string, t vocab.TableName, heads map[string]*header) (hiddenTable, error) {
	var comment string
	err := db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&comment)
	if errors.Is(err, sql.ErrNoRows) {
		return hiddenTable{owner: hiddenAbsent}, nil
	}
	if err != nil {
		return hiddenTable{}, fmt.Errorf("look for downstream table %s: %w", t, err)
	}
	ht := hiddenTable{owner: hiddenOther, comment: comment}
	mtask, id, marked := parseMark(comment)
	if marked && mtask != task {
		return ht, nil
	}
	for _, src := range sortedSources(heads) {
		h := heads[src]
		if !h.names(t) {
			continue
		}
		if marked && h.LoadID == id || !marked && h.LoadID == "" {
			ht.owner, ht.by = hiddenOurs, h
			return ht, nil
		}
	}
	if marked {
		ht.owner = hiddenEarlier
	}
	return ht, nil
}

// names reports whether the header loads a target under the hidden table t.
func (h *header) names(t vocab.TableName) bool {
	for _, m := range h.Targets {
		if m.Hidden != "" && m.dest() == t {
			return true
		}
	}
	return false
}

// restoreComment is the comment t gets back after the cut-over: its upstream table's.
func (h *header) restoreComment(t vocab.TableName) string {
	for _, m := range h.Targets {
		if m.Target == t {
			return m.Comment
		}
	}
	return ""
}

// refusal is the error for a hidden table the load may not use, rename or drop.
func refusal(task string, target, hidden vocab.TableName, ht hiddenTable, then string) error {
	if ht.owner == hiddenEarlier {
		return fmt.Errorf("downstream table %s is left from an earlier load of task %s (its comment %q marks it as that load's) whose checkpoint is gone; "+
			"it may hold part of that load: drop it (the task created it), then %s", hidden, task, ht.comment, then)
	}
	why := fmt.Sprintf("its comment %q is no mark of a load of the task", ht.comment)
	if ht.comment == "" {
		why = "it has no comment, so no mark of a load of the task"
	}
	return fmt.Errorf("downstream table %s, the name task %s loads %s under until its cut-over: a table of this name exists that task %s did not create "+
		"(%s); it is left as it is: rename it, then %s", hidden, task, target, task, why, then)
}

// decodeHeaders decodes the load headers of the task's sources.
func decodeHeaders(task string, rows map[string]meta.LoadRow) (map[string]*header, error) {
	out := make(map[string]*header, len(rows))
	for src, r := range rows {
		var h header
		if err := json.Unmarshal([]byte(r.Data), &h); err != nil {
			return nil, fmt.Errorf("load state of source %s of task %s: %w", src, task, err)
		}
		out[src] = &h
	}
	return out, nil
}

// taskHeaders reads the load headers of every source of a task; a task without a checkpoint table
// (or meta schema) has none.
func taskHeaders(ctx context.Context, down *sql.DB, metaSchema, task string) (map[string]*header, error) {
	rows, err := meta.NewStore(down, metaSchema, task, "").LoadHeaders(ctx)
	var me *mysql.MySQLError
	// 1146 no such table, 1049 no such database; 1054: a checkpoint table of the layout before
	// id_hash, which no load has written (a load's Store.Init migrates it first).
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049 || me.Number == 1054) {
		return map[string]*header{}, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeHeaders(task, rows)
}

// hiddenFor is the hidden name a load of task plans for target: the one a load header of the task
// records already (every source of a task loads a target into one table, and a load an older version
// planned keeps its name), else HiddenName.
func hiddenFor(task string, target vocab.TableName, heads map[string]*header) vocab.TableName {
	for _, src := range sortedSources(heads) {
		for _, m := range heads[src].Targets {
			if m.Target == target && m.Hidden != "" {
				return m.dest()
			}
		}
	}
	return vocab.TableName{Schema: target.Schema, Name: HiddenName(task, target)}
}

// HiddenConflict is the precheck of a target that a load of task will place (it does not exist): nil
// when the hidden tables the load would use are absent or the task's loads', else the error the load
// would stop on. fresh: start-task --remove-meta drops the task's loads first (DropHidden), and a new
// load then uses HiddenName.
func HiddenConflict(ctx context.Context, down *sql.DB, metaSchema, task string, target vocab.TableName, fresh bool) error {
	heads, err := taskHeaders(ctx, down, metaSchema, task)
	if err != nil {
		return err
	}
	names := []vocab.TableName{hiddenFor(task, target, heads)}
	if n := (vocab.TableName{Schema: target.Schema, Name: HiddenName(task, target)}); fresh && n != names[0] {
		names = append(names, n)
	}
	for _, hidden := range names {
		ht, err := inspectHidden(ctx, down, task, hidden, heads)
		if err != nil {
			return err
		}
		if ht.owner != hiddenAbsent && ht.owner != hiddenOurs {
			return refusal(task, target, hidden, ht, "start the task")
		}
	}
	return nil
}

func sortedSources(heads map[string]*header) []string {
	return slices.Sorted(maps.Keys(heads))
}

// CommentBack ends the cut-over's ALTER TABLE that gives a target its comment back, so that the
// statement reads as what it is in the downstream's logs.
const CommentBack = "/* tributary: the load cut-over gives the target its upstream comment back */"

// escapeString is s as the body of a quoted SQL string in a session whose sql_mode has or has not
// NO_BACKSLASH_ESCAPES.
func escapeString(s string, noBackslash bool) string {
	if !noBackslash {
		s = strings.ReplaceAll(s, `\`, `\\`)
	}
	return strings.ReplaceAll(s, "'", "''")
}
