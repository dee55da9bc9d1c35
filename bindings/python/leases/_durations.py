"""Durations cross into the library as whole microseconds, converted from
datetime.timedelta exactly (integer arithmetic, nothing rounded); times as
microseconds since the epoch, from aware datetimes only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

from ._errors import InvalidArgumentError, InvalidDurationError
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
            f"{what} {duration_text(value)} has a fraction of a microsecond ({nanos} ns); "
            "durations are whole microseconds and are never rounded"
        )
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def duration_us(value: object, what: str = "duration") -> int:
    """The whole microseconds of a timedelta in 1 µs .. 24 h, else an error."""
    us = whole_us(value, what)
    if us <= 0 or us > MAX_DURATION_US:
        raise InvalidDurationError(
            f"{what} must be more than zero and at most 24 hours "
            f"(1 .. {MAX_DURATION_US} microseconds), not {duration_text(value)}"
        )
    return us


def wait_us(value: object, what: str = "wait") -> int:
    """The whole microseconds of a wait's bound, a timedelta in 0 .. 24 h
    (0: do not wait), else an error."""
    us = whole_us(value, what)
    if us < 0 or us > MAX_WAIT_US:
        raise InvalidDurationError(
            f"{what} must be at least zero and at most 24 hours "
            f"(0 .. {MAX_WAIT_US} microseconds), not {duration_text(value)}"
        )
    return us


def describe_us(us: int) -> str:
    """A count of microseconds for a message, as duration_text writes it."""
    return describe_ns(us * 1000)


def describe_ns(ns: int) -> str:
    """A count of nanoseconds as people write a duration, the spelling of
    every surface's messages (tests/vectors/durations.json "shown"): the
    hours, minutes and seconds that are not zero, largest first, then the
    rest under a second in the largest of ms, us and ns that states it
    whole: 48h, 1h30m, 250ms, 1500us, 1s500ms. Zero is 0s."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    secs, frac = divmod(ns, 1_000_000_000)
    if secs == 0 and frac == 0:
        return "0s"
    parts = [sign]
    for n, unit in ((secs // 3600, "h"), (secs % 3600 // 60, "m"), (secs % 60, "s")):
        if n:
            parts.append(f"{n}{unit}")
    if frac:
        if frac % 1_000_000 == 0:
            parts.append(f"{frac // 1_000_000}ms")
        elif frac % 1000 == 0:
            parts.append(f"{frac // 1000}us")
        else:
            parts.append(f"{frac}ns")
    return "".join(parts)


def duration_text(value: object) -> str:
    """A timedelta (with a subclass's nanoseconds) as describe_ns writes it."""
    if not isinstance(value, timedelta):
        return str(value)
    nanos = getattr(value, "nanoseconds", 0)
    extra = nanos if isinstance(nanos, int) else 0
    us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    return describe_ns(us * 1000 + extra)


def us_within(value: object, what: str, low_us: int, high_us: int, high_is: str = "") -> int:
    """The whole microseconds of a timedelta in low_us .. high_us (``high_is``
    names the upper bound when another argument sets it), else
    InvalidArgumentError: the library's status for delays and backoffs,
    whose bounds are not a lease duration's."""
    us = whole_us(value, what)
    if not low_us <= us <= high_us:
        high = f"{high_is} ({describe_us(high_us)})" if high_is else describe_us(high_us)
        raise InvalidArgumentError(f"{what} must be {describe_us(low_us)} .. {high}, not {describe_us(us)}")
    return us


def unix_us(value: object, what: str) -> int:
    """An aware datetime as microseconds since the epoch, exact. A naive
    datetime is refused: the authority's clock is UTC, and guessing the
    caller's zone would move the time."""
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime.datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(
            f"{what} must be an aware datetime (e.g. datetime.now(timezone.utc)), not the naive {value}"
        )
    return whole_us(value - _EPOCH, what)


def datetime_from_unix_us(us: int) -> datetime:
    """An aware UTC datetime, exact (no float on the way)."""
    return _EPOCH + timedelta(microseconds=us)


def optional_datetime(us: Optional[int]) -> Optional[datetime]:
    return None if us is None else datetime_from_unix_us(us)
