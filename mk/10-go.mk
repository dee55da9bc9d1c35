# Go core: unit, rule, multi-process, reliability and fuzz tests.

# make test gives each target an execution-count budget, not a duration: a
# duration budget races Go 1.26's fuzz coordinator at the deadline
# (golang/go#75804, fixed in 1.27) and fails with "context deadline exceeded"
# on a loaded machine without any failing input.
FUZZ_TARGETS := FuzzDecodeToken:30000x FuzzParseFacts:30000x FuzzMigrateLegacy:100x
FUZZ_LONG ?= 5m

.PHONY: test-go fuzz vet
TEST_TARGETS += vet test-go

vet: ## go vet (release and test builds)
	$(GO) vet ./...
	$(GO) vet -tags leasestest ./...

test-go: ## Go tests (core rules, processes, reliability short run), plus a short run of every fuzz target
	$(GO) test -count=1 -timeout 20m ./...
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$${t%%:*}$$" -fuzztime=$${t##*:} ./core || exit 1; \
	done

fuzz: ## run every fuzz target longer (FUZZ_LONG=5m each)
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$${t%%:*}$$" -fuzztime=$(FUZZ_LONG) ./core || exit 1; \
	done
