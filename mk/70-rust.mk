# Rust projection (bindings/rust, crate `leases`): its tests against the
# release library, again with --features testing against the test library
# (clock, busy and internal statuses), doc tests, rustdoc without warnings,
# and clippy. Both test runs include tests/postgres.rs, so they run under
# $(PG_RUN) (a PostgreSQL server, required).

CARGO      ?= cargo
RUST_DIR   := bindings/rust
RUST_ENV   := CARGO_TARGET_DIR=$(ROOT)/$(BUILD)/rust
# --locked: the committed Cargo.lock pins every crate; cargo fetches them itself.
RUST_FLAGS := --locked -j 2

.PHONY: test-rust
TEST_TARGETS += test-rust

test-rust: $(CAPI_SO) $(CAPI_TEST_SO) ## Rust crate: tests (release and test library), doc tests, rustdoc, clippy
	cd $(RUST_DIR) && $(PG_RUN) env $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) test $(RUST_FLAGS) --all-targets
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) test $(RUST_FLAGS) --doc
	cd $(RUST_DIR) && $(PG_RUN) env $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test $(CARGO) test $(RUST_FLAGS) --features testing --all-targets
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test RUSTDOCFLAGS="-D warnings" \
		$(CARGO) doc $(RUST_FLAGS) --no-deps --features testing
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD) $(CARGO) clippy $(RUST_FLAGS) --all-targets -- -D warnings
	cd $(RUST_DIR) && $(RUST_ENV) LEASES_LIB_DIR=$(ROOT)/$(BUILD)/test \
		$(CARGO) clippy $(RUST_FLAGS) --all-targets --features testing -- -D warnings
