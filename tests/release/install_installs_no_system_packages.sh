#!/usr/bin/env bash
# Rule: installing libleases never installs system packages. `make install`
# runs with a PATH on which cmake and ninja are missing and apt-get, apt and
# dpkg only record that they were called: install must fail before it has
# installed anything, name `make deps`, and call none of them.
# Usage: install_installs_no_system_packages.sh REPO_ROOT
set -euo pipefail
root=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leases-install-nopkg-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install installs no system packages: $*" >&2; exit 1; }

# Every program of PATH but cmake and ninja, first found first.
mkdir -p "$tmp/bin"
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name=${f##*/}
    case $name in cmake|ninja|ninja-build) continue;; esac
    [ -x "$f" ] && [ ! -e "$tmp/bin/$name" ] && ln -s "$f" "$tmp/bin/$name"
  done
done
for pm in apt-get apt dpkg; do
  rm -f "$tmp/bin/$pm"
  printf '#!/bin/sh\necho "%s $*" >> "%s/called"\nexit 0\n' "$pm" "$tmp" > "$tmp/bin/$pm"
  chmod +x "$tmp/bin/$pm"
done
PATH=$tmp/bin command -v cmake >/dev/null && fail "cmake is still on the test's PATH"

if PATH=$tmp/bin make -C "$root" --no-print-directory install PREFIX="$tmp/prefix" > "$tmp/out" 2>&1; then
  cat "$tmp/out" >&2; fail "make install succeeded without cmake"
fi
[ ! -e "$tmp/called" ] || { cat "$tmp/out" >&2; fail "make install called a package manager: $(cat "$tmp/called")"; }
grep -q "make deps" "$tmp/out" || { cat "$tmp/out" >&2; fail "make install's error does not name 'make deps'"; }
[ ! -e "$tmp/prefix" ] || fail "make install installed something before failing: $(find "$tmp/prefix" | head)"
echo "install installs no system packages: without cmake, make install stopped before installing anything, named 'make deps' and called no package manager"
