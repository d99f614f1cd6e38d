package sink

// DownstreamSession returns the session settings of the syncer's downstream connections: the user's
// (task target-database.session) over these defaults. TIMESTAMP values are read as UTC text, so the
// session is in UTC; NO_AUTO_VALUE_ON_ZERO writes an AUTO_INCREMENT column's 0 as 0, as upstream stored
// it, instead of a new value; strict mode refuses a value rather than truncate it; zero dates that the
// upstream accepted are accepted (no NO_ZERO_DATE). The modes exist in MariaDB and MySQL 8 alike.
func DownstreamSession(user map[string]any) map[string]any {
	out := map[string]any{
		"time_zone": "+00:00",
		"sql_mode":  "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO",
	}
	for k, v := range user {
		out[k] = v
	}
	return out
}
