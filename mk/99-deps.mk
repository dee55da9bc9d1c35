# System packages. `make deps` (as root) installs from Debian's packages what
# the build and the tests need besides the toolchains (Go, Rust/cargo, Python
# 3, gcc/g++, make): cmake, ninja, pkg-config and GoogleTest, strace,
# Chromium, valgrind, PostgreSQL. `make install` never installs system packages
# (install-preflight, mk/60-cpp.mk); the test targets that need a tool still
# fetch it when it is missing (cpp-tools, go-tools, web-tools).

.PHONY: deps
deps: ## install the build and test tools from Debian's packages (as root; make install never does)
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build pkg-config libgtest-dev strace chromium valgrind postgresql

.PHONY: test-install-no-system-packages
TEST_TARGETS += test-install-no-system-packages

test-install-no-system-packages: $(CAPI_SO) $(CAPI_A) $(CLI_BIN) ## make install without cmake: fails naming make deps, installs nothing, runs no package manager
	bash tests/release/install_installs_no_system_packages.sh $(ROOT)
