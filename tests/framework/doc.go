// Package framework is the home of Tributary's test frameworks; this package itself holds nothing but
// this map. Each framework is a package of its own:
//
//   - wait: the one way tests wait for something: Eventually(t, timeout, cond, what) fails the test
//     when cond does not hold in time, Until(timeout, cond) reports it. A leaf: it imports nothing of
//     the project, so every other package (and framework) may use it.
//   - leak: the goroutine-leak check (go.uber.org/goleak) of every package whose code starts
//     goroutines: its TestMain calls leak.VerifyTestMain, which runs the tests, the package's cleanup,
//     then fails a passing run that left a goroutine behind.
//   - mariadbtest: throw-away mariadbd instances (ROW binlog, own datadir and port, copied from one
//     template datadir per test process), with the server settings users run. Start ties one to a
//     test; Launch is for programs (make demo, the chaos soak). Main is a TestMain that removes the
//     template.
//   - etcdtest: one embedded etcd member per test process, shared by the package's tests (each keeps
//     to its own key prefix); Stop from TestMain ends it.
//   - e2e: a whole cluster as real processes: upstream and downstream mariadbd, dm-masters, dm-workers,
//     every command through dmctl. tests/integration, make demo and the chaos soak (tests/chaos) run on it.
//   - certtest: throw-away TLS certificates (a CA and what it signs) for the TLS tests.
//   - onlinetest: the statement sequences gh-ost and pt-online-schema-change write, replayed by the
//     online DDL tests.
//   - netutil: FreePort, and the proxies that stand for a network: DelayProxy (a downstream in another
//     zone, for the benchmarks) and FaultProxy (a path that stalls, cuts and heals, for the chaos soak
//     and the path-fault tests).
//   - script: data-driven test scripts with golden output, in raft's testdata style.
//   - house: no code; its test holds the import rules of the package map (docs/design.md, Layout).
//
// Under go test -short (make unit) no server starts: mariadbtest.Start, etcdtest.Client and
// e2e.SkipShort skip the test, saying why, and starting a mariadbd or a cluster is refused.
package framework
