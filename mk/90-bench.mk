# Benchmarks (bench/): `make bench` prints one table and writes
# bench/results/latest.md, the 1M-job scaling row included (the scaling target asks
# `make bench` for claim latency at 1M jobs against 1k); `make bench-quick`
# leaves that row out (filling 1M jobs takes about 2 minutes).
# Not part of `make test`: test-bench-smoke only proves the harness still runs.
# bench/go (floor, core rows, driver) and bench/peers (goqite, River on SQLite
# and on PostgreSQL) are Go modules of their own, so the library's go.mod
# carries neither the peers nor the harness.
# Section 13 (the worker loop per language) drains the same jobs through every
# face's loop (leasesbench, cbench, cppbench, rustbench, pybench.py and the
# CLI) at concurrency 1 and 4 on SQLite and PostgreSQL; alone it is
# `leasesbench run -sections faces` (docs/PERFORMANCE.md, "Running it").
# Section 11 (the worker loop on PostgreSQL) runs worker.Run next to River
# (riverpgxv5) and a hand-written floor on the same server, 1 to 64 handlers.
# Section 10 (the status page) serves a busy production of 100,000 jobs of its
# own on SQLite and on PostgreSQL with the CLI's `leases serve`, and runs
# section 7's 4 workers for 4 s with the page open and without.
# Section 7 (workers) runs on PostgreSQL too. `make bench` starts a throwaway
# cluster of its own with fsync on (LEASES_PG_DURABLE=1), never the fsync=off
# one `make test` shares: its figures stand next to SQLite synchronous=FULL.
# Set BENCH_PG_RUN to run against another server, e.g.
# BENCH_PG_RUN='env LEASES_TEST_PG_URL=postgres://…' (it must run with fsync on).
# The smoke run takes whatever cluster $(PG_RUN) provides: it measures nothing.

BENCH_DIR   := $(BUILD)/bench
BENCH_SCALE ?= 1
BENCH_REPS  ?= 5
BENCH_LB    := $(BENCH_DIR)/leasesbench
BENCH_PB    := $(BENCH_DIR)/peersbench
BENCH_CB    := $(BENCH_DIR)/cbench
BENCH_CPP   := $(BENCH_DIR)/cppbench
BENCH_RS    := $(BENCH_DIR)/rustbench
BENCH_PG_RUN ?= LEASES_PG_DURABLE=1 $(ROOT)/tests/pg/cluster.sh run --
BENCH_RUN   := $(BENCH_LB) run -bin $(BENCH_DIR) -cli $(CLI_BIN) -repo $(ROOT)

.PHONY: bench bench-full bench-quick bench-tools bench-bindings test-bench-smoke
TEST_TARGETS += test-bench-smoke

$(BENCH_LB): $(wildcard bench/go/go.* bench/go/cmd/leasesbench/*.go) $(CLI_SRCS)
	@mkdir -p $(@D)
	$(GO) -C bench/go build -o $(ROOT)/$@ ./cmd/leasesbench

$(BENCH_PB): $(wildcard bench/peers/go.* bench/peers/*.go bench/peers/*.sql)
	@mkdir -p $(@D)
	$(GO) -C bench/peers build -o $(ROOT)/$@ .

$(BENCH_CB): bench/c/cbench.c include/leases.h $(CAPI_SO)
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -pthread -Iinclude $< -o $@ -L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)

# The binding programs are best effort: a binding that does not build yet
# leaves its rows saying so ("binding not yet landed") instead of a figure.
bench-bindings: $(CAPI_SO) $(CAPI_A)
	@rm -f $(BENCH_CPP) $(BENCH_RS)
	-$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror -pthread -Iinclude -Ibindings/cpp/include bench/cpp/cppbench.cpp \
		-o $(BENCH_CPP) -L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)
	-cd bench/rust && CARGO_TARGET_DIR=$(ROOT)/$(BENCH_DIR)/rust LEASES_LIB_DIR=$(ROOT)/$(BUILD) \
		$(CARGO) build --release --locked -j 2 && cp $(ROOT)/$(BENCH_DIR)/rust/release/rustbench $(ROOT)/$(BENCH_RS)

bench-tools: $(BENCH_LB) $(BENCH_PB) $(BENCH_CB) $(CAPI_SO) $(CLI_BIN)

bench: bench-tools bench-bindings ## benchmarks: one table with the 1M-job scaling row, bench/results/latest.md (BENCH_SCALE=1, BENCH_REPS=5; ~18 min)
	$(BENCH_PG_RUN) $(BENCH_RUN) -scale $(BENCH_SCALE) -reps $(BENCH_REPS) -full -out bench/results/latest.md

bench-full: bench ## the same as bench (kept for scripts that name it)

bench-quick: bench-tools bench-bindings ## bench without the 1M-job scaling row
	$(BENCH_PG_RUN) $(BENCH_RUN) -scale $(BENCH_SCALE) -reps $(BENCH_REPS) -out bench/results/latest.md

# go vet of both bench modules and the driver's tests (both stores), then one
# repetition of every row at tiny sizes (no Rust: compiling the crate alone
# takes longer than the budget), the PostgreSQL rows included.
test-bench-smoke: bench-tools ## bench harness smoke: vet, the driver's tests, every row once at tiny sizes
	$(GO) -C bench/go vet ./...
	$(GO) -C bench/peers vet ./...
	$(PG_RUN) env LEASES_REQUIRE_PG=1 $(GO) -C bench/go test -count=1 ./...
	@test -z "$$(gofmt -l bench/go bench/peers)" || { gofmt -l bench/go bench/peers; echo "gofmt needed"; exit 1; }
	@rm -f $(BENCH_RS)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror -pthread -Iinclude -Ibindings/cpp/include bench/cpp/cppbench.cpp \
		-o $(BENCH_CPP) -L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)
	$(PG_RUN) $(BENCH_RUN) -smoke -reps 1 -tmp $(BENCH_DIR)/smoke-tmp -out $(BENCH_DIR)/smoke.md > /dev/null
	@echo "test-bench-smoke: every row ran but Rust's (its crate builds in make bench only) (build/bench/smoke.md)"
