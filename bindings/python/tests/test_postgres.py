"""A postgres:// or postgresql:// location selects the PostgreSQL store
(several hosts): the whole API works on it, a token crosses between two handles,
the clock seam replaces the server's clock (test library), and neither an
open failure nor a repr shows the URL's password. Each test runs in a fresh
schema of $LEASES_TEST_PG_URL; without a server they skip, or fail under
LEASES_REQUIRE_PG."""

from __future__ import annotations

import json
import urllib.parse
from datetime import timedelta
from typing import Any, Iterator, List

import pytest

import leases

import _pg
import _testing
from conftest import PRODUCTION, SECONDS_30, T0, check_complete_and_claim_next, claim, load_vectors

PASSWORD = "SECRETPW"


@pytest.fixture
def schema() -> Iterator[_pg.Schema]:
    yield from _pg.fresh_schema()


@pytest.fixture
def pg(schema: _pg.Schema) -> Iterator[leases.Authority]:
    with leases.Authority(schema.url) as a:
        a.create_production(PRODUCTION)
        yield a


def settled_events(auth: leases.Authority, job_id: str) -> List[leases.Event]:
    """The production's events right after the job completed. Each test has
    a schema of its own and no other writer of it runs, so the process reads
    its own committed events at once (docs/postgres.md)."""
    events = auth.events(production=PRODUCTION)
    assert any(e.job_id == job_id and e.kind == "completed" for e in events)
    return events


def with_password(url: str, password: str) -> str:
    parts = urllib.parse.urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def test_a_postgres_url_opens_the_postgresql_store_for_the_whole_lifecycle(
    pg: leases.Authority, schema: _pg.Schema
) -> None:
    first = pg.request_job(PRODUCTION, key="frame-1", payload=b"\x00\xffone")
    second = pg.request_job(PRODUCTION, key="frame-2")
    assert pg.request_job(PRODUCTION, key="frame-1", payload=b"\x00\xffone") == first
    lease = pg.claim(PRODUCTION, worker="w1", duration=timedelta(seconds=30))
    assert lease is not None and lease.job_id == first
    assert lease.payload == b"\x00\xffone"
    before = lease.expiry
    lease.renew(timedelta(minutes=5))
    assert lease.expiry > before
    lease.complete(metadata={"frames": 1}, provenance={"tool": "render"})

    jobs = {j.id: j for j in pg.jobs(PRODUCTION)}
    assert [j.id for j in pg.jobs(PRODUCTION)] == [first, second]
    assert (jobs[first].state, jobs[first].worker, jobs[first].attempts) == ("completed", "w1", 1)
    assert jobs[second].state == "requested"
    events = settled_events(pg, first)
    kinds = [e.kind for e in events if e.job_id == first]
    assert kinds == ["requested", "claimed", "renewed", "completed"]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)
    assert [e.seq for e in pg.events(production=PRODUCTION, after=seqs[-2])] == [seqs[-1]]

    # The rows are in the PostgreSQL schema: the URL was not taken for a file name.
    assert schema.query("SELECT count(*) FROM leases_jobs") == "2"
    facts = schema.query(
        f"SELECT kind || '=' || key || '=' || value_json FROM leases_facts "
        f"WHERE job_id = '{first}' ORDER BY kind"
    ).splitlines()
    assert [(f.split("=", 2)[0], f.split("=", 2)[1], json.loads(f.split("=", 2)[2])) for f in facts] == [
        ("metadata", "frames", 1),
        ("provenance", "tool", "render"),
    ]


def test_the_postgresql_scheme_selects_postgresql_too(schema: _pg.Schema) -> None:
    url = "postgresql://" + schema.url.split("://", 1)[1]
    with leases.Authority(url) as a:
        a.create_production(PRODUCTION)
    assert schema.query("SELECT count(*) FROM leases_productions") == "1"


def test_a_token_exported_on_one_handle_is_imported_through_a_second_handle(
    pg: leases.Authority, schema: _pg.Schema
) -> None:
    job_id = pg.request_job(PRODUCTION)
    lease = claim(pg, duration=timedelta(minutes=1))
    token = lease.export_token()
    with leases.Authority(schema.url) as other:
        again = other.import_token(token)
        assert (again.job_id, again.worker, again.expiry) == (job_id, "w1", lease.expiry)
        again.renew(timedelta(minutes=2))
        again.complete(metadata={"by": "second handle"})
    (job,) = pg.jobs(PRODUCTION)
    assert job.state == "completed"
    with pytest.raises(leases.WrongStateError):  # the claim is finished, for every copy
        lease.renew(timedelta(minutes=3))


def test_a_cancel_through_one_handle_is_seen_by_the_holder_on_another(
    pg: leases.Authority, schema: _pg.Schema
) -> None:
    job_id = pg.request_job(PRODUCTION)
    with leases.Authority(schema.url) as worker_side:
        lease = worker_side.claim(PRODUCTION, worker="w1", duration=SECONDS_30)
        assert lease is not None
        pg.cancel(PRODUCTION, job_id)
        with pytest.raises(leases.CancelledError):
            lease.complete()


def test_an_edit_on_postgresql_publishes_only_at_commit(pg: leases.Authority) -> None:
    pg.request_job(PRODUCTION)
    with pg.edit() as edit:
        pending = edit.claim(PRODUCTION, worker="w1", duration=timedelta(seconds=5))
        assert pending is not None
        edit.complete(pending, metadata={"inline": True})
    assert [j.state for j in pg.jobs(PRODUCTION)] == ["completed"]


@pytest.mark.testlib
def test_on_postgresql_the_seam_clock_replaces_the_servers_and_a_clock_behind_the_mark_regresses(
    pg: leases.Authority,
) -> None:
    _testing.set_clock(pg, T0)
    pg.request_job(PRODUCTION)
    pg.request_job(PRODUCTION)
    lease = claim(pg, duration=timedelta(seconds=30, microseconds=1))
    assert lease.expiry == T0 + timedelta(seconds=30, microseconds=1)
    _testing.set_clock(pg, T0 + timedelta(seconds=10))
    lease.renew(SECONDS_30)
    assert lease.expiry == T0 + timedelta(seconds=40)

    _testing.set_clock(pg, T0 + timedelta(seconds=5))  # behind the mark (T0 + 10 s)
    with pytest.raises(leases.ClockRegressedError):
        lease.renew(timedelta(minutes=1))
    with pytest.raises(leases.ClockRegressedError):
        pg.claim(PRODUCTION, worker="w2", duration=SECONDS_30)
    assert lease.expiry == T0 + timedelta(seconds=40), "a rejection changes nothing"

    _testing.set_clock(pg, T0 + timedelta(seconds=10))  # caught up
    lease.complete()
    assert [j.state for j in pg.jobs(PRODUCTION)] == ["completed", "requested"]


def test_a_failed_postgresql_open_is_a_storage_error_without_the_password() -> None:
    with pytest.raises(leases.StorageError) as caught:
        leases.Authority(f"postgres://u:{PASSWORD}@127.0.0.1:1/x")
    text = str(caught.value) + repr(caught.value)
    assert PASSWORD not in text
    assert "127.0.0.1:1" in text  # the message still names the server


def test_the_repr_of_a_postgresql_authority_hides_the_password(schema: _pg.Schema) -> None:
    # The test server trusts the local user, so any password opens it.
    with leases.Authority(with_password(schema.url, PASSWORD)) as a:
        a.create_production(PRODUCTION)
        a.request_job(PRODUCTION)
        edit = a.edit()
        texts = [repr(a), str(a), repr(edit)]
        edit.abort()
    for text in texts:
        assert PASSWORD not in text and "xxxxx" in text


REDACTION = load_vectors("redaction.json")


@pytest.mark.parametrize("case", REDACTION["cases"], ids=lambda c: c["why"])
def test_redact_shows_a_location_as_the_library_does(case: Any) -> None:
    # tests/vectors/redaction.json: core/store/pgstore's Redact is the rule.
    from leases._authority import redact

    assert redact(case["url"]) == case["redacted"]
    assert REDACTION["secret"] not in redact(case["url"])


def test_redact_leaves_a_sqlite_path_unchanged() -> None:
    from leases._authority import redact

    assert redact("jobs.db") == "jobs.db"
    assert redact("/tmp/my jobs.db") == "/tmp/my jobs.db"


def test_complete_and_claim_next_completes_and_claims_in_one_commit_on_postgres(pg: leases.Authority) -> None:
    check_complete_and_claim_next(pg)
