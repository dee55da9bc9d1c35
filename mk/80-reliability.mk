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
REL_RACE_ENV := LEASES_REL_RACE=1 LEASES_REL_PYTHON=$(PY)

.PHONY: soak test-reliability test-race reliability-workers
TEST_TARGETS += test-reliability

$(REL_DIR)/race_worker_c: tests/reliability/race/race_worker.c include/leases.h $(CAPI_SO)
	@mkdir -p $(@D)
	$(CC) $(REL_C_FLAGS) $< -o $@ -L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)

$(REL_DIR)/race_worker_cpp: tests/reliability/race/race_worker.cpp include/leases.h $(CPP_DIR)/include/leases/leases.hpp $(CAPI_SO)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -g -O1 -Wall -Wextra -Werror -Iinclude -I$(CPP_DIR)/include $< -o $@ \
		-L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)

$(BUILD)/rust/debug/examples/race_worker: $(RUST_DIR)/examples/race_worker.rs $(wildcard $(RUST_DIR)/src/*.rs) $(CAPI_SO)
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) build $(RUST_FLAGS) --example race_worker

reliability-workers: $(REL_RACE_BINS) $(CLI_BIN) $(CAPI_SO)

test-race: reliability-workers ## the six-language race alone (short)
	$(REL_RACE_ENV) $(GO) test -count=1 -timeout 10m -run 'TestRace' -v ./tests/reliability/ | grep -E '^(---|ok|FAIL|=== RUN|\s+\w+_test.go)'

test-reliability: test-race ## race, C ABI fuzz (ASan, valgrind), clock faults via the test library

soak: reliability-workers ## long reliability run (500+ kill iterations), figures in build/reliability/
	mkdir -p $(REL_DIR)
	rm -f $(REL_DIR)/figures.jsonl
	LEASES_SOAK=1 LEASES_REL_FIGURES=$(ROOT)/$(REL_DIR)/figures.jsonl $(REL_RACE_ENV) \
		$(GO) test -count=1 -timeout 90m -v -run . ./tests/reliability/ | grep -E '^(---|ok|FAIL|\s+\w+_test.go)'
	@cat $(REL_DIR)/figures.jsonl
