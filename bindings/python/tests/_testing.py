"""Test-only access to include/leases_testing.h (the clock seam, a short busy
timeout, a recovered panic). Present only in build/test/libleases.so; never
part of the public package."""

from __future__ import annotations

import ctypes
from datetime import datetime, timedelta, timezone
from typing import Dict, Union

from leases import Authority, _ffi

TESTING_SIGNATURES: Dict[str, _ffi.Signature] = {
    "leases_testing_set_clock": (_ffi.c_status, [_ffi.AuthorityPtr, _ffi.c_int64]),
    "leases_testing_set_clock_sequence": (
        _ffi.c_status,
        [_ffi.AuthorityPtr, ctypes.POINTER(_ffi.c_int64), _ffi.c_size_t],
    ),
    "leases_testing_open": (
        _ffi.c_status,
        [_ffi.c_char_p, _ffi.c_int64, ctypes.POINTER(_ffi.AuthorityPtr)],
    ),
    "leases_testing_panic": (_ffi.c_status, []),
}

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def has_seam() -> bool:
    return hasattr(_ffi.lib, "leases_testing_set_clock")


def declare() -> None:
    _ffi.declare(_ffi.lib, TESTING_SIGNATURES)


def unix_us(when: datetime) -> int:
    d = when - EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def set_clock(auth: Authority, when: Union[datetime, None]) -> None:
    """Freezes the authority's clock at `when` (None: the system clock)."""
    us = 0 if when is None else unix_us(when)
    _ffi.call(_ffi.lib.leases_testing_set_clock, auth._handle(), us)


def open_with_busy_timeout(path: str, timeout: timedelta) -> Authority:
    out = _ffi.AuthorityPtr()
    us = timeout // timedelta(microseconds=1)
    _ffi.call(_ffi.lib.leases_testing_open, path.encode(), us, ctypes.byref(out))
    auth = Authority.__new__(Authority)
    auth.path = path
    auth._ptr = out
    return auth


def panic() -> None:
    _ffi.call(_ffi.lib.leases_testing_panic)
