#!/usr/bin/env bash
# Install test of the Rust route, from outside the repository: fresh cargo
# projects depend on the packaged crate (`make rust-crate`), with no build
# script of their own and no LEASES_* variable, and run the README's Rust
# example twice in one directory with an empty environment.
# 1. The default: offline (`cargo build --offline`, crates fetched before),
#    with no Go on PATH, against a libleases installed by `make install
#    PREFIX=<tmp>` and found by pkg-config through PKG_CONFIG_PATH.
# 2. The `bundled` feature: the crate builds libleases.a from golib/ with Go,
#    with nothing installed and no pkg-config path.
# Crates come from the shared cargo cache (~/.cargo); the projects share one
# target directory, so the crates are compiled once.
# Usage: install_test.sh REPO_ROOT CRATE_FILE
set -euo pipefail
root=$1
crate=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leases-rust-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "rust install test: $*" >&2; exit 1; }

tar -xzf "$crate" -C "$tmp"
pkg=$(echo "$tmp"/leases-*)
[ -f "$pkg/golib/go.mod" ] || fail "the packaged crate has no golib/go.mod"
[ -f "$pkg/LICENSE" ] || fail "the packaged crate has no LICENSE"
[ ! -e "$pkg/tests" ] || fail "the packaged crate ships its repository tests"

# app DIR FEATURES: a fresh project depending on the packaged crate.
app() {
  mkdir -p "$1/src"
  cat > "$1/Cargo.toml" <<TOML
[package]
name = "leases-fresh-app"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
leases = { path = "$pkg"$2 }
TOML
  python3 - "$root/README.md" "$1/src/main.rs" <<'PY'
import re, sys, pathlib
text = pathlib.Path(sys.argv[1]).read_text()
body = re.search(r"^```rust\n(.*?)^```$", text, flags=re.S | re.M).group(1)
pathlib.Path(sys.argv[2]).write_text(body)
PY
}

# runs BIN LABEL: the example twice in one directory, empty environment,
# linked statically (nothing to find at run time).
runs() {
  if readelf -d "$1" | grep -q 'Shared library: \[libleases'; then
    readelf -d "$1" | grep NEEDED >&2; fail "$2: the binary needs libleases.so; the default links the archive"
  fi
  mkdir -p "$tmp/run-$2"
  for i in 1 2; do
    out=$(cd "$tmp/run-$2" && env -i "$1") || fail "$2: run $i of the README example failed: $out"
    case $out in *lt1.*) fail "$2: the example printed token text";; esac
  done
  [ -f "$tmp/run-$2/jobs.db" ] || fail "$2: the example did not create jobs.db"
}

# 1. Installed, offline, no Go.
make -C "$root" --no-print-directory install PREFIX="$tmp/prefix" >/dev/null
app "$tmp/installed" ""
(cd "$tmp/installed" && cargo fetch --quiet)   # the crates, before going offline
nogo=$tmp/nogo-bin
mkdir -p "$nogo"
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name=${f##*/}
    case $name in go|gofmt) continue;; esac
    [ -x "$f" ] && [ ! -e "$nogo/$name" ] && ln -s "$f" "$nogo/$name"
  done
done
PATH=$nogo command -v go >/dev/null && fail "go is still on the offline build's PATH"
(cd "$tmp/installed" && env -i PATH="$nogo" HOME="$HOME" CARGO_TARGET_DIR="$tmp/target" PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" \
  CARGO_NET_OFFLINE=true GOPROXY=off cargo build --offline --release -j 2 --quiet) \
  || fail "the default (an installed libleases found by pkg-config) does not build offline without Go"
runs "$tmp/target/release/leases-fresh-app" installed

# A libleases.a installed over the one linked (an upgrade) is linked by the
# next build: the build script reruns when the archive changes.
touch "$tmp/prefix/lib/libleases.a"
out=$(cd "$tmp/installed" && env -i PATH="$nogo" HOME="$HOME" CARGO_TARGET_DIR="$tmp/target" PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"   CARGO_NET_OFFLINE=true GOPROXY=off cargo build --offline --release -j 2 -v 2>&1)   || { echo "$out" >&2; fail "the rebuild after a new libleases.a failed"; }
case $out in *build-script-build*) ;; *) echo "$out" >&2; fail "a new libleases.a did not rerun the build script: the program keeps the old library";; esac

# Without an installed library, the default says what to do.
app "$tmp/missing" ""
if out=$(cd "$tmp/missing" && env -i PATH="$nogo" HOME="$HOME" CARGO_TARGET_DIR="$tmp/target" PKG_CONFIG_PATH="$tmp/nowhere" \
    cargo build --offline --release -j 2 2>&1); then
  fail "the default built with no libleases installed"
fi
case $out in *"libleases not found"*bundled*) ;; *) echo "$out" >&2; fail "the missing-library error does not say what to do";; esac

# 2. bundled: built from golib/ with Go, nothing installed.
app "$tmp/bundled" ', features = ["bundled"]'
(cd "$tmp/bundled" && env -i PATH="$PATH" HOME="$HOME" CARGO_TARGET_DIR="$tmp/target" cargo build --release -j 2 --quiet) \
  || fail "the bundled feature does not build from golib/ with Go"
runs "$tmp/target/release/leases-fresh-app" bundled

echo "rust install test: the packaged crate linked an installed libleases offline without Go (pkg-config)," \
  "said what to do without one, and built libleases.a with Go under \`bundled\`; each program ran twice with an empty environment"
