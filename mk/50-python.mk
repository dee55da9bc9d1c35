# Python projection (bindings/python): a venv with pinned tools, mypy --strict,
# and pytest twice: against the test library (every test, clock seam included)
# and against the release library (every test that needs no seam); then the
# distributions (a manylinux wheel, an sdist that builds with Go) installed
# into fresh venvs outside the repository.

PY          ?= python3
PY_DIR      := bindings/python
PY_VENV     := $(BUILD)/venv
PY_STAMP    := $(PY_VENV)/.installed
PYTEST_ARGS ?=

.PHONY: test-python python-venv
TEST_TARGETS += test-python

$(PY_STAMP): $(PY_DIR)/requirements-dev.txt
	rm -rf $(PY_VENV)
	$(PY) -m venv $(PY_VENV)
	$(PY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	touch $@

python-venv: $(PY_STAMP) ## the Python venv (build/venv) with the pinned pytest and mypy

# pytest exits 5 when it collected no tests; like every other non-zero exit,
# make counts it as a failure. Both runs include tests/test_postgres.py, so
# they run under $(PG_RUN) (a PostgreSQL server, required).
test-python: $(CAPI_SO) $(CAPI_TEST_SO) $(CLI_BIN) $(PY_STAMP) ## Python binding: mypy --strict and pytest (test and release libraries; SQLite and PostgreSQL)
	cd $(PY_DIR) && ../../$(PY_VENV)/bin/mypy --strict leases tests
	cd $(PY_DIR) && $(PG_RUN) env PYTHONPATH=. LEASES_LIBRARY=$(ROOT)/$(CAPI_TEST_SO) \
		../../$(PY_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
	cd $(PY_DIR) && $(PG_RUN) env PYTHONPATH=. LEASES_LIBRARY=$(ROOT)/$(CAPI_SO) \
		../../$(PY_VENV)/bin/python -m pytest -q -p no:cacheprovider -m 'not testlib' $(PYTEST_ARGS)

# The wheel bundles the release library build/libleases.so (stripped) and is
# tagged manylinux_X_Y for the glibc it needs (setup.py); the sdist carries
# the Go sources in golib/ and builds the library where Go is installed.
PY_DIST := $(BUILD)/dist

.PHONY: python-dist test-python-install
TEST_TARGETS += test-python-install

python-dist: $(CAPI_SO) $(PY_STAMP) ## the Python wheel (manylinux, library bundled) and sdist (with the Go sources) in build/dist
	rm -rf $(PY_DIST) $(PY_DIR)/build && mkdir -p $(PY_DIST)
	env -u LEASES_BUNDLE_LIBRARY $(PY_VENV)/bin/python -m build --no-isolation --sdist --wheel -o $(PY_DIST) $(PY_DIR) >/dev/null
	@ls -l $(PY_DIST)

test-python-install: python-dist ## fresh venvs outside the repository install the wheel and a wheel built from the sdist; fork, asyncio, README example
	bash $(PY_DIR)/tests/install_test.sh $(ROOT) $(ROOT)/$(PY_DIST) $(ROOT)/$(PY_VENV)/bin/python
