// Package eventclass decides what the sync unit does with every binlog event a source writes: each
// event type, and each class of statement a query event carries. It is the only place this is
// decided; the sync unit carries the decision out. Three outcomes reach the user (Replicate, Skip with
// a log line, Stop naming the event and the ways out) and one is the reader's own (Track: positions,
// GTIDs, table maps). An event type or statement class that is not in the tables stops: nothing is
// dropped in silence because nobody named it. docs/ddl.md's event table is generated from these tables
// (TestEventTableInDocs keeps them equal).
//
// The package is pure: no I/O, no clock. Query reads a statement as the source server read it:
// executable comments (/*!NNNNN ... */, MariaDB's /*M!NNNNNN ... */) count when the source's version
// is at or above NNNNN and are comments otherwise (Expand).
package eventclass
