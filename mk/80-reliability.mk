# Reliability suite: `go test ./...` (make test-go) runs the short version;
# `make soak` runs the long one and records its figures for docs/RELIABILITY.md.

.PHONY: soak
soak: ## long reliability run (500+ kill iterations), figures in build/reliability/
	mkdir -p $(BUILD)/reliability
	rm -f $(BUILD)/reliability/figures.jsonl
	LEASES_SOAK=1 LEASES_REL_FIGURES=$(ROOT)/$(BUILD)/reliability/figures.jsonl \
		$(GO) test -count=1 -timeout 90m -v -run . ./tests/reliability/ | grep -E '^(---|ok|FAIL|\s+\w+_test.go)'
	@cat $(BUILD)/reliability/figures.jsonl
