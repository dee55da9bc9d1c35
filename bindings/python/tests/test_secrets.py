"""No claim secret, token or token fragment reaches the repr() or str() of any
object, record or exception of the package."""

from __future__ import annotations

import base64
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import List

import pytest

import leases

from conftest import PRODUCTION, SECONDS_30


def secret_forms(token: str) -> List[str]:
    raw = base64.urlsafe_b64decode(token[4:] + "=" * (-len(token[4:]) % 4))
    secret = raw[32:48]
    return [token, token[4:], token[-20:], secret.hex(), str(uuid.UUID(bytes=secret))]


def assert_no_secret(texts: List[str], token: str) -> None:
    forms = secret_forms(token)
    for text in texts:
        for form in forms:
            assert form not in text, f"a secret form leaked into: {text[:80]}..."


def test_no_object_record_or_exception_shows_the_secret(
    auth: leases.Authority, job_id: str, tmp_path: Path
) -> None:
    lease = auth.claim_job(PRODUCTION, job_id, worker="w1", duration=SECONDS_30)
    token = lease.export_token()
    twin = auth.import_token(token)
    edit = auth.edit()
    run = lease.execution(str(tmp_path))
    texts = [repr(x) for x in (auth, lease, twin, edit, run)]
    texts += [str(x) for x in (auth, lease, twin, edit, run)]
    texts += [repr(j) for j in auth.jobs(PRODUCTION)] + [repr(e) for e in auth.events()]
    edit.abort()
    run.abandon()

    errors: List[leases.LeasesError] = []
    mutated = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    for bad in (mutated, token + "x", token[:-1]):
        with pytest.raises(leases.BadTokenError) as e1:
            auth.import_token(bad)
        errors.append(e1.value)
    with pytest.raises(leases.NotExtendedError) as e2:
        lease.renew(timedelta(seconds=1))
    errors.append(e2.value)
    auth.cancel(PRODUCTION, job_id)
    for op in (lease.complete, twin.release, lambda: auth.import_token(token)):
        with pytest.raises(leases.LeasesError) as e3:
            op()
        errors.append(e3.value)
    texts += [repr(e) for e in errors] + [str(e) for e in errors]
    texts += [repr(lease), repr(twin)]
    lease.close()
    texts.append(repr(lease))
    assert_no_secret(texts, token)


def test_a_lease_repr_shows_production_job_worker_and_expiry(lease: leases.Lease) -> None:
    text = repr(lease)
    for part in (lease.production, lease.job_id, lease.worker, lease.expiry.isoformat()):
        assert part in text
    assert str(lease) == text


def test_exceptions_of_an_expired_or_lost_lease_show_no_secret(
    auth: leases.Authority, job_id: str
) -> None:
    # Real time: the claim must commit within its duration, on a loaded host too.
    old = auth.claim_job(PRODUCTION, job_id, worker="w1", duration=timedelta(milliseconds=500))
    token = old.export_token()
    time.sleep(0.6)
    errors: List[str] = []
    with pytest.raises(leases.ExpiredError) as e1:
        old.complete()
    errors += [repr(e1.value), str(e1.value)]
    time.sleep(1.25)  # the default policy's first backoff after the expiry (at most 1.2 s)
    auth.claim_job(PRODUCTION, job_id, worker="w2", duration=SECONDS_30)
    with pytest.raises(leases.LeaseLostError) as e2:
        old.renew(SECONDS_30)
    with pytest.raises(leases.LeaseLostError) as e3:
        auth.import_token(token)
    errors += [repr(e2.value), str(e2.value), repr(e3.value), str(e3.value)]
    assert_no_secret(errors, token)


def test_the_database_file_holds_no_secret(auth: leases.Authority, lease: leases.Lease) -> None:
    token = lease.export_token()
    lease.renew(timedelta(minutes=1))
    auth.close()
    data = b"".join(p.read_bytes() for p in Path(auth.path).parent.glob("jobs.db*"))
    raw = base64.urlsafe_b64decode(token[4:] + "=" * (-len(token[4:]) % 4))
    for form in secret_forms(token):
        assert form.encode() not in data
    assert raw[32:48] not in data


def test_the_worker_runtime_shows_no_secret_in_reprs_verdicts_or_logs(
    auth: leases.Authority, caplog: pytest.LogCaptureFixture
) -> None:
    first = auth.request_job(PRODUCTION)
    auth.request_job(PRODUCTION)
    texts: List[str] = []
    tokens: List[str] = []
    caplog.set_level("DEBUG", logger="leases")
    with leases.Canceller() as canceller:
        texts.append(repr(canceller))
        worker = auth.work(PRODUCTION, worker="w1", duration=SECONDS_30, exit_when_empty=True)
        for lease in worker:
            tokens.append(lease.export_token())
            texts += [repr(worker), repr(lease), repr(lease.keep_alive())]
            if lease.job_id == first:
                auth.cancel(PRODUCTION, first)  # the loop then logs that it ended unsettled
                verdict = lease.check()
                assert verdict is not None
                texts += [repr(verdict), str(verdict), repr(lease.lost)]
    texts += [r.getMessage() for r in caplog.records]
    assert any("ended before it was settled" in t for t in texts)
    for token in tokens:
        assert_no_secret(texts, token)


def test_retries_show_no_secret_in_records_attempts_events_or_errors(
    auth: leases.Authority, job_id: str
) -> None:
    auth.set_policy(PRODUCTION, leases.RetryPolicy(max_attempts=2, backoff_base=timedelta(0)))
    texts: List[str] = []
    tokens: List[str] = []
    for _ in range(2):
        lease = auth.claim_job(PRODUCTION, job_id, worker="w1", duration=SECONDS_30)
        tokens.append(lease.export_token())
        with pytest.raises(leases.InvalidArgumentError) as bad:
            lease.fail_retry("x", delay=timedelta(0))
        texts += [repr(bad.value), str(bad.value)]
        lease.fail_retry("crash")
        with pytest.raises(leases.ClosedError) as closed:
            lease.fail_retry()
        texts += [repr(closed.value), repr(lease)]
    record = auth.job(PRODUCTION, job_id)
    assert record.state == leases.JobState.DEAD
    texts += [repr(record), str(record)] + [repr(a) for a in record.attempt_history]
    texts += [repr(e) for e in auth.events()] + [repr(p) for p in auth.iter_productions()]
    auth.redrive(PRODUCTION, states=[leases.JobState.DEAD])
    texts += [repr(auth.job(PRODUCTION, job_id))]
    for token in tokens:
        assert_no_secret(texts, token)
