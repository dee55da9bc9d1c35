"""Shared fixtures: an authority on a fresh database, the shared vectors, and
the test seam (tests marked `testlib` need build/test/libleases.so)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, List

import pytest

import leases

import _pg
import _testing

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tests" / "vectors"
PRODUCTION = "nightly"
SECONDS_30 = timedelta(seconds=30)
T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)


def load_vectors(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    wanted = [i for i in items if i.get_closest_marker("testlib")]
    if wanted and not _testing.has_seam():
        raise pytest.UsageError(
            f"{len(wanted)} selected tests need the test library (LEASES_LIBRARY="
            f"build/test/libleases.so), but {leases.library_path()} has no test seam; "
            "deselect them with -m 'not testlib' for the release library"
        )
    if _testing.has_seam():
        _testing.declare()


def claim(
    auth: leases.Authority, worker: str = "w1", duration: timedelta = SECONDS_30
) -> leases.Lease:
    """Claims the next job of PRODUCTION, which must have one."""
    lease = auth.claim(PRODUCTION, worker=worker, duration=duration)
    assert lease is not None
    return lease


def check_complete_and_claim_next(auth: leases.Authority) -> None:
    """Lease.complete_and_claim_next on either store: the completion and the
    next claim in one call, None when nothing is left, nothing claimed when
    the completion is refused."""
    first = auth.request_job(PRODUCTION)
    second = auth.request_job(PRODUCTION)
    lease = claim(auth, worker="w7")
    assert lease.job_id == first
    with pytest.raises(leases.InvalidDurationError):
        lease.complete_and_claim_next(duration=timedelta(0))
    with pytest.raises(TypeError):
        lease.complete_and_claim_next(metadata=[1], duration=SECONDS_30)  # type: ignore[arg-type]
    nxt = lease.complete_and_claim_next(metadata={"frames": 3}, duration=SECONDS_30)
    assert nxt is not None
    assert nxt.job_id == second and nxt.worker == "w7" and nxt.production == PRODUCTION
    assert auth.job(PRODUCTION, first).state == "completed"
    assert auth.job(PRODUCTION, second).state == "claimed"
    with nxt.keep_alive():  # the duration it was claimed for is the default
        pass
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)
    third = auth.request_job(PRODUCTION)
    auth.cancel(PRODUCTION, second)
    with pytest.raises(leases.CancelledError):
        nxt.complete_and_claim_next(duration=SECONDS_30)
    assert auth.job(PRODUCTION, third).state == "requested"
    last = claim(auth)
    assert last.job_id == third
    assert last.complete_and_claim_next(duration=SECONDS_30) is None
    assert auth.job(PRODUCTION, third).state == "completed"


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each store in turn: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "jobs.db")
    else:
        for schema in _pg.fresh_schema():
            yield schema.url


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jobs.db")


@pytest.fixture
def auth(db_path: str) -> Iterator[leases.Authority]:
    with leases.Authority(db_path) as a:
        a.create_production(PRODUCTION)
        yield a


@pytest.fixture
def job_id(auth: leases.Authority) -> str:
    return auth.request_job(PRODUCTION, key="frame-1", payload=b"payload")


@pytest.fixture
def lease(auth: leases.Authority, job_id: str) -> leases.Lease:
    return auth.claim_job(PRODUCTION, job_id, worker="w1", duration=SECONDS_30)


@pytest.fixture
def frozen(auth: leases.Authority) -> Iterator[leases.Authority]:
    """The authority with its clock frozen at T0 (test library only)."""
    _testing.set_clock(auth, T0)
    yield auth
