# Releases: the license and the third-party license list, the version's one
# source (VERSION), and `make dist`, every artifact of a version in one
# folder with SHA256SUMS (docs/decisions.md, "Releases").

LICENSES_FILE := THIRD_PARTY_LICENSES.md
LICENSES_TOOL := python3 mk/licenses.py $(ROOT) $(ROOT)/$(PY_VENV)/bin/python
RELEASE_TOOL  := python3 mk/release.py
DIST_DIR      := $(BUILD)/release/$(VERSION)
DIST_ARCH     := $(shell uname -m)
DIST_STAGE    := $(BUILD)/release/stage
DIST_TREE     := libleases-$(VERSION)-linux-$(DIST_ARCH)

.PHONY: licenses test-release dist test-dist
TEST_TARGETS += test-release test-dist

licenses: $(PY_STAMP) ## regenerate THIRD_PARTY_LICENSES.md (every Go module, Rust crate and Python pin, with its license)
	$(LICENSES_TOOL) $(LICENSES_FILE)

# The checks' own failing cases first (tests/release), then the tree: the
# license list is current, every version agrees with VERSION (the release CLI
# and library included), every package carries the license.
test-release: $(PY_STAMP) $(CLI_BIN) $(CAPI_SO) ## release checks: THIRD_PARTY_LICENSES.md current, versions agree with VERSION, license fields
	python3 tests/release/test_release.py
	$(LICENSES_TOOL) --check $(LICENSES_FILE)
	$(RELEASE_TOOL) versions $(ROOT) --cli $(ROOT)/$(CLI_BIN) --library $(ROOT)/$(CAPI_SO)
	$(RELEASE_TOOL) license-fields $(ROOT)

# The wheel and sdist (python-dist) and the crate (rust-crate) are the ones
# their install tests use; the tarball is `make install` into a staging
# prefix (relocatable: the .pc files and the CMake package find their prefix
# from where they are); the CLI is build/leases.
dist: $(CAPI_SO) $(CAPI_A) $(CLI_BIN) python-dist rust-crate ## every artifact of VERSION in build/release/VERSION/ with SHA256SUMS
	rm -rf $(DIST_DIR) $(DIST_STAGE) && mkdir -p $(DIST_DIR) $(DIST_STAGE)
	$(MAKE) --no-print-directory install PREFIX=$(DIST_STAGE)/$(DIST_TREE) >/dev/null
	tar -C $(DIST_STAGE) --sort=name --owner=0 --group=0 --numeric-owner -czf $(DIST_DIR)/$(DIST_TREE).tar.gz $(DIST_TREE)
	cp $(PY_DIST)/libleases-$(VERSION)-*.whl $(PY_DIST)/libleases-$(VERSION).tar.gz $(DIST_DIR)/
	cp $(RUST_CRATE) $(DIST_DIR)/
	cp $(CLI_BIN) $(DIST_DIR)/leases-$(VERSION)-linux-$(DIST_ARCH)
	cd $(DIST_DIR) && sha256sum $$(ls | grep -v '^SHA256SUMS$$') > SHA256SUMS
	@ls -l $(DIST_DIR)

test-dist: dist ## make dist's folder: every artifact, each carrying VERSION and the license; SHA256SUMS matches
	cd $(DIST_DIR) && sha256sum --quiet -c SHA256SUMS
	python3 tests/release/test_dist.py $(DIST_DIR) $(VERSION)
