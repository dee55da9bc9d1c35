"""The low-level layer: finds and loads libleases.so on first use, declares
every C function of include/leases.h (argtypes and restype from _abi.py,
generated from the header), and turns statuses into exceptions.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._abi import (
    ABI_REVISION,
    ABI_VERSION,
    MAX_CURSOR_LEN,
    MAX_DURATION_US,
    MAX_FACTS_LEN,
    MAX_NAME_LEN,
    MAX_PATH_LEN,
    MAX_PAYLOAD_LEN,
    MAX_REASON_LEN,
    MAX_TOKEN_LEN,
    SIGNATURES,
    AuthorityPtr,
    CancellerPtr,
    EditPtr,
    ExecutionPtr,
    LeasePtr,
    Signature,
    c_status,
)
from ._errors import BadTokenError, ForkedError, InvalidArgumentError, error_for_status

__all__ = [
    "ABI_REVISION",
    "ABI_VERSION",
    "MAX_DURATION_US",
    "SIGNATURES",
    "AuthorityPtr",
    "CancellerPtr",
    "EditPtr",
    "ExecutionPtr",
    "LeasePtr",
    "Signature",
    "c_status",
]

LIBRARY_NAME = "libleases.so"

c_char_p = ctypes.c_char_p  # borrowed input text, or a string the library keeps
c_int64 = ctypes.c_int64
c_size_t = ctypes.c_size_t


# ---- finding and loading the library ---------------------------------------


def candidate_paths() -> List[Tuple[str, Path]]:
    """Where the library is looked for, in order: $LEASES_LIBRARY, the copy
    bundled in this package, the checkout's build/libleases.so."""
    found: List[Tuple[str, Path]] = []
    env = os.environ.get("LEASES_LIBRARY")
    if env:
        found.append(("$LEASES_LIBRARY", Path(env)))
        return found  # an explicit choice never falls back to another copy
    here = Path(__file__).resolve().parent
    found.append(("bundled copy", here / LIBRARY_NAME))
    # bindings/python/leases/_ffi.py -> the checkout root
    found.append(("checkout build", here.parents[2] / "build" / LIBRARY_NAME))
    return found


def find_library() -> Path:
    tried = []
    for what, path in candidate_paths():
        if path.is_file():
            return path
        tried.append(f"{what} {path}")
    raise ImportError(
        "libleases.so not found (looked at: " + "; ".join(tried) + "). Build it with "
        "`make build/libleases.so`, install the package with its bundled copy, or set "
        "LEASES_LIBRARY to the library's path."
    )


def library_abi(lib: ctypes.CDLL) -> Tuple[int, int]:
    """(ABI number, revision) of a loaded library; one that predates
    leases_abi_revision is revision 0."""
    abi = lib.leases_abi_version
    abi.restype, abi.argtypes = ctypes.c_uint32, []
    try:
        rev = lib.leases_abi_revision
    except AttributeError:
        return int(abi()), 0
    rev.restype, rev.argtypes = ctypes.c_uint32, []
    return int(abi()), int(rev())


def load_library(path: Path) -> ctypes.CDLL:
    """Loads the library, refuses another ABI or an older revision, and
    declares every function."""
    mode = os.RTLD_NOW
    # The Go runtime inside cannot be unloaded: never let dlclose() unmap it.
    mode |= getattr(os, "RTLD_NODELETE", 0)
    lib = ctypes.CDLL(str(path), mode=mode)
    found, revision = library_abi(lib)
    if found != ABI_VERSION or revision < ABI_REVISION:
        raise ImportError(
            f"{path} implements libleases ABI version {found} revision {revision}, but this leases "
            f"package needs ABI version {ABI_VERSION} revision {ABI_REVISION} or later; install a "
            "library at least as new as the package"
        )
    declare(lib, SIGNATURES)
    return lib


def declare(lib: ctypes.CDLL, signatures: Dict[str, Signature]) -> None:
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


# ---- loading on first use ---------------------------------------------------
#
# Loading starts the Go runtime, whose threads do not survive fork(). So
# nothing is loaded at import: a process may import leases and then fork
# workers (multiprocessing's fork context, prefork servers), each of which
# loads the library itself on its first call. `lib` and `LIBRARY_PATH` are
# resolved by the module __getattr__ below until load() binds them as plain
# globals; the annotations tell the type checker what they will be.

lib: ctypes.CDLL
LIBRARY_PATH: Path

_load_lock = threading.Lock()
_load_started = False  # set before the runtime can start
_forked = False


def _bound() -> Optional[ctypes.CDLL]:
    library: Optional[ctypes.CDLL] = globals().get("lib")
    return library


def load() -> ctypes.CDLL:
    """The library, found, loaded and checked by the first call (ImportError
    when it is missing or of another ABI)."""
    global _load_started
    found = _bound()
    if found is not None:
        return found
    with _load_lock:
        found = _bound()
        if found is not None:
            return found
        path = find_library()
        _load_started = True
        library = load_library(path)
        globals()["LIBRARY_PATH"] = path
        globals()["lib"] = library
        return library


def loaded() -> bool:
    """Whether this process has loaded (or is loading) the library."""
    return _load_started


def __getattr__(name: str) -> Any:
    if name == "lib":
        return load()
    if name == "LIBRARY_PATH":
        load()
        return globals()["LIBRARY_PATH"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- fork safety -------------------------------------------------------------


def _after_fork_in_child() -> None:
    global _forked, _load_lock
    if _load_started:
        _forked = True
    else:
        # Nothing was loaded: the child loads the library itself. A lock
        # another thread of the parent held at the fork would never be freed.
        _load_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def ensure_not_forked() -> None:
    """Rule 1 of the rejection order: a child fork()ed after the library was
    loaded cannot use it (the Go runtime's threads did not survive the fork)."""
    if _forked:
        raise ForkedError(
            "forked: this process is a fork()ed child of one that had loaded libleases; "
            "it cannot use it (open the authority in each worker process, after the fork, and "
            "never use the library in the parent before forking; or use multiprocessing's "
            "'spawn' start method)"
        )


def usable() -> bool:
    """False in a forked child, where finalizers must not call the library."""
    return not _forked


# ---- calls -------------------------------------------------------------------


def last_error() -> str:
    raw = load().leases_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def last_error_job_id() -> str:
    """The job id the thread's last failure names; "" for none."""
    raw = load().leases_last_error_job_id()
    return raw.decode("ascii", "replace") if raw else ""


def status_name(status: int) -> str:
    raw = load().leases_status_name(status)
    return raw.decode("ascii", "replace") if raw else "unknown"


def check(status: int) -> None:
    """Raises the exception of a failed call. Must run right after the call,
    on the same thread: the message is the thread's last error."""
    if status != 0:
        raise error_for_status(status, last_error(), status_name(status), last_error_job_id())


def call(fn: Callable[..., int], *args: Any) -> None:
    ensure_not_forked()
    check(fn(*args))


def take_string(out: ctypes.c_void_p) -> str:
    """Copies an owned output string and gives it back with leases_free."""
    address = out.value
    if not address:
        return ""
    try:
        return ctypes.string_at(address).decode("utf-8")
    finally:
        load().leases_free(address)


def take_bytes(out: ctypes.c_void_p, length: int) -> bytes:
    """Copies an owned output buffer and gives it back with leases_free."""
    address = out.value
    if not address:
        return b""
    try:
        return ctypes.string_at(address, length)
    finally:
        load().leases_free(address)


# The header's byte limits of each text argument, by its name. A str longer
# in characters than its limit in bytes is refused before it is encoded
# (copied), so an absurd argument never costs its size in memory twice; the
# library checks the exact byte length of the rest.
LIMITS: Dict[str, Tuple[int, str]] = {
    **{n: (MAX_NAME_LEN, "LEASES_MAX_NAME_LEN") for n in ("production", "worker", "key", "name", "job_id")},
    "reason": (MAX_REASON_LEN, "LEASES_MAX_REASON_LEN"),
    "facts": (MAX_FACTS_LEN, "LEASES_MAX_FACTS_LEN"),
    "path": (MAX_PATH_LEN, "LEASES_MAX_PATH_LEN"),
    "output_dir": (MAX_PATH_LEN, "LEASES_MAX_PATH_LEN"),
    "token": (MAX_TOKEN_LEN, "LEASES_MAX_TOKEN_LEN"),
    "cursor": (MAX_CURSOR_LEN, "LEASES_MAX_CURSOR_LEN"),
}


def too_long(what: str, size: int, unit: str, limit: int, name: str) -> str:
    return f"{what} is {size} {unit}, over the limit of {limit} bytes ({name})"


def encode(value: str, what: str) -> bytes:
    """UTF-8 for the library, which validates it. Lone surrogates pass through
    as invalid UTF-8 so that the library reports them; a NUL byte cannot cross
    a C string, so it is refused here with the library's status."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    limit = LIMITS.get(what)
    if limit is not None and len(value) > limit[0]:
        error = BadTokenError if what == "token" else InvalidArgumentError
        raise error(too_long(what, len(value), "characters", *limit))
    data = value.encode("utf-8", "surrogatepass")
    if b"\0" in data:
        raise InvalidArgumentError(f"{what} contains a NUL byte")
    return data


def payload_bytes(payload: object) -> bytes:
    """A job payload as bytes, its size checked before it is copied."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
    size = memoryview(payload).nbytes if not isinstance(payload, bytes) else len(payload)
    if size > MAX_PAYLOAD_LEN:
        raise InvalidArgumentError(too_long("payload", size, "bytes", MAX_PAYLOAD_LEN, "LEASES_MAX_PAYLOAD_LEN"))
    return bytes(payload)


def int64_at_least_zero(value: object, what: str) -> int:
    """An int that crosses as int64_t >= 0."""
    return int_within(value, what, 0, 2**63 - 1, "0 .. 2**63-1 (an int64_t)")


def int_within(value: object, what: str, low: int, high: int, bounds: str = "") -> int:
    """An int in low .. high (``bounds`` says so in the message), checked
    before it crosses as a fixed-size C integer: ctypes would wrap one out
    of range silently (2**64 to 0)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"{what} must be {bounds or f'{low} .. {high}'}, not {value}")
    return value


def encode_optional(value: Optional[str], what: str) -> Optional[bytes]:
    return None if value is None else encode(value, what)


def encode_path(value: "os.PathLike[str] | str", what: str) -> bytes:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or os.PathLike, not {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError(f"{what} must be a text path, not {type(path).__name__}")
    return encode(path, what)
