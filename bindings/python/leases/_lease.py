"""Leases (owning handles of one claim) and executions of the reference
executor. A lease's secret stays inside the library: it reaches Python only
as an exported token, on request."""

from __future__ import annotations

import ctypes
import json
import os
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from . import _ffi
from ._abi import MAX_DELAY_US, MAX_FACTS_LEN
from ._durations import datetime_from_unix_us, duration_us, us_within, wait_us
from ._errors import InvalidArgumentError, LeasesError, error_for_status
from ._managed import Closing, Managed
from ._waiting import Canceller, canceller_handle, in_slices

if TYPE_CHECKING:
    from ._authority import Authority

JSONMapping = Mapping[str, Any]


def facts_json(
    metadata: Optional[JSONMapping], provenance: Optional[JSONMapping]
) -> Optional[bytes]:
    """The facts_json of the C API, {"metadata": {...}, "provenance": {...}},
    or None for no facts."""
    facts: Dict[str, Dict[str, Any]] = {}
    for name, value in (("metadata", metadata), ("provenance", provenance)):
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise TypeError(f"{name} must be a mapping, not {type(value).__name__}")
        facts[name] = dict(value)
    if not facts:
        return None
    # Encoded piece by piece, stopping past the limit: huge facts are refused
    # before the whole document is built and copied.
    chunks = []
    size = 0
    try:
        for chunk in json.JSONEncoder(ensure_ascii=False, allow_nan=False).iterencode(facts):
            size += len(chunk)
            if size > MAX_FACTS_LEN:
                break
            chunks.append(chunk)
    except ValueError as e:  # NaN/Infinity, circular references: not JSON
        raise InvalidArgumentError(f"metadata/provenance is not JSON: {e}") from e
    if size > MAX_FACTS_LEN:
        raise InvalidArgumentError(
            _ffi.too_long("facts", size, "characters or more", MAX_FACTS_LEN, "LEASES_MAX_FACTS_LEN")
        )
    return _ffi.encode("".join(chunks), "facts")


class Lease(Managed):
    """The owning handle of one claim: production, job, worker and expiry.

    Closing it (or leaving ``with``, or garbage collection) frees local memory
    only: it never releases, renews or writes. An unreleased claim lasts until
    its expiry or a coordinator cancel.
    """

    _what = "lease"

    def __init__(self, ptr: Any, authority: "Authority", duration_us: Optional[int] = None) -> None:
        # Built by Authority/Edit only; takes ownership of ptr. duration_us:
        # what it was claimed for (keep_alive's default), None when imported.
        self._ptr = ptr
        self._authority = authority  # keeps the authority open while in use
        self._duration_us = duration_us
        self.job_id: str = self._local_string(_ffi.lib.leases_lease_job_id)
        self.production: str = self._local_string(_ffi.lib.leases_lease_production)
        self.worker: str = self._local_string(_ffi.lib.leases_lease_worker)

    def _local_string(self, fn: Any) -> str:
        out = ctypes.c_void_p()
        _ffi.call(fn, self._ptr, ctypes.byref(out))
        return _ffi.take_string(out)

    def _release(self, ptr: Any) -> None:
        _ffi.lib.leases_lease_free(ptr)

    @property
    def expiry(self) -> datetime:
        """The expiry last confirmed by the authority (aware, UTC)."""
        out = ctypes.c_int64()
        _ffi.call(_ffi.lib.leases_lease_expiry, self._handle(), ctypes.byref(out))
        return datetime_from_unix_us(out.value)

    @property
    def payload(self) -> bytes:
        """The claimed job's payload bytes, the worker's input. Reads the
        store; works while the lease is active or pending in an edit."""
        out = ctypes.c_void_p()
        length = ctypes.c_size_t()
        _ffi.call(_ffi.lib.leases_lease_payload, self._handle(), ctypes.byref(out), ctypes.byref(length))
        return _ffi.take_bytes(out, length.value)

    def renew(self, duration: timedelta) -> None:
        """Sets the expiry to now + duration; it must extend the current one
        and commit before it."""
        _ffi.ensure_not_forked()
        us = duration_us(duration)
        _ffi.call(_ffi.lib.leases_lease_renew, self._handle(), us)

    def release(self) -> None:
        """Gives the job back (requested again); closes the claim."""
        _ffi.call(_ffi.lib.leases_lease_release, self._handle())

    def fail(self, reason: str) -> None:
        """Marks the job failed with a reason, terminally (``FAILED``,
        whatever attempts are left: a retry needs a coordinator's
        ``retry_job``); closes the claim. ``fail_retry`` is the retryable
        failure."""
        _ffi.ensure_not_forked()
        text = _ffi.encode(reason, "reason")
        _ffi.call(_ffi.lib.leases_lease_fail, self._handle(), text)

    def fail_retry(self, reason: Optional[str] = None, *, delay: Optional[timedelta] = None) -> None:
        """A retryable failure: this attempt ends and the job is requested
        again after ``delay`` (1 µs .. 366 days on the authority's clock;
        None: the production policy's backoff for this attempt), or is
        ``DEAD`` if this was its last attempt (``max_attempts``). The
        reason (optional) is kept in the attempt history and a ``retry``
        event. The claim must be unexpired; closes the claim."""
        _ffi.ensure_not_forked()
        text = _ffi.encode_optional(reason, "reason")
        # The library reads 0 as "the policy's backoff", so a zero delay
        # is refused rather than silently turned into a backoff.
        us = 0 if delay is None else us_within(delay, "delay", 1, MAX_DELAY_US)
        _ffi.call(_ffi.lib.leases_lease_fail_retry, self._handle(), text, us)

    def complete(
        self,
        metadata: Optional[JSONMapping] = None,
        provenance: Optional[JSONMapping] = None,
    ) -> None:
        """Completes the job publishing metadata and provenance (JSON values),
        all in one commit; closes the claim."""
        _ffi.ensure_not_forked()
        facts = facts_json(metadata, provenance)
        _ffi.call(_ffi.lib.leases_lease_complete, self._handle(), facts)

    def complete_and_claim_next(
        self,
        metadata: Optional[JSONMapping] = None,
        provenance: Optional[JSONMapping] = None,
        *,
        duration: timedelta,
    ) -> Optional["Lease"]:
        """Completes the job as complete() does and claims the production's
        next claimable job for the same worker for duration, in one commit.
        Returns the new lease, or None when nothing was claimable (the
        completion committed all the same). A refused completion raises its
        error and claims nothing; this lease is closed once it succeeds."""
        _ffi.ensure_not_forked()
        facts = facts_json(metadata, provenance)
        us = duration_us(duration)
        out = _ffi.LeasePtr()
        _ffi.call(_ffi.lib.leases_lease_complete_and_claim_next, self._handle(), facts, us, ctypes.byref(out))
        if not out:
            return None
        return Lease(out, self._authority, us)

    def export_token(self) -> str:
        """The token of this active lease for another process. It is a
        credential: keep it out of logs, argument lists and reprs."""
        out = ctypes.c_void_p()
        _ffi.call(_ffi.lib.leases_lease_export, self._handle(), ctypes.byref(out))
        return _ffi.take_string(out)

    def keep_alive(
        self, duration: Optional[timedelta] = None, *, interval: Optional[timedelta] = None
    ) -> "KeepAlive":
        """Keeps the claim alive in the background: the library renews it
        by the rules of ``renew(duration)`` every ``interval`` (default: a
        third of the duration), retrying busy and unknown outcomes while the
        claim may hold. ``duration`` defaults to the one it was claimed for
        (required for an imported lease). It stops when the lease is
        completed, released, failed or closed, at ``stop_keep_alive()``, and
        when a renewal is rejected: then ``lost`` says why (a coordinator's
        cancel arrives within one interval). Returns a context manager that
        stops it on exit; calling it again replaces the running renewer."""
        _ffi.ensure_not_forked()
        if duration is None:
            if self._duration_us is None:
                raise TypeError(
                    "keep_alive() needs a duration for a lease that was not claimed through "
                    "this package (an imported token)"
                )
            us = self._duration_us
        else:
            us = duration_us(duration)
        every = 0 if interval is None else duration_us(interval, "interval")
        _ffi.call(_ffi.lib.leases_lease_keep_alive, self._handle(), us, every)
        return KeepAlive(self)

    def stop_keep_alive(self) -> None:
        """Stops the keep-alive, if one runs; returns once no renewal can be
        written any more. The claim stays as it is."""
        _ffi.call(_ffi.lib.leases_lease_keep_alive_stop, self._handle())

    def check(self) -> Optional[LeasesError]:
        """Asks the store, without writing, whether this lease still holds
        its claim now on the authority's clock: None when it does, else the
        exception its next operation would raise (``CancelledError``,
        ``ExpiredError``, ``LeaseLostError``, ``ClosedError``, ...), returned,
        not raised. A failure to ask (``BusyError``, ``StorageError``) is
        raised: it says nothing about the claim."""
        reason = _ffi.c_status()
        _ffi.call(_ffi.lib.leases_lease_check, self._handle(), ctypes.byref(reason))
        return self._reason(reason.value)

    @property
    def lost(self) -> Optional[LeasesError]:
        """Why this process knows the claim is over (the exception its next
        operation would raise), or None while it knows of nothing: a
        kept-alive lease learns of a rejected renewal (a coordinator's
        cancel, an expiry) by itself; otherwise only operations and
        ``check()`` find out. Local: asks no store."""
        return self.wait_lost(timedelta(0))

    def wait_lost(
        self, timeout: Optional[timedelta] = None, *, canceller: Optional[Canceller] = None
    ) -> Optional[LeasesError]:
        """Waits until this process knows the claim is over and returns why
        (as ``lost``), or None once ``timeout`` (None: no bound; at most 24 h
        otherwise) has passed. Ctrl-C interrupts it within 200 ms; a
        cancelled ``canceller`` ends it with ``InterruptedError``."""
        _ffi.ensure_not_forked()
        bound = None if timeout is None else wait_us(timeout, "timeout")
        self._handle()
        lost: List[Optional[LeasesError]] = [None]

        def attempt(slice_us: int) -> bool:
            reason = _ffi.c_status()
            _ffi.check(
                _ffi.lib.leases_lease_wait_lost(
                    self._handle(), slice_us, canceller_handle(canceller), ctypes.byref(reason)
                )
            )
            lost[0] = self._reason(reason.value)
            return lost[0] is not None

        in_slices(bound, attempt)
        return lost[0]

    @staticmethod
    def _reason(status: int) -> Optional[LeasesError]:
        """The exception of a lease's reported reason (read right after the
        call that reported it: the message is the thread's last error)."""
        if status == 0:
            return None
        return error_for_status(status, _ffi.last_error(), _ffi.status_name(status), _ffi.last_error_job_id())

    def execution(self, output_dir: Union[str, "os.PathLike[str]"]) -> "Execution":
        """Begins an execution of the reference executor in output_dir."""
        return Execution(self, output_dir)

    def __repr__(self) -> str:
        # Never the secret or the token: production, job, worker, expiry.
        if self._ptr is None:
            expiry = "closed"
        else:
            try:
                expiry = self.expiry.isoformat()
            except LeasesError:
                expiry = "unknown"
        return (
            f"<leases.Lease production={self.production!r} job_id={self.job_id!r} "
            f"worker={self.worker!r} expiry={expiry}>"
        )

    __str__ = __repr__


class KeepAlive(Closing):
    """A running keep-alive: leaving ``with`` (or ``stop()``) stops it and
    returns once no renewal can be written any more; a lease that is
    closed or freed meanwhile has stopped it already."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease

    def stop(self) -> None:
        if not self.lease.closed:
            self.lease.stop_keep_alive()

    close = stop

    def __repr__(self) -> str:
        return f"<leases.KeepAlive of {self.lease!r}>"


class Execution(Managed):
    """One execution of a lease by the reference executor: write the output to
    ``temp_path``; ``finish`` fsyncs it, renames it to ``final_path`` and
    completes the lease registering it. As a context manager it finishes on
    success (with ``metadata``/``provenance`` gathered meanwhile) and
    abandons (removing its own files) on an exception."""

    _what = "execution"

    def __init__(self, lease: Lease, output_dir: Union[str, "os.PathLike[str]"]) -> None:
        _ffi.ensure_not_forked()
        directory = _ffi.encode_path(output_dir, "output_dir")
        out = _ffi.ExecutionPtr()
        _ffi.call(_ffi.lib.leases_execution_begin, lease._handle(), directory, ctypes.byref(out))
        self._ptr = out
        self.lease = lease
        self.temp_path: str = self._path(_ffi.lib.leases_execution_temp_path)
        self.final_path: str = self._path(_ffi.lib.leases_execution_final_path)
        self.metadata: Dict[str, Any] = {}
        self.provenance: Dict[str, Any] = {}

    def _path(self, fn: Any) -> str:
        raw = fn(self._ptr)
        if raw is None:
            self.abandon()
            raise InvalidArgumentError(_ffi.last_error())
        return str(raw.decode("utf-8"))

    def _release(self, ptr: Any) -> None:
        _ffi.lib.leases_execution_abandon(ptr)

    def finish(
        self,
        metadata: Optional[JSONMapping] = None,
        provenance: Optional[JSONMapping] = None,
    ) -> None:
        """Publishes the output and completes the lease. Without arguments the
        ``metadata``/``provenance`` attributes are published. Consumes the
        execution, unless the facts are refused as invalid."""
        _ffi.ensure_not_forked()
        facts = facts_json(
            self.metadata if metadata is None else metadata,
            self.provenance if provenance is None else provenance,
        )
        ptr = self._handle()
        status = _ffi.lib.leases_execution_finish(ptr, facts)
        if status != InvalidArgumentError.status:  # only a refused argument leaves it usable
            self._ptr = None
        _ffi.check(status)

    def abandon(self) -> None:
        """Removes this execution's files and consumes it; idempotent."""
        self.close()

    def _succeed(self) -> None:
        self.finish()

    def __repr__(self) -> str:
        state = "consumed" if self._ptr is None else "open"
        return f"<leases.Execution job_id={self.lease.job_id!r} final_path={self.final_path!r} {state}>"
