# Docs: the repository stands alone. No tracked file refers to a document or
# path outside it, and every relative Markdown link lands on a tracked file.

.PHONY: test-refs
TEST_TARGETS += test-refs

test-refs: ## no tracked file refers outside the repository; every Markdown link resolves (and the check's own failing cases)
	python3 tests/refs/test_check_refs.py
	python3 tests/refs/check_refs.py --root $(ROOT)
