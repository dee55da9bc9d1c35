# Rust projection (bindings/rust, crate `leases`): its tests against the
# release archive build/libleases.a (the crate's default link), again with
# --features testing against the test library (clock, busy and internal
# statuses; shared), doc tests, rustdoc without warnings, and clippy. Both
# test runs include tests/postgres.rs, so they run under $(PG_RUN) (a
# PostgreSQL server, required); tests/records.rs runs the release CLI
# (build/leases) to read what Rust published and publish what Rust reads
# (tests/vectors/facts.json). test-rust-install packages the crate and
# builds a fresh project on it outside the repository.

CARGO      ?= cargo
RUST_DIR   := bindings/rust
RUST_ENV   := CARGO_TARGET_DIR=$(ROOT)/$(BUILD)/rust
# --locked: the committed Cargo.lock pins every crate; cargo fetches them itself.
RUST_FLAGS := --locked -j 2

.PHONY: test-rust
TEST_TARGETS += test-rust

test-rust: $(CAPI_A) $(CAPI_TEST_SO) $(CLI_BIN) ## Rust crate: tests (release and test library), doc tests, rustdoc, clippy
	cd $(RUST_DIR) && $(PG_RUN) env $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) test $(RUST_FLAGS) --all-targets
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) test $(RUST_FLAGS) --doc
	cd $(RUST_DIR) && $(PG_RUN) env $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test $(CARGO) test $(RUST_FLAGS) --features testing --all-targets
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test RUSTDOCFLAGS="-D warnings" \
		$(CARGO) doc $(RUST_FLAGS) --no-deps --features testing
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) clippy $(RUST_FLAGS) --all-targets -- -D warnings
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test \
		$(CARGO) clippy $(RUST_FLAGS) --all-targets --features testing -- -D warnings

# The crate as a user gets it: `cargo package` of a staged copy of the crate
# with golib/ (the library's Go sources, mk/golib_sources.py) beside it, so
# the packaged crate builds libleases.a by itself with the `bundled` feature.
# cargo verifies the package by building it so, outside the repository's
# layout, with no LEASES_LIB_DIR and no pkg-config path.
RUST_CRATE_DIR := $(BUILD)/rust-crate
RUST_CRATE     := $(RUST_CRATE_DIR)/package/leases-$(VERSION).crate

.PHONY: rust-crate test-rust-install
TEST_TARGETS += test-rust-install

rust-crate: ## cargo package: build/rust-crate/package/leases-VERSION.crate, the crate with its Go sources
	rm -rf $(RUST_CRATE_DIR) && mkdir -p $(RUST_CRATE_DIR)/leases
	cp -r $(RUST_DIR)/Cargo.toml $(RUST_DIR)/Cargo.lock $(RUST_DIR)/build.rs $(RUST_DIR)/src LICENSE $(RUST_CRATE_DIR)/leases/
	python3 mk/golib_sources.py $(ROOT) $(RUST_CRATE_DIR)/leases/golib
	cd $(RUST_CRATE_DIR)/leases && env -u LEASES_LIB_DIR -u PKG_CONFIG_PATH $(CARGO) package --locked --allow-dirty -j 2 \
		--features bundled --target-dir $(ROOT)/$(RUST_CRATE_DIR)
	@ls -l $(RUST_CRATE)

# Fresh cargo projects outside the repository depend on the packaged crate
# and build and run the README's example twice, with no LEASES_* variable:
# first offline and without Go, against a libleases installed by `make
# install PREFIX=<tmp>` and found by pkg-config (the default); then with the
# `bundled` feature, which builds libleases.a from golib/ with Go. Nothing is
# needed at run time.
test-rust-install: rust-crate $(CAPI_SO) $(CAPI_A) $(CLI_BIN) ## the packaged crate in fresh projects: offline against an installed libleases (pkg-config), and `bundled` (Go)
	bash $(RUST_DIR)/tests/install_test.sh $(ROOT) $(ROOT)/$(RUST_CRATE)
