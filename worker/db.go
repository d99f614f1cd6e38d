package worker

import "github.com/tributary-db/tributary/dbutil"

// OpenDB opens a pool to a configured MySQL/MariaDB endpoint (dbutil.OpenDB).
var OpenDB = dbutil.OpenDB

// SourcePosition reads a source's current binlog position and, on MariaDB, its GTID set
// (dbutil.SourcePosition).
var SourcePosition = dbutil.SourcePosition
