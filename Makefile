# Tributary. `make test` is what CI runs (through .ci/run).
GO ?= go
PKGS := ./...

.PHONY: build test unit test-faults bench fuzz proto vet demo chaos

# Binaries into bin/; -V prints the commit they were built from (also where -buildvcs=false is set).
GIT_HASH := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo " (modified)")
build:
	$(GO) build $(PKGS)
	$(GO) build -ldflags '-X "github.com/tributary-db/tributary/internal/cli.GitHash=$(GIT_HASH)"' -o bin/ ./cmd/...

vet:
	$(GO) vet $(PKGS)

# Unit tests, the randomized model test (500 runs on an embedded etcd), the split fuzz corpus, and the
# worker's integration tests on throw-away mariadbd instances (20 seeded restart runs), a 90 s chaos
# soak with a fixed seed (chaos.TestSoakShort); the real
# binaries' scenarios run in task-mode incremental (the harness's default) and the full-load ones
# (TestLoad*) in all and full. Then the e2e scenarios again in task-mode all (load, then binlog): all
# of ./tests/integration/'s TestE2E* but the fault tests (make test-faults) and the input checks, which
# depend on neither mode. Both runs run; the target fails if either did.
E2E_ALL_SKIP := TestE2E(PartitionFromEtcd|ThreeMastersFailover|FailoverWhileLockHalfFormed|BadInputIsRefusedAndChangesNothing)$$
test: vet
	@status=0; \
	echo "$(GO) test -count=1 -timeout 20m $(PKGS)"; \
	$(GO) test -count=1 -timeout 20m $(PKGS) || status=1; \
	echo "TRIBUTARY_TASK_MODE=all $(GO) test -count=1 -timeout 10m -run '^TestE2E' -skip '$(E2E_ALL_SKIP)' ./tests/integration/"; \
	TRIBUTARY_TASK_MODE=all $(GO) test -count=1 -timeout 10m -run '^TestE2E' -skip '$(E2E_ALL_SKIP)' ./tests/integration/ || status=1; \
	exit $$status

# The tests that need no server, in under a minute: go test -short over every package. Every test
# that starts a throw-away mariadbd (tests/framework/mariadbtest), an embedded etcd
# (tests/framework/etcdtest, master's StartEtcd), the real binaries (tests/framework/e2e,
# ./tests/integration/), pt-online-schema-change or headless Chromium skips under -short, saying so; so do
# the long ones (the chaos soak, pessimist's path-fault run). What is left: parsing, routing, config,
# the DDL toolkit, the shard group and lock model on in-memory state, the delay and fault proxies, the
# dashboards' metric check. make test runs it all.
unit:
	$(GO) test -short -count=1 $(PKGS)

# The whole fault matrix: kill -9 of the leader master, the owner worker and the non-owner worker at
# each of 6 steps of a lock (18 cells, TRIBUTARY_FAULT_RUNS runs each), plus the partition and failover
# tests. `make test` runs one cell per step.
FAULT_RUNS ?= 1
test-faults:
	TRIBUTARY_FAULTS=all TRIBUTARY_FAULT_RUNS=$(FAULT_RUNS) $(GO) test -count=1 -timeout 60m -v \
		-run 'TestFaultMatrix|TestLoadFaults|TestE2EPartition|TestE2EThreeMasters|TestE2EWorkerFailover|TestE2EFailoverWhile|TestE2EKillWorker' ./tests/integration/ 2>&1 \
		| grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok)'

# The chaos soak: 3 masters, 3 workers, 3 upstreams and a downstream under a steady workload and
# continuous shard DDL while faults overlap; the checkers judge the run (package tests/chaos, docs/testing.md
# "Chaos soak"). DURATION and SEED choose the run; a failing seed replays the same schedule.
DURATION ?= 3m
SEED ?= 1
chaos:
	$(GO) run ./tests/chaos/run -duration $(DURATION) -seed $(SEED)

# Lock resolution on embedded etcd (pessimist benchmarks), and binlog catch-up of 1M rows over 4 and 16
# shard tables with DM's default syncer settings and Tributary's, each beside a plain batched INSERT into
# the same downstream measured in the same run, the catch-up of the tables a waiting lock does not block
# beside the same with no lock (and the RSS of 1M rows held back), a hot table and 20k updates with the
# downstream behind a delaying proxy (a round trip of 1 ms and more), and a lock end to end through real processes at 2 and 8
# sources (integration's BenchmarkLockLatency); printed as one table with the machine
# (go run ./tests/bench -rows N -lock-benchtime 20x -latency-rounds 20).
bench:
	$(GO) run ./tests/bench

# Coverage-guided fuzzing of DDL splitting (FUZZTIME=1m by default).
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run XXX -fuzz FuzzSplit -fuzztime $(FUZZTIME) ./ddl/

# Regenerates the committed gRPC code from proto/*.proto. Needs protoc (Debian: protobuf-compiler) and
# the two plugins at the versions the committed code was made with.
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
proto:
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(CURDIR)/bin $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/bin $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH="$(CURDIR)/bin:$$PATH" protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative proto/*.proto

# The main job on one machine: throw-away MariaDB servers, dm-master, two dm-workers, a shard-merge task,
# a workload with two DDLs applied shard by shard, and a check that downstream equals merged upstream.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
demo:
	@[ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null || { echo "installing mariadb-server (apt-get)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq mariadb-server >/dev/null; }
	$(GO) build -o bin/ ./cmd/...
	$(GO) run ./demo --bin bin
