# Go core: unit, rule, multi-process and fuzz tests.

FUZZTIME ?= 10s

.PHONY: test-go fuzz vet
TEST_TARGETS += vet test-go

vet: ## go vet (release and test builds)
	$(GO) vet ./...
	$(GO) vet -tags leasestest ./...

test-go: ## Go tests, plus a short run of every fuzz target
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -run='^$$' -fuzz='^FuzzDecodeToken$$' -fuzztime=$(FUZZTIME) ./core

FUZZ_LONG ?= 5m
fuzz: ## run the fuzz targets longer (FUZZ_LONG=5m)
	$(GO) test -count=1 -run='^$$' -fuzz='^FuzzDecodeToken$$' -fuzztime=$(FUZZ_LONG) ./core
