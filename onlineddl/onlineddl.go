// Package onlineddl turns what an online schema change tool (gh-ost, pt-online-schema-change) writes
// to the binlog back into the DDL the user meant, as DM's online-ddl does: a ghost table is created
// from the real one, altered, filled by a row copy (and triggers or binlog replay), and swapped in
// with a RENAME TABLE. Ghost and trash tables never reach the downstream; the ALTERs run on the ghost
// table are kept, and the cut-over RENAME becomes those ALTERs on the real table at that position.
//
// The package is pure: Decide reads a statement and the tracked runs and says what to do; the caller
// persists the runs with its checkpoint. Every step is keyed by binlog position, so a statement read
// again (a restart or a re-sync from an earlier position) changes nothing and gives the same answer.
package onlineddl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/vocab"
)

// DM's default rules: gh-ost's _t_gho ghost and _t_ghc/_t_del trash tables, pt-osc's _t_new ghost and
// _t_old trash tables. The first group is the real table's name.
var (
	DefaultShadowRules = []string{`^_(.+)_(?:new|gho)$`}
	DefaultTrashRules  = []string{`^_(.+)_(?:ghc|del|old)$`}
)

// Kind is what a table is to the rules.
type Kind int

// Table kinds.
const (
	Real  Kind = iota // a table of the user's
	Ghost             // a tool's copy of a real table, altered and swapped in at the cut-over
	Trash             // a tool's bookkeeping table, or the real table renamed away at the cut-over
)

// Rules recognise ghost and trash tables by name.
type Rules struct {
	shadow, trash []*regexp.Regexp
}

// NewRules compiles the shadow and trash table rules (DM's shadow-table-rules and trash-table-rules;
// empty: DM's defaults). A shadow rule's first group must be the real table's name.
func NewRules(shadow, trash []string) (*Rules, error) {
	if len(shadow) == 0 {
		shadow = DefaultShadowRules
	}
	if len(trash) == 0 {
		trash = DefaultTrashRules
	}
	r := &Rules{}
	for _, s := range shadow {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("shadow-table-rules %q: %w", s, err)
		}
		if re.NumSubexp() < 1 {
			return nil, fmt.Errorf("shadow-table-rules %q: needs a group that captures the real table's name", s)
		}
		r.shadow = append(r.shadow, re)
	}
	for _, s := range trash {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("trash-table-rules %q: %w", s, err)
		}
		r.trash = append(r.trash, re)
	}
	return r, nil
}

// Classify says what a table name is; for a ghost table also the real table's name.
func (r *Rules) Classify(name string) (Kind, string) {
	for _, re := range r.shadow {
		if m := re.FindStringSubmatch(name); m != nil {
			return Ghost, m[1]
		}
	}
	for _, re := range r.trash {
		if re.MatchString(name) {
			return Trash, ""
		}
	}
	return Real, ""
}

// Tool reports whether t is a ghost or trash table (its rows and DDL never go downstream).
func (r *Rules) Tool(t vocab.TableName) bool {
	k, _ := r.Classify(t.Name)
	return k != Real
}

// Run is one tool run on a real table, as the binlog showed it so far.
type Run struct {
	Ghost   vocab.TableName `json:"ghost"`
	Created vocab.Position  `json:"created"` // the ghost table's CREATE (zero: before the task started)
	DDLs    []Applied       `json:"ddls,omitempty"`
	CutOver vocab.Position  `json:"cutover"` // the RENAME that swapped the ghost in (zero: not yet)
	// Past are the table's earlier runs that swapped their ghost in, oldest first, each without a
	// Past of its own: a restart or a re-sync from before the latest run reads them again and must
	// find their ALTERs (the chaos soak, seed 18: a restart from before two pt-online-schema-change
	// runs on one shard took the first run's statements for re-reads of the second, swapped in
	// nothing, and the shard's group paused on an inconsistent DDL sequence). Prune drops those that
	// no restart reads again.
	Past []Run `json:"past,omitempty"`
}

// Clone is a copy of r that shares nothing with it.
func (r *Run) Clone() *Run {
	c := *r
	c.DDLs = append([]Applied(nil), r.DDLs...)
	c.Past = nil
	for _, p := range r.Past {
		c.Past = append(c.Past, *p.Clone())
	}
	return &c
}

// Prune drops the past runs swapped in before from (where a restart resumes: nothing before it is
// read again) and reports whether it dropped any.
func (r *Run) Prune(from vocab.Position) bool {
	n := 0
	for n < len(r.Past) && r.Past[n].CutOver.Compare(from) < 0 {
		n++
	}
	if n == 0 {
		return false
	}
	r.Past = append([]Run(nil), r.Past[n:]...)
	return true
}

// at is the run of the table (this one or a past one) whose statements span position p: created
// at or before it and swapped in at or after it (or not yet). Nil when p is before all of them.
func (r *Run) at(p vocab.Position) *Run {
	if r.Created.Compare(p) <= 0 {
		return r
	}
	for i := len(r.Past) - 1; i >= 0; i-- {
		if past := &r.Past[i]; past.Created.Compare(p) <= 0 && past.CutOver.Compare(p) >= 0 {
			return past
		}
	}
	return nil
}

// createdAt reports whether this run or a past one was created at p (a CREATE read again).
func (r *Run) createdAt(p vocab.Position) bool {
	if r.Created.Compare(p) == 0 {
		return true
	}
	for _, past := range r.Past {
		if past.Created.Compare(p) == 0 {
			return true
		}
	}
	return false
}

// Applied is one ALTER run on the ghost table, rewritten onto the real table.
type Applied struct {
	At  vocab.Position `json:"at"`
	SQL string         `json:"sql"`
}

// Runs are the tracked runs by real table.
type Runs map[vocab.TableName]*Run

// Encode is a run as the checkpoint keeps it ("" for none: the table's run is over).
func Encode(r *Run) string {
	if r == nil {
		return ""
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// Decode reads a run that Encode wrote (nil for "").
func Decode(s string) (*Run, error) {
	if s == "" {
		return nil, nil
	}
	r := &Run{}
	if err := json.Unmarshal([]byte(s), r); err != nil {
		return nil, fmt.Errorf("online DDL run %q: %w", truncate(s), err)
	}
	return r, nil
}

// Decision is what to do with one DDL statement.
type Decision struct {
	// Pass: the statement names no ghost or trash table; it goes its usual way.
	Pass bool
	// DDLs replace the statement (the cut-over: the ghost table's ALTERs on the real table); with
	// Pass false and no DDLs the statement is dropped.
	DDLs []string
	// Changed lists the real tables whose run changed (to persist with the checkpoint).
	Changed []vocab.TableName
	// Note says what was recognised, for the log.
	Note string
}

// Decide reads a DDL statement (its default schema, the end position of its event) against the runs,
// updates them, and says what to do with it.
func (r *Rules) Decide(runs Runs, parsed *ddl.Parsed, schema string, at vocab.Position) (Decision, error) {
	sql := parsed.SQL
	pieces, err := parsed.Pieces(schema)
	if err != nil {
		return Decision{Pass: true}, nil // the usual path reports or skips what it cannot read
	}
	tool, real := 0, 0
	for _, p := range pieces {
		if p.Source.Name == "" {
			real++
			continue
		}
		if r.Tool(p.Source) || (p.RenamedTo.Name != "" && r.Tool(p.RenamedTo)) {
			tool++
		} else {
			real++
		}
	}
	if tool == 0 {
		return Decision{Pass: true}, nil
	}
	// A statement of the tool's: its ghost table's names become the real table's. It is parsed again
	// here (the usual path's tree is the binlog's names); it never runs downstream as it is.
	route := func(t vocab.TableName) vocab.TableName {
		if k, real := r.Classify(t.Name); k == Ghost && t.Name != "" {
			return vocab.TableName{Schema: t.Schema, Name: real}
		}
		return t
	}
	parts, err := ddl.Split(sql, schema, route)
	if err != nil {
		return Decision{Pass: true}, nil
	}
	if real > 0 {
		return Decision{}, fmt.Errorf("online DDL: statement %q mixes the tool's ghost or trash tables with other tables; no tool writes that", truncate(sql))
	}
	d := Decision{}
	cutover := map[vocab.TableName]bool{} // real tables whose ghost was renamed into place by this statement
	for _, p := range parts {
		srcKind, srcReal := r.Classify(p.Source.Name)
		switch p.Kind {
		case ddl.KindCreateTable, ddl.KindCreateTableLike:
			if srcKind != Ghost {
				d.Note = "trash table created"
				continue
			}
			rt := vocab.TableName{Schema: p.Source.Schema, Name: srcReal}
			next := &Run{Ghost: p.Source, Created: at}
			if run := runs[rt]; run != nil {
				if run.createdAt(at) || run.Created.Compare(at) > 0 {
					continue // read again (a run before the oldest kept is never read again)
				}
				next.Past = run.Past
				if !run.CutOver.IsZero() {
					done := *run
					done.Past = nil
					next.Past = append(slices.Clip(next.Past), done)
				}
			}
			runs[rt] = next
			d.Changed = append(d.Changed, rt)
			d.Note = "ghost table created"
		case ddl.KindAlterTable, ddl.KindCreateIndex, ddl.KindDropIndex:
			if srcKind != Ghost {
				d.Note = "trash table altered"
				continue
			}
			rt := vocab.TableName{Schema: p.Source.Schema, Name: srcReal}
			run := runs[rt]
			if run == nil {
				run = &Run{Ghost: p.Source} // the ghost was created before the task started
				runs[rt] = run
			} else if past := run.at(at); past != nil {
				run = past // a past run's ALTER read again
			}
			if n := len(run.DDLs); (n > 0 && run.DDLs[n-1].At.Compare(at) >= 0) || (!run.CutOver.IsZero() && run.CutOver.Compare(at) >= 0) {
				continue // read again
			}
			// p.SQL is the statement with the ghost table's name routed to the real table's.
			run.DDLs = append(run.DDLs, Applied{At: at, SQL: p.SQL})
			d.Changed = append(d.Changed, rt)
			d.Note = "ALTER of the ghost table kept for the cut-over"
		case ddl.KindDropTable, ddl.KindTruncateTable:
			d.Note = "tool table dropped"
			if srcKind == Ghost {
				rt := vocab.TableName{Schema: p.Source.Schema, Name: srcReal}
				if run := runs[rt]; run != nil && run.CutOver.IsZero() && run.Created.Compare(at) < 0 {
					delete(runs, rt) // the tool gave up before its cut-over
					if n := len(run.Past); n > 0 {
						last := run.Past[n-1] // the table's last run that swapped in is the latest again
						last.Past = run.Past[: n-1 : n-1]
						runs[rt] = &last
					}
					d.Changed = append(d.Changed, rt)
					d.Note = "ghost table dropped before a cut-over: the tool's run is forgotten"
				}
			}
		case ddl.KindRenameTable, ddl.KindAlterTableRename:
			dstKind, _ := r.Classify(p.RenamedTo.Name)
			switch {
			case srcKind == Ghost && dstKind == Real && p.RenamedTo.Name == srcReal:
				cutover[vocab.TableName{Schema: p.RenamedTo.Schema, Name: srcReal}] = true
			case srcKind == Real && dstKind == Trash, srcKind != Real && dstKind != Real:
				// the real table renamed away, or tool tables among themselves
			default:
				return Decision{}, fmt.Errorf("online DDL: %q renames %s to %s, which no cut-over does", truncate(sql), p.Source, p.RenamedTo)
			}
		default:
			d.Note = "statement on a tool table dropped"
		}
	}
	for rt := range cutover {
		run := runs[rt]
		if run == nil {
			d.Note = "cut-over of a ghost table without a recorded ALTER: nothing to run"
			continue
		}
		if past := run.at(at); past != nil {
			run = past // a past run's cut-over read again
		}
		if !run.CutOver.IsZero() && run.CutOver.Compare(at) != 0 {
			continue // an earlier run's cut-over; this one saw no ALTER
		}
		if run.CutOver.IsZero() {
			run.CutOver = at
			d.Changed = append(d.Changed, rt)
		}
		for _, a := range run.DDLs {
			d.DDLs = append(d.DDLs, a.SQL)
		}
		d.Note = "cut-over: the ghost table's ALTERs run on the real table"
	}
	return d, nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
