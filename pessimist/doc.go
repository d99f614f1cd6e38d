// Package pessimist coordinates sharding DDL across sources with a pessimistic lock held in etcd.
//
// A lock is one (task, target table); its ID is task-`db`.`tbl` as in DM. All of its state is in etcd
// under a Layout (see there for the keys); nothing lives only in a master's memory.
//
// # Pieces
//
//   - Keeper (keeper.go, locks.go): the pure state machine. Its input is the pessimist keys (infos,
//     operations, unlock requests, each task's source set) with their revisions; its output is Txns:
//     etcd transactions guarded by the exact revisions the decision rests on.
//   - Coordinator (coordinator.go): the master-side loop. Full read, watch from that revision, feed the
//     Keeper, write its Txns (fenced by the leader key when given). It runs only while leader.
//   - Agent (agent.go): the worker side. PutInfo, WaitOperation, DoneOperationDeleteInfo.
//
// # Protocol, with what happens on re-entry at each step
//
//  1. A worker's shard group (package shardgroup) is synced on DDLs for a target: the worker calls
//     PutInfo. Re-entry: a restarted worker that re-reads the binlog puts the same info again, which
//     writes nothing; an operation already waiting for it is returned by WaitOperation at once. Each
//     Agent claims its source's generation key with its first put, and later puts require it: a put
//     of a dead incarnation that reaches etcd late fails instead of leaving an info nobody answers.
//  2. The coordinator waits until every source of the task has an info for the lock with the same DDLs
//     (different DDLs are a conflict: shown by Locks, nothing executed). It writes an exec operation for
//     the owner: the source whose info was created first. The write is guarded by the task's source
//     set, by "no info or operation of the lock changed since the Keeper's revision", and by the
//     owner's info; a stale or deposed coordinator's copy of it fails. Re-entry: a new coordinator
//     sees the operation and waits; if the owner left the task, the exec is moved to another source.
//  3. The owner executes the DDLs downstream (idempotently), saves its checkpoint past them, then calls
//     DoneOperationDeleteInfo: the operation is marked done and the info deleted in one transaction. Re-entry: a
//     worker that crashed after its checkpoint but before done finds its operation with Operations()
//     on restart and marks it done; one that crashed before its checkpoint re-reads the binlog and
//     gets the same operation again at step 1.
//  4. Only after seeing the owner's done, the coordinator writes skip operations for every other
//     source that reached the DDLs, in as few transactions as etcd's --max-txn-ops allows, each
//     guarded by the owner's done operation. Re-entry: sources that already have one are not sent
//     another.
//  5. Each non-owner saves its checkpoint past the DDLs and calls DoneOperationDeleteInfo.
//  6. When every operation is done, the lock's operations are deleted: by the last source's own done
//     transaction when it sees it is the last (no other info, no unlock request), else by the
//     coordinator. A source that runs ahead may already have put its info for the next DDL of the same
//     target: an info of a source whose operation is done belongs to the next round and waits.
//
// # Unlock
//
// Keeper.Unlock (dmctl shard-ddl-lock unlock) works in every state. --force-remove deletes every key of
// that lock and nothing else. Otherwise it writes one Unlock request naming the owner and the sources
// still missing; the normal decisions then run the lock without waiting for them and send each a skip
// when it arrives, so an unlock interrupted by a restart simply continues.
package pessimist
