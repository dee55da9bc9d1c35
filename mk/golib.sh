#!/bin/sh
# The one recipe that builds libleases from its Go sources. make, CMake
# (add_subdirectory/FetchContent), the Rust crate's build script and the
# Python sdist all run it, so every route builds the same library.
#
# Usage: golib.sh shared|static|test OUT
#   shared  OUT=.../libleases.so (or .../libleases.so.<ABI>): the release
#           library, stripped, SONAME libleases.so.<ABI>, exports versioned by
#           capi/leases.map; the other of the two names links to it
#   static  OUT=.../libleases.a: the release archive (-buildmode=c-archive),
#           stripped; link it with -lpthread -lresolv
#   test    OUT=.../libleases.so: the test build (leasestest tag, the seam of
#           include/leases_testing.h), with its symbols: valgrind's
#           suppressions and backtraces name Go functions
# cgo's generated header is internal: it moves to OUT's directory, cgo/.
# Environment: GO (default go), CGO_CFLAGS (default -g -O2).
set -eu

usage() { echo "usage: golib.sh shared|static|test OUT" >&2; exit 2; }
[ $# -eq 2 ] || usage
mode=$1
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}
if ! command -v "$go" >/dev/null 2>&1; then
	echo "golib.sh: building libleases from source needs Go 1.26 or later and a C compiler," \
		"but '$go' is not on PATH. Install Go (or set GO), or use a prebuilt libleases." >&2
	exit 127
fi

version=$(cat "$root/VERSION")
abi=$(cat "$root/abi/VERSION")
soname=libleases.so.$abi
# gcc's -Wl splits on commas, so the linker options travel in one word.
case $mode in
shared) buildmode=c-shared tags= strip="-s -w"
	ext="-extldflags=-Wl,--version-script=$root/capi/leases.map,-soname,$soname" ;;
test) buildmode=c-shared tags=leasestest strip=
	ext="-extldflags=-Wl,--version-script=$root/capi/leases.map,--version-script=$root/capi/leases_testing.map,-soname,$soname" ;;
static) buildmode=c-archive tags= strip="-s -w" ext= ;;
*) usage ;;
esac

dir=$(dirname "$out")
mkdir -p "$dir/cgo"
dir=$(cd "$dir" && pwd)
base=$(basename "$out")
cd "$root"
CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--g -O2} -DLEASES_RELEASE_VERSION=$version" \
	"$go" build -trimpath -buildmode="$buildmode" ${tags:+-tags "$tags"} \
	-ldflags="$strip $ext" -o "$dir/$base" ./capi
mv "$dir/${base%.*}.h" "$dir/cgo/libleases_$mode.h"
# The loader looks for the SONAME, the linker's -lleases for libleases.so:
# whichever of the two OUT is, the other becomes a link to it.
if [ "$buildmode" = c-shared ]; then
	if [ "$base" = "$soname" ]; then
		ln -sfn "$base" "$dir/libleases.so"
	else
		ln -sfn "$base" "$dir/$soname"
	fi
fi
