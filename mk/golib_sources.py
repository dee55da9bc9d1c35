"""Copies the Go sources that mk/golib.sh builds libleases from into DEST: the
golib/ directory a packaged Rust crate or a Python sdist carries, so either
builds the library with Go outside the repository. Go modules the library
depends on are not copied: go fetches them as it does for any module.

Usage: golib_sources.py ROOT DEST
"""
import shutil
import sys
from pathlib import Path

# leases.go is the root package (package leases): the C exports open an
# authority through it.
FILES = ["go.mod", "go.sum", "VERSION", "abi/VERSION", "abi/REVISION", "leases.go",
         "include/leases.h", "include/leases_testing.h", "mk/golib.sh"]
TREES = ["capi", "core", "worker/loop"]
# The module root's package (package leases: it opens the stores capi
# opens through), without its tests.
ROOT_PACKAGE = "*.go"


def wanted(relative: Path) -> bool:
    return not relative.name.endswith("_test.go") and "testdata" not in relative.parts


def main() -> None:
    root, dest = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    shutil.rmtree(dest, ignore_errors=True)
    paths = [root / f for f in FILES]
    paths += sorted(p for p in root.glob(ROOT_PACKAGE) if wanted(p.relative_to(root)))
    for tree in TREES:
        paths += sorted(p for p in (root / tree).rglob("*") if p.is_file() and wanted(p.relative_to(root)))
    for src in paths:
        target = dest / src.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    print(f"golib_sources: {len(paths)} files into {dest}")


if __name__ == "__main__":
    main()
