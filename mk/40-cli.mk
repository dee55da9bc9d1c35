# CLI: build/leases (release build, stripped, version from VERSION) and an end-to-end
# smoke test of that binary (SQLite, then PostgreSQL). The CLI's own
# subprocess tests (cmd/leases, run against a leasestest build) already run in
# test-go.

CLI_BIN  := $(BUILD)/leases
CLI_SRCS := $(wildcard cmd/leases/*.go leases.go core/*.go core/*/*.go core/*/*/*.go) go.mod go.sum VERSION mk/40-cli.mk

.PHONY: cli test-cli
BUILD_TARGETS += $(CLI_BIN)
TEST_TARGETS  += test-cli

cli: $(CLI_BIN) ## build the leases CLI (build/leases)

# A position-independent executable: Go compiles its packages with the same
# code generation as the shared library's (-buildmode=c-shared), so from an
# empty build cache the CLI reuses the library's compiled packages (SQLite,
# pgx, the core) instead of compiling them a second time; make demo builds
# both, and this halves its cold build.
$(CLI_BIN): $(CLI_SRCS)
	@mkdir -p $(@D)
	$(GO) build -trimpath -buildmode=pie -ldflags="-s -w -X main.version=$(VERSION)" -o $@ ./cmd/leases

# The PostgreSQL smoke test (a postgres:// URL in --db and $$LEASES_DB) runs
# under $(PG_RUN); the CLI's Go tests on PostgreSQL (cmd/leases/postgres_test.go)
# run in test-go, which has a server too.
test-cli: $(CLI_BIN) ## shell smoke test of the release CLI binary, as an operator uses it, on SQLite and PostgreSQL
	bash tests/cli/smoke.sh $(ROOT)/$(CLI_BIN) $(VERSION)
	$(PG_RUN) bash tests/cli/smoke_pg.sh $(ROOT)/$(CLI_BIN)

# `make install` (mk/60-cpp.mk) also installs the CLI as $(PREFIX)/bin/leases.
.PHONY: install-cli
install: install-cli

install-cli: $(CLI_BIN) install-preflight
	install -D -m 0755 $(CLI_BIN) $(DESTDIR)$(abspath $(PREFIX))/bin/leases
