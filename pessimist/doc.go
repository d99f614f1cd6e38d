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
//   - Agent (agent.go): the worker side. PutInfo, WaitOperation, DoneOperationDeleteInfo, Operations.
//     An agent's waits share one watch of its task's operations, on a gRPC stream of its own and kept
//     between locks (a minute idle ends it); a wait makes no watch of its own. It sees its lock removed
//     through the same watch: every transaction of the master that deletes infos puts a removal mark
//     beside the operations, the lock's (Layout.RemovedKey: unlock --force-remove, a source dropped
//     from the task) or the task's (Layout.TaskRemovedKey: start-task --remove-meta). A wait on an info its
//     agent has just created reads nothing when the watch hands it every event after the info (each
//     answer is written after it); any other wait reads the lock once, after subscribing.
//
// # Protocol, with what happens on re-entry at each step
//
//  1. A worker's shard group (package shardgroup) is synced on DDLs for a target: the worker calls
//     PutInfo. Re-entry: a restarted worker that re-reads the binlog puts the same info again, which
//     writes nothing; an operation already waiting for it is returned by WaitOperation at once. Each
//     Agent claims its source's generation key with its first put, and later puts require it: a put
//     of a dead incarnation that reaches etcd late fails instead of leaving an info nobody answers.
//  2. The info that completes the lock writes the exec itself, for its own source, with the round,
//     in the transaction that creates it: each info created counts itself on the lock's arrival
//     counter (Layout.ArriveKey, O(1) in etcd), and the put that finds every other source of the task
//     counted with the same DDLs against the source set it read, and the lock without a round, an
//     operation or an unlock request, is the last (see Agent.PutInfo for why the count is exact).
//     Nothing else counts: a conflict, a changed info, a source outside the task, a source set the
//     agent has not read yet, a source removed from the task or a skip of its own poisons the counter
//     until the coordinator's next new round deletes it. A lock that does not complete itself so (an
//     unlock, a conflict, a poisoned count) is the coordinator's:
//     it waits until every source of the task has an info for the lock with the same DDLs
//     (different DDLs are a conflict: shown by Locks, nothing executed). It writes an exec operation for
//     the owner, the source whose info was created first, and in the same transaction the lock's
//     Round: the other sources with those DDLs, the participants (the exec holds only their number).
//     The write is guarded by the task's source set, by "no info or operation of the lock changed
//     since the Keeper's revision", and by the owner's info; a stale or deposed coordinator's copy of
//     it fails. It is decided only once the lock holds no info of a source outside the task, so the
//     participants are exactly the infos with the exec's DDLs created before it, other than the
//     owner's: an agent can tell it is one from the exec alone. Re-entry: a new coordinator sees the
//     operation and waits; if the owner left the task, the exec (and Round) is moved to another source.
//  3. The owner executes the DDLs downstream (idempotently), saves its checkpoint past them, then calls
//     DoneOperationDeleteInfo: the operation is marked done and the info deleted in one transaction. Re-entry: a
//     worker that crashed after its checkpoint but before done finds its operation with Operations()
//     on restart and marks it done; one that crashed before its checkpoint re-reads the binlog and
//     gets the same operation again at step 1.
//  4. The owner's done operation is the skip of every participant (an implicit skip): each watches
//     the lock's operations (normally the exec alone) and takes the done exec as its skip, so no
//     participant can skip before the owner's done is in etcd, and the coordinator writes nothing.
//     Sources that reached the DDLs after the exec (one an unlock marked missing, one added to the
//     task) and sources an unlock overruled are not participants: the coordinator writes them skip
//     operations of their own, only after seeing the owner's done, in as few transactions as etcd's
//     --max-txn-ops allows, each guarded by the owner's done operation. Re-entry: a restarted
//     participant finds its implicit skip again (WaitOperation, Operations); sources that already
//     have a skip operation are not sent another.
//  5. Each non-owner saves its checkpoint past the DDLs and calls DoneOperationDeleteInfo: a
//     participant deletes its info (guarded by the exec), a source with a skip of its own marks it
//     done and deletes its info.
//  6. The owner and each participant count their done on the round's done key (its version). The
//     one that sees every other done counted, with no unlock request and no operation besides the
//     exec, is the last: the same transaction deletes the lock's operations, Round and counter (an
//     O(1) check in etcd). Otherwise (an unlock, skips of their own, a participant that left the
//     task) the coordinator deletes them once no participant's info of the round is left and every
//     operation is done. A source that runs ahead may already have put its info for the next DDL of
//     the same target: a participant's info created after the exec, like an info of a source whose
//     operation is done, belongs to the next round and waits.
//
// Writes per lock of N sources: N infos, the last of which carries the exec (with its Round), the
// owner's done and N-1 participants' dones, the last of which clears the lock: 2N. When the
// coordinator writes the exec, 2N+1.
//
// # Unlock
//
// Keeper.Unlock (dmctl shard-ddl-lock unlock) works in every state. --force-remove deletes every key of
// that lock and nothing else, and puts its removal mark (which ends its sources' waits; one key per
// target that was ever force-removed, until the task's keys are removed). Otherwise it writes one
// Unlock request naming the owner and the sources still missing; the normal decisions then run the
// lock without waiting for them and send each a skip when it arrives, so an unlock interrupted by a
// restart simply continues.
package pessimist
