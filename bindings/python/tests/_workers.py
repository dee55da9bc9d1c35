"""Worker functions run in spawned processes (importable by name)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from typing import Optional

import leases


def complete_from_token(db_path: str, token: str) -> str:
    """Imports a token handed over by the parent and completes its job."""
    with leases.Authority(db_path) as auth:
        with auth.import_token(token) as lease:
            lease.complete(metadata={"pid": os.getpid()})
            return lease.job_id


def claim_and_export(db_path: str, production: str, worker: str) -> Optional[str]:
    """Claims a job and hands its token back to the parent."""
    with leases.Authority(db_path) as auth:
        lease = auth.claim(production, worker=worker, duration=timedelta(minutes=1))
        return None if lease is None else lease.export_token()


def open_and_complete(db_path: str, production: str, worker: str) -> str:
    """A worker that opens the authority itself (after its fork), requests a
    job, claims that job and completes it; returns the job id."""
    with leases.Authority(db_path) as auth:
        auth.create_production(production)
        job_id = auth.request_job(production, key=worker)
        with auth.claim_job(production, job_id, worker=worker, duration=timedelta(minutes=1)) as lease:
            lease.complete(metadata={"pid": os.getpid()})
        return job_id


def list_jobs_or_error(db_path: str, production: str) -> str:
    """The error class a worker meets when it uses the library (or "ok")."""
    try:
        with leases.Authority(db_path) as auth:
            auth.jobs(production)
        return "ok"
    except leases.LeasesError as e:
        return f"{type(e).__name__}: {e}"


def create_in_another_process(db_path: str, production: str) -> None:
    """Creates the database and a production from a new interpreter, so the
    caller (which must not load the library before it forks) does not, and
    workers forked next do not all create the same new file at one instant
    (docs/python.md, "Workers in other processes")."""
    code = "import sys, leases; leases.Authority(sys.argv[1]).create_production(sys.argv[2])"
    subprocess.run([sys.executable, "-c", code, db_path, production], check=True)
