# Go core: unit, rule, multi-process, reliability and fuzz tests.

# make test gives each target an execution-count budget, not a duration: a
# duration budget races Go 1.26's fuzz coordinator at the deadline
# (golang/go#75804, fixed in 1.27) and fails with "context deadline exceeded"
# on a loaded machine without any failing input.
FUZZ_TARGETS := FuzzDecodeToken:30000x FuzzParseFacts:30000x FuzzMigrateLegacy:100x
FUZZ_LONG ?= 5m

.PHONY: test-go fuzz vet go-tools
TEST_TARGETS += vet test-go

vet: ## go vet (release and test builds)
	$(GO) vet ./...
	$(GO) vet -tags leasestest,leasesworkers ./...

# The reliability tests inject faults with strace; a bare Debian gets it here.
go-tools:
	@command -v strace >/dev/null || { echo "installing strace from Debian"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace; }

test-go: go-tools ## Go tests (core rules, processes, reliability short run), the core conformance suite and the worker loop again on PostgreSQL, and a short run of every fuzz target
	$(PG_RUN) $(GO) test -count=1 -timeout 20m ./...
	$(PG_RUN) env LEASES_TEST_STORE=postgres $(GO) test -count=1 -timeout 10m ./core/... ./worker/...
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$${t%%:*}$$" -fuzztime=$${t##*:} ./core || exit 1; \
	done

fuzz: ## run every fuzz target longer (FUZZ_LONG=5m each)
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$${t%%:*}$$" -fuzztime=$(FUZZ_LONG) ./core || exit 1; \
	done
