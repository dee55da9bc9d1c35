"""Which rejection wins when several apply (docs/errors.md): the binding
reports the first of forked; invalid argument or duration; closed; clock
regressed; not found; cancelled; lease lost; wrong state; expired; not
extended. (Forked first: tests/test_processes.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

import leases

import _testing
from conftest import PRODUCTION, SECONDS_30, T0, claim


def test_an_invalid_duration_wins_over_a_closed_lease(lease: leases.Lease) -> None:
    lease.close()
    with pytest.raises(leases.InvalidDurationError):
        lease.renew(timedelta(0))


def test_an_invalid_argument_wins_over_a_closed_lease(lease: leases.Lease) -> None:
    lease.close()
    with pytest.raises(leases.InvalidArgumentError):
        lease.fail("bad\0reason")


@pytest.mark.testlib
def test_closed_wins_over_clock_regressed(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen)
    lease.complete()
    _testing.set_clock(frozen, T0 - timedelta(seconds=1))
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)


@pytest.mark.testlib
def test_clock_regressed_wins_over_not_found(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    claim(frozen)
    _testing.set_clock(frozen, T0 - timedelta(seconds=1))
    with pytest.raises(leases.ClockRegressedError):
        frozen.claim("no-such-production", worker="w", duration=SECONDS_30)


@pytest.mark.testlib
def test_cancelled_wins_over_lease_lost(frozen: leases.Authority) -> None:
    job_id = frozen.request_job(PRODUCTION)
    old = claim(frozen, duration=timedelta(seconds=10))
    _testing.set_clock(frozen, T0 + timedelta(seconds=20))
    claim(frozen, worker="w2")
    frozen.cancel(PRODUCTION, job_id)
    with pytest.raises(leases.CancelledError):
        old.renew(SECONDS_30)


@pytest.mark.testlib
def test_lease_lost_wins_over_wrong_state_and_expired(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    old = claim(frozen, duration=timedelta(seconds=10))
    _testing.set_clock(frozen, T0 + timedelta(seconds=20))
    claim(frozen, worker="w2").complete()  # another claim finished the job
    with pytest.raises(leases.LeaseLostError):
        old.complete()


@pytest.mark.testlib
def test_wrong_state_wins_over_expired(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen, duration=timedelta(seconds=10))
    twin = frozen.import_token(lease.export_token())
    twin.complete()  # this claim finished through another handle
    _testing.set_clock(frozen, T0 + timedelta(seconds=20))
    with pytest.raises(leases.WrongStateError):
        lease.complete()


@pytest.mark.testlib
def test_expired_wins_over_not_extended(frozen: leases.Authority) -> None:
    frozen.request_job(PRODUCTION)
    lease = claim(frozen, duration=timedelta(seconds=10))
    _testing.set_clock(frozen, T0 + timedelta(seconds=10))
    with pytest.raises(leases.ExpiredError):
        lease.renew(timedelta(microseconds=1))
