package eventclass

import (
	"strconv"
	"strings"
)

// Version is the source server's version as executable comments are read against it.
type Version struct {
	MariaDB bool
	// ID is MAJOR*10000 + MINOR*100 + PATCH (10.11.6 is 101106, 8.0.36 is 80036); 0: unknown, when
	// every versioned comment counts (as on a server newer than any).
	ID int
}

// ParseVersion reads a server version string (FORMAT_DESCRIPTION_EVENT's, or VERSION()):
// "10.11.6-MariaDB-log", "8.0.36", "5.5.5-10.11.6-MariaDB".
func ParseVersion(s string) Version {
	v := Version{MariaDB: strings.Contains(strings.ToLower(s), "mariadb")}
	s = strings.TrimPrefix(s, "5.5.5-") // MariaDB's replication-compatible prefix
	nums := strings.SplitN(strings.SplitN(s, "-", 2)[0], ".", 3)
	if len(nums) < 2 {
		return v
	}
	id := 0
	for i, mul := range []int{10000, 100, 1} {
		if i >= len(nums) {
			break
		}
		n, err := strconv.Atoi(nums[i])
		if err != nil {
			return v
		}
		id += n * mul
	}
	v.ID = id
	return v
}

// runs reports whether a versioned executable comment runs on v. MySQL runs /*!NNNNN when its version
// is at least NNNNN. MariaDB runs /*M!NNNNNN the same way, but /*!NNNNN only outside MySQL 5.7 to 9.x
// (50700-99999), whose syntax it may not share (its lexer's rule; seen on 10.11: /*!80016 ...*/ does
// not run, /*!50100 ...*/ does).
func (v Version) runs(mariadbOnly bool, n int) bool {
	if mariadbOnly && !v.MariaDB {
		return false
	}
	if v.MariaDB && !mariadbOnly && n >= 50700 && n <= 99999 {
		return false
	}
	return v.ID == 0 || n <= v.ID
}

// Expand returns the statement as the source server ran it: the text of an executable comment
// (/*! ... */, /*!NNNNN ... */, /*M! ... */, /*M!NNNNNN ... */) that runs on v takes the comment's
// place; one that does not run is removed, as is any other comment. Strings and quoted names are
// kept as they are. A statement without comments is returned unchanged.
func Expand(q string, v Version) string {
	if !strings.Contains(q, "/*") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q))
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '`' || c == '\'' || c == '"':
			j := skipQuoted(q, i)
			b.WriteString(q[i:j])
			i = j
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			body := q[i+2 : i+2+end]
			i += end + 4
			mariadbOnly := false
			switch {
			case strings.HasPrefix(body, "M!"):
				mariadbOnly, body = true, body[2:]
			case strings.HasPrefix(body, "!"):
				body = body[1:]
			default:
				b.WriteByte(' ') // an ordinary comment (or an optimizer hint) separates tokens
				continue
			}
			n, most := 0, 5 // MySQL reads five digits, MariaDB six (/*M!100301)
			if v.MariaDB {
				most = 6
			}
			for n < len(body) && n < most && body[n] >= '0' && body[n] <= '9' {
				n++
			}
			if n >= 5 {
				ver, _ := strconv.Atoi(body[:n])
				if !v.runs(mariadbOnly, ver) {
					b.WriteByte(' ')
					continue
				}
				body = body[n:]
			} else if mariadbOnly && !v.MariaDB {
				b.WriteByte(' ')
				continue
			}
			b.WriteByte(' ')
			b.WriteString(Expand(body, v)) // an executable comment may hold comments of its own
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
			i++
		}
	}
	return strings.TrimSpace(b.String())
}
