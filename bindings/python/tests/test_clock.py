"""The clock policy through the binding, with the authority's clock frozen by
the test seam (build/test/libleases.so only): expiries come from the
authority's clock, renewals must commit before the previous expiry, and a
backward clock blocks guarded operations (but never cancel)."""

from __future__ import annotations

from datetime import timedelta
from typing import Callable, List

import pytest

import leases

import _testing
from conftest import PRODUCTION, SECONDS_30, T0, claim

pytestmark = pytest.mark.testlib


def test_expiry_is_the_authority_clock_plus_the_duration_exactly(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen, duration=timedelta(seconds=30, microseconds=1))
    assert lease.expiry == T0 + timedelta(seconds=30, microseconds=1)
    (job,) = frozen.jobs(PRODUCTION)
    assert job.claimed_at == T0 and job.expiry == lease.expiry


def test_renew_sets_the_expiry_from_the_authority_clock(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    _testing.set_clock(frozen, T0 + timedelta(seconds=5))
    lease.renew(SECONDS_30)
    assert lease.expiry == T0 + timedelta(seconds=35)


def test_renew_must_commit_before_the_previous_expiry(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen, duration=timedelta(seconds=10))
    _testing.set_clock(frozen, T0 + timedelta(seconds=10))  # expiry is exclusive
    with pytest.raises(leases.ExpiredError):
        lease.renew(SECONDS_30)


def test_renewal_must_strictly_extend_the_expiry(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    with pytest.raises(leases.NotExtendedError):
        lease.renew(SECONDS_30)  # same instant + same duration: not later
    lease.renew(SECONDS_30 + timedelta(microseconds=1))


def test_a_backward_clock_blocks_guarded_operations_until_it_catches_up(
    frozen: leases.Authority,
) -> None:
    frozen.request_job(PRODUCTION)
    frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    token = lease.export_token()
    _testing.set_clock(frozen, T0 - timedelta(microseconds=1))
    guarded: List[Callable[[], object]] = [
        lambda: lease.renew(timedelta(minutes=1)),
        lease.release,
        lambda: lease.fail("x"),
        lease.complete,
        lambda: frozen.import_token(token),
        lambda: frozen.claim(PRODUCTION, worker="w2", duration=SECONDS_30),
    ]
    for op in guarded:
        with pytest.raises(leases.ClockRegressedError):
            op()
    _testing.set_clock(frozen, T0)
    lease.renew(timedelta(minutes=1))


def test_cancel_is_not_blocked_by_a_regressed_clock(frozen: leases.Authority) -> None:
    job_id = frozen.request_job(PRODUCTION)
    claim(frozen)
    _testing.set_clock(frozen, T0 - timedelta(hours=1))
    frozen.cancel(PRODUCTION, job_id)
    assert [j.state for j in frozen.jobs(PRODUCTION)] == ["cancelled"]


def test_a_forward_jump_expires_claims_at_once(frozen: leases.Authority) -> None:
    job_id = frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    _testing.set_clock(frozen, T0 + timedelta(hours=1))
    with pytest.raises(leases.ExpiredError):
        lease.complete()
    again = claim(frozen, worker="w2")
    assert again.job_id == job_id


def test_the_high_water_mark_survives_reopening(frozen: leases.Authority, db_path: str) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    token = lease.export_token()
    _testing.set_clock(frozen, T0 + timedelta(seconds=10))
    lease.renew(SECONDS_30)  # the mark is now T0 + 10 s
    frozen.close()
    with leases.Authority(db_path) as reopened:
        _testing.set_clock(reopened, T0 + timedelta(seconds=5))
        with pytest.raises(leases.ClockRegressedError):
            reopened.import_token(token)
        _testing.set_clock(reopened, T0 + timedelta(seconds=11))
        reopened.import_token(token).complete()
