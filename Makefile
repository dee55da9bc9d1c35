# libleases build. `make help` lists the targets; `make test` is what CI runs.
# Each component adds its build and test targets in mk/<component>.mk.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all

GO       ?= go
BUILD    := build
ROOT     := $(abspath .)
VERSION  := $(shell cat VERSION)

BUILD_TARGETS :=
TEST_TARGETS  :=

# Commands that need a PostgreSQL server run under $(PG_RUN): inside `make
# test` one throwaway cluster serves every suite (LEASES_TEST_PG_URL is set);
# a target run on its own starts and stops a cluster of its own.
PG_RUN = $(if $(LEASES_TEST_PG_URL),,$(ROOT)/tests/pg/cluster.sh run --)

include $(sort $(wildcard mk/*.mk))

.PHONY: all test test-suites help clean
all: $(BUILD_TARGETS) ## build everything (library, CLI)

test: ## run every test suite (what CI runs) with one throwaway PostgreSQL cluster
	$(PG_RUN) $(MAKE) --no-print-directory test-suites

test-suites: $(TEST_TARGETS)
	@echo "make test: all suites passed: $(TEST_TARGETS)"

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | sort -u | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

clean: ## remove build outputs
	rm -rf $(BUILD)
