"""Release checks: the version comes from one place (VERSION), every package
carries the license (Apache-2.0), and a `make dist` folder holds every
artifact of the version with checksums that match.

Usage:
  release.py versions ROOT [--cli BIN] [--library SO]
      every place that carries the release version agrees with VERSION; the
      CLI's --version and the library's leases_version() too when given
  release.py license-fields ROOT
      LICENSE is the Apache License 2.0 and every package's metadata says so
  release.py dist DIR VERSION
      DIR holds the wheel, sdist, crate, library tarball and CLI of VERSION,
      each carrying VERSION and the license, and SHA256SUMS matches them
"""
import ctypes
import hashlib
import platform
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import List

SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?")
SPDX = "Apache-2.0"


class Problems:
    def __init__(self) -> None:
        self.items: List[str] = []

    def __call__(self, ok: bool, message: str) -> None:
        if not ok:
            self.items.append(message)

    def exit(self, what: str) -> None:
        if self.items:
            sys.exit(f"{what}: {len(self.items)} problem(s):\n" + "\n".join(f"  - {p}" for p in self.items))
        print(f"{what}: ok")


def toml_value(text: str, table: str, key: str) -> str:
    """The string value of key in [table] of a simple TOML file."""
    m = re.search(rf"^\[{re.escape(table)}\]\n(.*?)(?=^\[|\Z)", text, flags=re.S | re.M)
    if not m:
        return ""
    v = re.search(rf'^{re.escape(key)}\s*=\s*"([^"]*)"', m.group(1), flags=re.M)
    return v.group(1) if v else ""


def versions(root: Path, cli: str, library: str) -> None:
    p = Problems()
    version = (root / "VERSION").read_text().strip()
    p(SEMVER.fullmatch(version) is not None, f"VERSION {version!r} is not a semantic version (X.Y.Z)")
    cargo = (root / "bindings/rust/Cargo.toml").read_text()
    p(toml_value(cargo, "package", "version") == version,
      f"bindings/rust/Cargo.toml: version {toml_value(cargo, 'package', 'version')!r}, VERSION {version!r}")
    lock = (root / "bindings/rust/Cargo.lock").read_text()
    locked = re.search(r'\[\[package\]\]\nname = "leases"\nversion = "([^"]*)"', lock)
    p(bool(locked) and locked.group(1) == version,  # type: ignore[union-attr]
      f"bindings/rust/Cargo.lock: leases {locked.group(1) if locked else 'missing'}, VERSION {version!r}")
    py = (root / "bindings/python/pyproject.toml").read_text()
    p(toml_value(py, "project", "version") == version,
      f"bindings/python/pyproject.toml: version {toml_value(py, 'project', 'version')!r}, VERSION {version!r}")
    # CMake and pkg-config derive theirs: the project reads VERSION, the .pc
    # files take the project's.
    cmake = (root / "bindings/cpp/CMakeLists.txt").read_text()
    p('file(READ "${LEASES_ROOT}/VERSION" LEASES_RELEASE_VERSION)' in cmake
      and "project(leases VERSION ${LEASES_RELEASE_VERSION}" in cmake,
      "bindings/cpp/CMakeLists.txt: the project's version is not read from VERSION")
    for pc in ("leases.pc.in", "leases-static.pc.in"):
        text = (root / "bindings/cpp/cmake" / pc).read_text()
        p("Version: @LEASES_RELEASE_VERSION@" in text, f"bindings/cpp/cmake/{pc}: Version is not VERSION's")
    # The header carries the ABI's numbers, never the release version
    # (docs/ABI.md): leases_version() reports that.
    header = (root / "include/leases.h").read_text()
    abi = (root / "abi/VERSION").read_text().strip()
    p(re.search(rf"^#define LEASES_ABI_VERSION {re.escape(abi)}$", header, flags=re.M) is not None,
      f"include/leases.h: LEASES_ABI_VERSION is not abi/VERSION ({abi})")
    release_macros = [m for m in re.findall(r"^#define (LEASES_\w*VERSION\w*)", header, flags=re.M)
                      if m != "LEASES_ABI_VERSION"]
    p(not release_macros, f"include/leases.h: a release version macro {release_macros}: leases_version() says it")
    changelog = (root / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", changelog, flags=re.M)
    p(bool(headings) and headings[0].strip() == "Unreleased", "CHANGELOG.md: the first section is not '## Unreleased'")
    p(any(h.split()[0] == version for h in headings[1:]), f"CHANGELOG.md: no section '## {version}'")
    # Artifact names the docs spell out carry the current version.
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for name in re.findall(r"\b(?:libleases|leases)-(\d+\.\d+\.\d+)(?=[-.])", doc.read_text()):
            p(name == version, f"{doc.relative_to(root)}: names version {name} of an artifact, VERSION {version!r}")
    if cli:
        out = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout.strip()
        p(out == f"leases {version}", f"{cli} --version: {out!r}, expected 'leases {version}'")
    if library:
        lib = ctypes.CDLL(library)
        lib.leases_version.restype = ctypes.c_char_p
        got = lib.leases_version().decode()
        p(got == version, f"{library}: leases_version() {got!r}, VERSION {version!r}")
    p.exit(f"versions ({version})")


def license_fields(root: Path) -> None:
    p = Problems()
    text = (root / "LICENSE").read_text() if (root / "LICENSE").is_file() else ""
    flat = " ".join(text.split())
    p(flat.startswith("Apache License Version 2.0, January 2004") and "END OF TERMS AND CONDITIONS" in flat,
      "LICENSE: not the full text of the Apache License 2.0")
    readme = (root / "README.md").read_text()
    section = re.search(r"^## License\n(.*?)(?=^## |\Z)", readme, flags=re.S | re.M)
    p(bool(section) and "Apache License 2.0" in section.group(1) and "LICENSE" in section.group(1),  # type: ignore[union-attr]
      "README.md: no '## License' section naming the Apache License 2.0 and LICENSE")
    go = re.search(r"^- \*\*Go\*\*:(.*?)(?=^- \*\*|^## |\Z)", readme, flags=re.S | re.M)
    p(bool(go) and SPDX in go.group(1),  # type: ignore[union-attr]
      "README.md: the Go module's entry under Installing does not state its license")
    py = (root / "bindings/python/pyproject.toml").read_text()
    p(toml_value(py, "project", "license") == SPDX, f"bindings/python/pyproject.toml: license is not {SPDX!r}")
    p(re.search(r'^license-files\s*=\s*\[[^\]]*"LICENSE"', py, flags=re.M) is not None,
      "bindings/python/pyproject.toml: license-files does not ship LICENSE")
    cargo = (root / "bindings/rust/Cargo.toml").read_text()
    p(toml_value(cargo, "package", "license") == SPDX, f"bindings/rust/Cargo.toml: license is not {SPDX!r}")
    p('"/LICENSE"' in cargo, "bindings/rust/Cargo.toml: the crate's include does not ship LICENSE")
    for pc in ("leases.pc.in", "leases-static.pc.in"):
        text = (root / "bindings/cpp/cmake" / pc).read_text()
        p(f"License: {SPDX}" in text, f"bindings/cpp/cmake/{pc}: no 'License: {SPDX}'")
    config = (root / "bindings/cpp/cmake/leasesConfig.cmake.in").read_text()
    p(f'set(leases_LICENSE "{SPDX}")' in config, f"bindings/cpp/cmake/leasesConfig.cmake.in: leases_LICENSE is not {SPDX}")
    for linked in ("bindings/python/LICENSE", "bindings/rust/LICENSE"):
        f = root / linked
        p(f.is_file() and f.read_text() == text_of(root / "LICENSE"), f"{linked}: not the repository's LICENSE")
    p.exit("license fields")


def text_of(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def dist(folder: Path, version: str) -> None:
    p = Problems()
    files = sorted(f.name for f in folder.iterdir())
    arch = platform.machine()  # as make dist names them (uname -m)
    wheels = [f for f in files if re.fullmatch(rf"libleases-{re.escape(version)}-py3-none-manylinux_\d+_\d+_\w+\.whl", f)]
    expected = {
        "sdist": f"libleases-{version}.tar.gz",
        "crate": f"leases-{version}.crate",
        "tarball": f"libleases-{version}-linux-{arch}.tar.gz",
        "cli": f"leases-{version}-linux-{arch}",
        "sums": "SHA256SUMS",
    }
    p(len(wheels) == 1, f"one manylinux wheel of {version} expected, found {wheels}")
    for what, name in expected.items():
        p(name in files, f"no {what}: {name}")
    known = set(expected.values()) | set(wheels)
    p(set(files) <= known, f"files that are no artifact of {version}: {sorted(set(files) - known)}")
    if p.items:
        p.exit(f"dist {folder}")
    # SHA256SUMS: one line per other file, as sha256sum writes and -c reads.
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        m = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        p(m is not None, f"SHA256SUMS: unreadable line {line!r}")
        if m:
            sums[m.group(2)] = m.group(1)
    p(sorted(sums) == sorted(known - {"SHA256SUMS"}), f"SHA256SUMS lists {sorted(sums)}, the folder has {sorted(known - {'SHA256SUMS'})}")
    for name, digest in sums.items():
        f = folder / name
        if f.is_file():
            p(hashlib.sha256(f.read_bytes()).hexdigest() == digest, f"SHA256SUMS: {name} does not match")
    with zipfile.ZipFile(folder / wheels[0]) as whl:
        names = whl.namelist()
        meta = whl.read(f"libleases-{version}.dist-info/METADATA").decode()
        p(f"\nVersion: {version}\n" in meta, "wheel: METADATA Version is not VERSION")
        p(f"\nLicense-Expression: {SPDX}\n" in meta, f"wheel: METADATA has no License-Expression: {SPDX}")
        p(f"libleases-{version}.dist-info/licenses/LICENSE" in names, "wheel: no licenses/LICENSE")
        p("leases/libleases.so" in names, "wheel: no bundled leases/libleases.so")
    with tarfile.open(folder / expected["sdist"]) as sd:
        top = f"libleases-{version}/"
        names = sd.getnames()
        info = sd.extractfile(top + "PKG-INFO").read().decode()  # type: ignore[union-attr]
        p(f"\nVersion: {version}\n" in info and f"\nLicense-Expression: {SPDX}\n" in info,
          "sdist: PKG-INFO lacks the version or the license expression")
        p(top + "LICENSE" in names and top + "golib/go.mod" in names, "sdist: no LICENSE or no golib/ (the Go sources)")
    with tarfile.open(folder / expected["crate"]) as crate:
        top = f"leases-{version}/"
        names = crate.getnames()
        manifest = crate.extractfile(top + "Cargo.toml").read().decode()  # type: ignore[union-attr]
        p(toml_value(manifest, "package", "version") == version and toml_value(manifest, "package", "license") == SPDX,
          "crate: Cargo.toml lacks the version or the license")
        p(top + "LICENSE" in names and top + "golib/go.mod" in names, "crate: no LICENSE or no golib/ (the `bundled` sources)")
    abi = None
    with tarfile.open(folder / expected["tarball"]) as tb:
        top = f"libleases-{version}-linux-{arch}/"
        members = {m.name: m for m in tb.getmembers()}
        sonames = [n for n in members if re.fullmatch(re.escape(top) + r"lib/libleases\.so\.\d+", n)]
        p(len(sonames) == 1 and members[sonames[0]].isfile(), "tarball: no lib/libleases.so.<ABI>")
        if sonames:
            abi = sonames[0].rsplit(".", 1)[1]
        link = members.get(top + "lib/libleases.so")
        p(link is not None and link.issym(), "tarball: lib/libleases.so is not the development link")
        for need in ["lib/libleases.a", "include/leases.h", "include/leases/leases.hpp", "bin/leases",
                     "lib/cmake/leases/leasesConfig.cmake", "lib/cmake/leases/leasesConfigVersion.cmake",
                     "share/doc/leases/LICENSE", "share/doc/leases/THIRD_PARTY_LICENSES.md"]:
            p(top + need in members, f"tarball: no {need}")
        for pc in ("leases.pc", "leases-static.pc"):
            m = members.get(top + "lib/pkgconfig/" + pc)
            text = tb.extractfile(m).read().decode() if m else ""  # type: ignore[union-attr]
            p(f"\nVersion: {version}\n" in text and f"\nLicense: {SPDX}\n" in text,
              f"tarball: lib/pkgconfig/{pc} lacks Version {version} or License {SPDX}")
            p("prefix=${pcfiledir}/" in text, f"tarball: lib/pkgconfig/{pc} is not relocatable")
        m = members.get(top + "lib/cmake/leases/leasesConfigVersion.cmake")
        text = tb.extractfile(m).read().decode() if m else ""  # type: ignore[union-attr]
        p(f'set(PACKAGE_VERSION "{version}")' in text, "tarball: the CMake package's version is not VERSION")
        m = members.get(top + "bin/leases")
        cli_in_tarball = tb.extractfile(m).read() if m else b""  # type: ignore[union-attr]
    cli = folder / expected["cli"]
    p(cli.read_bytes() == cli_in_tarball, "the CLI differs from the tarball's bin/leases")
    out = subprocess.run([str(cli), "--version"], capture_output=True, text=True).stdout.strip()
    p(out == f"leases {version}", f"{expected['cli']} --version: {out!r}")
    p.exit(f"dist {folder} (wheel, sdist, crate, tarball of ABI {abi}, CLI; SHA256SUMS)")


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    cmd, rest = args[0], args[1:]
    if cmd == "versions" and rest:
        cli = library = ""
        root = Path(rest[0])
        i = 1
        while i < len(rest):
            if rest[i] == "--cli":
                cli = rest[i + 1]
            elif rest[i] == "--library":
                library = rest[i + 1]
            else:
                sys.exit(__doc__)
            i += 2
        versions(root, cli, library)
    elif cmd == "license-fields" and len(rest) == 1:
        license_fields(Path(rest[0]))
    elif cmd == "dist" and len(rest) == 2:
        dist(Path(rest[0]), rest[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
