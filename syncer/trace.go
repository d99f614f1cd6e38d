package syncer

import (
	"time"

	"go.uber.org/zap"
)

// Lock tracing: with --log-level debug, each step of a lock on this worker is logged as
// {"msg":"lock trace","lock":...,"step":...,"at_us":<Unix microseconds>}, so the path of one lock can be
// followed across processes on one machine (BenchmarkLockLatency in integration/ does). The steps,
// in order:
//
//	ddl read        the DDL event that made the source's group synced was read from the binlog
//	info putting    the DDL is parsed and the group synced: the info's put starts
//	info put        the info is in etcd
//	op received     the operation's watch event arrived (exec or skip)
//	op applying     the event loop took it
//	flushed         batched DML before the DDL committed
//	ddl prepared    epoch, definition and marker checked (owner); the "started" marker goes in one query
//	                with the DDL (else it is written here); or, for a DDL sent behind a "running" marker
//	                (DDLExecutor.ExecDDLFirst), nothing read: the query is about to go
//	ddl executed    the DDL returned downstream (owner)
//	marked done     (owner)
//	checkpoint      the checkpoint past the lock committed
//	done            the operation is done in etcd
//	re-sync started the reader re-reads held-back DML (only when some was held back)
func (s *Syncer) trace(lock, step string, at time.Time) {
	if ce := s.log.Check(zap.DebugLevel, "lock trace"); ce != nil {
		ce.Write(zap.String("lock", lock), zap.String("step", step), zap.Int64("at_us", at.UnixMicro()))
	}
}
