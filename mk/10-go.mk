# Go core: unit, rule, multi-process, reliability and fuzz tests.

FUZZ_TARGETS := FuzzDecodeToken FuzzParseFacts FuzzMigrateLegacy
FUZZTIME  ?= 5s
FUZZ_LONG ?= 5m

.PHONY: test-go fuzz vet
TEST_TARGETS += vet test-go

vet: ## go vet (release and test builds)
	$(GO) vet ./...
	$(GO) vet -tags leasestest ./...

test-go: ## Go tests (core rules, processes, reliability short run), plus a short run of every fuzz target
	$(GO) test -count=1 -timeout 20m ./...
	for f in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) ./core || exit 1; \
	done

fuzz: ## run every fuzz target longer (FUZZ_LONG=5m each)
	for f in $(FUZZ_TARGETS); do \
		$(GO) test -count=1 -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZ_LONG) ./core || exit 1; \
	done
