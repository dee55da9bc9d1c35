"""The paged observations and the open options of the C ABI (since revision
1), through the typed Authority methods and iterators over them, on SQLite
and on PostgreSQL: pages followed to the end list every job once, event
pages follow "next" and "more", the shared facts vector reads back
identically across Python and the CLI, and the open options reach the
library."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator, List

import pytest

import leases

import _pg
from conftest import PRODUCTION, ROOT, SECONDS_30, load_vectors

CLI = ROOT / "build" / "leases"


@pytest.fixture
def store(location: str) -> Iterator[leases.Authority]:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION)
        yield a


def every_page_of_jobs(auth: leases.Authority, limit: int, **filters: Any) -> List[List[str]]:
    pages: List[List[str]] = []
    cursor = None
    while True:
        page = auth.jobs_page(PRODUCTION, cursor=cursor, limit=limit, **filters)
        assert all(isinstance(j, leases.Job) for j in page.items)
        pages.append([j.id for j in page.items])
        cursor = page.next
        if cursor is None:
            return pages


def test_jobs_pages_followed_to_the_end_list_every_job_once(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION, key=f"k{i}") for i in range(11)]
    pages = every_page_of_jobs(store, 4)
    assert [len(p) for p in pages] == [4, 4, 3]
    assert [i for p in pages for i in p] == ids
    lease = store.claim_job(PRODUCTION, ids[5], worker="w", duration=SECONDS_30)
    assert every_page_of_jobs(store, 0, states=["claimed"]) == [[ids[5]]]
    assert every_page_of_jobs(store, 0, states=[leases.JobState.CLAIMED]) == [[ids[5]]]
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
        kinds += [e.kind for e in page.items]
        after = page.next
        if not page.more:
            break
    assert kinds == ["production_created", "requested", "claimed", "completed"]
    assert store.events_page(PRODUCTION, after=after).items == []
    timeline = store.events_page(job_id=job, kinds=["claimed", "completed"])
    assert [e.kind for e in timeline.items] == ["claimed", "completed"]


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
    assert_reads_back_the_vector(record, vector, os.path.abspath(directory))
    assert record.facts.outputs[0].path == final


def assert_reads_back_the_vector(record: leases.JobRecord, vector: Any, directory: str) -> None:
    """A job record holds the vector's facts: metadata and provenance equal
    as JSON values, the output's size and SHA-256 exact, its path the
    directory, the job id and the nonce."""
    content = vector["output"]["content"].encode("utf-8")
    assert isinstance(record, leases.JobRecord) and record.state == leases.JobState.COMPLETED
    assert record.facts.metadata == vector["metadata"]
    assert record.facts.provenance == vector["provenance"]
    [output] = record.facts.outputs
    assert output.size == vector["output"]["size"] == len(content)
    assert output.sha256 == vector["output"]["sha256"] == hashlib.sha256(content).hexdigest()
    assert output.path == f"{directory}/{record.id}.{output.nonce}.out"
    assert Path(output.path).read_bytes() == content


def cli(location: str, *args: str) -> str:
    done = subprocess.run([str(CLI), "--db", location, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_facts_python_published_read_back_identically_by_the_cli(location: str, tmp_path: Path) -> None:
    vector = load_vectors("facts.json")
    with leases.Authority(location) as auth:
        auth.create_production(vector["production"])
        job = auth.request_job(vector["production"])
        directory = tmp_path / vector["output"]["dir"]
        directory.mkdir()
        lease = auth.claim_job(vector["production"], job, worker="python", duration=SECONDS_30)
        with lease.execution(directory) as run:
            Path(run.temp_path).write_bytes(vector["output"]["content"].encode("utf-8"))
            run.metadata.update(vector["metadata"])
            run.provenance.update(vector["provenance"])
        mine = auth.job(vector["production"], job)
    theirs = leases.JobRecord.from_json(json.loads(cli(location, "job", "show", "--production",
                                                       vector["production"], "--job", job, "--json")))
    assert theirs == mine
    assert_reads_back_the_vector(theirs, vector, os.path.abspath(directory))


def test_facts_the_cli_published_read_back_identically_in_python(location: str, tmp_path: Path) -> None:
    vector = load_vectors("facts.json")
    production = vector["production"]
    cli(location, "production", "create", production)
    job = cli(location, "job", "request", "--production", production).strip()
    token = tmp_path / "job.token"
    cli(location, "claim", "--production", production, "--worker", "cli", "--duration", "5m",
        "--job", job, "--token-out", str(token))
    directory = tmp_path / vector["output"]["dir"]
    directory.mkdir()
    content = tmp_path / "content"
    content.write_bytes(vector["output"]["content"].encode("utf-8"))
    facts = [f"--metadata={k}={json.dumps(v, ensure_ascii=False)}" for k, v in vector["metadata"].items()]
    facts += [f"--provenance={k}={json.dumps(v, ensure_ascii=False)}" for k, v in vector["provenance"].items()]
    cli(location, "exec", "--token-file", str(token), "--output-dir", str(directory), *facts,
        "--", "sh", "-c", 'cat "$1" > "$LEASES_OUTPUT"', "sh", str(content))
    with leases.Authority(location) as auth:
        record = auth.job(production, job)
    assert record.worker == "cli"
    assert_reads_back_the_vector(record, vector, os.path.abspath(directory))


def test_productions_pages_and_job_counts(store: leases.Authority) -> None:
    for name in ("b", "a"):
        store.create_production(name)
    first = store.productions_page(limit=2)
    second = store.productions_page(cursor=first.next, limit=2)
    assert [p.name for p in first.items + second.items] == ["a", "b", PRODUCTION]
    assert second.next is None
    assert [p.name for p in store.iter_productions(page_size=1)] == ["a", "b", PRODUCTION]
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    store.cancel(PRODUCTION, ids[0])
    counts = store.job_counts(PRODUCTION)
    assert (counts["requested"], counts[leases.JobState.CANCELLED], counts["claimed"]) == (2, 1, 0)
    assert counts.expired == 0
    assert counts.oldest_requested == store.job(PRODUCTION, ids[1]).requested_at


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
        # Not the default (10 s), and no bound a loaded host's connect could pass.
        with leases.Authority(schema.url, busy_timeout=timedelta(seconds=30)) as a:
            a.create_production(PRODUCTION)
        with leases.Authority(schema.url, must_exist=True) as a:
            assert a.jobs(PRODUCTION) == []


def test_iterators_follow_every_page_in_constant_steps(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION, key=f"k{i}") for i in range(25)]
    jobs = store.iter_jobs(PRODUCTION, page_size=7)
    assert [j.id for j in jobs] == ids
    held = store.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert held is not None
    assert [j.id for j in store.iter_jobs(PRODUCTION, states=["claimed"])] == [held.job_id]
    assert [j.key for j in store.iter_jobs(PRODUCTION, key="k3")] == ["k3"]
    kinds = [e.kind for e in store.iter_events(PRODUCTION, page_size=4)]
    assert kinds == ["production_created"] + ["requested"] * 25 + ["claimed"]
    last = store.events(PRODUCTION)[-1].seq
    assert list(store.iter_events(PRODUCTION, after=last)) == []
    assert [e.job_id for e in store.iter_events(job_id=ids[0], kinds=["claimed"])] == [ids[0]]


def test_listings_check_their_arguments_before_the_store(store: leases.Authority) -> None:
    with pytest.raises(leases.InvalidArgumentError):
        store.iter_jobs(PRODUCTION, page_size=1001)
    with pytest.raises(TypeError):
        store.iter_jobs(PRODUCTION, states="claimed")
    with pytest.raises(leases.InvalidArgumentError, match="int64_t"):
        store.iter_events(after=2**64)
    with pytest.raises(leases.InvalidArgumentError):
        store.jobs_page(PRODUCTION, limit=-1)
    with pytest.raises(leases.NotFoundError):
        store.job(PRODUCTION, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(leases.NotFoundError):
        list(store.iter_jobs("no such production"))


def test_a_job_record_is_typed_and_holds_no_secret(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION, key="k", payload=b"12345")
    lease = store.claim_job(PRODUCTION, job, worker="w", duration=SECONDS_30)
    token = lease.export_token()
    record = store.job(PRODUCTION, job)
    assert (record.id, record.key, record.state, record.worker, record.payload_size) == (job, "k", "claimed", "w", 5)
    assert record.facts == leases.Facts() and record.requested_at is not None
    assert record.claimed_at is not None and record.expiry == lease.expiry
    for text in (repr(record), str(record)):
        assert token not in text and token[4:24] not in text


def test_a_page_of_jobs_read_with_facts_carries_each_completed_jobs_facts_in_one_call(
    store: leases.Authority,
) -> None:
    jobs = [store.request_job(PRODUCTION) for _ in range(4)]
    first = store.claim_job(PRODUCTION, jobs[0], worker="w", duration=SECONDS_30)
    first.complete(metadata={"frames": 24, "tags": ["hd", True, None]}, provenance={"tool": {"name": "render"}})
    store.claim_job(PRODUCTION, jobs[1], worker="w", duration=SECONDS_30).complete()
    held = store.claim_job(PRODUCTION, jobs[2], worker="w", duration=SECONDS_30)
    page = store.jobs_page(PRODUCTION, facts=True)
    assert [j.id for j in page.items] == [j.id for j in store.jobs_page(PRODUCTION).items]
    assert set(page.facts) == {jobs[0], jobs[1]}, "an entry for each completed job, none for the others"
    for job in jobs[:2]:
        assert page.facts[job] == store.job(PRODUCTION, job).facts
    assert page.facts[jobs[0]].metadata["tags"] == ["hd", True, None]
    assert store.jobs_page(PRODUCTION).facts == {}, "without facts=True, none"
    one = store.jobs_page(PRODUCTION, facts=True, limit=1)
    assert set(one.facts) == {jobs[0]}
    held.release()


def test_page_arguments_are_range_checked_before_the_c_call(store: leases.Authority) -> None:
    # ctypes would pass limit 2**32 as 0 (the default page) and after 2**64
    # as 0 (every event): both must be refused, not wrapped.
    for limit in (-1, 2**32, leases._abi.MAX_PAGE_SIZE + 1):
        with pytest.raises(leases.InvalidArgumentError, match="page limit"):
            store.jobs_page(PRODUCTION, limit=limit)
        with pytest.raises(leases.InvalidArgumentError, match="page limit"):
            store.events_page(PRODUCTION, limit=limit)
        with pytest.raises(leases.InvalidArgumentError, match="page limit"):
            store.productions_page(limit=limit)
    for after in (-1, 2**63, 2**64):
        with pytest.raises(leases.InvalidArgumentError, match="int64_t"):
            store.events_page(PRODUCTION, after=after)
    with pytest.raises(TypeError):
        store.jobs_page(PRODUCTION, limit=True)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_CURSOR_LEN"):
        store.jobs_page(PRODUCTION, cursor="c" * (leases._abi.MAX_CURSOR_LEN + 1))
    with pytest.raises(TypeError):
        store.jobs_page(PRODUCTION, states=["claimed", 3])  # type: ignore[list-item]
