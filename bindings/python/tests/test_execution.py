"""The reference executor: `with lease.execution(...)` finishes on success
(publishing the output and completing the lease) and abandons on an
exception (removing only its own files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import leases

from conftest import PRODUCTION, SECONDS_30


def state(auth: leases.Authority, job_id: str) -> str:
    return [j.state for j in auth.jobs(PRODUCTION) if j.id == job_id][0]


def test_a_successful_block_finishes_the_execution_and_completes_the_lease(
    auth: leases.Authority, lease: leases.Lease, tmp_path: Path
) -> None:
    with lease.execution(output_dir=tmp_path) as run:
        assert lease.job_id in run.temp_path and lease.job_id in run.final_path
        assert os.path.dirname(run.temp_path) == str(tmp_path)
        Path(run.temp_path).write_bytes(b"frame")
        run.metadata["frames"] = 1
        run.provenance["tool"] = "render"
    assert run.closed
    assert Path(run.final_path).read_bytes() == b"frame"
    assert not Path(run.temp_path).exists()
    assert state(auth, lease.job_id) == "completed"
    with pytest.raises(leases.ClosedError):
        lease.renew(SECONDS_30)


def test_an_exception_abandons_the_execution_removing_its_files_only(
    auth: leases.Authority, lease: leases.Lease, tmp_path: Path
) -> None:
    neighbour = tmp_path / "other-worker.out"
    neighbour.write_bytes(b"theirs")
    with pytest.raises(RuntimeError):
        with lease.execution(output_dir=str(tmp_path)) as run:
            Path(run.temp_path).write_bytes(b"partial")
            raise RuntimeError("render crashed")
    assert not Path(run.temp_path).exists() and not Path(run.final_path).exists()
    assert neighbour.read_bytes() == b"theirs"
    assert state(auth, lease.job_id) == "claimed"
    lease.release()  # the lease itself stayed active


def test_two_executions_of_one_job_never_share_a_file(
    lease: leases.Lease, tmp_path: Path
) -> None:
    a = lease.execution(tmp_path)
    b = lease.execution(tmp_path)
    assert len({a.temp_path, a.final_path, b.temp_path, b.final_path}) == 4
    a.abandon()
    b.abandon()


def test_explicit_finish_with_facts_then_the_block_does_nothing_more(
    auth: leases.Authority, lease: leases.Lease, tmp_path: Path
) -> None:
    with lease.execution(tmp_path) as run:
        Path(run.temp_path).write_bytes(b"x")
        run.finish(metadata={"explicit": True})
        with pytest.raises(leases.ClosedError):
            run.finish()
    assert state(auth, lease.job_id) == "completed"


def test_refused_facts_leave_the_execution_usable(
    auth: leases.Authority, lease: leases.Lease, tmp_path: Path
) -> None:
    run = lease.execution(tmp_path)
    Path(run.temp_path).write_bytes(b"x")
    with pytest.raises(leases.InvalidArgumentError):
        run.finish(metadata={"k" * 300: 1})  # fact key over the name limit
    assert not run.closed
    run.finish(metadata={"k": 1})
    assert state(auth, lease.job_id) == "completed"


def test_a_rejected_completion_removes_its_files_and_consumes_the_execution(
    auth: leases.Authority, lease: leases.Lease, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = lease.execution(out)
    Path(run.temp_path).write_bytes(b"x")
    auth.cancel(PRODUCTION, lease.job_id)
    with pytest.raises(leases.CancelledError):
        run.finish()
    assert run.closed
    assert list(out.iterdir()) == []


def test_an_execution_needs_an_active_lease(lease: leases.Lease, tmp_path: Path) -> None:
    lease.close()
    with pytest.raises(leases.ClosedError):
        lease.execution(tmp_path)
