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

include $(sort $(wildcard mk/*.mk))

.PHONY: all test help clean
all: $(BUILD_TARGETS) ## build everything (library, CLI)

test: $(TEST_TARGETS) ## run every test suite (what CI runs)
	@echo "make test: all suites passed: $(TEST_TARGETS)"

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | sort -u | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

clean: ## remove build outputs
	rm -rf $(BUILD)
