#!/usr/bin/env bash
# Install test of the Rust route, from outside the repository: a fresh cargo
# project depends on the packaged crate (`make rust-crate`), builds with an
# environment holding only PATH and HOME (no LEASES_LIB_DIR, no build script
# of its own), and runs the README's Rust example twice in one directory with
# an empty environment. Crates come from the shared cargo cache (~/.cargo).
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
[ ! -e "$pkg/tests" ] || fail "the packaged crate ships its repository tests"

mkdir -p "$tmp/app/src"
cat > "$tmp/app/Cargo.toml" <<TOML
[package]
name = "leases-fresh-app"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
leases = { path = "$pkg" }
TOML
python3 - "$root/README.md" "$tmp/app/src/main.rs" <<'PY'
import re, sys, pathlib
text = pathlib.Path(sys.argv[1]).read_text()
body = re.search(r"^```rust\n(.*?)^```$", text, flags=re.S | re.M).group(1)
pathlib.Path(sys.argv[2]).write_text(body)
PY
(cd "$tmp/app" && env -i PATH="$PATH" HOME="$HOME" cargo build --release -j 2 --quiet)
bin=$tmp/app/target/release/leases-fresh-app
if readelf -d "$bin" | grep -q 'Shared library: \[libleases'; then
  readelf -d "$bin" | grep NEEDED >&2; fail "the binary needs libleases.so; the default links the archive"
fi
mkdir -p "$tmp/run"
for i in 1 2; do
  out=$(cd "$tmp/run" && env -i "$bin") || fail "run $i of the README example failed: $out"
  case $out in *lt1.*) fail "the example printed token text";; esac
done
[ -f "$tmp/run/jobs.db" ] || fail "the example did not create jobs.db"
echo "rust install test: the packaged crate built libleases.a with Go in a fresh project (no LEASES_LIB_DIR, no build.rs) and its program ran twice with an empty environment"
