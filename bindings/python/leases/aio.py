"""The asyncio face of the leases package: each blocking call of Authority and
Lease runs in a worker thread (``asyncio.to_thread``), so an async service
claims, renews and completes without blocking its event loop.

    import leases.aio

    async with await leases.aio.AsyncAuthority.open("jobs.db") as auth:
        lease = await auth.claim("nightly", worker="w1", duration=timedelta(seconds=30))
        if lease is not None:
            await lease.complete(metadata={"frames": 1})

The rules, records and exceptions are those of the blocking API (``.sync``
gives the wrapped object). Cancelling an await does not stop the call already
running in its thread: a claim that succeeds after its caller was cancelled is
released (the job is claimable again at once), every other call completes.
Each method is the blocking method of the same name run by ``_run``, or by
``_claim`` when it returns a new claim, which is how a new blocking call gets
its async twin; each async iterator reads the blocking one's ``Pages`` through
``_paged``, a page per thread hop.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from datetime import datetime, timedelta
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ._abi import RESULT_RELEASE, STOP_GIVE_BACK
from ._authority import Authority, BytesLike, Pages, PathArg, RequestOptions
from ._errors import LeasesError
from ._lease import Execution, JSONMapping, Lease
from ._records import Event, Job, JobCounts, JobRecord, JobState, Page, Production, RetryPolicy
from ._waiting import Canceller
from ._worker import WorkOptions, Worker, drain_timeout
from ._worker import log as _worker_log

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only, never evaluated

__all__ = ["AsyncAuthority", "AsyncExecution", "AsyncLease", "AsyncWorker"]

_T = TypeVar("_T")
_H = TypeVar("_H", bound="_AsyncHandle")

# Releases of claims whose caller was cancelled, kept alive until they end.
_pending_releases: Set["asyncio.Task[None]"] = set()


async def _run(call: Callable[[], _T]) -> _T:
    return await asyncio.to_thread(call)


def _release_quietly(lease: Lease) -> None:
    # The caller is gone; a claim that ended meanwhile (expired, cancelled by
    # a coordinator) needs nothing more.
    try:
        lease.release()
    except Exception:
        lease.close()


async def _claim(
    call: Callable[[], Optional[Lease]], canceller: Optional[Canceller] = None
) -> Optional[Lease]:
    """Runs a claiming call in a thread. If the awaiting task is cancelled,
    the claim it was making is released when it arrives, in the thread when
    it has not returned yet, else from the loop; a waiting claim given
    `canceller` is ended at once instead of running out its wait."""
    cancelled = threading.Event()

    def claim_in_thread() -> Optional[Lease]:
        lease = call()
        if lease is not None and cancelled.is_set():
            _release_quietly(lease)
            return None
        return lease

    task = asyncio.ensure_future(asyncio.to_thread(claim_in_thread))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancelled.set()
        if canceller is not None:
            canceller.cancel()
        task.add_done_callback(_release_late_claim)
        raise


async def _run_to_the_end(call: Callable[[], _T], on_cancel: Optional[Callable[[], None]] = None) -> _T:
    """Runs call in a thread. A cancellation of the awaiting task calls
    on_cancel (which makes the call return soon), then waits for the
    thread's call to return before it goes on: what the call holds (a
    canceller, a generator, the store) is free again once the caller sees
    the CancelledError."""
    task = asyncio.ensure_future(_run(call))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        await asyncio.wait([task])
        raise


async def _waiting(call: Callable[[Canceller], _T]) -> _T:
    """Runs a waiting call in a thread with a canceller of its own, which a
    cancellation of the awaiting task cancels: the thread's wait ends at
    once (InterruptedError, nobody awaits it) instead of running out."""
    with Canceller() as canceller:
        return await _run_to_the_end(lambda: call(canceller), canceller.cancel)


async def _paged(pages: Pages[_T]) -> AsyncIterator[_T]:
    """The items of a listing, one page read per thread hop. A cancelled
    read ends the iteration once its page has arrived, so no thread still
    reads it when the caller goes on."""
    while not pages.done:
        for item in (await _run_to_the_end(pages.read)).items:
            yield item


def _release_late_claim(task: "asyncio.Task[Optional[Lease]]") -> None:
    if task.cancelled() or task.exception() is not None:
        return
    lease = task.result()
    if lease is None:
        return
    release = asyncio.ensure_future(asyncio.to_thread(_release_quietly, lease))
    _pending_releases.add(release)
    release.add_done_callback(_pending_releases.discard)


class _Closable(Protocol):
    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...


class _AsyncHandle:
    """What every async wrapper of a handle (or loop) shares: close() and
    ``async with``, which leave it as its blocking ``with`` does."""

    sync: _Closable

    @property
    def closed(self) -> bool:
        return self.sync.closed

    async def close(self) -> None:
        await _run(self.sync.close)

    async def __aenter__(self: _H) -> _H:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await _run(lambda: self.sync.__exit__(exc_type, exc, tb))


class AsyncLease(_AsyncHandle):
    """An owning claim, as Lease, with awaitable calls. ``async with`` frees
    local memory only, as ``with`` does for a Lease."""

    sync: Lease

    def __init__(self, lease: Lease) -> None:
        self.sync = lease
        self.job_id: str = lease.job_id
        self.production: str = lease.production
        self.worker: str = lease.worker

    async def expiry(self) -> datetime:
        """The expiry last confirmed by the authority (aware, UTC)."""
        return await _run(lambda: self.sync.expiry)

    async def payload(self) -> bytes:
        """The claimed job's payload bytes."""
        return await _run(lambda: self.sync.payload)

    async def renew(self, duration: timedelta) -> None:
        await _run(lambda: self.sync.renew(duration))

    async def release(self) -> None:
        await _run(self.sync.release)

    async def fail(self, reason: str) -> None:
        await _run(lambda: self.sync.fail(reason))

    async def fail_retry(self, reason: Optional[str] = None, *, delay: Optional[timedelta] = None) -> None:
        """The retryable failure (``Lease.fail_retry``)."""
        await _run(lambda: self.sync.fail_retry(reason, delay=delay))

    async def complete(
        self, metadata: Optional[JSONMapping] = None, provenance: Optional[JSONMapping] = None
    ) -> None:
        await _run(lambda: self.sync.complete(metadata, provenance))

    async def complete_and_claim_next(
        self,
        metadata: Optional[JSONMapping] = None,
        provenance: Optional[JSONMapping] = None,
        *,
        duration: timedelta,
    ) -> Optional["AsyncLease"]:
        """``Lease.complete_and_claim_next``: completes the job and claims the
        production's next job in one commit (None when nothing was
        claimable). If the awaiting task is cancelled, the completion stands
        and the job it claimed is released when the call returns, as an
        abandoned ``claim``'s is."""
        return _wrap(
            await _claim(lambda: self.sync.complete_and_claim_next(metadata, provenance, duration=duration))
        )

    async def export_token(self) -> str:
        """The token of this active lease: a credential, never to be logged."""
        return await _run(self.sync.export_token)

    async def execution(self, output_dir: PathArg) -> "AsyncExecution":
        """Begins an execution of the reference executor in output_dir
        (``Lease.execution``), creating its temporary file in a thread."""
        return AsyncExecution(await _run(lambda: self.sync.execution(output_dir)), self)

    async def keep_alive(self, duration: Optional[timedelta] = None, *, interval: Optional[timedelta] = None) -> None:
        """Keeps the claim alive in the background (``Lease.keep_alive``)."""
        await _run(lambda: self.sync.keep_alive(duration, interval=interval))

    async def stop_keep_alive(self) -> None:
        await _run(self.sync.stop_keep_alive)

    async def check(self) -> Optional[LeasesError]:
        """None while the claim holds, else why not (``Lease.check``)."""
        return await _run(self.sync.check)

    @property
    def lost(self) -> Optional[LeasesError]:
        """Why this process knows the claim is over, or None (local: no store
        access, so no thread)."""
        return self.sync.lost

    async def wait_lost(self, timeout: Optional[timedelta] = None) -> Optional[LeasesError]:
        """Waits until the claim is known to be over (``Lease.wait_lost``);
        cancelling the await ends the wait in its thread at once."""
        return await _waiting(lambda c: self.sync.wait_lost(timeout, canceller=c))

    def __repr__(self) -> str:
        return f"<leases.aio.AsyncLease production={self.production!r} job_id={self.job_id!r} worker={self.worker!r}>"

    __str__ = __repr__


class AsyncExecution(_AsyncHandle):
    """One execution of an AsyncLease by the reference executor, as
    ``Execution``: write the output to ``temp_path`` (in a thread, or with
    the loop's own file I/O), then ``await finish()``, which fsyncs it,
    renames it to ``final_path`` and completes the lease in a thread.
    ``async with`` finishes on success (publishing ``metadata`` and
    ``provenance``, gathered meanwhile) and abandons on an exception,
    removing only its own files. A cancelled ``finish`` still runs to its
    end in its thread, as every call here but a claim does."""

    sync: Execution

    def __init__(self, execution: Execution, lease: AsyncLease) -> None:
        self.sync = execution
        self.lease = lease
        self.temp_path: str = execution.temp_path
        self.final_path: str = execution.final_path

    @property
    def metadata(self) -> Dict[str, Any]:
        """What ``finish()`` without arguments publishes as metadata."""
        return self.sync.metadata

    @property
    def provenance(self) -> Dict[str, Any]:
        """What ``finish()`` without arguments publishes as provenance."""
        return self.sync.provenance

    async def finish(self, metadata: Optional[JSONMapping] = None, provenance: Optional[JSONMapping] = None) -> None:
        """Publishes the output and completes the lease (``Execution.finish``)."""
        await _run(lambda: self.sync.finish(metadata, provenance))

    async def abandon(self) -> None:
        """Removes this execution's files and consumes it; idempotent."""
        await _run(self.sync.abandon)

    def __repr__(self) -> str:
        return "<leases.aio.AsyncExecution " + repr(self.sync)[len("<leases.Execution ") :]

    __str__ = __repr__


def _wrap(lease: Optional[Lease]) -> Optional[AsyncLease]:
    return None if lease is None else AsyncLease(lease)


class AsyncAuthority(_AsyncHandle):
    """An open authority, as Authority, with awaitable calls. ``await
    AsyncAuthority.open(path)`` opens one (a SQLite path or a PostgreSQL URL)
    without blocking the loop; ``AsyncAuthority(authority)`` wraps an open one."""

    sync: Authority

    def __init__(self, authority: Authority) -> None:
        self.sync = authority

    @classmethod
    async def open(
        cls,
        path: PathArg,
        *,
        must_exist: bool = False,
        synchronous: Optional[str] = None,
        busy_timeout: Optional[timedelta] = None,
    ) -> "AsyncAuthority":
        """Opens as ``Authority(path, ...)`` does, with the same options
        (``must_exist``, ``synchronous``, ``busy_timeout``), in a thread."""
        return cls(
            await _run(
                lambda: Authority(path, must_exist=must_exist, synchronous=synchronous, busy_timeout=busy_timeout)
            )
        )

    async def create_production(self, name: str, *, policy: Optional[RetryPolicy] = None) -> None:
        await _run(lambda: self.sync.create_production(name, policy=policy))

    async def set_policy(self, production: str, policy: Optional[RetryPolicy]) -> None:
        await _run(lambda: self.sync.set_policy(production, policy))

    async def request_job(
        self,
        production: str,
        key: Optional[str] = None,
        payload: BytesLike = b"",
        **options: Unpack[RequestOptions],
    ) -> str:
        return await _run(lambda: self.sync.request_job(production, key, payload, **options))

    async def claim(
        self, production: str, *, worker: str, duration: timedelta, wait: Optional[timedelta] = None
    ) -> Optional[AsyncLease]:
        """The next claimable job's lease (FIFO); None when there is none,
        or, with ``wait``, none became claimable within it. Cancelling the
        await ends the wait in its thread at once, having claimed nothing."""
        # Freed by its last reference, the thread's call: never under a wait.
        canceller = Canceller()
        return _wrap(
            await _claim(
                lambda: self.sync.claim(production, worker=worker, duration=duration, wait=wait, canceller=canceller),
                canceller,
            )
        )

    async def claim_job(self, production: str, job_id: str, *, worker: str, duration: timedelta) -> AsyncLease:
        lease = await _claim(lambda: self.sync.claim_job(production, job_id, worker=worker, duration=duration))
        assert lease is not None  # claim_job raises instead
        return AsyncLease(lease)

    async def cancel(self, production: str, job_id: str) -> None:
        await _run(lambda: self.sync.cancel(production, job_id))

    async def retry_job(self, production: str, job_id: str) -> None:
        await _run(lambda: self.sync.retry_job(production, job_id))

    async def redrive(self, production: str, *, states: Iterable[Union[JobState, str]]) -> int:
        return await _run(lambda: self.sync.redrive(production, states=states))

    async def import_token(self, token: str) -> AsyncLease:
        # Not released on cancellation: the token's claim may be another
        # holder's to finish.
        return AsyncLease(await _run(lambda: self.sync.import_token(token)))

    async def jobs(self, production: str) -> List[Job]:
        return await _run(lambda: self.sync.jobs(production))

    async def events(self, production: Optional[str] = None, after: int = 0) -> List[Event]:
        return await _run(lambda: self.sync.events(production, after))

    # The paged observations: each awaitable is one page read in a thread;
    # each async iterator reads one page per thread hop (never one per
    # item, never the whole listing) and checks its arguments at the call.

    async def jobs_page(
        self,
        production: str,
        *,
        states: Optional[Sequence[str]] = None,
        key: Optional[str] = None,
        job_id: Optional[str] = None,
        cursor: Optional[str] = None,
        limit: int = 0,
    ) -> Page[Job]:
        return await _run(
            lambda: self.sync.jobs_page(production, states=states, key=key, job_id=job_id, cursor=cursor, limit=limit)
        )

    def iter_jobs(
        self,
        production: str,
        *,
        states: Optional[Sequence[str]] = None,
        key: Optional[str] = None,
        page_size: int = 0,
    ) -> AsyncIterator[Job]:
        """``async for job in auth.iter_jobs(production)``: ``Authority.iter_jobs``,
        each job listed once even while states change."""
        return _paged(self.sync._job_pages(production, states, key, page_size))

    async def events_page(
        self,
        production: Optional[str] = None,
        *,
        job_id: Optional[str] = None,
        kinds: Optional[Sequence[str]] = None,
        after: int = 0,
        limit: int = 0,
    ) -> Page[Event]:
        return await _run(
            lambda: self.sync.events_page(production, job_id=job_id, kinds=kinds, after=after, limit=limit)
        )

    def iter_events(
        self,
        production: Optional[str] = None,
        *,
        job_id: Optional[str] = None,
        kinds: Optional[Sequence[str]] = None,
        after: int = 0,
        page_size: int = 0,
    ) -> AsyncIterator[Event]:
        """``Authority.iter_events`` for ``async for``: the events with seq >
        after that can be read now."""
        return _paged(self.sync._event_pages(production, job_id, kinds, after, page_size))

    async def job(self, production: str, job_id: str) -> JobRecord:
        return await _run(lambda: self.sync.job(production, job_id))

    async def productions_page(self, *, cursor: Optional[str] = None, limit: int = 0) -> Page[Production]:
        return await _run(lambda: self.sync.productions_page(cursor=cursor, limit=limit))

    def iter_productions(self, *, page_size: int = 0) -> AsyncIterator[Production]:
        """``Authority.iter_productions`` for ``async for``."""
        return _paged(self.sync._production_pages(page_size))

    async def job_counts(self, production: str) -> JobCounts:
        return await _run(lambda: self.sync.job_counts(production))

    def work(
        self, production: str, *, worker: str, duration: timedelta, **options: Unpack[WorkOptions]
    ) -> "AsyncWorker":
        """The worker loop (``Authority.work``) for ``async for`` and
        ``await run(handler)``; each claim waits in a thread. While it runs
        in the main thread's event loop it drains on SIGINT and SIGTERM and
        gives the jobs back on a second one, as ``Worker.run`` does
        (``handle_signals``: None, the default, means "if this is the main
        thread"; False leaves the signals alone). ``stop()`` drains it from
        any thread; cancelling the task gives its jobs back."""
        handle_signals = options.pop("handle_signals", None)
        # The blocking loop runs in worker threads, where it could handle no
        # signal: the event loop's handlers are this face's own.
        options["handle_signals"] = False
        return AsyncWorker(
            self.sync.work(production, worker=worker, duration=duration, **options), handle_signals=handle_signals
        )

    async def run(self, call: Callable[[Authority], _T]) -> _T:
        """Runs call(authority) in a worker thread: a whole edit, say, which
        must stay on one thread (``auth.run(lambda a: ...)``)."""
        return await _run(lambda: call(self.sync))

    def __repr__(self) -> str:
        return f"<leases.aio.AsyncAuthority {self.sync!r}>"


# The signals a worker loop drains on, as the blocking loop's.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class AsyncWorker(_AsyncHandle):
    """``Authority.work``'s loop for ``async for``: each step (settling the
    previous job, claiming the next, waiting for it) runs in a worker thread,
    so the event loop keeps running. ``async with`` ends it on exit, giving
    back a job the body left unsettled; ``stop()`` drains it from the loop or
    any thread.

    While ``async for`` or ``run()`` runs in the main thread's event loop,
    SIGINT and SIGTERM drain it as they drain ``Worker.run``
    (``handle_signals``: None, the default, means "if this is the main
    thread"): the first one claims nothing more and lets the running jobs
    finish. Its handlers are the event loop's (``loop.add_signal_handler``),
    ahead of ``asyncio.run``'s own SIGINT handler, and the handlers they
    replaced come back when the loop ends, also on an error; a signal the
    process was started ignoring stays ignored. A second signal, or the
    drain timeout passing during a drain, gives the running jobs back at
    once and cancels the tasks running them; ``run()`` then raises
    ``KeyboardInterrupt`` for SIGINT, else ``DrainTimeout`` when jobs were
    running, and so does leaving ``async with`` on that cancellation (a bare
    ``async for`` lets the ``CancelledError`` through). Without signal
    handling (``handle_signals=False``, or a loop in another thread),
    cancelling the awaiting task gives its jobs back."""

    sync: Worker

    def __init__(self, worker: Worker, *, handle_signals: Optional[bool] = None) -> None:
        self.sync = worker
        self._steps: Optional[Iterator[Lease]] = None
        self._scoped = False
        self._handle_signals = handle_signals
        # Set while this worker's signal handlers are in place: the loop that
        # holds them, and what each replaced (the signal module's handler,
        # and the loop's own when it had one).
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._saved: List[Tuple[int, Any, Optional[asyncio.Handle]]] = []
        self._signalled = False  # a signal came
        self._alarm: Optional[asyncio.TimerHandle] = None  # the drain timeout, once a drain began
        self._tasks: Sequence["asyncio.Future[Any]"] = ()  # what runs the jobs: cancelled on a give-back
        self._ending: Optional[BaseException] = None  # what a give-back ends the loop with

    def stop(self) -> None:
        """Drains: claims nothing more (a waiting claim ends at once), lets
        the running jobs finish, then ends the loop (``Worker.stop``). From
        the loop or any thread; idempotent. While the signal handlers are in
        place, the drain timeout then ends the loop as after a signal."""
        self.sync.stop()
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._arm_alarm)
            except RuntimeError:  # the loop closed meanwhile
                pass

    @property
    def stopping(self) -> bool:
        return self.sync.stopping

    # ---- signals -------------------------------------------------------------

    def _install_signals(self, tasks: Sequence["asyncio.Future[Any]"]) -> bool:
        """Drains on SIGINT and SIGTERM while the loop runs, when the option
        asks for it (None: if this is the main thread); tasks run the jobs,
        and a give-back cancels them. Whether this call installed them (the
        caller then restores them)."""
        if self._loop is not None:
            return False
        self._tasks = tasks
        wanted = self._handle_signals
        main = threading.current_thread() is threading.main_thread()
        if wanted is None:
            wanted = main
        if not wanted:
            return False
        if not main:
            raise RuntimeError(
                "handle_signals=True needs the main thread's event loop (Python runs signal handlers there); "
                "in other threads call worker.stop() instead"
            )
        loop = asyncio.get_running_loop()
        self._loop = loop
        # A handler of the loop's own (add_signal_handler) is held by the
        # loop, not by the signal module: it is put back there.
        own = getattr(loop, "_signal_handlers", None)
        try:
            for sig in _SIGNALS:
                previous = signal.getsignal(sig)
                if previous is signal.SIG_IGN:  # started ignoring it (nohup, a background job)
                    continue
                before = own.get(sig) if isinstance(own, dict) else None
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._saved.append((sig, previous, before))
        except NotImplementedError:
            # An event loop without signal handlers (Windows'): by default
            # the loop runs without them, as in a thread.
            self._restore_signals()
            if self._handle_signals:
                raise
            return False
        except BaseException:
            self._restore_signals()
            raise
        return True

    def _restore_signals(self) -> None:
        """Puts back the handlers the loop's replaced (idempotent; in the
        main thread, where they were installed)."""
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
        loop, saved = self._loop, self._saved
        if loop is None or threading.current_thread() is not threading.main_thread():
            return
        self._loop, self._saved = None, []
        for sig, previous, before in reversed(saved):
            try:
                loop.remove_signal_handler(sig)
                if before is not None and not before.cancelled():
                    loop.add_signal_handler(sig, getattr(before, "_callback"), *getattr(before, "_args"))
                elif previous is not None:
                    signal.signal(sig, previous)
            except (RuntimeError, ValueError, OSError) as e:  # the loop closed meanwhile, say
                _worker_log.warning(
                    "worker %s: signal %d: its previous handler could not be put back: %s", self.sync.worker, sig, e
                )

    def _on_signal(self, signum: int) -> None:
        # A callback of the event loop, one at a time: a second signal is
        # always taken for one, however soon it follows the first.
        second = self._signalled or self.sync._asked
        self._signalled = True
        if not second:
            _worker_log.info("worker %s: signal %d: draining", self.sync.worker, signum)
            self.sync.stop()
            self._arm_alarm()
            return
        self._give_back(signum)

    def _arm_alarm(self) -> None:
        """Once a drain began: gives the jobs back when the drain timeout
        passes, as a second signal does (the library releases them then; this
        also ends the tasks running them)."""
        drain_s = self.sync._drain_s
        if drain_s is not None and self._loop is not None and self._alarm is None:
            self._alarm = self._loop.call_later(drain_s, self._give_back, None)

    def _give_back(self, signum: Optional[int]) -> None:
        """A second signal, or the drain timeout passing (signum None): the
        running jobs are given back at once and the tasks running them
        cancelled; the loop ends with KeyboardInterrupt for SIGINT, else
        DrainTimeout when jobs were running."""
        sync = self.sync
        with sync._lock:
            out = sorted(lease.job_id for lease in sync._out)
        sync._stop(STOP_GIVE_BACK)
        if self._ending is None:
            if signum == signal.SIGINT:
                self._ending = KeyboardInterrupt()
            elif out:
                self._ending = drain_timeout(sync.worker, out)
            else:
                return
        for task in self._tasks:
            task.cancel()

    def _raise_ending(self, uncancel: bool) -> None:
        """Raises what a give-back ends the loop with, in place of the
        cancellation it caused (uncancel: of the current task)."""
        ending = self._ending
        if ending is None:
            return
        if uncancel:
            undo = getattr(asyncio.current_task(), "uncancel", None)  # Python 3.11
            if undo is not None:
                undo()
        raise ending from None

    # ---- the loop --------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[AsyncLease]:
        return self._leases()

    async def __anext__(self) -> AsyncLease:
        if self._steps is None:
            self._steps = iter(self.sync)
        steps = self._steps
        lease = await _run_to_the_end(lambda: next(steps, None), self.sync.stop)
        if lease is None:
            raise StopAsyncIteration
        return AsyncLease(lease)

    async def _leases(self) -> AsyncGenerator[AsyncLease, None]:
        """What ``async for`` iterates: an async generator, so that leaving
        the loop closes it (asyncio runs its ``aclose()``) even while this
        worker is still referenced. Outside ``async with``, closing it ends
        the loop as a bare ``for`` does: a job left unsettled is failed for
        a retry. Inside, ``__aexit__`` ends the loop, knowing why. The signal
        handlers are in place from its start to its end; a give-back cancels
        the task iterating it."""
        task = asyncio.current_task()
        installed = self._install_signals(() if task is None else (task,))
        try:
            while True:
                try:
                    lease = await self.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    self._raise_ending(uncancel=True)
                    raise
                yield lease
        finally:
            if installed:
                self._restore_signals()
            if not self._scoped:
                await _run(self.sync._close_loop)

    async def __aenter__(self) -> "AsyncWorker":
        self._scoped = True
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._restore_signals()
        await _run(lambda: self.sync.__exit__(exc_type, exc, tb))
        if isinstance(exc, asyncio.CancelledError):
            self._raise_ending(uncancel=True)

    async def run(self, handler: Callable[[AsyncLease], Awaitable[Optional[Mapping[str, Any]]]]) -> None:
        """``Worker.run`` for asyncio: ``await handler(lease)`` for each job,
        in ``concurrency`` tasks at once; the metadata it returns is
        published by the completion, in one commit with the next claim; an
        ``Exception`` fails the job for a retry with its text and the loop
        goes on; a cancellation (or another ``BaseException``) gives the
        job back, stops the loop (the other tasks' jobs are given back too)
        and is raised. SIGINT and SIGTERM drain it, a second one gives the
        jobs back (see the class)."""
        sync = self.sync
        if sync._iterated:
            raise RuntimeError("a leases.Worker runs once; make another with Authority.work")
        sync._iterated = True

        async def serve() -> None:
            while True:
                lease = await _run_to_the_end(sync._next, sync.stop)
                if lease is None:
                    return
                try:
                    metadata = await handler(AsyncLease(lease))
                except Exception as e:
                    error = e
                    await _run(lambda: sync._failed(lease, error))
                    continue
                except BaseException:
                    sync._stop(STOP_GIVE_BACK)
                    await _run(lambda: sync._settle(lease, RESULT_RELEASE))
                    raise
                await _run(lambda: sync._returned(lease, metadata))

        tasks: List["asyncio.Future[None]"] = []
        installed = self._install_signals(tasks)  # filled in below, before any signal can be handled
        try:
            tasks.extend(asyncio.ensure_future(serve()) for _ in range(sync.concurrency))
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                sync._stop(STOP_GIVE_BACK)
                for t in tasks:
                    t.cancel()
                await asyncio.wait(tasks)
                self._raise_ending(uncancel=False)
                raise
            self._raise_ending(uncancel=False)
        finally:
            if installed:
                self._restore_signals()

    async def close(self) -> None:
        """Ends the loop, giving back a job the body left unsettled."""
        self._restore_signals()
        await _run(self.sync.close)

    async def aclose(self) -> None:
        """Ends the loop, giving back a job the body left unsettled (as
        leaving ``async with`` does)."""
        await self.close()

    def __repr__(self) -> str:
        return f"<leases.aio.AsyncWorker {self.sync!r}>"
