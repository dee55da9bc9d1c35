"""Bundles the libleases.so that `make` built into the package, and tags the
wheel for the platform (it carries a native library, no Python extension).

The library is $LEASES_BUNDLE_LIBRARY, else the checkout's build/libleases.so
(the release build: never the test build with its clock seam).
"""

import os
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def library_to_bundle() -> Path:
    env = os.environ.get("LEASES_BUNDLE_LIBRARY")
    path = Path(env) if env else HERE.parents[1] / "build" / "libleases.so"
    if not path.is_file():
        raise SystemExit(
            f"libleases.so not found at {path}: run `make build/libleases.so` in the "
            "checkout first, or set LEASES_BUNDLE_LIBRARY to the library to bundle"
        )
    return path


class BuildPyWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "leases" / "libleases.so"
        self.copy_file(str(library_to_bundle()), str(target))


class BinaryDistribution(Distribution):
    """Carries a native library: built and installed as platform files."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    # Any Python 3 can load it through ctypes: only the platform matters.
    def get_tag(self) -> "tuple[str, str, str]":
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
