# C++ projection (bindings/cpp, header-only leases/leases.hpp): the GoogleTest
# suite (build/cpp), the same suite under ASan+UBSan (build/cpp-asan), and the
# install test (make install into a temporary prefix, then find_package,
# pkg-config and the reference executor examples/cpp-executor).

CPP_DIR        := bindings/cpp
CPP_BUILD      := $(BUILD)/cpp
CPP_ASAN_BUILD := $(BUILD)/cpp-asan
CPP_PKG_BUILD  := $(BUILD)/cpp-install
CPP_JOBS       ?= 2
PREFIX         ?= /usr/local
CPP_CMAKE      := cmake -G Ninja -DLEASES_ROOT=$(ROOT) -DLEASES_STATIC_LIBRARY=$(ROOT)/$(CAPI_A) \
                  -DLEASES_LIBRARY=$(ROOT)/$(CAPI_SO) -DLEASES_TEST_LIBRARY=$(ROOT)/$(CAPI_TEST_SO) \
                  -DLEASES_CLI=$(ROOT)/$(CLI_BIN)

.PHONY: test-cpp test-cpp-unit test-cpp-asan test-cpp-valgrind test-cpp-install cpp-tools cpp-build install install-cpp
TEST_TARGETS += test-cpp

test-cpp: test-cpp-unit test-cpp-asan test-cpp-valgrind test-cpp-install ## C++ projection: GoogleTest suite, ASan/UBSan run, valgrind run of the worker runtime, install test

# The machine image has cmake, ninja and GoogleTest; a bare Debian gets them here.
cpp-tools:
	@if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null || ! command -v pkg-config >/dev/null \
		|| ! [ -f /usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake ]; then \
		echo "installing cmake, ninja, pkg-config and GoogleTest from Debian"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build pkg-config libgtest-dev; \
	fi

# The CLI publishes the facts vector that tests/test_records.cpp reads back.
cpp-build: $(CAPI_SO) $(CAPI_TEST_SO) $(CLI_BIN) cpp-tools
	$(CPP_CMAKE) -S $(CPP_DIR) -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(CPP_BUILD) -j $(CPP_JOBS)

test-cpp-unit: cpp-build ## C++ tests (test library) and compile-fail tests
	cd $(CPP_BUILD) && $(PG_RUN) ctest --output-on-failure -j $(CPP_JOBS)

# The worker runtime's tests (threads, waits, keep-alive, Worker, worker
# processes; SQLite and PostgreSQL) under valgrind, with the C suite's
# suppressions of the Go runtime (mk/20-capi.mk says why): errors in the
# projection and every definite leak fail. LEASES_UNDER_VALGRIND lengthens the
# real-time durations of the keep-alive tests.
# Then the two-store suites of retries, records and pages (every call of
# revision 1), with the same checks: they parse much of the JSON the library
# returns, whose bytes the shim states defined (capi/shim.c), so an
# uninitialised value read in the projection fails them too. They run with
# LEASES_UNDER_VALGRIND too: their PostgreSQL authority then waits a minute,
# not the default 10 s, before a statement counts as unanswered (pg.hpp).
CPP_VALGRIND_FILTER := Waiting.*:Postgres.*Wait*:Postgres.*Canceller*:Postgres.*KeptAlive*:Postgres.*Worker*:Postgres.*Sigterm*
test-cpp-valgrind: cpp-build ## the C++ worker-runtime tests, then the retries, records and pages tests, under valgrind: no error outside the Go runtime, no definite leak
	$(PG_RUN) env GODEBUG=asyncpreemptoff=1 LEASES_UNDER_VALGRIND=1 $(VALGRIND) $(VALGRIND_ARGS) \
		$(CPP_BUILD)/leases_cpp_tests --gtest_filter='$(CPP_VALGRIND_FILTER)' --gtest_brief=1
	$(PG_RUN) env GODEBUG=asyncpreemptoff=1 LEASES_UNDER_VALGRIND=1 $(VALGRIND) $(VALGRIND_ARGS) \
		$(CPP_BUILD)/leases_cpp_tests --gtest_filter='Stores/*' --gtest_brief=1

# libleases.so is prebuilt Go, so nothing of the Go runtime is instrumented;
# the wrapper, the tests and every malloc'd string crossing the boundary are,
# leak detection included (docs/cpp.md). Compile-fail tests run once above.
# Both runs include tests/test_postgres.cpp, so ctest runs under $(PG_RUN).
test-cpp-asan: $(CAPI_TEST_SO) $(CLI_BIN) cpp-tools ## C++ tests built with -fsanitize=address,undefined
	$(CPP_CMAKE) -S $(CPP_DIR) -B $(CPP_ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
		-DLEASES_SANITIZE=ON -DLEASES_COMPILE_FAIL_TESTS=OFF >/dev/null
	cmake --build $(CPP_ASAN_BUILD) -j $(CPP_JOBS)
	cd $(CPP_ASAN_BUILD) && $(PG_RUN) env UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(CPP_JOBS)

test-cpp-install: $(CAPI_SO) $(CAPI_A) cpp-tools ## make install into a temporary prefix; find_package, pkg-config, executor
	bash $(CPP_DIR)/tests/install_test.sh $(ROOT)

# A prerequisite only, so another component can add its own install steps.
install: install-cpp ## install libleases.so.N (+ libleases.so link), leases.h, leases.hpp, CMake package, leases.pc and the leases CLI (PREFIX=/usr/local)

# Installing never installs system packages: without cmake or ninja, install
# stops before it has installed anything and names `make deps`.
.PHONY: install-preflight
install-preflight:
	@for tool in cmake ninja; do command -v $$tool >/dev/null || { \
		echo "make install: $$tool not found; installing libleases installs no system packages." \
			"Install $$tool yourself, or run 'make deps' (as root: Debian's packages of the build and test tools)" >&2; \
		exit 1; }; done

install-cpp: $(CAPI_SO) $(CAPI_A) install-preflight
	rm -rf $(CPP_PKG_BUILD)
	$(CPP_CMAKE) -S $(CPP_DIR) -B $(CPP_PKG_BUILD) -DLEASES_BUILD_TESTS=OFF \
		-DCMAKE_INSTALL_PREFIX=$(abspath $(PREFIX)) >/dev/null
	cmake --install $(CPP_PKG_BUILD)
