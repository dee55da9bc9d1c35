# make demo (demo/): the product doing its job on ./demo/leases.db, with
# workers in Python, Rust, C++ and the CLI's `leases work`; and
# test-demo, the same demo in a quick mode on its own database, checked.
# Everything it runs is the release build: build/libleases.so, build/leases.
# Python runs as plain python3 with PYTHONPATH (no venv, nothing to install).

DEMO_BUILD := $(BUILD)/demo
DEMO_CPP   := $(DEMO_BUILD)/cpp_worker
DEMO_RUST  := $(DEMO_BUILD)/rust/release/leases-demo-worker
DEMO_DEPS  := $(CAPI_SO) $(CLI_BIN) $(DEMO_CPP) $(DEMO_RUST)
DEMO_RUN   := PYTHONPATH=$(ROOT)/bindings/python LEASES_LIBRARY=$(ROOT)/$(CAPI_SO) \
              python3 demo/demo.py --root $(ROOT) --cpp-worker $(ROOT)/$(DEMO_CPP) --rust-worker $(ROOT)/$(DEMO_RUST)
DEMO_ARGS  ?=
# How long the status page stays up after the demo ends (Ctrl-C ends it sooner).
DEMO_LINGER ?= 60s

.PHONY: demo demo-workers demo-readme test-demo
TEST_TARGETS += test-demo

demo: $(DEMO_DEPS) ## the main job: ~200 jobs, workers in Python/Rust/C++/CLI, a token handoff, a kill -9, a cancel
	$(DEMO_RUN) --linger $(DEMO_LINGER) $(DEMO_ARGS)

demo-workers: $(DEMO_DEPS)

# README.md's sample of the demo's output, rewritten from a real run of
# make demo (its page lingering DEMO_LINGER too) between README's demo-sample
# markers; test-demo checks that the sample has the shape of a real run.
demo-readme: $(DEMO_DEPS) ## run make demo and write its output's excerpt into README.md's sample block
	@mkdir -p $(DEMO_BUILD)
	$(DEMO_RUN) --linger $(DEMO_LINGER) $(DEMO_ARGS) > $(DEMO_BUILD)/readme-run.txt 2>&1 || { cat $(DEMO_BUILD)/readme-run.txt; exit 1; }
	python3 demo/readme_sample.py write README.md $(DEMO_BUILD)/readme-run.txt

$(DEMO_CPP): demo/cpp_worker.cpp bindings/cpp/include/leases/leases.hpp include/leases.h $(CAPI_SO)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude -Ibindings/cpp/include $< -o $@ \
		-L$(BUILD) -lleases -Wl,-rpath,$(ROOT)/$(BUILD)

# cargo decides what to rebuild; touch gives make a fresh timestamp.
$(DEMO_RUST): $(wildcard demo/rust-worker/Cargo.* demo/rust-worker/src/*.rs) \
              demo/rust-worker/build.rs \
              $(wildcard bindings/rust/Cargo.* bindings/rust/build.rs bindings/rust/src/*.rs) $(CAPI_SO)
	cd demo/rust-worker && CARGO_TARGET_DIR=$(ROOT)/$(DEMO_BUILD)/rust LEASES_LIB_DIR=$(ROOT)/$(BUILD) \
		$(CARGO) build --release --locked -j 2 --quiet
	touch $@

# The quick demo (40 jobs) on build/demo-test/leases.db; tests/demo/check.py
# asserts its summary and scans everything it printed for token text. Claims
# of 3 s (renewed every second) survive a CI host stalled for over a second.
# It also checks README.md's sample of the demo against this real run.
test-demo: $(DEMO_DEPS) ## make demo in a quick mode, its summary checked, no token in its output
	rm -rf $(DEMO_BUILD)-test && mkdir -p $(DEMO_BUILD)-test
	$(DEMO_RUN) --db $(BUILD)/demo-test/leases.db --jobs 40 --work-ms 100 --expire-ms 3000 --interval 0.5 --serve 127.0.0.1:0 --linger 0 \
		--summary-json $(DEMO_BUILD)-test/summary.json 2>&1 | tee $(DEMO_BUILD)-test/output.txt
	python3 tests/demo/check.py $(DEMO_BUILD)-test/summary.json $(DEMO_BUILD)-test/output.txt $(DEMO_BUILD)-test/work README.md

# README.md's examples (Go, C, Python, C++, Rust, CLI), extracted, built
# against the release library and run: tests/readme/run_examples.py.
.PHONY: test-readme
TEST_TARGETS += test-readme

test-readme: $(CAPI_SO) $(CAPI_A) $(CLI_BIN) ## build and run every example of README.md, no token in their output
	python3 tests/readme/run_examples.py $(ROOT)
