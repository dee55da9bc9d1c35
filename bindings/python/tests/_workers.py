"""Worker functions run in spawned processes (importable by name)."""

from __future__ import annotations

import os
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
