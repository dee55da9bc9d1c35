"""leases: Python workers' projection of libleases, a job-lease authority.

    from datetime import timedelta
    import leases

    with leases.Authority("jobs.db") as auth:
        auth.create_production("nightly")
        lease = auth.claim("nightly", worker="w1", duration=timedelta(seconds=30))
        if lease is not None:
            lease.complete(metadata={"frames": 1})

Durations are datetime.timedelta only (1 µs .. 24 h, whole microseconds).
Every rejection is a LeasesError subclass, one per C status.
"""

from __future__ import annotations

from . import _ffi
from ._authority import Authority, Edit
from ._durations import MAX_DURATION
from ._errors import (
    Busy,
    Cancelled,
    ClockRegressed,
    Closed,
    DurationError,
    Expired,
    ForkedProcess,
    InternalError,
    InvalidArgument,
    LeaseLost,
    LeasesError,
    NotExtended,
    NotFound,
    NothingToClaim,
    OutcomeUnknown,
    SchemaError,
    StateError,
    StorageError,
    TokenError,
)
from ._lease import Execution, Lease
from ._records import Event, Job

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
    "MAX_DURATION",
    "Authority",
    "Busy",
    "Cancelled",
    "ClockRegressed",
    "Closed",
    "DurationError",
    "Edit",
    "Event",
    "Execution",
    "Expired",
    "ForkedProcess",
    "InternalError",
    "InvalidArgument",
    "Job",
    "Lease",
    "LeaseLost",
    "LeasesError",
    "NotExtended",
    "NotFound",
    "NothingToClaim",
    "OutcomeUnknown",
    "SchemaError",
    "StateError",
    "StorageError",
    "TokenError",
    "library_path",
    "library_version",
]
