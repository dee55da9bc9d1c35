"""The low-level layer: every header function is declared with matching
types, the library is found and loaded as promised, and another ABI is
refused."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import leases
from leases import _ffi

import _testing
from conftest import PRODUCTION, ROOT, SECONDS_30

PACKAGE_DIR = Path(leases.__file__).resolve().parent

DECL = re.compile(
    r"^\s*((?:const\s+)?[A-Za-z_][A-Za-z0-9_]*\s*\**)\s*\b(leases_[a-z0-9_]+)\s*\(([^)]*)\)\s*;",
    re.MULTILINE | re.DOTALL,
)


def header_functions(name: str) -> Dict[str, Tuple[str, List[str]]]:
    text = (ROOT / "include" / name).read_text(encoding="utf-8")
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    found: Dict[str, Tuple[str, List[str]]] = {}
    for ret, fn, params in DECL.findall(text):
        params = " ".join(params.split())
        args = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
        found[fn] = (ret, args)
    return found


def c_type_of(decl: str) -> str:
    """'const leases_lease *lease' -> 'leases_lease *' (const and name dropped)."""
    tokens = decl.replace("const ", " ").replace("*", " * ").split()
    words = [t for t in tokens if t != "*"]
    if len(words) >= 2:  # the last word is the parameter's name
        tokens.remove(words[-1])
    return (words[0] + " " + "*" * tokens.count("*")).strip()


HANDLES = {
    "leases_authority": _ffi.AuthorityPtr,
    "leases_edit": _ffi.EditPtr,
    "leases_lease": _ffi.LeasePtr,
    "leases_execution": _ffi.ExecutionPtr,
}


def expected_ctype(c_type: str, is_return: bool) -> Any:
    base, _, stars = c_type.partition(" ")
    scalars: Dict[str, Any] = {
        "leases_status": ctypes.c_int,
        "int64_t": ctypes.c_int64,
        "size_t": ctypes.c_size_t,
        "uint32_t": ctypes.c_uint32,
    }
    if base in HANDLES:
        return HANDLES[base] if stars == "*" else ctypes.POINTER(HANDLES[base])
    if base == "void":
        return None if stars == "" else ctypes.c_void_p
    if base == "char":
        # char * is borrowed input or a string the library keeps; char ** is
        # an owned output read as an address so it can go to leases_free.
        return ctypes.c_char_p if stars == "*" else ctypes.POINTER(ctypes.c_void_p)
    if base == "uint8_t" and stars == "*":
        return ctypes.POINTER(ctypes.c_uint8)
    if base == "uint8_t" and stars == "**":
        # an owned output buffer, read as an address so it can go to leases_free
        return ctypes.POINTER(ctypes.c_void_p)
    if base in scalars:
        return scalars[base] if stars == "" else ctypes.POINTER(scalars[base])
    raise AssertionError(f"the test does not know the C type {c_type!r}")


def assert_declared(header: str, signatures: Dict[str, _ffi.Signature]) -> None:
    functions = header_functions(header)
    assert len(functions) >= 3, f"parsed too few declarations from {header}"
    missing = sorted(set(functions) - set(signatures))
    assert not missing, f"{header} declares functions the binding does not cover: {missing}"
    extra = sorted(set(signatures) - set(functions))
    assert not extra, f"the binding declares functions {header} does not: {extra}"
    for name, (ret, params) in functions.items():
        restype, argtypes = signatures[name]
        assert restype == expected_ctype(c_type_of(ret + " " + name), True), f"{name} return type"
        want = [expected_ctype(c_type_of(p), False) for p in params]
        assert argtypes == want, f"{name} argtypes {argtypes} != header {params}"


def test_every_function_of_leases_h_is_declared_with_the_header_types() -> None:
    assert_declared("leases.h", _ffi.SIGNATURES)


def test_every_function_of_leases_testing_h_is_declared_by_the_test_helper() -> None:
    assert_declared("leases_testing.h", _testing.TESTING_SIGNATURES)


def test_the_loaded_library_uses_the_declared_types() -> None:
    for name, (restype, argtypes) in _ffi.SIGNATURES.items():
        fn = getattr(_ffi.lib, name)
        assert fn.restype == restype and fn.argtypes == argtypes, name


def test_abi_version_matches_abi_VERSION_the_header_and_the_library() -> None:
    assert int((ROOT / "abi" / "VERSION").read_text().strip()) == _ffi.ABI_VERSION
    header = (ROOT / "include" / "leases.h").read_text()
    m = re.search(r"#define LEASES_ABI_VERSION (\d+)", header)
    assert m is not None and int(m.group(1)) == _ffi.ABI_VERSION
    assert _ffi.lib.leases_abi_version() == leases.ABI_VERSION == 1
    assert int((ROOT / "abi" / "REVISION").read_text().strip()) == _ffi.ABI_REVISION
    m = re.search(r"#define LEASES_ABI_REVISION (\d+)", header)
    assert m is not None and int(m.group(1)) == _ffi.ABI_REVISION == leases.ABI_REVISION
    assert _ffi.lib.leases_abi_revision() >= _ffi.ABI_REVISION


def test_max_duration_matches_the_header() -> None:
    header = (ROOT / "include" / "leases.h").read_text()
    m = re.search(r"#define LEASES_MAX_DURATION_US INT64_C\((\d+)\)", header)
    assert m is not None and int(m.group(1)) == _ffi.MAX_DURATION_US


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


def test_LEASES_LIBRARY_naming_a_missing_file_fails_the_import_naming_it(tmp_path: Path) -> None:
    env = _env_without_library()
    env["LEASES_LIBRARY"] = str(tmp_path / "nowhere" / "libleases.so")
    r = _python("import leases", env, tmp_path)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and str(tmp_path / "nowhere") in r.stderr
