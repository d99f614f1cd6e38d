package ddl

import (
	"github.com/tributary-db/tributary/shardgroup"
	"github.com/tributary-db/tributary/vocab"
)

// Items groups the parts of one binlog event by source table, keeping statement order, so a
// multi-table DDL gives one item per table, each attributed to its own table.
func Items(parts []Part, pos vocab.Position) []shardgroup.DDLItem {
	var items []shardgroup.DDLItem
	index := map[vocab.TableName]int{}
	for _, p := range parts {
		i, ok := index[p.Source]
		if !ok {
			i = len(items)
			index[p.Source] = i
			items = append(items, shardgroup.DDLItem{Source: p.Source, Target: p.Target, Pos: pos})
		}
		items[i].DDLs = append(items[i].DDLs, p.SQL)
	}
	return items
}
