#!/usr/bin/env bash
# Install test of the Python route, from outside the repository: the wheel
# `make python-dist` built carries a manylinux tag auditwheel agrees with and
# a stripped library; a fresh venv installs it (no index) and, with an empty
# environment, runs the README's example twice, a child forked before the
# first use, a child forked after it (ForkedError) and an asyncio claim; then
# a wheel built from the sdist with Go (no checkout) does the same.
# Usage: install_test.sh REPO_ROOT DIST_DIR TOOLS_PYTHON
set -euo pipefail
root=$1
dist=$2
tools=$3  # a Python with setuptools, build and auditwheel (build/venv)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leases-python-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "python install test: $*" >&2; exit 1; }

wheel=$(echo "$dist"/libleases-*.whl)
sdist=$(echo "$dist"/libleases-*.tar.gz)
[ -f "$wheel" ] && [ -f "$sdist" ] || fail "no wheel and sdist in $dist"

# check_wheel WHEEL: the tag is manylinux_X_Y, auditwheel says the wheel is
# consistent with it, and the bundled library is stripped.
check_wheel() {
  local tag
  tag=$(basename "$1" .whl | awk -F- '{print $NF}')
  case $tag in manylinux_*_x86_64 | manylinux_*_aarch64) ;; *) fail "$1: platform tag $tag is not manylinux";; esac
  "$tools" -m auditwheel show "$1" >"$tmp/show.txt" 2>&1 || { cat "$tmp/show.txt" >&2; fail "auditwheel show failed"; }
  tr -s ' \n' ' ' <"$tmp/show.txt" | grep -q "is consistent with the following platform tag: \"$tag\"" ||
    { cat "$tmp/show.txt" >&2; fail "auditwheel does not agree with $tag"; }
  rm -rf "$tmp/unzipped" && mkdir "$tmp/unzipped"
  "$tools" -m zipfile -e "$1" "$tmp/unzipped"
  if readelf -S -W "$tmp/unzipped/leases/libleases.so" | grep -qE '\.(symtab|debug_info) '; then
    fail "$1: the bundled libleases.so is not stripped"
  fi
}

# The program a user runs, in a directory of its own with an empty environment.
cat > "$tmp/example.py" <<'PY'
import asyncio, multiprocessing, os, subprocess, sys
from datetime import timedelta
import leases
import leases.aio
from leases import _ffi

assert "site-packages" in leases.__file__, leases.__file__

def work(i):
    # A worker forked before the parent used the library opens it itself.
    with leases.Authority("jobs.db") as auth:
        auth.create_production("fork")
        job = auth.request_job("fork", key=f"{os.getppid()}-{i}")
        auth.claim_job("fork", job, worker=f"child-{i}", duration=timedelta(seconds=30)).complete()
        return job

def after(_):
    try:
        leases.Authority("jobs.db").jobs("fork")
        return "no error"
    except leases.ForkedError as e:
        return "ForkedError"

async def claim_async():
    async with await leases.aio.AsyncAuthority.open("jobs.db") as auth:
        await auth.create_production("aio")
        job = await auth.request_job("aio")
        lease = await auth.claim_job("aio", job, worker="aio", duration=timedelta(seconds=30))
        await lease.complete(metadata={"async": True})
        return [j.state for j in await auth.jobs("aio") if j.id == job]

# The database exists before the workers start (created by another process:
# this one must not load the library before it forks).
subprocess.run([sys.executable, "-c", "import leases; leases.Authority('jobs.db').close()"], check=True)
ctx = multiprocessing.get_context("fork")
assert not _ffi.loaded()
with ctx.Pool(2) as pool:
    done = pool.map(work, range(4))
assert asyncio.run(claim_async()) == ["completed"]
assert str(leases.library_path()).startswith(os.path.dirname(leases.__file__))
with ctx.Pool(1) as pool:
    assert pool.map(after, [0]) == ["ForkedError"]
with leases.Authority("jobs.db") as auth:
    states = {j.id: j.state for j in auth.jobs("fork")}
assert all(states[j] == "completed" for j in done), states
print("python install example: forked workers, asyncio claim, ForkedError after first use: ok")
PY
python3 - "$root/README.md" "$tmp/readme.py" <<'PY'
import re, sys, pathlib
text = pathlib.Path(sys.argv[1]).read_text()
body = re.search(r"^```python\n(.*?)^```$", text, flags=re.S | re.M).group(1)
pathlib.Path(sys.argv[2]).write_text(body)
PY

# install_and_run WHEEL: a fresh venv, the wheel from the file (no index),
# then the programs, twice, from a directory outside the repository.
install_and_run() {
  rm -rf "$tmp/venv" "$tmp/run" && mkdir "$tmp/run"
  python3 -m venv "$tmp/venv"
  "$tmp/venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$1"
  for i in 1 2; do
    (cd "$tmp/run" && env -i HOME="$tmp" "$tmp/venv/bin/python" "$tmp/example.py") || fail "example run $i"
    (cd "$tmp/run" && env -i HOME="$tmp" "$tmp/venv/bin/python" "$tmp/readme.py" >"$tmp/readme.out") ||
      fail "README example run $i"
    if grep -q "lt1\." "$tmp/readme.out"; then fail "the README example printed token text"; fi
  done
}

check_wheel "$wheel"
install_and_run "$wheel"

# The sdist builds its library from golib/ with Go, away from the checkout.
mkdir "$tmp/from-sdist"
(cd "$tmp" && env -u LEASES_BUNDLE_LIBRARY -u LEASES_LIBRARY "$tools" -m pip wheel --quiet --no-build-isolation \
  --no-deps --disable-pip-version-check -w "$tmp/from-sdist" "$sdist")
built=$(echo "$tmp/from-sdist"/libleases-*.whl)
check_wheel "$built"
install_and_run "$built"
echo "python install test: the manylinux wheel and a wheel built from the sdist with Go installed into fresh venvs;" \
  "forked workers, an asyncio claim, ForkedError after first use and the README example (twice) ran"
