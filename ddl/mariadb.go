package ddl

import "strings"

// mariadbSynonyms are MariaDB keywords the TiDB parser does not know, with the standard word of the
// same meaning: `c INT AS (a+1) PERSISTENT` is MariaDB's `STORED`.
var mariadbSynonyms = map[string]string{"PERSISTENT": "STORED"}

// normalizeMariaDB replaces MariaDB-only keyword synonyms outside quoted strings, quoted names and
// comments. It is used only for a statement the parser refused as written.
func normalizeMariaDB(sql string) (string, bool) {
	var sb strings.Builder
	changed := false
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(sql) {
				if sql[j] == '\\' && c != '`' && j+1 < len(sql) {
					j += 2
					continue
				}
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c { // doubled quote
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			sb.WriteString(sql[i:j])
			i = j
		case c == '#' || (c == '-' && strings.HasPrefix(sql[i:], "-- ")):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			sb.WriteString(sql[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(sql[i:], "/*") && !strings.HasPrefix(sql[i:], "/*!") && !strings.HasPrefix(sql[i:], "/*M!"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				j = len(sql) - i - 2
			} else {
				j += 2
			}
			sb.WriteString(sql[i : i+2+j])
			i += 2 + j
		case isIdentByte(c):
			j := i
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			w := sql[i:j]
			if r, ok := mariadbSynonyms[strings.ToUpper(w)]; ok && (i == 0 || sql[i-1] != '.') {
				sb.WriteString(r)
				changed = true
			} else {
				sb.WriteString(w)
			}
			i = j
		default:
			sb.WriteByte(c)
			i++
		}
	}
	return sb.String(), changed
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
