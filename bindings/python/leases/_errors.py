"""The exception classes of the leases package: one per C status code.

Messages come from the library (``leases_last_error``), which never puts a
claim secret or any part of a token into one.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class LeasesError(Exception):
    """Base class of every rejection or failure reported by libleases.

    ``status`` is the C status code (``LEASES_*``) and ``status_name`` its
    name in ``tests/vectors/statuses.json`` (``"expired"``, ...).
    """

    status: int = -1
    status_name: str = "unknown"

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is not None and status != type(self).status:
            # Only the generic base class is built for an unknown code.
            self.status = status

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, {self.message!r})"


class InvalidArgument(LeasesError, ValueError):
    """Bad input: empty, oversize or invalid text, bad JSON, unknown handle."""

    status = 1
    status_name = "invalid_argument"


class DurationError(LeasesError, ValueError):
    """A duration that is not 1 µs .. 24 h in whole microseconds."""

    status = 2
    status_name = "invalid_duration"


class NotFound(LeasesError):
    """The production or job does not exist, or belongs to another production."""

    status = 3
    status_name = "not_found"


class NothingToClaim(LeasesError):
    """No claimable job (``claim`` returns ``None`` instead of raising it)."""

    status = 4
    status_name = "nothing_to_claim"


class StateError(LeasesError):
    """The job or claim is not in a state that allows the operation."""

    status = 5
    status_name = "wrong_state"


class LeaseLost(LeasesError):
    """The job's current claim is another one."""

    status = 6
    status_name = "lease_lost"


class Expired(LeasesError):
    """The claim expired on the authority's clock."""

    status = 7
    status_name = "expired"


class Cancelled(LeasesError):
    """The coordinator cancelled the job."""

    status = 8
    status_name = "cancelled"


class NotExtended(LeasesError):
    """A renewal would not move the expiry later."""

    status = 9
    status_name = "not_extended"


class ClockRegressed(LeasesError):
    """The authority's clock is behind its durable high-water mark."""

    status = 10
    status_name = "clock_regressed"


class Closed(LeasesError):
    """The object is closed or consumed, or the lease is pending in an edit."""

    status = 11
    status_name = "closed"


class TokenError(LeasesError, ValueError):
    """A malformed, overlong, non-canonical or unsupported token."""

    status = 12
    status_name = "bad_token"


class Busy(LeasesError):
    """The writer lock was not obtained within the busy timeout."""

    status = 13
    status_name = "busy"


class StorageError(LeasesError):
    """The database could not be opened, read or written; nothing changed."""

    status = 14
    status_name = "storage"


class OutcomeUnknown(LeasesError):
    """A commit failed and may or may not have persisted."""

    status = 15
    status_name = "outcome_unknown"


class SchemaError(LeasesError):
    """The database was written by a newer library."""

    status = 16
    status_name = "schema_too_new"


class ForkedProcess(LeasesError):
    """Called in a fork()ed child of the process that loaded the library."""

    status = 17
    status_name = "forked"


class InternalError(LeasesError):
    """A bug in the library, reported instead of crashing the process."""

    status = 18
    status_name = "internal"


ERROR_CLASSES: Dict[int, Type[LeasesError]] = {
    cls.status: cls
    for cls in (
        InvalidArgument,
        DurationError,
        NotFound,
        NothingToClaim,
        StateError,
        LeaseLost,
        Expired,
        Cancelled,
        NotExtended,
        ClockRegressed,
        Closed,
        TokenError,
        Busy,
        StorageError,
        OutcomeUnknown,
        SchemaError,
        ForkedProcess,
        InternalError,
    )
}


def error_for_status(status: int, message: str, status_name: str = "unknown") -> LeasesError:
    """The exception for a failed call's status and last-error message."""
    cls = ERROR_CLASSES.get(status)
    if cls is not None:
        return cls(message)
    err = LeasesError(message, status)
    err.status_name = status_name
    return err
