"""The life of jobs and leases through the Python API: requests, claims,
renewals, the three endings, cancel, listings, and what closing an object
does (local memory only) and does not do (never release a claim)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from datetime import datetime, timedelta, timezone

import pytest

import leases

from conftest import PRODUCTION, ROOT, SECONDS_30, check_complete_and_claim_next


def job(auth: leases.Authority, job_id: str) -> leases.Job:
    (found,) = [j for j in auth.jobs(PRODUCTION) if j.id == job_id]
    return found


def test_claim_renew_complete_publishes_the_completion(auth: leases.Authority) -> None:
    job_id = auth.request_job(PRODUCTION, key="frame-1", payload=b"\x00\xffdata")
    lease = auth.claim(PRODUCTION, worker="w1", duration=SECONDS_30)
    assert lease is not None
    assert (lease.job_id, lease.production, lease.worker) == (job_id, PRODUCTION, "w1")
    first = lease.expiry
    lease.renew(timedelta(minutes=5))
    assert lease.expiry > first
    lease.complete(metadata={"frames": 1}, provenance={"tool": "render"})
    j = job(auth, job_id)
    assert (j.state, j.key, j.worker, j.attempts) == ("completed", "frame-1", "w1", 1)
    kinds = [e.kind for e in auth.events(production=PRODUCTION) if e.job_id == job_id]
    assert kinds == ["requested", "claimed", "renewed", "completed"]


def test_a_lease_reads_its_jobs_payload_exactly(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION, payload=b"\x00\xffbinary\x00")
    auth.request_job(PRODUCTION)
    lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    assert lease.payload == b"\x00\xffbinary\x00"
    empty = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert empty is not None and empty.payload == b""
    lease.release()
    with pytest.raises(leases.ClosedError):
        lease.payload


def test_claim_returns_None_when_nothing_is_claimable(auth: leases.Authority) -> None:
    assert auth.claim(PRODUCTION, worker="w", duration=SECONDS_30) is None


def test_claim_takes_jobs_in_request_order(auth: leases.Authority) -> None:
    ids = [auth.request_job(PRODUCTION) for _ in range(3)]
    got = []
    for _ in ids:
        lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
        assert lease is not None
        got.append(lease.job_id)
    assert got == ids


def test_requesting_with_the_same_key_and_payload_returns_the_same_job(
    auth: leases.Authority,
) -> None:
    a = auth.request_job(PRODUCTION, key="k", payload=b"p")
    assert auth.request_job(PRODUCTION, key="k", payload=bytearray(b"p")) == a
    with pytest.raises(leases.WrongStateError):
        auth.request_job(PRODUCTION, key="k", payload=b"other")


def test_release_makes_the_job_requested_again(auth: leases.Authority, lease: leases.Lease) -> None:
    lease.release()
    j = job(auth, lease.job_id)
    assert j.state == "requested" and j.worker is None and j.expiry is None
    again = auth.claim(PRODUCTION, worker="w2", duration=SECONDS_30)
    assert again is not None and again.job_id == lease.job_id


def test_fail_records_the_reason(auth: leases.Authority, lease: leases.Lease) -> None:
    lease.fail("disk full")
    j = job(auth, lease.job_id)
    assert (j.state, j.reason) == ("failed", "disk full")


def test_coordinator_cancel_makes_the_holders_next_operation_fail(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    auth.cancel(PRODUCTION, lease.job_id)
    assert job(auth, lease.job_id).state == "cancelled"
    with pytest.raises(leases.CancelledError):
        lease.renew(SECONDS_30)


def test_lease_expiry_is_an_aware_utc_datetime_near_now_plus_duration(
    lease: leases.Lease,
) -> None:
    expiry = lease.expiry
    assert expiry.tzinfo is timezone.utc
    now = datetime.now(timezone.utc)
    assert now + timedelta(seconds=25) < expiry <= now + SECONDS_30


def test_job_and_event_records_are_frozen_and_typed(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    j = job(auth, lease.job_id)
    assert j.state == "claimed" and j.worker == "w1" and j.attempts == 1
    assert j.claimed_at is not None and j.claimed_at.tzinfo is timezone.utc
    assert j.expiry == lease.expiry and j.reason is None
    with pytest.raises(AttributeError):
        j.state = "completed"  # type: ignore[misc]
    events = auth.events()
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert all(e.at.tzinfo is timezone.utc for e in events)
    claimed = [e for e in events if e.kind == "claimed"]
    assert claimed[-1].worker == "w1" and claimed[-1].expiry == lease.expiry
    assert auth.events(after=events[-1].seq) == []
    assert len(auth.events(production=PRODUCTION, after=events[0].seq)) == len(events) - 1


def test_events_after_must_be_an_int_not_bool(auth: leases.Authority) -> None:
    with pytest.raises(TypeError):
        auth.events(after=True)
    with pytest.raises(leases.InvalidArgumentError):
        auth.events(after=-1)


def test_leaving_a_lease_with_block_frees_it_but_keeps_the_claim(
    auth: leases.Authority, job_id: str
) -> None:
    with auth.claim_job(PRODUCTION, job_id, worker="w1", duration=SECONDS_30) as lease:
        token = lease.export_token()
    assert lease.closed
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)
    with pytest.raises(leases.ClosedError):
        lease.expiry
    assert job(auth, job_id).state == "claimed"
    auth.import_token(token).complete()  # the claim is still whole
    assert job(auth, job_id).state == "completed"


def test_garbage_collecting_a_lease_never_releases_its_claim(
    auth: leases.Authority, job_id: str
) -> None:
    lease = auth.claim_job(PRODUCTION, job_id, worker="w1", duration=SECONDS_30)
    del lease
    gc.collect()
    j = job(auth, job_id)
    assert j.state == "claimed" and j.worker == "w1"
    assert auth.claim(PRODUCTION, worker="w2", duration=SECONDS_30) is None


def test_a_closed_authority_raises_Closed_and_its_leases_report_Closed(
    db_path: str,
) -> None:
    auth = leases.Authority(db_path)
    auth.create_production(PRODUCTION)
    auth.request_job(PRODUCTION)
    lease = auth.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    auth.close()
    auth.close()  # idempotent
    with pytest.raises(leases.ClosedError):
        auth.jobs(PRODUCTION)
    with pytest.raises(leases.ClosedError):
        auth.edit()
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)
    with pytest.raises(leases.ClosedError):
        with auth:
            pass


def test_an_authority_reopens_the_same_file_with_its_jobs(db_path: str) -> None:
    with leases.Authority(db_path) as a:
        a.create_production(PRODUCTION)
        job_id = a.request_job(PRODUCTION)
    with leases.Authority(db_path) as b:
        assert [j.id for j in b.jobs(PRODUCTION)] == [job_id]


def test_paths_may_be_pathlike(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    with leases.Authority(path) as a:
        assert a.path == str(path)
    assert path.exists()


@pytest.mark.parametrize("bad", [b"nightly", 1, None])
def test_names_must_be_str(auth: leases.Authority, bad: object) -> None:
    with pytest.raises(TypeError):
        auth.create_production(bad)  # type: ignore[arg-type]


def test_payload_must_be_bytes(auth: leases.Authority) -> None:
    with pytest.raises(TypeError):
        auth.request_job(PRODUCTION, payload="text")  # type: ignore[arg-type]


def test_a_NUL_byte_in_text_raises_InvalidArgument_not_a_truncated_call(
    auth: leases.Authority,
) -> None:
    with pytest.raises(leases.InvalidArgumentError, match="NUL"):
        auth.create_production("night\0ly")
    with pytest.raises(leases.NotFoundError):
        auth.jobs("night")


def test_text_that_is_not_valid_UTF8_is_refused_by_the_library(auth: leases.Authority) -> None:
    with pytest.raises(leases.InvalidArgumentError, match="UTF-8"):
        auth.create_production("bad\udcffname")


def test_text_over_the_name_limit_raises_InvalidArgument(auth: leases.Authority) -> None:
    auth.create_production("n" * 200)
    with pytest.raises(leases.InvalidArgumentError, match="limit"):
        auth.create_production("n" * 201)


def test_non_ascii_names_round_trip(auth: leases.Authority) -> None:
    auth.create_production("nächtlich")
    auth.request_job("nächtlich")
    lease = auth.claim("nächtlich", worker="wörker", duration=SECONDS_30)
    assert lease is not None
    assert (lease.production, lease.worker) == ("nächtlich", "wörker")


def test_metadata_must_be_a_json_mapping(lease: leases.Lease) -> None:
    with pytest.raises(TypeError):
        lease.complete(metadata=["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        lease.complete(metadata={"x": object()})
    with pytest.raises(leases.InvalidArgumentError):
        lease.complete(metadata={"x": float("nan")})
    lease.complete(metadata={"x": 1})  # nothing above touched the lease


def test_library_version_is_the_release_version() -> None:
    assert leases.library_version() == (ROOT / "VERSION").read_text().strip()
    assert leases.__version__ == leases.library_version()


def test_job_state_is_a_JobState_equal_to_its_listing_spelling(auth: leases.Authority) -> None:
    auth.request_job(PRODUCTION)
    (j,) = auth.jobs(PRODUCTION)
    assert j.state == "requested" and isinstance(j.state, str)
    assert j.state is leases.JobState.REQUESTED
    assert f"{j.state}" == str(j.state) == "requested"
    assert json.dumps({"state": j.state}) == '{"state": "requested"}'


def test_a_job_state_added_later_is_kept_as_its_plain_text() -> None:
    from leases._records import Job

    j = Job.from_json({"id": "x", "production": "p", "state": "paused", "attempts": 0})
    assert j.state == "paused" and type(j.state) is str
    assert leases.JobState.parse("failed") is leases.JobState.FAILED


def test_complete_and_claim_next_completes_and_claims_in_one_commit(auth: leases.Authority) -> None:
    check_complete_and_claim_next(auth)
