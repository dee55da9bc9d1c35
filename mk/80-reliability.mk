# Reliability suite (tests/reliability, docs/RELIABILITY.md). `go test ./...`
# (make test-go) runs the Go-only short version: kill -9 loops, strace fault
# injection, hostile files. test-reliability adds what needs the built
# library, CLI and bindings: the six-language race (porcupine, event-log
# invariants, secret-leak scan), the C ABI fuzz harness under ASan and
# valgrind, and the clock faults through the test library. `make soak` runs
# everything longer and records its figures for docs/RELIABILITY.md.

REL_DIR      := $(BUILD)/reliability
REL_C_FLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Iinclude
REL_RACE_BINS := $(REL_DIR)/race_worker_c $(REL_DIR)/race_worker_cpp $(BUILD)/rust/debug/examples/race_worker
REL_RACE_ENV := LEASES_REL_PYTHON=$(PY)

REL_SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
REL_FUZZ_SEED ?= $(shell date +%s)
REL_FUZZ_CALLS ?= 5000
REL_FUZZ_VG_CALLS ?= 1000

.PHONY: soak test-reliability test-race test-sim test-clock-faults test-abi-fuzz reliability-workers
TEST_TARGETS += test-reliability

# The C, C++ and Rust workers link the test library: they make clock faults
# through its seam (so does the Python worker, which loads it).
$(REL_DIR)/race_worker_c: tests/reliability/race/race_worker.c include/leases.h include/leases_testing.h $(CAPI_TEST_SO)
	@mkdir -p $(@D)
	$(CC) $(REL_C_FLAGS) -DLEASES_RACE_CLOCK $< -o $@ -L$(BUILD)/test -lleases -Wl,-rpath,$(ROOT)/$(BUILD)/test

$(REL_DIR)/race_worker_cpp: tests/reliability/race/race_worker.cpp include/leases.h include/leases_testing.h $(CPP_DIR)/include/leases/leases.hpp $(CAPI_TEST_SO)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -g -O1 -Wall -Wextra -Werror -Iinclude -I$(CPP_DIR)/include $< -o $@ \
		-L$(BUILD)/test -lleases -Wl,-rpath,$(ROOT)/$(BUILD)/test

$(BUILD)/rust/debug/examples/race_worker: $(RUST_DIR)/examples/race_worker.rs $(wildcard $(RUST_DIR)/src/*.rs) $(CAPI_TEST_SO)
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test $(CARGO) build $(RUST_FLAGS) --example race_worker --features testing

# The clock-fault test and the ABI fuzzer link the test library (clock seam,
# short busy timeout, panic); the fuzzer twice: with ASan+UBSan, and plain
# for valgrind (which cannot run ASan binaries).
$(REL_DIR)/clock_faults: tests/reliability/c/clock_faults.c tests/c/pg.h include/leases.h include/leases_testing.h $(CAPI_TEST_SO)
	@mkdir -p $(@D)
	$(CC) $(REL_C_FLAGS) -Itests/c $< -o $@ -L$(BUILD)/test -lleases -Wl,-rpath,$(ROOT)/$(BUILD)/test

$(REL_DIR)/abi_fuzz_asan: tests/reliability/c/abi_fuzz.c tests/c/json.h include/leases.h include/leases_testing.h $(CAPI_TEST_SO)
	@mkdir -p $(@D)
	$(CC) $(REL_C_FLAGS) $(REL_SAN_FLAGS) -Itests/c $< -o $@ -L$(BUILD)/test -lleases -Wl,-rpath,$(ROOT)/$(BUILD)/test

$(REL_DIR)/abi_fuzz: tests/reliability/c/abi_fuzz.c tests/c/json.h include/leases.h include/leases_testing.h $(CAPI_TEST_SO)
	@mkdir -p $(@D)
	$(CC) $(REL_C_FLAGS) -Itests/c $< -o $@ -L$(BUILD)/test -lleases -Wl,-rpath,$(ROOT)/$(BUILD)/test

# The CLI worker runs a test build of the CLI (tag leasestest): its clock
# faults go through the seam's LEASES_TEST_CLOCK_OFFSET_US. The release
# build/leases has no seam (TestTheReleaseCLIHasNoClockSeam checks both).
REL_CLI_TEST := $(BUILD)/test/leases

$(REL_CLI_TEST): $(CLI_SRCS)
	@mkdir -p $(@D)
	$(GO) build -tags leasestest -o $@ ./cmd/leases

reliability-workers: $(REL_RACE_BINS) $(CLI_BIN) $(REL_CLI_TEST) $(CAPI_SO)

# The clock faults run twice: on SQLite files, and on PostgreSQL (a fresh
# schema per test; the seam replaces the server's clock sample).
test-clock-faults: $(REL_DIR)/clock_faults ## clock jumps (forward, backward, between the two samples, across a reopen) via the C test library, on SQLite and PostgreSQL
	rm -rf $(REL_DIR)/clock && mkdir -p $(REL_DIR)/clock
	$(REL_DIR)/clock_faults $(ROOT)/$(REL_DIR)/clock
	$(PG_RUN) $(REL_DIR)/clock_faults postgres

# The seed changes every run and is printed; REL_FUZZ_SEED=N replays one.
test-abi-fuzz: $(REL_DIR)/abi_fuzz_asan $(REL_DIR)/abi_fuzz ## C ABI fuzz harness: ASan+UBSan run, then a valgrind run
	rm -rf $(REL_DIR)/fuzz && mkdir -p $(REL_DIR)/fuzz/asan $(REL_DIR)/fuzz/vg
	ASAN_OPTIONS=detect_leaks=1 $(REL_DIR)/abi_fuzz_asan $(ROOT)/$(REL_DIR)/fuzz/asan $(REL_FUZZ_SEED) $(REL_FUZZ_CALLS)
	GODEBUG=asyncpreemptoff=1 $(VALGRIND) $(VALGRIND_ARGS) $(REL_DIR)/abi_fuzz \
		$(ROOT)/$(REL_DIR)/fuzz/vg $$(( $(REL_FUZZ_SEED) + 1 )) $(REL_FUZZ_VG_CALLS)

# leasestest gives the Go race worker the clock seam: its clock faults.
# The release CLI is built too: the race checks it has no clock seam.
test-race: reliability-workers ## the six-language race (with clock faults) and the full-scenario leak scan (short)
	$(PG_RUN) env $(REL_RACE_ENV) $(GO) test -tags leasesworkers,leasestest -count=1 -timeout 10m -run 'TestRace|TestNoSecret|TestTheReleaseCLIHasNoClockSeam' -v ./tests/reliability/ | grep -E '^(---|ok|FAIL|=== RUN|\s+\w+_test.go|\s+(Error|Messages|Test):)'

# The seeded simulation (tests/reliability/sim_test.go) and the tests of its
# fault seam need the test seams
# (tag leasestest): one seed per store, a few seconds each; LEASES_SIM_SEED=N
# replays a seed it printed.
SIM_GO_TEST = $(GO) test -tags leasesworkers,leasestest -count=1 -v -run 'TestSimulation|TestAnInjected|TestTheSimulation' ./tests/reliability/

test-sim: ## seeded simulation: processes, goroutines, clock steps, store faults, kill -9, on SQLite and PostgreSQL (short)
	$(PG_RUN) env LEASES_REQUIRE_PG=1 $(SIM_GO_TEST) -timeout 10m | grep -E '^(---|ok|FAIL|\s+\w+_test.go|\s+(Error|Messages|Test):)'

test-reliability: test-race test-sim test-clock-faults test-abi-fuzz ## race, simulation, C ABI fuzz (ASan, valgrind), clock faults via the test library

# Soak budgets: the Go suite (with the test seams, so every race worker makes
# clock faults) with LEASES_SOAK=1 (500 kill -9 iterations, 120
# kills at a write, 120 I/O-fault runs, 3 race rounds of 30 s), the seeded
# simulation (8 seeds of 3000 actions per store), the ABI fuzzer, the clock
# faults on both stores, and every Go fuzz target by execution count. Every
# figure is written by the program that did the work: the Go tests, the
# simulation, clock_faults and abi_fuzz append their own counts to
# $(SOAK_FIGURES); mk/fuzz_figure.sh records the inputs each fuzz target
# executed, read from go test's own report.
SOAK_FUZZ_CALLS    ?= 100000
SOAK_FUZZ_VG_CALLS ?= 10000
SOAK_GO_FUZZ       ?= FuzzDecodeToken:300000x FuzzParseFacts:300000x FuzzMigrateLegacy:2000x
SOAK_FIGURES       := $(ROOT)/$(REL_DIR)/figures.jsonl

soak: reliability-workers $(REL_DIR)/clock_faults $(REL_DIR)/abi_fuzz_asan $(REL_DIR)/abi_fuzz ## long reliability run (500+ kill iterations), figures in build/reliability/figures.jsonl
	mkdir -p $(REL_DIR)
	rm -f $(REL_DIR)/figures.jsonl
	$(PG_RUN) env LEASES_SOAK=1 LEASES_REL_FIGURES=$(SOAK_FIGURES) $(REL_RACE_ENV) \
		$(GO) test -tags leasesworkers,leasestest -count=1 -timeout 90m -v -run . -skip 'TestSimulation|TestAnInjected|TestTheSimulation' ./tests/reliability/ | grep -E '^(---|ok|FAIL|\s+\w+_test.go|\s+(Error|Messages|Test):)'
	$(PG_RUN) env LEASES_SOAK=1 LEASES_REQUIRE_PG=1 LEASES_REL_FIGURES=$(SOAK_FIGURES) \
		$(SIM_GO_TEST) -timeout 60m | grep -E '^(---|ok|FAIL|\s+\w+_test.go|\s+(Error|Messages|Test):)'
	rm -rf $(REL_DIR)/clock && mkdir -p $(REL_DIR)/clock
	LEASES_REL_FIGURES=$(SOAK_FIGURES) $(REL_DIR)/clock_faults $(ROOT)/$(REL_DIR)/clock
	$(PG_RUN) env LEASES_REL_FIGURES=$(SOAK_FIGURES) $(REL_DIR)/clock_faults postgres
	rm -rf $(REL_DIR)/fuzz && mkdir -p $(REL_DIR)/fuzz/asan $(REL_DIR)/fuzz/vg
	ASAN_OPTIONS=detect_leaks=1 LEASES_REL_FIGURES=$(SOAK_FIGURES) $(REL_DIR)/abi_fuzz_asan \
		$(ROOT)/$(REL_DIR)/fuzz/asan $(REL_FUZZ_SEED) $(SOAK_FUZZ_CALLS)
	GODEBUG=asyncpreemptoff=1 LEASES_REL_FIGURES=$(SOAK_FIGURES) $(VALGRIND) $(VALGRIND_ARGS) $(REL_DIR)/abi_fuzz \
		$(ROOT)/$(REL_DIR)/fuzz/vg $$(( $(REL_FUZZ_SEED) + 1 )) $(SOAK_FUZZ_VG_CALLS)
	for t in $(SOAK_GO_FUZZ); do \
		mk/fuzz_figure.sh $(SOAK_FIGURES) "$${t%%:*}" "$${t##*:}" $(GO) || exit 1; \
	done
	@cat $(REL_DIR)/figures.jsonl
