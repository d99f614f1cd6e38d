// Package shardgroup tracks, for one source and one target table, which shard tables have reached which
// sharding DDL. It is pure: no I/O, no clocks, no goroutines, and no parser: it sees a DDL as the
// statements package ddl made of it.
//
// The model, for one target table T on one source:
//
//   - Every upstream shard table routed to T has a ShardingSequence: the DDLItems read from the binlog
//     for that table, in binlog order.
//   - The ShardingGroup keeps the group's step list (the first DDLItem seen at each step) and the index of
//     the active step: the oldest step that has not been resolved downstream yet.
//   - TrySync adds a DDLItem to its table's sequence. The item must equal the group's step at that index,
//     otherwise the group reports "detect inconsistent DDL sequence" and stays as it was. Successive
//     DDLs queue: a table may run ahead by any number of steps.
//   - The group is synced when every table has reached the active step. The caller then coordinates the
//     step across sources (package pessimist) and calls ResolveActive once it is executed or skipped.
//   - DML of a table at a binlog position after the table's first unresolved DDL is held back (Blocked);
//     after ResolveActive the caller re-reads the binlog from the returned position.
//   - AddItem is re-entrant by position: an item at or before the table's last known position is a
//     duplicate and changes nothing; the result says whether it has been resolved.
package shardgroup
