"""Bundles libleases.so into the package and tags the wheel for the platform
it really needs (it carries a native library, no Python extension).

The library is, in order: $LEASES_BUNDLE_LIBRARY; in a checkout, its
build/libleases.so (the release build `make` made: never the test build with
its clock seam); else it is built here with Go from golib/ (the Go sources an
sdist carries) or from the checkout's sources, by mk/golib.sh, stripped.

The wheel's tag is manylinux_X_Y_<arch>, X.Y being the newest glibc symbol
version the library needs (read from its ELF version requirements), so pip
installs it from an index on every system with that glibc or newer.
"""

import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]


def go_sources() -> Optional[Path]:
    """golib/ of an sdist, else the checkout around this directory."""
    for root in (HERE / "golib", CHECKOUT):
        if (root / "go.mod").is_file() and (root / "mk" / "golib.sh").is_file():
            return root
    return None


def library_to_bundle(build_temp: Path) -> Path:
    env = os.environ.get("LEASES_BUNDLE_LIBRARY")
    if env:
        path = Path(env)
        if not path.is_file():
            raise SystemExit(f"LEASES_BUNDLE_LIBRARY={env}: no such file")
        return path
    prebuilt = CHECKOUT / "build" / "libleases.so"
    if prebuilt.is_file() and not (HERE / "golib").is_dir():  # an sdist builds its own
        return prebuilt
    src = go_sources()
    if src is None:
        raise SystemExit(
            f"libleases.so not found at {prebuilt} and no Go sources to build it from: run "
            "`make build/libleases.so` in the checkout first, build from the sdist (it carries "
            "the sources; needs Go), or set LEASES_BUNDLE_LIBRARY to the library to bundle"
        )
    out = build_temp / "golib" / "libleases.so"
    print(f"building libleases.so from the Go sources in {src} (needs Go 1.26+ and a C compiler)")
    done = subprocess.run(["sh", str(src / "mk" / "golib.sh"), "shared", str(out)])
    if done.returncode != 0:
        raise SystemExit(f"building libleases.so with mk/golib.sh failed (exit {done.returncode})")
    return out


def glibc_floor(path: Path) -> Optional[Tuple[int, int]]:
    """The newest GLIBC_X.Y version an ELF64 little-endian file requires
    (its SHT_GNU_verneed section), None if it requires none."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    versions: List[Tuple[int, int]] = []
    for _, sh_type, _, _, offset, _, link, info, _, _ in sections:
        if sh_type != 0x6FFFFFFE:  # SHT_GNU_verneed
            continue
        strtab = sections[link][4]
        entry = offset
        for _ in range(info):
            _, count, _, aux, next_entry = struct.unpack_from("<HHIII", data, entry)
            at = entry + aux
            for _ in range(count):
                _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, at)
                text = data[strtab + name:data.index(b"\0", strtab + name)].decode("ascii")
                if text.startswith("GLIBC_"):
                    parts = text[len("GLIBC_"):].split(".")
                    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                        versions.append((int(parts[0]), int(parts[1])))
                at += next_aux
            entry += next_entry
    return max(versions) if versions else None


class BuildPyWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "leases" / "libleases.so"
        build_temp = Path(self.get_finalized_command("build").build_temp)
        self.copy_file(str(library_to_bundle(build_temp)), str(target))


class SdistWithGoSources(sdist):
    """The sdist carries golib/, the Go sources of the library, so a wheel
    builds from it wherever Go is installed."""

    def make_release_tree(self, base_dir: str, files: List[str]) -> None:
        super().make_release_tree(base_dir, files)
        dest = Path(base_dir) / "golib"
        if (HERE / "golib" / "go.mod").is_file():
            shutil.copytree(HERE / "golib", dest)
        elif (CHECKOUT / "mk" / "golib_sources.py").is_file():
            subprocess.run([sys.executable, str(CHECKOUT / "mk" / "golib_sources.py"), str(CHECKOUT), str(dest)],
                           check=True)
        else:
            raise SystemExit("an sdist needs the Go sources: make it from the libleases checkout")


class BinaryDistribution(Distribution):
    """Carries a native library: built and installed as platform files."""

    def has_ext_modules(self) -> bool:
        return True


class ManylinuxWheel(bdist_wheel):
    # Any Python 3 loads it through ctypes: only the platform matters, and of
    # the platform only the architecture and the glibc the library needs.
    def get_tag(self) -> "tuple[str, str, str]":
        _, _, plat = super().get_tag()
        library = Path(self.bdist_dir) / "leases" / "libleases.so"
        if plat.startswith("linux_") and library.is_file():
            floor = glibc_floor(library)
            if floor is not None:
                plat = f"manylinux_{floor[0]}_{floor[1]}_{platform.machine()}"
        return "py3", "none", plat


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPyWithLibrary, "sdist": SdistWithGoSources, "bdist_wheel": ManylinuxWheel},
)
