// Package ddl is the DDL toolkit of the sync unit, on the TiDB parser. It is pure: no I/O.
//
//   - Split turns one DDL statement into single-table parts (Part), each attributed to its own source
//     table and rewritten (through the AST, never by string editing) to its target name; Items groups
//     them into the shard group's items.
//   - Decide is the safety table (Policy): what a statement kind may do to a table of each scope
//     (merged, shard, unsharded), rendered for the docs by PolicyMarkdown.
//   - Effects tells what a DDL leaves behind, so that a re-run after a crash can tell whether it
//     already ran; CompareWithDownstream tells whether a downstream table already is what a DDL would
//     make of it (a DDL the downstream refused as "already applied" is taken as applied only then).
//   - TrackColumns, DMLTables, TablesOf and the definition helpers (TargetDefinition,
//     CreateIfNotExists, WithDefaultCollation, WithTableComment) read and rewrite statements for the
//     schema tracker, the loader and the DDL executor.
package ddl
