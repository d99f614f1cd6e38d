package dbutil

import (
	"context"
	"database/sql"

	"github.com/tributary-db/tributary/vocab"
)

// TableEstimate is how big a source's table is, as far as the server says without reading it.
type TableEstimate struct {
	Table       vocab.TableName
	Rows, Bytes int64
}

// TableEstimates lists the base tables outside the system schemas with their estimated rows and data
// bytes. information_schema's figures are InnoDB's statistics, which lag behind a bulk insert (right
// after one they can be half the rows or less); where the table's file (InnoDB's tablespace, whose
// size is current) has grown past the data and index the statistics describe, both are scaled to it.
func TableEstimates(ctx context.Context, db RowsQuerier) ([]TableEstimate, error) {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0) "+
		"FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY 1, 2")
	if err != nil {
		return nil, err
	}
	var out []TableEstimate
	var index []int64
	for rows.Next() {
		var e TableEstimate
		var idx int64
		if err := rows.Scan(&e.Table.Schema, &e.Table.Name, &e.Rows, &e.Bytes, &idx); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, e)
		index = append(index, idx)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	files := tablespaceSizes(ctx, db)
	for i := range out {
		e := &out[i]
		file, ok := files[e.Table.Schema+"/"+e.Table.Name]
		stats := e.Bytes + index[i]
		if !ok || stats <= 0 || e.Rows <= 0 || file <= stats+stats/4 {
			continue // no file of its own, or the statistics are about current
		}
		scale := float64(file) / float64(stats)
		e.Rows, e.Bytes = int64(float64(e.Rows)*scale), int64(float64(e.Bytes)*scale)
	}
	return out, nil
}

// tablespaceSizes is the file size of each InnoDB table with a file of its own, by "schema/table"
// (MariaDB's INNODB_SYS_TABLESPACES, MySQL 8's INNODB_TABLESPACES); empty when neither can be read.
func tablespaceSizes(ctx context.Context, db RowsQuerier) map[string]int64 {
	out := map[string]int64{}
	for _, q := range []string{"SELECT NAME, FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES", "SELECT NAME, FILE_SIZE FROM information_schema.INNODB_TABLESPACES"} {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			continue
		}
		for rows.Next() {
			var name string
			var size sql.NullInt64
			if rows.Scan(&name, &size) == nil && size.Valid {
				out[name] = size.Int64
			}
		}
		rows.Close()
		if len(out) > 0 {
			break
		}
	}
	return out
}
