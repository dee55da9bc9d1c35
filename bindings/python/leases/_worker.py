"""The worker loop: ``for lease in auth.work(...)`` waits for each job
without polling, keeps its claim alive while the body runs, settles it, and
drains on SIGTERM/SIGINT (or ``stop()`` from another thread)."""

from __future__ import annotations

import logging
import signal
import threading
import traceback
import weakref
from datetime import timedelta
from types import FrameType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Generator,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    TypedDict,
    Union,
)

from . import _ffi
from ._abi import MAX_REASON_LEN
from ._durations import duration_us, wait_us
from ._errors import (
    BusyError,
    ClockRegressedError,
    ClosedError,
    InterruptedError,
    LeasesError,
    OutcomeUnknownError,
    StorageError,
)
from ._lease import Lease, facts_json
from ._managed import Closing
from ._waiting import SLICE_US, Canceller, in_slices

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only, never evaluated

    from ._authority import Authority

log = logging.getLogger("leases.worker")

# Failures of a claim that say nothing about the next one: tried again after
# a pause that doubles (as the Go worker does), never in a tight loop.
_TRANSIENT = (BusyError, StorageError, OutcomeUnknownError, ClockRegressedError)
_RETRY_MIN = 0.01
_RETRY_MAX = 1.0
# With exit_when_empty, how long a claim waits before the loop calls the
# production empty: a wait, not a bare claim, since on PostgreSQL a bare
# claim passes over a job another transaction holds and may yet give back.
_EMPTY_GRACE_US = 100_000

# How the loop settles a job: give it back, complete it, or complete it and
# claim the next job in the same commit.
_Settle = Literal["release", "complete", "complete_next"]

_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


class DrainTimeout(SystemExit):
    """Raised into the body of a ``work()`` loop running in the main thread
    when its drain timeout passes (or a second SIGTERM arrives) while the
    job still runs: the job was given back (released) first. A
    ``SystemExit``: ``except Exception`` does not swallow it, and left
    uncaught it ends the program with its message and exit status 1."""


class WorkOptions(TypedDict, total=False):
    """The options of a work loop (``Authority.work``; docs/python.md)."""

    interval: Optional[timedelta]
    drain_timeout: Optional[timedelta]
    max_jobs: Optional[int]
    exit_when_empty: bool
    handle_signals: Optional[bool]


class Worker(Closing):
    """The worker loop of one production; ``Authority.work`` makes it.

    Iterating it claims jobs one at a time, waiting for each without
    polling, and yields each lease kept alive. When the body of the loop
    goes on to the next job without settling the lease (``complete``,
    ``fail``, ``release``), the loop completes it (no facts), claiming the
    next job in the same commit when it would claim again anyway (not
    when stopping or at ``max_jobs``); when the loop is left early (an
    exception, ``break``) it releases it (claimable again at once).
    Iterate it once.

    ``stop()`` (any thread) drains: no new claim, the running job finishes,
    the loop ends. In the main thread, SIGINT and SIGTERM call ``stop()``
    while the loop runs (``handle_signals``; the previous handlers come back
    when it ends); a second signal, or ``drain_timeout`` passing, gives the
    running job back and interrupts the body (KeyboardInterrupt for SIGINT,
    else ``DrainTimeout``). In another thread the drain timeout releases the
    job, and the body finds it gone (``lease.lost``, ``ClosedError``).
    """

    def __init__(
        self, authority: "Authority", production: str, *, worker: str, duration: timedelta, **options: Unpack[WorkOptions]
    ) -> None:
        _ffi.ensure_not_forked()
        interval = options.get("interval")
        drain_timeout = options.get("drain_timeout")
        max_jobs = options.get("max_jobs")
        self._p = _ffi.encode(production, "production")
        self._w = _ffi.encode(worker, "worker")
        self._duration = duration
        self._us = duration_us(duration)
        self._interval = interval
        if interval is not None:
            duration_us(interval, "interval")
        self._drain_s: Optional[float] = None
        if drain_timeout is not None:
            self._drain_s = wait_us(drain_timeout, "drain_timeout") / 1e6
        if max_jobs is not None and (
            not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 1
        ):
            raise ValueError(f"max_jobs must be a positive int or None, not {max_jobs!r}")
        self.production = production
        self.worker = worker
        self._authority = authority
        self._max_jobs = max_jobs
        self._exit_when_empty = bool(options.get("exit_when_empty", False))
        self._handle_signals = options.get("handle_signals")
        self._signals = False
        self._canceller = Canceller()
        self._stopping = threading.Event()
        # Reentrant: the signal handlers run on the main thread, possibly
        # while the loop itself holds it.
        self._lock = threading.RLock()
        self._current: Optional[Lease] = None
        self._timer: Optional[threading.Timer] = None
        # A weak reference: the loop's frame holds the Worker, so a strong one
        # would make a cycle, and a loop left by `break` would then be closed
        # (its job given back) only by the cycle collector, not at once.
        self._loop_gen: Optional["weakref.ref[Generator[Lease, None, None]]"] = None
        self._iterated = False
        # What run()'s handler returned for the running job: the metadata
        # the loop's completion publishes.
        self._metadata: Optional[Mapping[str, Any]] = None
        self.drain_timed_out = False

    # ---- stopping ------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether the loop was asked to stop (it claims nothing more)."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Drains: claims nothing more (a waiting claim ends at once), lets
        the running job finish, then ends the loop. With a drain timeout,
        the job still running when it passes is given back. From any thread;
        idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        try:
            self._canceller.cancel()
        except ClosedError:  # the loop has ended meanwhile
            pass
        with self._lock:
            running = self._current is not None
        if running and self._drain_s is not None:
            if self._signals:
                # SIGALRM sent to the main thread itself, not setitimer's
                # signal to the process: in a process with the library's
                # threads a process-wide signal may land on another thread,
                # and then a main thread blocked in a C call (a sleep) would
                # not wake to run the handler.
                self._timer = threading.Timer(self._drain_s, self._alarm_main)
                self._timer.daemon = True
                self._timer.start()
            else:
                self._timer = threading.Timer(self._drain_s, self._give_back)
                self._timer.daemon = True
                self._timer.start()

    def _alarm_main(self) -> None:
        """The drain timeout of a loop that handles signals: SIGALRM to the
        main thread, unless the loop has ended and its handlers are gone."""
        with self._lock:
            if self._signals:
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)

    def _give_back(self) -> Optional[Lease]:
        """Releases the job still running (the drain timeout passed, or a
        second signal came); returns it, or None when none runs."""
        with self._lock:
            lease, self._current = self._current, None
            if lease is None:
                return None
            self.drain_timed_out = True
        try:
            lease.release()
        except LeasesError as e:
            log.warning("worker: a job still running at the drain timeout was not given back: %r: %s", lease, e)
        return lease

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        if not self._stopping.is_set():
            log.info("worker %s: signal %d: draining", self.worker, signum)
            self.stop()
            return
        # The drain timeout (SIGALRM) or a second signal: stop the job now.
        lease = self._give_back()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        if lease is not None:
            raise DrainTimeout(
                f"leases: worker {self.worker}: the drain timeout passed while job {lease.job_id} "
                "was running; it was given back"
            )

    def _install_signals(self) -> List[Any]:
        wanted = self._handle_signals
        main = threading.current_thread() is threading.main_thread()
        if wanted is None:
            wanted = main
        if not wanted:
            return []
        if not main:
            raise RuntimeError(
                "handle_signals=True needs the main thread (Python runs signal handlers there); "
                "in other threads call worker.stop() instead"
            )
        # A signal the process was started ignoring (a background job's
        # SIGINT, nohup) stays ignored, as Python leaves it.
        names = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
        if self._drain_s is not None:
            names.append(signal.SIGALRM)
        saved = [(s, signal.signal(s, self._on_signal)) for s in names]
        self._signals = True
        return saved

    def _restore_signals(self, saved: List[Any]) -> None:
        if not saved or threading.current_thread() is not threading.main_thread():
            return
        with self._lock:  # no drain alarm is sent once this is False
            self._signals = False
        for s, previous in saved:
            signal.signal(s, previous)

    # ---- the loop --------------------------------------------------------------

    def __iter__(self) -> Iterator[Lease]:
        if self._iterated:
            raise RuntimeError("a leases.Worker is iterated once; make another with Authority.work")
        self._iterated = True
        loop = self._loop()
        self._loop_gen = weakref.ref(loop)
        return loop

    def _loop(self) -> Generator[Lease, None, None]:
        saved = self._install_signals()
        nxt: Optional[Lease] = None
        try:
            claimed = 0
            while True:
                # The next job comes from the last completion when it could
                # claim one (one commit for both), else from a waiting claim.
                lease, nxt = nxt, None
                if lease is None:
                    if not self._may_claim(claimed):
                        break
                    lease = self._claim_next()
                    if lease is None:
                        break
                if not self._start(lease):
                    continue
                claimed += 1
                body_done = False
                try:
                    yield lease
                    body_done = True
                finally:
                    nxt = self._settle(lease, body_done, self._may_claim(claimed))
        finally:
            if nxt is not None:  # claimed by a completion as the loop was left
                self._settle_quietly(nxt, "release")
                nxt.close()
            if self._timer is not None:
                self._timer.cancel()
            self._restore_signals(saved)
            self._canceller.close()

    def _may_claim(self, claimed: int) -> bool:
        """Whether the loop claims another job after ``claimed`` of them."""
        return not self._stopping.is_set() and (self._max_jobs is None or claimed < self._max_jobs)

    def _claim_next(self) -> Optional[Lease]:
        """The next lease, waiting for one; None once the loop must end
        (stopped, or the production was empty with exit_when_empty)."""
        pause = _RETRY_MIN
        while not self._stopping.is_set():
            got: List[Optional[Lease]] = [None]

            def attempt(slice_us: int) -> bool:
                got[0] = self._authority._claim_slice(self._p, self._w, self._us, slice_us, self._canceller)
                return got[0] is not None or self._stopping.is_set()

            try:
                in_slices(_EMPTY_GRACE_US if self._exit_when_empty else None, attempt)
            except InterruptedError:
                return None
            except _TRANSIENT as e:
                log.warning("worker %s: claim failed; trying again in %.2f s: %s", self.worker, pause, e)
                self._stopping.wait(pause)
                pause = min(2 * pause, _RETRY_MAX)
                continue
            if got[0] is not None or self._exit_when_empty:
                return got[0]
        return None

    def _start(self, lease: Lease) -> bool:
        """Keeps the new lease alive and makes it the running job; one
        claimed as the loop was stopped, or that cannot be kept alive (its
        claim ended already), is given back and skipped."""
        try:
            lease.keep_alive(self._duration, interval=self._interval)
        except LeasesError as e:
            log.warning("worker: cannot keep %r alive; giving the job back: %s", lease, e)
            self._settle_quietly(lease, "release")
            lease.close()
            return False
        with self._lock:
            # stop() sets the flag before it looks for a running job.
            if not self._stopping.is_set():
                self._current = lease
                return True
        self._settle_quietly(lease, "release")
        lease.close()
        return False

    def _settle(self, lease: Lease, body_done: bool, claim_next: bool) -> Optional[Lease]:
        """Completes (the body went on) or releases (the loop was left) a
        job the body did not settle itself; then frees the lease. A
        completion when the loop would claim again anyway claims the next
        job in the same commit and returns it (None: nothing was
        claimable, or no claim was wanted)."""
        with self._lock:
            mine = self._current is lease
            self._current = None
        metadata, self._metadata = self._metadata, None  # this job's, whoever settles it
        nxt = None
        try:
            if mine:
                if not body_done:
                    how: _Settle = "release"
                elif claim_next and not self._stopping.is_set():
                    how = "complete_next"
                else:
                    how = "complete"
                nxt = self._settle_quietly(lease, how, metadata)
        finally:
            lease.close()
        return nxt

    def _settle_quietly(
        self, lease: Lease, how: _Settle, metadata: Optional[Mapping[str, Any]] = None
    ) -> Optional[Lease]:
        """Releases, completes or completes-and-claims-next (``how``) a
        lease unless it is over already; logs a failure, as the loop goes
        on. Returns the next lease a complete_next claimed."""
        try:
            lost = lease.lost
            if lost is None:
                if how == "release":
                    lease.release()
                elif how == "complete":
                    lease.complete(metadata)
                else:
                    return lease.complete_and_claim_next(metadata, duration=self._duration)
            elif not isinstance(lost, ClosedError):
                log.warning("worker: %r ended before it was settled: %s", lease, lost)
        except LeasesError as e:
            # An unknown outcome of complete_next is the completion's: the
            # library returned no new lease, and names both jobs.
            what = "given back" if how == "release" else "completed"
            log.warning("worker: %r was not %s: %s", lease, what, e)
        return None

    # ---- run -------------------------------------------------------------------

    def run(self, handler: Callable[[Lease], Optional[Mapping[str, Any]]]) -> None:
        """The loop with a handler: ``handler(lease)`` runs for each job.
        What it returns (None, or a mapping of metadata) is published as
        the job's completion, in the same commit as the next claim; an
        ``Exception`` it raises (or metadata that is not JSON) fails the job
        for a retry (``fail_retry``: back after the production's backoff,
        dead after its last attempt) with the exception as the attempt's
        reason, logged on the ``leases.worker`` logger, and the loop goes
        on. A ``BaseException`` that is not an ``Exception``
        (``KeyboardInterrupt``, ``DrainTimeout``) gives the job back and
        ends the loop, as leaving ``for`` does. A handler may settle the
        lease itself; the loop then leaves it as it is."""
        for lease in self:
            try:
                metadata = handler(lease)
            except Exception as e:
                self._handler_failed(lease, e)
                continue
            self._handler_returned(lease, metadata)

    def _handler_returned(self, lease: Lease, metadata: Optional[Mapping[str, Any]]) -> None:
        """Hands what run()'s handler returned to the loop's completion;
        metadata that is not JSON fails the job as a raising handler does."""
        try:
            facts_json(metadata, None)  # refused here, not by the completion
        except (LeasesError, TypeError) as e:
            self._handler_failed(lease, e)
            return
        self._metadata = metadata

    def _handler_failed(self, lease: Lease, e: BaseException) -> None:
        """Fails the job of a handler that raised for a retry, unless it is
        over already (the handler settled it, a cancel)."""
        log.warning("worker: the handler failed on %r; failing the job for a retry", lease, exc_info=e)
        try:
            if lease.lost is None:
                lease.fail_retry(_failure_reason(e))
        except LeasesError as fe:
            log.warning("worker: %r was not failed for a retry: %s", lease, fe)

    # ---- with ------------------------------------------------------------------

    def close(self) -> None:
        """Ends the loop (leaving ``with`` does): a job the body left
        unsettled is given back."""
        self._stopping.set()
        loop = None if self._loop_gen is None else self._loop_gen()
        if loop is not None:
            loop.close()
        elif not self._iterated:
            self._canceller.close()

    @property
    def closed(self) -> bool:
        return self._stopping.is_set() and (self._loop_gen is None or self._loop_gen() is None)

    def __repr__(self) -> str:
        state = "stopping" if self.stopping else ("running" if self._iterated else "new")
        return f"<leases.Worker production={self.production!r} worker={self.worker!r} {state}>"


def _failure_reason(e: BaseException) -> str:
    """A handler's exception as an attempt's reason ("ValueError: bad
    input"): valid UTF-8 without NUL, cut at a character boundary to
    LEASES_MAX_REASON_LEN bytes."""
    text = "".join(traceback.format_exception_only(type(e), e)).strip().replace("\0", "")
    raw = text.encode("utf-8", "replace")[:MAX_REASON_LEN]
    return raw.decode("utf-8", "ignore")
