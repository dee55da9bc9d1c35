"""One exception class per status (tests/vectors/statuses.json), carrying the
library's message, and every class reached through a real operation."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple, Type

import pytest

import leases
from leases import _ffi

import _testing
from conftest import PRODUCTION, SECONDS_30, T0, load_vectors

STATUSES = [s for s in load_vectors("statuses.json") if s["code"] != 0]



def class_of(status: Any) -> Type[leases.LeasesError]:
    """The class a status is named to: its stem plus PEP 8's Error suffix."""
    stem = status["stem"]
    cls = getattr(leases, stem if stem.endswith("Error") else stem + "Error")
    assert isinstance(cls, type) and issubclass(cls, leases.LeasesError)
    return cls


def test_every_status_of_the_vectors_has_its_own_class_named_after_it() -> None:
    classes = [class_of(s) for s in STATUSES]
    assert len(set(classes)) == len(STATUSES)
    for s, cls in zip(STATUSES, classes):
        assert cls.status == s["code"] and cls.status_name == s["name"]
        assert cls.__name__ in leases.__all__


def test_NotHeldError_is_the_base_of_exactly_the_not_held_statuses() -> None:
    for s in STATUSES:
        assert issubclass(class_of(s), leases.NotHeldError) == s["not_held"], s["name"]
    assert {s["name"] for s in STATUSES if s["not_held"]} == {"lease_lost", "expired", "cancelled"}


def test_a_lost_lease_is_caught_as_NotHeldError(auth: leases.Authority) -> None:
    job = auth.request_job(PRODUCTION)
    lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    auth.cancel(PRODUCTION, job)
    with pytest.raises(leases.NotHeldError) as err:
        lease.renew(SECONDS_30)
    assert type(err.value) is leases.CancelledError


OLD_NAMES = {
    "InvalidArgument": "InvalidArgumentError", "DurationError": "InvalidDurationError",
    "NotFound": "NotFoundError", "NothingToClaim": "NothingToClaimError", "StateError": "WrongStateError",
    "LeaseLost": "LeaseLostError", "Expired": "ExpiredError", "Cancelled": "CancelledError",
    "NotExtended": "NotExtendedError", "ClockRegressed": "ClockRegressedError", "Closed": "ClosedError",
    "TokenError": "BadTokenError", "Busy": "BusyError", "OutcomeUnknown": "OutcomeUnknownError",
    "SchemaError": "SchemaTooNewError", "ForkedProcess": "ForkedError",
}


@pytest.mark.parametrize("old,new", sorted(OLD_NAMES.items()))
def test_the_old_names_are_deprecated_aliases_of_the_status_named_classes(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"leases.{old} is deprecated; use leases.{new}"):
        alias = getattr(leases, old)
    assert alias is getattr(leases, new)
    assert old not in leases.__all__


def test_an_unknown_name_is_still_an_AttributeError() -> None:
    with pytest.raises(AttributeError):
        getattr(leases, "NoSuchError")


@pytest.mark.parametrize("status", STATUSES, ids=lambda s: s["name"])
def test_each_status_raises_its_class_with_code_name_and_last_error(status: Any) -> None:
    with pytest.raises(leases.LeasesError) as err:
        _ffi.check(status["code"])
    assert type(err.value) is class_of(status)
    assert err.value.status == status["code"]
    assert err.value.status_name == status["name"]
    assert str(err.value) == _ffi.last_error()


@pytest.mark.parametrize("status", STATUSES, ids=lambda s: s["name"])
def test_the_library_names_each_status_as_the_vectors_do(status: Any) -> None:
    assert _ffi.status_name(status["code"]) == status["name"]


def test_an_unknown_status_raises_the_base_class_with_its_code() -> None:
    with pytest.raises(leases.LeasesError) as err:
        _ffi.check(99)
    assert type(err.value) is leases.LeasesError
    assert err.value.status == 99 and err.value.status_name == "unknown"


def test_the_message_is_the_library_message_of_the_failed_call(auth: leases.Authority) -> None:
    with pytest.raises(leases.NotFoundError) as err:
        auth.request_job("no-such-production")
    assert "no-such-production" in str(err.value)
    assert str(err.value) == _ffi.last_error()


def test_argument_errors_are_also_ValueErrors() -> None:
    for cls in (leases.InvalidArgumentError, leases.InvalidDurationError, leases.BadTokenError):
        assert issubclass(cls, ValueError) and issubclass(cls, leases.LeasesError)


# ---- every class reached through a real operation --------------------------


def test_empty_name_raises_InvalidArgument(auth: leases.Authority) -> None:
    with pytest.raises(leases.InvalidArgumentError):
        auth.create_production("")


def test_unknown_production_raises_NotFound(auth: leases.Authority) -> None:
    with pytest.raises(leases.NotFoundError):
        auth.claim("elsewhere", worker="w", duration=SECONDS_30)


def test_cancelling_a_completed_job_raises_StateError(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    lease.complete()
    with pytest.raises(leases.WrongStateError):
        auth.cancel(PRODUCTION, lease.job_id)


def test_renewing_to_an_earlier_expiry_raises_NotExtended(lease: leases.Lease) -> None:
    with pytest.raises(leases.NotExtendedError):
        lease.renew(timedelta(seconds=1))


def test_completing_a_cancelled_job_raises_Cancelled(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    auth.cancel(PRODUCTION, lease.job_id)
    with pytest.raises(leases.CancelledError):
        lease.complete()


def test_completing_after_the_expiry_raises_Expired(auth: leases.Authority, job_id: str) -> None:
    # Real time: the claim must commit within its duration, on a loaded host
    # too (a claim born expired is refused).
    lease = auth.claim_job(PRODUCTION, job_id, worker="w", duration=timedelta(milliseconds=500))
    time.sleep(0.6)
    with pytest.raises(leases.ExpiredError):
        lease.complete()


def test_a_lease_whose_job_was_claimed_again_raises_LeaseLost(
    auth: leases.Authority, job_id: str
) -> None:
    old = auth.claim_job(PRODUCTION, job_id, worker="w1", duration=timedelta(milliseconds=500))
    time.sleep(1.8)  # past the expiry and the default policy's first backoff (at most 1.2 s)
    auth.claim_job(PRODUCTION, job_id, worker="w2", duration=SECONDS_30)
    with pytest.raises(leases.LeaseLostError):
        old.renew(SECONDS_30)


def test_using_a_completed_lease_raises_Closed(lease: leases.Lease) -> None:
    lease.complete()
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)


SETTLED = "; a lease is closed once it has completed, released or failed its claim"


def test_a_settled_lease_says_how_this_lease_ended_its_claim_and_that_a_settled_lease_is_closed(
    auth: leases.Authority,
) -> None:
    """The library's message passes through: the same text on every surface."""
    endings: List[Tuple[Callable[[leases.Lease], None], str]] = [
        (lambda l: l.complete(), "completed"),
        (lambda l: l.release(), "released"),
        (lambda l: l.fail("broken"), "failed"),
    ]
    for settle, how in endings:
        job = auth.request_job(PRODUCTION)
        lease = auth.claim_job(PRODUCTION, job, worker="w", duration=SECONDS_30)
        settle(lease)
        with pytest.raises(leases.ClosedError) as e:
            lease.complete()
        assert str(e.value) == (
            f"closed: lease for job {job} is closed: this lease already {how} the job" + SETTLED
        )


def test_a_malformed_token_raises_TokenError(auth: leases.Authority) -> None:
    with pytest.raises(leases.BadTokenError):
        auth.import_token("lt1.not-a-token")


def test_a_file_that_is_not_a_database_raises_StorageError(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not the pages of a database\n" * 200)
    with pytest.raises(leases.StorageError):
        leases.Authority(str(path))
    assert path.read_bytes() == b"these are not the pages of a database\n" * 200


def test_a_newer_schema_raises_SchemaError(db_path: str) -> None:
    leases.Authority(db_path).close()
    with sqlite3.connect(db_path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(leases.SchemaTooNewError):
        leases.Authority(db_path)


@pytest.mark.testlib
def test_a_clock_behind_its_high_water_mark_raises_ClockRegressed(
    frozen: leases.Authority, lease: leases.Lease
) -> None:
    _testing.set_clock(frozen, T0 - timedelta(seconds=1))
    with pytest.raises(leases.ClockRegressedError):
        lease.renew(SECONDS_30)


@pytest.mark.testlib
def test_a_writer_lock_held_past_the_busy_timeout_raises_Busy(
    auth: leases.Authority, db_path: str
) -> None:
    auth.request_job(PRODUCTION)
    other = _testing.open_with_busy_timeout(db_path, timedelta(milliseconds=50))
    with other, auth.edit():
        with pytest.raises(leases.BusyError):
            other.claim(PRODUCTION, worker="w2", duration=SECONDS_30)


@pytest.mark.testlib
def test_a_recovered_panic_raises_InternalError() -> None:
    with pytest.raises(leases.InternalError, match="panic"):
        _testing.panic()


@pytest.mark.testlib
def test_an_outcome_unknown_claim_names_the_job_it_chose_in_job_id(location: str) -> None:
    with leases.Authority(location) as auth:
        auth.create_production(PRODUCTION)
        first, second, third = (auth.request_job(PRODUCTION) for _ in range(3))
        lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
        assert lease is not None and lease.job_id == first
        with pytest.raises(leases.WrongStateError) as taken:
            auth.claim_job(PRODUCTION, first, worker="w", duration=SECONDS_30)
        assert taken.value.job_id == first  # the job the refused call acted on
        with pytest.raises(leases.InvalidArgumentError) as bad:
            auth.claim(PRODUCTION, worker="", duration=SECONDS_30)
        assert bad.value.job_id is None
        _testing.lose_commit_acks(auth)
        with pytest.raises(leases.OutcomeUnknownError) as unknown:
            lease.complete_and_claim_next(duration=SECONDS_30)
        assert unknown.value.job_id == second  # the next job, not the completed one
        with pytest.raises(leases.OutcomeUnknownError) as unknown:
            auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
        assert unknown.value.job_id == third
        assert third in str(unknown.value)
