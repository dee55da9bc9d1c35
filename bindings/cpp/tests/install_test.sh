#!/usr/bin/env bash
# Install test of the C++ projection: `make install PREFIX=<tmp>`, then build
# and run against that prefix only (1) a CMake consumer using
# find_package(leases), (2) the reference executor examples/cpp-executor,
# (3) a C consumer built with `pkg-config --cflags --libs leases`, (4) the Rust
# crate by path with LEASES_LIB_DIR=<prefix>/lib.
# Usage: install_test.sh REPO_ROOT
set -euo pipefail
root=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leases-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

make -C "$root" --no-print-directory install PREFIX="$prefix"

abi=$(cat "$root/abi/VERSION")
soname=libleases.so.$abi
for f in include/leases.h include/leases/leases.hpp lib/cmake/leases/leasesConfig.cmake \
         lib/cmake/leases/leasesConfigVersion.cmake lib/pkgconfig/leases.pc lib/$soname bin/leases; do
  test -f "$prefix/$f" || { echo "install test: $prefix/$f is missing" >&2; exit 1; }
done
# The real file carries the SONAME; libleases.so is the development link to it.
if [ "$(readlink "$prefix/lib/libleases.so")" != "$soname" ]; then
  echo "install test: lib/libleases.so must be a symlink to $soname" >&2; ls -la "$prefix/lib" >&2; exit 1
fi
if ! readelf -d "$prefix/lib/$soname" | grep -q "Library soname: \[$soname\]"; then
  echo "install test: lib/$soname has no SONAME $soname" >&2; exit 1
fi
# The installed CLI runs and reports the release version.
"$prefix/bin/leases" version | grep -q "$(cat "$root/VERSION")" || {
  echo "install test: bin/leases version does not report $(cat "$root/VERSION")" >&2; exit 1; }
if [ -e "$prefix/include/leases_testing.h" ]; then
  echo "install test: the test seam header must not be installed" >&2; exit 1
fi

# (1) find_package(leases) from a CMake project.
cmake -S "$root/bindings/cpp/tests/consumer" -B "$tmp/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/consumer" -j2 >/dev/null
# The executable records the SONAME, not a build path or the unversioned link.
if ! readelf -d "$tmp/consumer/consumer" | grep -q "Shared library: \[$soname\]"; then
  echo "install test: consumer does not depend on $soname:" >&2
  readelf -d "$tmp/consumer/consumer" | grep NEEDED >&2; exit 1
fi
"$tmp/consumer/consumer" "$tmp/consumer.db"

# (2) the reference executor: claims, writes through an execution request,
# completes; three seeded jobs give three final files and nothing else.
cmake -S "$root/examples/cpp-executor" -B "$tmp/executor" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/executor" -j2 >/dev/null
mkdir -p "$tmp/out"
"$tmp/executor/cpp-executor" --db "$tmp/executor.db" --production frames --output-dir "$tmp/out" --seed 3
n=$(find "$tmp/out" -type f | wc -l)
if [ "$n" -ne 3 ]; then
  echo "install test: expected 3 output files, found $n:" >&2; ls -la "$tmp/out" >&2; exit 1
fi
rc=0
"$tmp/executor/cpp-executor" --db "$tmp/executor.db" --production frames --output-dir "$tmp/out" || rc=$?
if [ "$rc" -ne 3 ]; then
  echo "install test: a second run must find nothing to claim (exit 3), got $rc" >&2; exit 1
fi

# (3) a C consumer through pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs leases)
"${CC:-cc}" -std=c99 -Wall -Wextra -Werror "$root/bindings/cpp/tests/consumer/consumer.c" -o "$tmp/consumer-c" \
  $flags -Wl,-rpath,"$(pkg-config --variable=libdir leases)"
"$tmp/consumer-c" "$tmp/consumer-c.db"
# The C++ header through pkg-config as well.
"${CXX:-c++}" -std=c++17 -Wall -Wextra -Werror -pedantic "$root/bindings/cpp/tests/consumer/main.cpp" \
  -o "$tmp/consumer-pc" $flags -Wl,-rpath,"$(pkg-config --variable=libdir leases)"
"$tmp/consumer-pc" "$tmp/consumer-pc.db"

# (4) the Rust crate by path against the installed library (LEASES_LIB_DIR=<prefix>/lib):
# the README's example crate, linked to lib/libleases.so -> libleases.so.1.
if command -v cargo >/dev/null; then
  mkdir -p "$root/build/readme"
  [ -f "$root/build/readme/example.rs" ] || python3 - "$root" <<'PY'
import re, sys, pathlib
root = pathlib.Path(sys.argv[1])
text = (root / "README.md").read_text()
body = re.search(r"^```rust\n(.*?)^```$", text, flags=re.S | re.M).group(1)
(root / "build" / "readme" / "example.rs").write_text(body)
PY
  (cd "$root/tests/readme/rust" && CARGO_TARGET_DIR="$root/build/install-rust" LEASES_LIB_DIR="$prefix/lib" \
    cargo build --release --locked -j 2 --quiet)
  bin=$root/build/install-rust/release/readme-example
  if ! readelf -d "$bin" | grep -q "Shared library: \[$soname\]" || ! readelf -d "$bin" | grep -q "$prefix/lib"; then
    echo "install test: the Rust example is not linked to $prefix/lib/$soname:" >&2; readelf -d "$bin" >&2; exit 1
  fi
  (mkdir -p "$tmp/rust" && cd "$tmp/rust" && "$bin" >/dev/null)
fi

echo "install test: find_package(leases), the reference executor, pkg-config consumers and the Rust crate (LEASES_LIB_DIR) all passed"
