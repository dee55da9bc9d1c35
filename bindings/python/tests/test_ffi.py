"""The low-level layer: the generated declarations are the loaded ones, the
library is found and loaded as promised (on first use, once), and another ABI
or an older revision is refused."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import leases
from leases import _abi, _ffi

import _testing
from conftest import PRODUCTION, ROOT, SECONDS_30

PACKAGE_DIR = Path(leases.__file__).resolve().parent

def test_the_declarations_are_the_generated_ones_of_both_headers() -> None:
    # _abi.py is generated from the headers (make abi-generate); make test-abi
    # fails when it is not current and when the package leaves a function unused.
    assert _ffi.SIGNATURES is _abi.SIGNATURES
    assert "leases_abi_revision" in _ffi.SIGNATURES
    assert _testing.TESTING_SIGNATURES is _abi.TESTING_SIGNATURES
    assert all(name.startswith("leases_testing_") for name in _abi.TESTING_SIGNATURES)


def test_the_loaded_library_uses_the_declared_types() -> None:
    for name, (restype, argtypes) in _ffi.SIGNATURES.items():
        fn = getattr(_ffi.lib, name)
        assert fn.restype == restype and fn.argtypes == argtypes, name


def test_abi_version_and_revision_match_abi_and_the_library() -> None:
    assert int((ROOT / "abi" / "VERSION").read_text().strip()) == _ffi.ABI_VERSION == leases.ABI_VERSION == 1
    assert int((ROOT / "abi" / "REVISION").read_text().strip()) == _ffi.ABI_REVISION == leases.ABI_REVISION
    assert _ffi.lib.leases_abi_version() == 1
    assert _ffi.lib.leases_abi_revision() >= _ffi.ABI_REVISION


def test_max_duration_is_the_generated_limit() -> None:
    assert _ffi.MAX_DURATION_US == _abi.MAX_DURATION_US == 86_400_000_000


def test_a_library_with_another_abi_is_refused_naming_both_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ffi, "ABI_VERSION", 7)
    with pytest.raises(ImportError) as err:
        _ffi.load_library(_ffi.LIBRARY_PATH)
    text = str(err.value)
    assert "ABI version 1 revision" in text and "ABI version 7 revision" in text


def test_a_library_of_an_older_revision_is_refused_naming_both_revisions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    have = _ffi.lib.leases_abi_revision()
    monkeypatch.setattr(_ffi, "ABI_REVISION", have + 1)
    with pytest.raises(ImportError) as err:
        _ffi.load_library(_ffi.LIBRARY_PATH)
    text = str(err.value)
    assert f"revision {have}," in text and f"revision {have + 1} or later" in text


def test_a_library_of_a_newer_revision_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ffi, "ABI_REVISION", 0)
    _ffi.load_library(_ffi.LIBRARY_PATH)


def test_a_library_without_leases_abi_revision_counts_as_revision_0() -> None:
    class Revision0Library:
        def __init__(self) -> None:
            self.leases_abi_version = _ffi.lib.leases_abi_version

    assert _ffi.library_abi(Revision0Library()) == (1, 0)  # type: ignore[arg-type]


def test_the_library_is_loaded_with_RTLD_NOW_and_RTLD_NODELETE(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modes = []
    real = ctypes.CDLL

    def spy(path: str, mode: int = 0) -> ctypes.CDLL:
        modes.append(mode)
        return real(path, mode=mode)

    monkeypatch.setattr(ctypes, "CDLL", spy)
    _ffi.load_library(_ffi.LIBRARY_PATH)
    assert modes and modes[0] & os.RTLD_NODELETE and modes[0] & os.RTLD_NOW


def test_every_owned_string_is_given_back_with_leases_free(
    auth: leases.Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    freed: List[int] = []
    real = _ffi.lib.leases_free

    def counting_free(address: int) -> None:
        freed.append(address)
        real(address)

    monkeypatch.setattr(_ffi.lib, "leases_free", counting_free)
    auth.request_job(PRODUCTION)  # 1: job id
    lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)  # 3: job, production, worker
    assert lease is not None
    lease.export_token()  # 1
    auth.jobs(PRODUCTION)  # 1
    auth.events()  # 1
    assert len(freed) == 7 and all(freed)


def _python(code: str, env: Dict[str, str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _env_without_library() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LEASES_LIBRARY"}
    env["PYTHONPATH"] = str(PACKAGE_DIR.parent)
    return env


def test_without_LEASES_LIBRARY_a_checkout_loads_build_libleases_so(tmp_path: Path) -> None:
    if (PACKAGE_DIR / "libleases.so").exists():
        pytest.fail("a bundled copy sits in the checkout's package directory; remove it")
    r = _python("import leases; print(leases.library_path())", _env_without_library(), tmp_path)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == ROOT / "build" / "libleases.so"


def test_LEASES_LIBRARY_naming_a_missing_file_fails_the_first_use_naming_it(tmp_path: Path) -> None:
    env = _env_without_library()
    env["LEASES_LIBRARY"] = str(tmp_path / "nowhere" / "libleases.so")
    # Importing loads nothing, so it succeeds; the first call fails.
    assert _python("import leases, leases.aio", env, tmp_path).returncode == 0
    r = _python("import leases; leases.Authority('jobs.db')", env, tmp_path)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and str(tmp_path / "nowhere") in r.stderr
    assert not (tmp_path / "jobs.db").exists()


def test_the_first_use_from_many_threads_loads_the_library_once(tmp_path: Path) -> None:
    code = """
import threading, time
import leases
from leases import _ffi
calls = []
real = _ffi.load_library
def slow_load(path):
    calls.append(path)
    time.sleep(0.2)  # every thread arrives while the first one loads
    return real(path)
_ffi.load_library = slow_load
seen = []
threads = [threading.Thread(target=lambda: seen.append(leases.library_version())) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(len(calls), len(seen))
"""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent))
    r = _python(code, env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "8"]
