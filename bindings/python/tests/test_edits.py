"""Edits are one write transaction: `with` commits on success and aborts on an
exception; leases claimed inside stay pending until the commit; a consumed
edit raises ClosedError."""

from __future__ import annotations

from datetime import timedelta
from typing import List

import pytest

import leases

from conftest import PRODUCTION, SECONDS_30


def states(auth: leases.Authority) -> List[str]:
    return [j.state for j in auth.jobs(PRODUCTION)]


def test_claim_and_complete_in_one_edit_commit_together(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION)
    with auth.edit() as edit:
        pending = edit.claim(PRODUCTION, worker="w1", duration=timedelta(seconds=5))
        assert pending is not None
        edit.complete(pending, metadata={"inline": True})
    assert states(auth) == ["completed"]
    kinds = [e.kind for e in auth.events(production=PRODUCTION)]
    assert kinds[-2:] == ["claimed", "completed"]


def test_an_exception_inside_the_block_aborts_the_edit_and_closes_its_leases(
    auth: leases.Authority,
) -> None:
    auth.request_job(PRODUCTION)
    with pytest.raises(RuntimeError, match="boom"):
        with auth.edit() as edit:
            pending = edit.claim(PRODUCTION, worker="w1", duration=SECONDS_30)
            raise RuntimeError("boom")
    assert states(auth) == ["requested"]
    assert pending is not None
    with pytest.raises(leases.ClosedError):
        pending.renew(SECONDS_30)
    assert edit.closed


def test_a_lease_claimed_in_an_edit_is_pending_until_the_commit(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION)
    edit = auth.edit()
    pending = edit.claim(PRODUCTION, worker="w1", duration=SECONDS_30)
    assert pending is not None
    with pytest.raises(leases.ClosedError, match="pending"):
        pending.renew(timedelta(minutes=1))
    edit.commit()
    pending.renew(timedelta(minutes=1))  # active now
    assert states(auth) == ["claimed"]


def test_edit_claim_returns_None_when_nothing_is_claimable(auth: leases.Authority) -> None:
    with auth.edit() as edit:
        assert edit.claim(PRODUCTION, worker="w", duration=SECONDS_30) is None


def test_a_committed_or_aborted_edit_raises_Closed(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION)
    committed = auth.edit()
    committed.commit()
    aborted = auth.edit()
    aborted.abort()
    aborted.abort()  # idempotent
    for edit in (committed, aborted):
        with pytest.raises(leases.ClosedError):
            edit.claim(PRODUCTION, worker="w", duration=SECONDS_30)
        with pytest.raises(leases.ClosedError):
            edit.commit()
    assert states(auth) == ["requested"]


def test_an_edit_can_complete_an_already_active_lease(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    with auth.edit() as edit:
        edit.complete(lease, provenance={"tool": "render"})
        assert states(auth) == ["claimed"]  # not published before the commit
    assert states(auth) == ["completed"]


def test_completing_the_same_lease_twice_in_one_edit_raises_StateError(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    with auth.edit() as edit:
        edit.complete(lease)
        with pytest.raises(leases.WrongStateError):
            edit.complete(lease)
    assert states(auth) == ["completed"]


def test_a_rejection_inside_an_edit_leaves_it_usable(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION)
    with auth.edit() as edit:
        with pytest.raises(leases.NotFoundError):
            edit.claim("elsewhere", worker="w", duration=SECONDS_30)
        assert edit.claim(PRODUCTION, worker="w", duration=SECONDS_30) is not None
    assert states(auth) == ["claimed"]


def test_garbage_collecting_an_open_edit_aborts_it(auth: leases.Authority) -> None:
    import gc

    auth.request_job(PRODUCTION)
    edit = auth.edit()
    edit.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    del edit
    gc.collect()
    assert states(auth) == ["requested"]
    # the writer lock is free again
    assert auth.claim(PRODUCTION, worker="w", duration=SECONDS_30) is not None


def test_edit_complete_needs_a_Lease(auth: leases.Authority) -> None:
    with auth.edit() as edit:
        with pytest.raises(TypeError):
            edit.complete("not a lease")  # type: ignore[arg-type]
