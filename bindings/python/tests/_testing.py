"""Test-only access to include/leases_testing.h (the clock seam, a short busy
timeout, a recovered panic). Present only in build/test/libleases.so; never
part of the public package."""

from __future__ import annotations

import ctypes
from datetime import datetime, timedelta, timezone
from typing import Union

from leases import Authority, _abi, _ffi

# Generated from include/leases_testing.h with the package's declarations.
TESTING_SIGNATURES = _abi.TESTING_SIGNATURES

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


def set_safety_poll(auth: Authority, poll: timedelta) -> None:
    """How often the authority's waiters look though nothing woke them (the
    default is 1 s on PostgreSQL, 10 s on SQLite); call it before waiting."""
    _ffi.call(_ffi.lib.leases_testing_set_safety_poll, auth._handle(), poll // timedelta(microseconds=1))


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


def lose_commit_acks(auth: Authority) -> None:
    """Every later commit of auth persists and then reports
    OutcomeUnknownError, as one whose acknowledgement was lost."""
    _ffi.call(_ffi.lib.leases_testing_lose_commit_acks, auth._handle())
