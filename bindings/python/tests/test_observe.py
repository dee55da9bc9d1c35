"""The paged observations and the open options of the C ABI (since revision
1), through the thin Authority methods that call them, on SQLite and on
PostgreSQL: pages followed to the end list every job once, event pages
follow "next" and "more", the shared facts vector reads back identically,
and the open options reach the library."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator, List

import pytest

import leases

import _pg
from conftest import PRODUCTION, SECONDS_30, load_vectors


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[leases.Authority]:
    if request.param == "sqlite":
        location = str(tmp_path / "jobs.db")
        with leases.Authority(location) as a:
            a.create_production(PRODUCTION)
            yield a
        return
    for schema in _pg.fresh_schema():
        with leases.Authority(schema.url) as a:
            a.create_production(PRODUCTION)
            yield a


def every_page_of_jobs(auth: leases.Authority, limit: int, **filters: Any) -> List[List[str]]:
    pages: List[List[str]] = []
    cursor = None
    while True:
        page = auth.jobs_page(PRODUCTION, cursor=cursor, limit=limit, **filters)
        pages.append([j["id"] for j in page["jobs"]])
        cursor = page["next"]
        if cursor is None:
            return pages


def test_jobs_pages_followed_to_the_end_list_every_job_once(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION, key=f"k{i}") for i in range(11)]
    pages = every_page_of_jobs(store, 4)
    assert [len(p) for p in pages] == [4, 4, 3]
    assert [i for p in pages for i in p] == ids
    lease = store.claim_job(PRODUCTION, ids[5], worker="w", duration=SECONDS_30)
    assert every_page_of_jobs(store, 0, states=["claimed"]) == [[ids[5]]]
    assert every_page_of_jobs(store, 0, key="k7") == [[ids[7]]]
    assert every_page_of_jobs(store, 0, job_id=ids[2], states=["requested", "claimed"]) == [[ids[2]]]
    lease.release()
    with pytest.raises(leases.InvalidArgumentError):
        store.jobs_page(PRODUCTION, states=["running"])
    with pytest.raises(leases.InvalidArgumentError):
        store.jobs_page(PRODUCTION, limit=leases._abi.MAX_PAGE_SIZE + 1)
    with pytest.raises(TypeError):
        store.jobs_page(PRODUCTION, states="claimed")  # a str is a sequence, but not of names


def test_events_pages_follow_next_and_more(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = store.claim_job(PRODUCTION, job, worker="w", duration=SECONDS_30)
    lease.complete(metadata={"frames": 1})
    kinds: List[str] = []
    after = 0
    while True:
        page = store.events_page(PRODUCTION, after=after, limit=2)
        kinds += [e["kind"] for e in page["events"]]
        after = page["next"]
        if not page["more"]:
            break
    assert kinds == ["production_created", "requested", "claimed", "completed"]
    assert store.events_page(PRODUCTION, after=after)["events"] == []
    timeline = store.events_page(job_id=job, kinds=["claimed", "completed"])
    assert [e["kind"] for e in timeline["events"]] == ["claimed", "completed"]


def test_the_shared_facts_vector_reads_back_identically(store: leases.Authority, tmp_path: Path) -> None:
    vector = load_vectors("facts.json")
    production = vector["production"]
    store.create_production(production)
    job = store.request_job(production)
    directory = tmp_path / vector["output"]["dir"]
    directory.mkdir()
    lease = store.claim_job(production, job, worker="w", duration=SECONDS_30)
    execution = lease.execution(directory)
    content = vector["output"]["content"].encode("utf-8")
    Path(execution.temp_path).write_bytes(content)
    final = execution.final_path
    execution.finish(metadata=vector["metadata"], provenance=vector["provenance"])

    record = store.job(production, job)
    assert record["state"] == "completed"
    assert record["facts"]["metadata"] == vector["metadata"]
    assert record["facts"]["provenance"] == vector["provenance"]
    [output] = record["facts"]["outputs"]
    assert output["size"] == vector["output"]["size"] == len(content)
    assert output["sha256"] == vector["output"]["sha256"] == hashlib.sha256(content).hexdigest()
    assert output["path"] == final == f"{os.path.abspath(directory)}/{job}.{output['nonce']}.out"


def test_productions_pages_and_job_counts(store: leases.Authority) -> None:
    for name in ("b", "a"):
        store.create_production(name)
    first = store.productions_page(limit=2)
    second = store.productions_page(cursor=first["next"], limit=2)
    assert [p["name"] for p in first["productions"] + second["productions"]] == ["a", "b", PRODUCTION]
    assert second["next"] is None
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    store.cancel(PRODUCTION, ids[0])
    counts = store.job_counts(PRODUCTION)
    assert (counts["requested"], counts["cancelled"], counts["claimed"]) == (2, 1, 0)
    assert counts["oldest_requested_unix_us"] == store.job(PRODUCTION, ids[1])["requested_at_unix_us"]


def test_open_options_must_exist_creates_nothing(tmp_path: Path) -> None:
    location = tmp_path / "missing.db"
    with pytest.raises(leases.NotFoundError):
        leases.Authority(location, must_exist=True)
    assert list(tmp_path.iterdir()) == []
    with leases.Authority(location, synchronous="NORMAL", busy_timeout=timedelta(milliseconds=250)) as a:
        a.create_production(PRODUCTION)
    with leases.Authority(location, must_exist=True) as a:
        assert a.jobs(PRODUCTION) == []
    with pytest.raises(ValueError):
        leases.Authority(location, synchronous="OFF")


def test_open_options_on_postgres_refuse_synchronous() -> None:
    for schema in _pg.fresh_schema():
        with pytest.raises(leases.NotFoundError):
            leases.Authority(schema.url, must_exist=True)
        with pytest.raises(leases.InvalidArgumentError, match="synchronous"):
            leases.Authority(schema.url, synchronous="FULL")
        with leases.Authority(schema.url, busy_timeout=timedelta(seconds=1)) as a:
            a.create_production(PRODUCTION)
        with leases.Authority(schema.url, must_exist=True) as a:
            assert a.jobs(PRODUCTION) == []
