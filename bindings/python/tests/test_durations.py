"""Durations are datetime.timedelta only: 1 µs .. 24 h in whole microseconds,
converted exactly and checked before the C call (tests/vectors/durations.json)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, List

import pytest

import leases
from leases import _ffi
from leases._durations import describe_ns, duration_text, duration_us

from conftest import PRODUCTION, SECONDS_30, load_vectors

DURATIONS = load_vectors("durations.json")


class NanoTimedelta(timedelta):
    """A timedelta carrying sub-microsecond nanoseconds, as pandas.Timedelta does."""

    nanoseconds: int

    def __new__(cls, ns: int) -> "NanoTimedelta":
        self = super().__new__(cls, microseconds=ns // 1000)
        self.nanoseconds = ns % 1000
        return self


def timedelta_of_ns(ns: int) -> timedelta:
    return timedelta(microseconds=ns // 1000) if ns % 1000 == 0 else NanoTimedelta(ns)


def ns_of(v: Any) -> int:
    return int(v["nanoseconds"])


@pytest.mark.parametrize("vector", DURATIONS["accepted"], ids=lambda v: v["text"])
def test_accepted_durations_convert_to_exact_microseconds(vector: Any) -> None:
    assert duration_us(timedelta_of_ns(ns_of(vector))) == ns_of(vector) // 1000


@pytest.mark.parametrize("vector", DURATIONS["accepted"], ids=lambda v: v["text"])
def test_accepted_durations_are_accepted_by_claim(auth: leases.Authority, vector: Any) -> None:
    auth.request_job(PRODUCTION)
    try:
        lease = auth.claim(PRODUCTION, worker="w", duration=timedelta_of_ns(ns_of(vector)))
        assert lease is not None
    except leases.ExpiredError:
        pass  # a 1 µs claim may be over before it commits; the duration was accepted


@pytest.mark.parametrize(
    "vector", DURATIONS["rejected"], ids=lambda v: v["text"] or v["nanoseconds"]
)
def test_rejected_durations_raise_DurationError(vector: Any) -> None:
    with pytest.raises(leases.InvalidDurationError):
        duration_us(timedelta_of_ns(ns_of(vector)))


def test_the_24_hour_limit_is_inclusive_and_shared_with_the_vectors() -> None:
    assert DURATIONS["max_us"] == _ffi.MAX_DURATION_US
    assert leases.MAX_DURATION == timedelta(hours=24)
    assert duration_us(timedelta(hours=24)) == 86_400_000_000
    with pytest.raises(leases.InvalidDurationError):
        duration_us(timedelta(hours=24, microseconds=1))


def test_conversion_is_exact_where_a_float_would_truncate() -> None:
    # int(total_seconds() * 1e6) gives 248 for 249 µs; integer arithmetic cannot.
    assert int(timedelta(microseconds=249).total_seconds() * 1e6) != 249
    for us in (249, 251, 489, 86_399_999_999):
        assert duration_us(timedelta(microseconds=us)) == us


def test_negative_durations_raise_DurationError() -> None:
    with pytest.raises(leases.InvalidDurationError):
        duration_us(-timedelta(microseconds=1))
    with pytest.raises(leases.InvalidDurationError):
        duration_us(timedelta(0))


def test_DurationError_is_a_ValueError_and_a_LeasesError_with_status_invalid_duration() -> None:
    assert issubclass(leases.InvalidDurationError, ValueError)
    assert issubclass(leases.InvalidDurationError, leases.LeasesError)
    with pytest.raises(leases.InvalidDurationError) as err:
        duration_us(timedelta(0))
    assert err.value.status == 2 and err.value.status_name == "invalid_duration"


NOT_TIMEDELTAS: List[Any] = [30, 30.0, None, True, "30s", 30_000_000]


@pytest.mark.parametrize("value", NOT_TIMEDELTAS, ids=repr)
def test_non_timedelta_durations_raise_TypeError_naming_timedelta(
    auth: leases.Authority, value: Any
) -> None:
    auth.request_job(PRODUCTION)
    with pytest.raises(TypeError, match="timedelta"):
        auth.claim(PRODUCTION, worker="w", duration=value)
    with pytest.raises(TypeError, match="timedelta"):
        auth.edit().claim(PRODUCTION, worker="w", duration=value)


@pytest.mark.parametrize("value", NOT_TIMEDELTAS, ids=repr)
def test_renew_refuses_non_timedelta_durations_with_TypeError(
    lease: leases.Lease, value: Any
) -> None:
    with pytest.raises(TypeError, match="timedelta"):
        lease.renew(value)


def test_durations_are_checked_before_the_C_call(
    auth: leases.Authority, job_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = auth.claim_job(PRODUCTION, job_id, worker="w", duration=SECONDS_30)
    calls: List[str] = []

    def recorder(name: str) -> Callable[..., int]:
        def fn(*args: Any) -> int:
            calls.append(name)
            return 0

        return fn

    for name in ("leases_claim", "leases_claim_job", "leases_lease_renew", "leases_edit_claim"):
        monkeypatch.setattr(_ffi.lib, name, recorder(name))
    edit_used = None
    for bad in (timedelta(0), timedelta(hours=25), NanoTimedelta(1500)):
        with pytest.raises(leases.InvalidDurationError):
            auth.claim(PRODUCTION, worker="w", duration=bad)
        with pytest.raises(leases.InvalidDurationError):
            auth.claim_job(PRODUCTION, job_id, worker="w", duration=bad)
        with pytest.raises(leases.InvalidDurationError):
            lease.renew(bad)
    with auth.edit() as edit:
        edit_used = edit
        with pytest.raises(leases.InvalidDurationError):
            edit.claim(PRODUCTION, worker="w", duration=timedelta(0))
    assert edit_used is not None and calls == []


def test_a_sub_microsecond_fraction_is_refused_not_rounded(lease: leases.Lease) -> None:
    before = lease.expiry
    with pytest.raises(leases.InvalidDurationError, match="microsecond"):
        lease.renew(NanoTimedelta(60_000_000_500))
    assert lease.expiry == before


def test_durations_in_messages_are_written_as_people_write_them_as_on_every_surface() -> None:
    shown = DURATIONS["shown"]
    assert len(shown) >= 20
    for case in shown:
        ns = int(case["nanoseconds"])
        assert describe_ns(ns) == case["shown"], ns
        if ns >= 0:
            assert duration_text(NanoTimedelta(ns)) == case["shown"], ns
        if ns % 1000 == 0:
            assert duration_text(timedelta(microseconds=ns // 1000)) == case["shown"], ns
    with pytest.raises(leases.InvalidDurationError, match=r"not 48h$"):
        duration_us(timedelta(hours=48))
    with pytest.raises(leases.InvalidDurationError, match=r"^duration 1500ns has a fraction"):
        duration_us(NanoTimedelta(1500))
