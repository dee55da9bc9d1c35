"""Retention and pruning through the Python surface, on SQLite and on
PostgreSQL: the policy set and shown, pruning by an age with an archive and
as a dry run, and bad input refused before anything is written."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

import leases
from leases import RetentionPolicy

from conftest import PRODUCTION, SECONDS_30


def test_the_retention_policy_is_set_and_shown(location: str) -> None:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION)
        assert a.retention(PRODUCTION) == RetentionPolicy()
        kept = RetentionPolicy(completed=None, failed=timedelta(hours=36), events=timedelta(days=3))
        a.set_retention(PRODUCTION, kept)
        assert a.retention(PRODUCTION) == kept
        assert a.productions_page().items[0].retention == kept
        a.set_retention(PRODUCTION, None)
        assert a.retention(PRODUCTION) == RetentionPolicy()
        with pytest.raises(leases.NotFoundError):
            a.retention("nope")
        with pytest.raises(leases.InvalidArgumentError):
            RetentionPolicy(completed=timedelta(0))
        with pytest.raises(leases.InvalidArgumentError):
            a.prune(older_than=timedelta(days=36501))


def test_a_prune_deletes_only_finished_jobs_past_the_age_with_its_archive(location: str, tmp_path: Path) -> None:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION)
        done = a.request_job(PRODUCTION, "a")
        a.request_job(PRODUCTION, "b")
        lease = a.claim(PRODUCTION, worker="w", duration=SECONDS_30)
        assert lease is not None and lease.job_id == done
        lease.complete()
        waiting = a.request_job(PRODUCTION, "c")
        would_jobs, would_events = a.prune(PRODUCTION, older_than=timedelta(microseconds=1), dry_run=True)
        assert would_jobs == 1 and would_events > 0
        assert a.job(PRODUCTION, done).state == leases.JobState.COMPLETED, "a dry run deletes nothing"
        archive = tmp_path / "archive.jsonl"
        jobs, events = a.prune(PRODUCTION, older_than=timedelta(microseconds=1), archive=archive)
        assert jobs == 1 and events >= 3
        with pytest.raises(leases.NotFoundError):
            a.job(PRODUCTION, done)
        assert a.job(PRODUCTION, waiting).state == leases.JobState.REQUESTED
        lines = [json.loads(x) for x in archive.read_text().splitlines()]
        assert [x["type"] for x in lines][-2:] == ["batch", "deleted"]
        assert any(x["type"] == "job" and x["job"]["id"] == done for x in lines)
        # The key of the pruned job names a new job.
        assert a.request_job(PRODUCTION, "a") != done
