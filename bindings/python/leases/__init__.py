"""leases: Python workers' projection of libleases, a job-lease authority.

    from datetime import timedelta
    import leases

    with leases.Authority("jobs.db") as auth:
        auth.create_production("nightly")
        lease = auth.claim("nightly", worker="w1", duration=timedelta(seconds=30))
        if lease is not None:
            lease.complete(metadata={"frames": 1})

Durations are datetime.timedelta only (1 µs .. 24 h, whole microseconds).
Every rejection is a LeasesError subclass, one per C status, named after it
(wrong_state -> WrongStateError); NotHeldError is the base of LeaseLostError,
ExpiredError and CancelledError.
"""

from __future__ import annotations

import warnings
from typing import Any

from . import _ffi
from ._authority import Authority, Edit
from ._durations import MAX_DURATION
from ._errors import (
    BadTokenError,
    BusyError,
    CancelledError,
    ClockRegressedError,
    ClosedError,
    ExpiredError,
    ForkedError,
    InternalError,
    InterruptedError,
    InvalidArgumentError,
    InvalidDurationError,
    LeaseLostError,
    LeasesError,
    NotExtendedError,
    NotFoundError,
    NotHeldError,
    NothingToClaimError,
    OutcomeUnknownError,
    SchemaTooNewError,
    StorageError,
    WrongStateError,
)
from ._errors import DEPRECATED_NAMES as _DEPRECATED_NAMES
from ._lease import Execution, KeepAlive, Lease
from ._records import (
    Attempt,
    AttemptEnding,
    Event,
    Facts,
    Job,
    JobCounts,
    JobRecord,
    JobState,
    Output,
    Page,
    Production,
    RetentionPolicy,
    RetryPolicy,
)
from ._waiting import Canceller
from ._worker import DrainTimeout, Worker

__version__ = "0.1.0"

ABI_VERSION = _ffi.ABI_VERSION
ABI_REVISION = _ffi.ABI_REVISION


def library_version() -> str:
    """The release version of the loaded libleases.so."""
    return str(_ffi.lib.leases_version().decode("ascii"))


def library_path() -> str:
    """Where the loaded libleases.so was found."""
    return str(_ffi.LIBRARY_PATH)


__all__ = [
    "ABI_REVISION",
    "ABI_VERSION",
    "Attempt",
    "AttemptEnding",
    "Authority",
    "BadTokenError",
    "BusyError",
    "Canceller",
    "CancelledError",
    "ClockRegressedError",
    "ClosedError",
    "DrainTimeout",
    "Edit",
    "Event",
    "Execution",
    "ExpiredError",
    "Facts",
    "ForkedError",
    "InternalError",
    "InterruptedError",
    "InvalidArgumentError",
    "InvalidDurationError",
    "Job",
    "JobCounts",
    "JobRecord",
    "JobState",
    "KeepAlive",
    "Lease",
    "LeaseLostError",
    "LeasesError",
    "MAX_DURATION",
    "NotExtendedError",
    "NotFoundError",
    "NotHeldError",
    "NothingToClaimError",
    "OutcomeUnknownError",
    "Output",
    "Page",
    "Production",
    "RetentionPolicy",
    "RetryPolicy",
    "SchemaTooNewError",
    "StorageError",
    "Worker",
    "WrongStateError",
    "library_path",
    "library_version",
]


def __getattr__(name: str) -> Any:
    """The exception names of 0.1.0 (``StateError``, ``Expired``, ...) still
    resolve, to the status-named classes, with a DeprecationWarning."""
    new = _DEPRECATED_NAMES.get(name)
    if new is None:
        raise AttributeError(f"module 'leases' has no attribute {name!r}")
    warnings.warn(
        f"leases.{name} is deprecated; use leases.{new} (the status-named class)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
