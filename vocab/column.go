package vocab

import "encoding/json"

// Column is what a replicator needs to know of a column beyond what every binlog carries: its name
// (binlogs without binlog_row_metadata=FULL have none), whether it is generated (its value is computed
// by the server and must never be written), and whether an integer column is unsigned (the binlog's
// integers are signed, and only the optional metadata says otherwise).
type Column struct {
	Name      string `json:"name"`
	Generated bool   `json:"gen,omitempty"`
	Unsigned  bool   `json:"unsigned,omitempty"`
	// BinaryLen is n for a BINARY(n) column: the binlog strips its trailing zero bytes, which the
	// server pads back on insert but not in a comparison.
	BinaryLen int `json:"binlen,omitempty"`
	// Type is the column's type as information_schema's COLUMN_TYPE writes it ("int(11) unsigned"),
	// for people reading the tracked schema (binlog-schema list); rows take their types from the
	// binlog. Empty in schemas tracked before it was kept.
	Type string `json:"type,omitempty"`
}

// UnmarshalJSON also reads a plain column name, as checkpoints written before flags were tracked hold.
func (c *Column) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*c = Column{}
		return json.Unmarshal(b, &c.Name)
	}
	type plain Column
	return json.Unmarshal(b, (*plain)(c))
}

// ColumnNames returns the names of cols.
func ColumnNames(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}
