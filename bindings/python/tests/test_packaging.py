"""Packaging: `pip install ./bindings/python` after `make` gives a working
package with the release libleases.so bundled, found without LEASES_LIBRARY;
the metadata carries the release version."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import leases

from conftest import ROOT

SOURCE = Path(leases.__file__).resolve().parents[1]
RELEASE_SO = ROOT / "build" / "libleases.so"

SMOKE = """
import os, sys, tempfile
from datetime import timedelta
import leases
print(leases.library_path())
with leases.Authority(os.path.join(tempfile.mkdtemp(), "j.db")) as auth:
    auth.create_production("p")
    auth.request_job("p")
    lease = auth.claim("p", worker="w", duration=timedelta(seconds=30))
    lease.complete(metadata={"ok": True})
    assert [j.state for j in auth.jobs("p")] == ["completed"]
"""


def run(
    args: List[str], env: Dict[str, str], cwd: Optional[Path] = None
) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_pip_install_bundles_the_release_library_that_make_built(tmp_path: Path) -> None:
    # The checkout layout in miniature: bindings/python next to build/libleases.so.
    checkout = tmp_path / "checkout"
    shutil.copytree(
        SOURCE,
        checkout / "bindings" / "python",
        ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", ".*_cache", "libleases.so"
        ),
    )
    (checkout / "build").mkdir()
    shutil.copy(RELEASE_SO, checkout / "build" / "libleases.so")
    env = {k: v for k, v in os.environ.items() if k not in ("LEASES_LIBRARY", "LEASES_BUNDLE_LIBRARY")}

    wheels = tmp_path / "wheels"
    r = run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
         "--disable-pip-version-check", "-w", str(wheels), str(checkout / "bindings" / "python")],
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith("libleases-0.1.0-py3-none-manylinux_2_")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {"leases/libleases.so", "leases/py.typed", "leases/_ffi.py"} <= names
        assert z.read("leases/libleases.so") == RELEASE_SO.read_bytes()

    site = tmp_path / "site"
    r = run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
         "--target", str(site), str(wheel)],
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    env["PYTHONPATH"] = str(site)
    r = run([sys.executable, "-c", SMOKE], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert Path(r.stdout.splitlines()[0]) == site / "leases" / "libleases.so"


def test_building_without_a_library_fails_with_a_clear_message(tmp_path: Path) -> None:
    src = tmp_path / "bindings" / "python"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*_cache"))
    env = {k: v for k, v in os.environ.items() if k != "LEASES_BUNDLE_LIBRARY"}
    r = run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
         "--disable-pip-version-check", "-w", str(tmp_path / "w"), str(src)],
        env=env,
    )
    assert r.returncode != 0
    assert "make build/libleases.so" in r.stdout + r.stderr


def test_package_metadata_carries_the_release_version() -> None:
    text = (SOURCE / "pyproject.toml").read_text()
    version = (ROOT / "VERSION").read_text().strip()
    assert f'version = "{version}"' in text
    assert leases.__version__ == version
