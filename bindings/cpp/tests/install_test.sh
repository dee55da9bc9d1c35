#!/usr/bin/env bash
# Install test of the C and C++ routes, from outside the repository: `make
# install PREFIX=<tmp>`, then against that prefix only (1) a CMake project
# using find_package(leases), installed with `cmake --install` and run with an
# empty environment (shared through an $ORIGIN rpath, shared through
# CMAKE_INSTALL_RPATH_USE_LINK_PATH, static), (2) the reference executor
# examples/cpp-executor, (3) C and C++ programs built with pkg-config (leases:
# shared, with its rpath; leases-static: the archive), run with an empty
# environment, (4) the Rust crate by path with LEASES_LIB_DIR=<prefix>/lib
# (the archive); then (5) add_subdirectory() of a fresh copy of the
# repository, which builds the libraries with Go, installed and run the same
# way, and refused with a clear message when Go is missing.
# Usage: install_test.sh REPO_ROOT
set -euo pipefail
root=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leases-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "install test: $*" >&2; exit 1; }

make -C "$root" --no-print-directory install PREFIX="$prefix"

abi=$(cat "$root/abi/VERSION")
soname=libleases.so.$abi
for f in include/leases.h include/leases/leases.hpp lib/cmake/leases/leasesConfig.cmake \
         lib/cmake/leases/leasesConfigVersion.cmake lib/pkgconfig/leases.pc lib/pkgconfig/leases-static.pc \
         lib/$soname lib/libleases.a bin/leases; do
  test -f "$prefix/$f" || fail "$prefix/$f is missing"
done
# The real file carries the SONAME; libleases.so is the development link to it.
if [ "$(readlink "$prefix/lib/libleases.so")" != "$soname" ]; then
  ls -la "$prefix/lib" >&2; fail "lib/libleases.so must be a symlink to $soname"
fi
readelf -d "$prefix/lib/$soname" | grep -q "Library soname: \[$soname\]" || fail "lib/$soname has no SONAME $soname"
# Release files ship stripped (docs/PERFORMANCE.md, "Sizes").
for f in "lib/$soname" bin/leases; do
  if readelf -S -W "$prefix/$f" | grep -qE '\.(symtab|debug_info) '; then fail "$f is not stripped"; fi
done
# The installed CLI runs and reports the release version.
"$prefix/bin/leases" version | grep -q "$(cat "$root/VERSION")" ||
  fail "bin/leases version does not report $(cat "$root/VERSION")"
if [ -e "$prefix/include/leases_testing.h" ]; then fail "the test seam header must not be installed"; fi

# needs BINARY yes|no: whether BINARY records the SONAME (static ones must not).
needs() {
  if readelf -d "$1" | grep -q "Shared library: \[$soname\]"; then
    [ "$2" = yes ] || { readelf -d "$1" | grep NEEDED >&2; fail "$1 must not need $soname (static)"; }
  else
    [ "$2" = no ] || { readelf -d "$1" | grep NEEDED >&2; fail "$1 does not depend on $soname"; }
  fi
}
# clean PROGRAM ARGS...: runs with an empty environment (no LD_LIBRARY_PATH).
clean() { (cd "$tmp" && env -i "$@"); }
# install_consumer BUILD_DIR APP_PREFIX CMAKE_ARGS...: configures, builds and
# `cmake --install`s the consumer project to APP_PREFIX.
consumer=$root/bindings/cpp/tests/consumer
install_consumer() {
  local build=$1 app=$2
  shift 2
  cmake -S "$consumer" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$app" "$@" >/dev/null
  ninja -C "$build" -j2 >/dev/null
  cmake --install "$build" >/dev/null
}

# (1) find_package(leases) from a CMake project, installed with cmake --install.
install_consumer "$tmp/consumer" "$tmp/app" -DCMAKE_PREFIX_PATH="$prefix"
needs "$tmp/app/bin/consumer" yes
needs "$tmp/app/bin/consumer_linkpath" yes
needs "$tmp/app/bin/consumer_static" no
needs "$tmp/app/bin/consumer_c_static" no
test -f "$tmp/app/lib/$soname" || fail "cmake --install did not ship $soname beside the consumer"
for p in consumer consumer_linkpath consumer_static; do clean "$tmp/app/bin/$p" "$tmp/$p.db"; done
clean "$tmp/app/bin/consumer_c_static" "$tmp/consumer_c_static.db"

# (2) the reference executor: claims, writes through an execution request,
# completes; three seeded jobs give three final files and nothing else.
cmake -S "$root/examples/cpp-executor" -B "$tmp/executor" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/executor" -j2 >/dev/null
mkdir -p "$tmp/out"
"$tmp/executor/cpp-executor" --db "$tmp/executor.db" --production frames --output-dir "$tmp/out" --seed 3
n=$(find "$tmp/out" -type f | wc -l)
[ "$n" -eq 3 ] || { ls -la "$tmp/out" >&2; fail "expected 3 output files, found $n"; }
rc=0
"$tmp/executor/cpp-executor" --db "$tmp/executor.db" --production frames --output-dir "$tmp/out" || rc=$?
[ "$rc" -eq 3 ] || fail "a second run must find nothing to claim (exit 3), got $rc"

# (3) C and C++ programs through pkg-config, nothing else on the command line.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc=${CC:-cc}
"$cc" -std=c99 -Wall -Wextra -Werror "$consumer/consumer.c" -o "$tmp/c-shared" $(pkg-config --cflags --libs leases)
"$cc" -std=c99 -Wall -Wextra -Werror "$consumer/consumer.c" -o "$tmp/c-static" $(pkg-config --cflags --libs leases-static)
"${CXX:-c++}" -std=c++17 -Wall -Wextra -Werror -pedantic "$consumer/main.cpp" -o "$tmp/cpp-shared" \
  $(pkg-config --cflags --libs leases)
needs "$tmp/c-shared" yes
needs "$tmp/cpp-shared" yes
needs "$tmp/c-static" no
clean "$tmp/c-shared" "$tmp/c-shared.db"
clean "$tmp/c-static" "$tmp/c-static.db"
clean "$tmp/cpp-shared" "$tmp/cpp-shared.db"
unset PKG_CONFIG_PATH

# (4) the Rust crate by path against the installed archive (LEASES_LIB_DIR=<prefix>/lib):
# the README's example crate, with no build script of its own.
if ! command -v cargo >/dev/null; then fail "cargo is needed"; fi
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
needs "$bin" no
clean "$bin" >/dev/null

# (5) add_subdirectory() of a fresh copy of the repository (its tracked and
# new files, as a clone has them): CMake builds both libraries with Go.
src=$tmp/clone
mkdir -p "$src"
git -C "$root" ls-files -z --cached --others --exclude-standard | (cd "$root" && xargs -0 cp --parents -t "$src")
[ ! -e "$src/build" ] || fail "the copy of the repository has a build/ directory"
install_consumer "$tmp/from-source" "$tmp/app-from-source" -DLEASES_SOURCE_DIR="$src"
needs "$tmp/app-from-source/bin/consumer" yes
needs "$tmp/app-from-source/bin/consumer_static" no
for p in consumer consumer_static consumer_c_static; do clean "$tmp/app-from-source/bin/$p" "$tmp/src-$p.db"; done
# Without Go the configure step says what is missing and how to do without it.
nogo=$tmp/nogo-bin
mkdir -p "$nogo"
for tool in cc c++ gcc g++ ld as sh ninja; do
  if command -v "$tool" >/dev/null; then ln -sf "$(command -v "$tool")" "$nogo/$tool"; fi
done
rc=0
PATH=$nogo "$(command -v cmake)" -S "$consumer" -B "$tmp/no-go" -G Ninja -DLEASES_SOURCE_DIR="$src" \
  -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF >"$tmp/no-go.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "configuring from source without Go must fail"
tr -s ' \n' ' ' <"$tmp/no-go.log" | grep -q "needs Go 1.26 or later" || { cat "$tmp/no-go.log" >&2; fail "no clear message without Go"; }

echo "install test: make install; find_package (cmake --install: \$ORIGIN, link path, static) run with an empty environment;" \
  "the reference executor; pkg-config leases and leases-static; the Rust crate on the installed archive;" \
  "add_subdirectory of a fresh copy built with Go (and refused without it): all passed"
