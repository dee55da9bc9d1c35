"""Durations cross into the library as whole microseconds, converted from
datetime.timedelta exactly (integer arithmetic, nothing rounded)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

from ._errors import InvalidDurationError
from ._abi import MAX_WAIT_US
from ._ffi import MAX_DURATION_US

MAX_DURATION = timedelta(microseconds=MAX_DURATION_US)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def whole_us(value: object, what: str) -> int:
    """The whole microseconds of a timedelta, exact; anything else is refused.

    A timedelta subclass carrying sub-microsecond nanoseconds (as
    pandas.Timedelta does) is refused rather than rounded.
    """
    if not isinstance(value, timedelta):
        raise TypeError(
            f"{what} must be a datetime.timedelta, not {type(value).__name__} "
            "(e.g. timedelta(seconds=30))"
        )
    nanos = getattr(value, "nanoseconds", 0)
    if isinstance(nanos, int) and nanos != 0:
        raise InvalidDurationError(
            f"{what} {value!s} has a fraction of a microsecond ({nanos} ns); "
            "durations are whole microseconds and are never rounded"
        )
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def duration_us(value: object, what: str = "duration") -> int:
    """The whole microseconds of a timedelta in 1 µs .. 24 h, else an error."""
    us = whole_us(value, what)
    if us <= 0 or us > MAX_DURATION_US:
        raise InvalidDurationError(
            f"{what} must be more than zero and at most 24 hours "
            f"(1 .. {MAX_DURATION_US} microseconds), not {value!s}"
        )
    return us


def wait_us(value: object, what: str = "wait") -> int:
    """The whole microseconds of a wait's bound, a timedelta in 0 .. 24 h
    (0: do not wait), else an error."""
    us = whole_us(value, what)
    if us < 0 or us > MAX_WAIT_US:
        raise InvalidDurationError(
            f"{what} must be at least zero and at most 24 hours "
            f"(0 .. {MAX_WAIT_US} microseconds), not {value!s}"
        )
    return us


def datetime_from_unix_us(us: int) -> datetime:
    """An aware UTC datetime, exact (no float on the way)."""
    return _EPOCH + timedelta(microseconds=us)


def optional_datetime(us: Optional[int]) -> Optional[datetime]:
    return None if us is None else datetime_from_unix_us(us)
