"""The worker loop: ``for lease in auth.work(...)`` and ``Worker.run``.

The loop's policy (waiting claim, keep-alive, complete-and-claim-next,
back-off, max jobs, exit-when-empty, drain and its timeout) is the library's
``leases_worker`` handle (docs/workers.md); this module keeps what is
Python's own: calling the handler on the caller's thread or a pool of
threads, the signal handlers, and the mapping of an exception to a reason."""

from __future__ import annotations

import ctypes
import json
import logging
import queue
import signal
import threading
import weakref
from datetime import timedelta
from types import FrameType, TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generator,
    Iterator,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
    TypedDict,
)

from . import _ffi
from ._abi import (
    RESULT_COMPLETE,
    RESULT_FAIL_RETRY,
    RESULT_RELEASE,
    RESULT_SETTLED,
    STOP_DRAIN,
    STOP_GIVE_BACK,
    WORKER_EXIT_WHEN_EMPTY,
    WORKER_GAVE_BACK,
    WorkerPtr,
    leases_worker_options,
)
from ._durations import duration_us, wait_us
from ._errors import ClosedError, LeasesError
from ._lease import Lease, facts_json
from ._managed import Closing

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only, never evaluated

    from ._authority import Authority

log = logging.getLogger("leases.worker")

# leases_worker_next waits in slices so that Python's signal handlers run
# between two C calls (Ctrl-C reaches the main thread's handler within a
# slice); a slice that ends idle costs PostgreSQL one look, so a second. A
# stop ends a waiting next at once: it needs no shorter slice.
_SLICE_US = 1_000_000
_STATUS_INVALID_ARGUMENT = 1
_STATUS_NOTHING_TO_CLAIM = 4
_STATUS_CLOSED = 11

# The reason of a job whose bare `for` was left with it unsettled.
LEFT_UNSETTLED_REASON = (
    b"worker: the loop was left with the job unsettled (an exception, break or return "
    b"through a for loop without with)"
)


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
    concurrency: Optional[int]


_OPTIONS = frozenset(WorkOptions.__annotations__)


def drain_timeout(worker: str, out: List[str]) -> DrainTimeout:
    """What a loop raises when it gave back the jobs ``out`` (their ids)
    because its drain timeout passed or a second SIGTERM came."""
    return DrainTimeout(
        f"leases: worker {worker}: the drain timeout passed while job(s) {', '.join(out)} "
        "were running; they were given back"
    )


def failure_reason(e: BaseException) -> bytes:
    """The text of a handler's exception, which the library turns into the
    attempt's reason by the one rule (invalid UTF-8 becomes U+FFFD, NUL
    bytes are dropped, cut to LEASES_MAX_REASON_LEN bytes): ``str(e)``, as
    Go takes an error's ``Error()``, or the class name when that is empty.
    A lone surrogate (a byte Python could not decode) is that byte again,
    so it becomes U+FFFD."""
    text = str(e) or type(e).__name__
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


class _HandedOut(Lease):
    """A lease the worker handed out: the worker owns its handle and
    releases it when the job is settled; closing it frees nothing (a
    settled one is closed). Leaving ``with lease:`` on an ``Exception``
    fails the job for a retry with the exception's text, as a handler's
    exception does."""

    def __init__(self, ptr: Any, worker: "Worker") -> None:
        super().__init__(ptr, worker._authority, worker._us)
        self._worker = worker

    def _release(self, ptr: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if isinstance(exc, Exception):
            self._worker._failed(self, exc)


class Worker(Closing):
    """The worker loop of one production; ``Authority.work`` makes it.

    Iterating it hands out one job at a time, kept alive. When the body of
    the loop goes on to the next job without settling the lease
    (``complete``, ``fail``, ``release``), the loop completes it (no facts),
    claiming the next job in the same commit when it would claim again
    anyway. An ``Exception`` that leaves ``with lease:`` in the body, or
    ``with`` around the loop (``with auth.work(...) as jobs:``), fails the
    unsettled job for a retry with the exception's text, as ``run()`` does;
    inside ``with``, ``break`` or another exit gives it back. A bare ``for``
    left with the job unsettled, whatever left it (an exception, ``break``,
    ``return``), fails it for a retry with a reason that says so: a
    generator is only closed, never told why, and a body that raised must
    never pass for one that gave the job back. Iterate it once.

    ``run(handler)`` calls the handler for each job, on ``concurrency``
    threads at once (default 1: the calling thread).

    ``stop()`` (any thread) drains: no new claim, the running jobs finish,
    the loop ends. In the main thread, SIGINT and SIGTERM drain while the
    loop runs (``handle_signals``; the previous handlers come back when it
    ends); a second signal gives the running jobs back at once and, for
    SIGINT, raises KeyboardInterrupt. ``drain_timeout`` (0 or None: as long
    as the jobs take) gives them back when it passes during a drain; in the
    main thread it then raises ``DrainTimeout`` into a running body.
    """

    def __init__(
        self, authority: "Authority", production: str, *, worker: str, duration: timedelta, **options: Unpack[WorkOptions]
    ) -> None:
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"work() got unexpected keyword argument(s): {', '.join(unknown)} "
                f"(its options: {', '.join(sorted(_OPTIONS))})"
            )
        _ffi.ensure_not_forked()
        o = leases_worker_options()
        o.size = ctypes.sizeof(o)
        p = _ffi.encode(production, "production")
        w = _ffi.encode(worker, "worker")
        us = duration_us(duration)
        interval = options.get("interval")
        if interval is not None:
            o.interval_us = duration_us(interval, "interval")
        drain_timeout = options.get("drain_timeout")
        self._drain_s: Optional[float] = None
        if drain_timeout is not None:
            o.drain_timeout_us = wait_us(drain_timeout, "drain_timeout")
            self._drain_s = o.drain_timeout_us / 1e6 or None
        max_jobs = options.get("max_jobs")
        if max_jobs is not None:
            if not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 0:
                raise ValueError(f"max_jobs must be an int of at least 0 (0 or None: no limit), not {max_jobs!r}")
            o.max_jobs = max_jobs
        concurrency = options.get("concurrency")
        self.concurrency = 1
        if concurrency is not None:
            self.concurrency = _ffi.int_within(concurrency, "concurrency", 1, 1024) if concurrency != 0 else 1
            o.concurrency = self.concurrency
        if options.get("exit_when_empty", False):
            o.flags = WORKER_EXIT_WHEN_EMPTY
        self._handle_signals = options.get("handle_signals")
        self.production = production
        self.worker = worker
        self._authority = authority
        self._us = us
        out = WorkerPtr()
        _ffi.call(_ffi.lib.leases_worker_new, authority._handle(), p, w, us, ctypes.byref(o), ctypes.byref(out))
        self._ptr: Optional[Any] = out
        # Plain flags, never a lock of their own: a signal handler sets them,
        # and it may run inside the very code that holds such a lock (a
        # threading.Event's set() by the handler of a first signal).
        self._stopping = False  # the handle was told to stop: it claims nothing more
        self._asked = False  # a stop was asked for (stop(), a signal, close())
        self._signalled = False  # a signal came
        # Reentrant: the signal handlers run on the main thread, possibly
        # while it holds the lock.
        self._lock = threading.RLock()
        self._out: Set[Lease] = set()
        self._serving = 0  # threads inside the handle's calls or a handler
        self._signals = False
        self._alarms: Optional["queue.SimpleQueue[bool]"] = None  # the drain alarm's thread's orders
        self._iterated = False
        # The loop's generator. Weakly held outside `with`: its frame holds
        # the Worker, so a strong reference would make a cycle, and a loop
        # left by `break` would then be closed (its job failed) only by
        # the cycle collector. Strongly held inside `with`: an exception
        # leaving the `for` would otherwise close the generator, giving the
        # job back, before `__exit__` sees the exception and fails the job
        # for a retry with it; `__exit__` closes it.
        self._loop_gen: Optional["weakref.ref[Generator[Lease, None, None]]"] = None
        self._loop_held: Optional[Generator[Lease, None, None]] = None
        self._scoped = False
        self._left_by: Optional[BaseException] = None
        # close() (leaving `with`, or called) is ending the loop: it knows
        # why. A loop closed otherwise (a bare `for` let go of it) does not.
        self._closing = False
        self._closer = threading.Lock()
        self._gave_back = False

    # ---- the handle ----------------------------------------------------------

    def _next(self) -> Optional[Lease]:
        """The next job from the handle, waiting in slices; None once the
        loop hands out nothing more."""
        while True:
            _ffi.ensure_not_forked()
            out = _ffi.LeasePtr()
            with self._lock:
                if self._ptr is None:
                    return None
                ptr = self._ptr
                self._serving += 1
            try:
                status = _ffi.lib.leases_worker_next(ptr, _SLICE_US, ctypes.byref(out))
                if status == _STATUS_NOTHING_TO_CLAIM:
                    continue
                _ffi.check(status)
                if not out:
                    return None
                try:
                    lease = _HandedOut(out, self)
                except BaseException:
                    _ffi.lib.leases_worker_settle(ptr, out, RESULT_RELEASE, None, 0)
                    raise
                with self._lock:
                    self._out.add(lease)
                return lease
            finally:
                with self._lock:
                    self._serving -= 1

    def _settle(self, lease: Lease, outcome: int, text: Optional[bytes] = None) -> None:
        """Hands the job's result to the handle, as every face does: a lease
        the handler closed itself (or the loop gave back) is settled as it
        is; a lease that ended under the handler (a coordinator's cancel, an
        expiry) gets its result all the same, which the store refuses (the
        handle frees its slot either way); facts refused before anything was
        written fail the attempt for a retry with why, and anything else
        refused releases the job. Logs what did not settle; the loop goes
        on."""
        with self._lock:
            if lease not in self._out:
                return
            self._out.discard(lease)
            ptr = self._ptr
        if ptr is None:
            return
        lost = lease.lost
        lp = lease._take()
        if isinstance(lost, ClosedError):
            status = _ffi.lib.leases_worker_settle(ptr, lp, RESULT_SETTLED, None, 0)
            if status in (0, _STATUS_CLOSED):
                return
        elif lost is not None:
            log.info("worker %s: %r ended before it was settled: %s", self.worker, lease, lost)
        status = _ffi.lib.leases_worker_settle(ptr, lp, outcome, text, len(text or b""))
        if status == _STATUS_INVALID_ARGUMENT and outcome == RESULT_COMPLETE:
            why = f"worker: the handler's facts were refused: {_ffi.last_error()}".encode()
            status = _ffi.lib.leases_worker_settle(ptr, lp, RESULT_FAIL_RETRY, why, len(why))
        if status == _STATUS_INVALID_ARGUMENT:
            status = _ffi.lib.leases_worker_settle(ptr, lp, RESULT_RELEASE, None, 0)  # nothing else can take it back
        if status == _STATUS_CLOSED:
            log.info("worker %s: %r was given back before it was settled", self.worker, lease)
        elif status != 0 and lost is None:
            log.warning("worker %s: %r was not settled: %s", self.worker, lease, _ffi.last_error())

    def _failed(self, lease: Lease, e: BaseException) -> None:
        """Fails the job of a handler that raised for a retry, with the
        exception's text as the reason."""
        log.warning("worker: the handler failed on %r; failing the job for a retry", lease, exc_info=e)
        self._settle(lease, RESULT_FAIL_RETRY, failure_reason(e))

    def _left_unsettled(self, lease: Lease) -> None:
        """Fails for a retry the job of a bare ``for`` that was left with
        the job unsettled: an exception, ``break`` or ``return``. A generator
        is closed without being told why (CPython hides the exception in
        flight from it), so every early exit counts as a failure of the
        body: a body that raised is never taken for one that meant to give
        the job back."""
        log.warning("worker: the loop was left with %r unsettled; failing the job for a retry", lease)
        self._settle(lease, RESULT_FAIL_RETRY, LEFT_UNSETTLED_REASON)

    def _returned(self, lease: Lease, metadata: Optional[Mapping[str, Any]]) -> None:
        """Completes the job with what the handler returned; metadata that
        is not JSON fails it as a raising handler does."""
        try:
            facts = facts_json(metadata, None)
        except (LeasesError, TypeError) as e:
            self._failed(lease, e)
            return
        self._settle(lease, RESULT_COMPLETE, facts)

    def stats(self) -> Dict[str, Any]:
        """The loop's counters now (state, out, claimed, completed, failed,
        released, settled, failed_claims, backoff_us; docs/workers.md)."""
        with self._lock:
            if self._ptr is None:
                raise LeasesError("the worker is closed", _STATUS_CLOSED)
            out = ctypes.c_void_p()
            _ffi.call(_ffi.lib.leases_worker_stats_json, self._ptr, ctypes.byref(out))
        stats: Dict[str, Any] = json.loads(_ffi.take_string(out))
        return stats

    # ---- stopping ------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether the loop was asked to stop (it claims nothing more)."""
        return self._stopping

    @property
    def drain_timed_out(self) -> bool:
        """Whether the loop gave jobs back (the drain timeout passed, or a
        second signal came)."""
        with self._lock:
            if self._ptr is not None and not self._gave_back:
                end = ctypes.c_int32()
                if _ffi.lib.leases_worker_wait(self._ptr, 0, None, ctypes.byref(end)) == 0:
                    self._gave_back = end.value == WORKER_GAVE_BACK
            return self._gave_back

    def stop(self) -> None:
        """Drains: claims nothing more (a waiting claim ends at once), lets
        the running jobs finish, then ends the loop; with a drain timeout,
        the jobs still running when it passes are given back. From any
        thread; idempotent."""
        self._stop(STOP_DRAIN)

    def _stop(self, mode: int) -> None:
        with self._lock:
            first = not self._asked
            self._asked = True
            if self._ptr is None:
                self._stopping = True
                return
            _ffi.lib.leases_worker_stop(self._ptr, mode)
            # Only now: a handler that sees `stopping` and returns must find
            # the loop claiming nothing more (its completion claims no next
            # job).
            self._stopping = True
            if mode == STOP_GIVE_BACK:
                self._gave_back = self._gave_back or bool(self._out)
            elif first and self._alarms is not None:
                self._alarms.put(True)  # SimpleQueue.put is reentrant: safe in a signal handler

    def _drain_alarm(self, orders: "queue.SimpleQueue[bool]", drain_s: float) -> None:
        """The drain alarm's thread, started with the signal handlers: once
        told that a drain began, it waits out the drain timeout and sends
        SIGALRM to the main thread itself, interrupting a body running there
        (a signal sent to the process may reach another thread, leaving the
        main thread's sleep or wait uninterrupted). A thread started in
        advance, since a signal handler must not start one (a thread's start
        takes locks that the interrupted code may hold). False ends it."""
        if not orders.get():
            return
        try:
            orders.get(timeout=drain_s)
            return
        except queue.Empty:
            pass
        with self._lock:
            if self._signals:
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        # Decided before anything else runs: a handler may run inside this
        # one (Python runs a pending handler between any two bytecodes), and
        # a second signal that came that soon must still give the jobs back.
        second = self._signalled or self._asked
        self._signalled = True
        if not second:
            log.info("worker %s: signal %d: draining", self.worker, signum)
            self._stop(STOP_DRAIN)
            return
        # The drain timeout (SIGALRM) or a second signal: give the jobs back.
        with self._lock:
            out = sorted(lease.job_id for lease in self._out)
        self._stop(STOP_GIVE_BACK)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        if out:
            raise drain_timeout(self.worker, out)

    def _install_signals(self) -> List[Tuple[int, Any]]:
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
            self._alarms = queue.SimpleQueue()
            threading.Thread(
                target=self._drain_alarm, args=(self._alarms, self._drain_s), name="leases-drain-alarm", daemon=True
            ).start()
        saved: List[Tuple[int, Any]] = [(s, signal.signal(s, self._on_signal)) for s in names]
        self._signals = True
        return saved

    def _restore_signals(self, saved: List[Tuple[int, Any]]) -> None:
        if self._alarms is not None:
            self._alarms.put(False)
            self._alarms = None
        if not saved:
            return
        with self._lock:  # no drain alarm is sent once this is False
            self._signals = False
        for s, previous in saved:
            signal.signal(s, previous)

    # ---- the loop --------------------------------------------------------------

    def __iter__(self) -> Iterator[Lease]:
        if self._iterated:
            raise RuntimeError("a leases.Worker is iterated once; make another with Authority.work")
        if self.concurrency != 1:
            raise ValueError("a Worker with concurrency above 1 runs its handler with run(handler), not for")
        self._iterated = True
        loop = self._loop()
        self._loop_gen = weakref.ref(loop)
        if self._scoped:
            self._loop_held = loop
        return loop

    def _loop(self) -> Generator[Lease, None, None]:
        saved = self._install_signals()
        try:
            while True:
                lease = self._next()
                if lease is None:
                    return
                done = False
                try:
                    yield lease
                    done = True
                finally:
                    if done:
                        self._settle(lease, RESULT_COMPLETE)
                    elif isinstance(self._left_by, Exception):
                        self._failed(lease, self._left_by)
                    elif self._closing:
                        self._settle(lease, RESULT_RELEASE)
                    else:
                        self._left_unsettled(lease)
        finally:
            self._restore_signals(saved)

    def run(self, handler: Callable[[Lease], Optional[Mapping[str, Any]]]) -> None:
        """The loop with a handler: ``handler(lease)`` runs for each job, on
        ``concurrency`` threads at once (1: the calling thread). What it
        returns (None, or a mapping of metadata) is published as the job's
        completion, in the same commit as the next claim; an ``Exception``
        it raises (or metadata that is not JSON) fails the job for a retry
        with the exception's text as the reason (``failure_reason``),
        logged on the ``leases.worker`` logger, and the loop goes on. A
        ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
        ``DrainTimeout``) gives the job back and ends the loop. A handler
        may settle the lease itself; the loop then leaves it as it is."""
        if self._iterated:
            raise RuntimeError("a leases.Worker runs once; make another with Authority.work")
        self._iterated = True
        saved = self._install_signals()
        try:
            if self.concurrency == 1:
                self._serve(handler)
                return
            errors: List[BaseException] = []

            def serve() -> None:
                try:
                    self._serve(handler)
                except BaseException as e:
                    errors.append(e)
                    self._stop(STOP_GIVE_BACK)

            threads = [
                threading.Thread(target=serve, name=f"leases-worker-{self.worker}-{n}", daemon=True)
                for n in range(self.concurrency)
            ]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.1)  # the main thread runs the signal handlers meanwhile
            except BaseException:
                self._stop(STOP_GIVE_BACK)
                raise
            if errors:
                raise errors[0]
        finally:
            self._restore_signals(saved)

    def _serve(self, handler: Callable[[Lease], Optional[Mapping[str, Any]]]) -> None:
        while True:
            lease = self._next()
            if lease is None:
                return
            try:
                metadata = handler(lease)
            except Exception as e:
                self._failed(lease, e)
                continue
            except BaseException:
                self._settle(lease, RESULT_RELEASE)
                raise
            self._returned(lease, metadata)

    # ---- with ------------------------------------------------------------------

    def __enter__(self) -> "Worker":
        self._scoped = True
        loop = None if self._loop_gen is None else self._loop_gen()
        if loop is not None:
            self._loop_held = loop
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._left_by = exc
        self.close()

    def _close_loop(self) -> None:
        """Closes the loop's generator. Called by ``close()`` (which set
        ``_closing``: it knows why), or by ``leases.aio``'s ``async for``
        (whose generator outlives the loop) as a bare ``for`` that let go of
        it: a job the body left unsettled is then failed for a retry. One
        closer at a time: a generator closed from two threads at once
        raises "generator already executing" in one of them."""
        with self._closer:
            loop = None if self._loop_gen is None else self._loop_gen()
            self._loop_held = None
            if loop is not None:
                loop.close()

    def close(self) -> None:
        """Ends the loop (leaving ``with`` does): a job the body left
        unsettled is failed for a retry when ``with`` is left on an
        exception, else given back; then the handle is freed once no thread
        uses it."""
        self._asked = True
        self._stopping = True
        self._closing = True
        self._close_loop()
        with self._lock:
            if self._ptr is None:
                return
            if self._serving or self._out:
                # A thread still waits or runs a job (run() left on an
                # exception): stop; the last reference frees the handle.
                _ffi.lib.leases_worker_stop(self._ptr, STOP_GIVE_BACK)
                return
            self._gave_back = self.drain_timed_out
            ptr, self._ptr = self._ptr, None
        _ffi.lib.leases_worker_free(ptr)

    def __del__(self) -> None:
        ptr = getattr(self, "_ptr", None)
        if ptr is not None and _ffi.usable():
            self._ptr = None
            _ffi.lib.leases_worker_free(ptr)

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def __repr__(self) -> str:
        state = "stopping" if self.stopping else ("running" if self._iterated else "new")
        return f"<leases.Worker production={self.production!r} worker={self.worker!r} {state}>"
