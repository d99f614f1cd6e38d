// Package starttime finds where a source's binlog reaches a point in time, for dmctl start-task
// --start-time (DM's flag): the position of the first event group (a transaction or a DDL) that
// begins at or after the time, and on MariaDB the GTID set executed before it.
//
// The search lists the source's binlogs (SHOW BINARY LOGS), finds by binary search the last file whose
// first event is older than the time, and scans that one file over a replication connection. The
// decisions are pure (searchFiles, scanner) and tested alone; Find does the I/O.
package starttime

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Time is a parsed --start-time.
type Time struct {
	Text  string    // as given
	civil string    // "YYYY-MM-DD HH:MM:SS" when no offset was given: read in the source's time zone
	at    time.Time // the instant, when the text carries an offset (Z, +08:00, +0800)
}

// civilLayouts are DM's two formats; zonedLayouts the same with an offset (newer DM accepts them).
var (
	civilLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05"}
	zonedLayouts = []string{"2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02 15:04:05-0700", "2006-01-02T15:04:05-0700"}
)

// Formats is how an error says what --start-time takes.
const Formats = `"YYYY-MM-DD HH:MM:SS" or "YYYY-MM-DDTHH:MM:SS" (in each source's time zone), or either with an offset such as Z or +08:00`

// Parse reads a --start-time.
func Parse(s string) (Time, error) {
	text := strings.TrimSpace(s)
	if strings.Contains(text, ".") { // time.Parse takes fractional seconds the layouts do not name
		return Time{}, fmt.Errorf("--start-time %q is not a time: give %s", s, Formats)
	}
	for _, l := range civilLayouts {
		if t, err := time.Parse(l, text); err == nil {
			return Time{Text: s, civil: t.Format(time.DateTime)}, nil
		}
	}
	for _, l := range zonedLayouts {
		if t, err := time.Parse(l, text); err == nil {
			return Time{Text: s, at: t}, nil
		}
	}
	return Time{}, fmt.Errorf("--start-time %q is not a time: give %s", s, Formats)
}

// Zoned reports whether the time carries its own offset (else it is read in each source's zone).
func (t Time) Zoned() bool { return t.civil == "" }

// Unix is the time as seconds since the epoch on a source. A time without an offset is read in the
// source's time zone, as DM does: the server converts it (UNIX_TIMESTAMP in the session of the
// source's connection, so its time_zone, and summer time, apply).
func (t Time) Unix(ctx context.Context, db *sql.DB) (int64, error) {
	if t.Zoned() {
		return t.at.Unix(), nil
	}
	var ts sql.NullFloat64
	var zone sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT UNIX_TIMESTAMP(?), @@session.time_zone", t.civil).Scan(&ts, &zone); err != nil {
		return 0, fmt.Errorf("read --start-time %q in the source's time zone: %w", t.Text, err)
	}
	if !ts.Valid || ts.Float64 <= 0 {
		return 0, fmt.Errorf("--start-time %q is not a time the source can represent in its time zone (%s)", t.Text, zone.String)
	}
	return int64(ts.Float64), nil
}
