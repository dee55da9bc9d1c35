"""leases.aio on SQLite and PostgreSQL: the blocking calls run in threads, so
the event loop keeps running while a claim waits for a lock; a claim whose
caller was cancelled is released; results and exceptions are those of the
blocking API."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, TypeVar

import pytest

import leases
import leases.aio
from leases.aio import AsyncAuthority, AsyncExecution, AsyncLease

from conftest import PRODUCTION, SECONDS_30

# A bound on a test whose worker takes signals: a signal lost would
# otherwise leave it waiting for good.
BOUND_S = 120.0


async def ticking(ticks: List[int]) -> None:
    while True:
        ticks[0] += 1
        await asyncio.sleep(0.01)


def test_async_claim_renew_and_complete_round_trip(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            job_id = await auth.request_job(PRODUCTION, key="frame-1", payload=b"one")
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert isinstance(lease, AsyncLease) and lease.job_id == job_id
            assert await lease.payload() == b"one"
            before = await lease.expiry()
            await lease.renew(timedelta(minutes=5))
            assert await lease.expiry() > before
            await lease.complete(metadata={"frames": 1})
            assert await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30) is None
            jobs = await auth.jobs(PRODUCTION)
            assert [(j.id, j.state, j.worker) for j in jobs] == [(job_id, "completed", "aio")]
            assert [e.kind for e in await auth.events(PRODUCTION)][-1] == "completed"
        assert auth.closed

    asyncio.run(main())


def test_async_complete_and_claim_next_completes_and_claims_the_next_job_in_one_call(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            first = await auth.request_job(PRODUCTION, payload=b"one")
            second = await auth.request_job(PRODUCTION, payload=b"two")
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert lease is not None and lease.job_id == first
            nxt = await lease.complete_and_claim_next(metadata={"n": 1}, duration=SECONDS_30)
            assert isinstance(nxt, AsyncLease) and nxt.job_id == second
            assert await nxt.payload() == b"two"
            assert await nxt.complete_and_claim_next(duration=SECONDS_30) is None  # nothing left
            jobs = await auth.jobs(PRODUCTION)
            assert [(j.id, j.state, j.worker) for j in jobs] == [(first, "completed", "aio"), (second, "completed", "aio")]
            record = await auth.job(PRODUCTION, first)
            assert record.facts.metadata == {"n": 1}
            with pytest.raises(leases.InvalidDurationError):  # checked before anything is sent
                await nxt.complete_and_claim_next(duration=timedelta(0))

    asyncio.run(main())


def test_a_claim_waiting_for_a_lock_does_not_block_the_event_loop(location: str) -> None:
    async def main() -> None:
        auth = await AsyncAuthority.open(location)
        await auth.create_production(PRODUCTION)
        job_id = await auth.request_job(PRODUCTION)
        with leases.Authority(location) as other:
            edit = other.edit()  # holds the job (and on SQLite the writer lock)
            assert edit.claim(PRODUCTION, worker="edit", duration=SECONDS_30) is not None
            ticks = [0]
            ticker = asyncio.ensure_future(ticking(ticks))
            claim = asyncio.ensure_future(auth.claim_job(PRODUCTION, job_id, worker="aio", duration=SECONDS_30))
            await asyncio.sleep(0.3)
            assert not claim.done(), "the claim did not wait for the edit"
            assert ticks[0] >= 3, f"the loop ran {ticks[0]} times in 0.3 s while a claim waited"
            edit.abort()
            lease = await asyncio.wait_for(claim, 30)
            ticker.cancel()
        await lease.complete()
        assert [j.worker for j in await auth.jobs(PRODUCTION)] == ["aio"]
        await auth.close()

    asyncio.run(main())


def test_a_claim_whose_caller_was_cancelled_is_released(location: str) -> None:
    async def main() -> leases.Job:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            job_id = await auth.request_job(PRODUCTION)
            with leases.Authority(location) as other:
                edit = other.edit()
                assert edit.claim(PRODUCTION, worker="edit", duration=SECONDS_30) is not None
                claim = asyncio.ensure_future(
                    auth.claim_job(PRODUCTION, job_id, worker="gone", duration=SECONDS_30)
                )
                await asyncio.sleep(0.2)
                claim.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await claim
                edit.abort()  # the thread's claim now goes through, then is released
            deadline = time.monotonic() + 30
            while True:
                (job,) = await auth.jobs(PRODUCTION)
                if job.attempts == 1 and job.state == "requested" or time.monotonic() > deadline:
                    return job
                await asyncio.sleep(0.05)

    job = asyncio.run(main())
    assert (job.state, job.attempts, job.worker) == ("requested", 1, None)


def test_exceptions_and_token_handover_are_those_of_the_blocking_api(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            with pytest.raises(leases.NotFoundError):
                await auth.claim_job(PRODUCTION, "00000000-0000-0000-0000-000000000000", worker="w",
                                     duration=SECONDS_30)
            with pytest.raises(leases.InvalidDurationError):
                await auth.claim(PRODUCTION, worker="w", duration=timedelta(0))
            job_id = await auth.request_job(PRODUCTION)
            lease = await auth.claim_job(PRODUCTION, job_id, worker="w", duration=SECONDS_30)
            token = await lease.export_token()
            await lease.close()
            again = await auth.import_token(token)
            assert "lt1." not in repr(again) and again.job_id == job_id
            await again.fail("reason")
            with pytest.raises(leases.ClosedError):  # the claim ended with fail()
                await again.renew(SECONDS_30)
            # A whole edit in one thread.
            await auth.request_job(PRODUCTION)

            def edit_in_thread(a: leases.Authority) -> str:
                with a.edit() as edit:
                    pending = edit.claim(PRODUCTION, worker="edit", duration=SECONDS_30)
                    assert pending is not None
                    edit.complete(pending, metadata={"inline": True})
                    return pending.job_id

            done = await auth.run(edit_in_thread)
            states = {j.id: j.state for j in await auth.jobs(PRODUCTION)}
            assert states == {job_id: "failed", done: "completed"}

    asyncio.run(main())


def test_an_async_waiting_claim_wakes_for_a_request_while_the_loop_runs(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            ticks = [0]
            ticker = asyncio.ensure_future(ticking(ticks))
            claim = asyncio.ensure_future(
                auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30, wait=timedelta(minutes=5))
            )
            await asyncio.sleep(0.3)
            assert not claim.done()
            job_id = await auth.request_job(PRODUCTION)
            lease = await asyncio.wait_for(claim, 60)  # eventually; a stalled host may take seconds
            ticker.cancel()
            assert lease is not None and lease.job_id == job_id
            assert ticks[0] >= 10, f"the loop ran {ticks[0]} times while a claim waited"
            await lease.complete()

    asyncio.run(main())


def test_cancelling_an_async_wait_ends_it_at_once_and_claims_nothing(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            claim = asyncio.ensure_future(
                auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30, wait=timedelta(hours=1))
            )
            await asyncio.sleep(0.2)
            start = time.monotonic()
            claim.cancel()
            with pytest.raises(asyncio.CancelledError):
                await claim
            # The thread's wait ended too: a job requested now stays requested.
            await auth.request_job(PRODUCTION)
            await asyncio.sleep(0.3)
            assert [j.state for j in await auth.jobs(PRODUCTION)] == ["requested"]
            # At once, not the hour: seconds leave room for a stalled host.
            assert time.monotonic() - start < 0.3 + 10

    asyncio.run(main())


def test_the_async_work_loop_keeps_jobs_alive_and_drains_on_stop(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            first = await auth.request_job(PRODUCTION)
            second = await auth.request_job(PRODUCTION)
            seen = []
            # 2 s: a real-time claim kept alive every third of it survives a
            # host stalled for a second.
            async with auth.work(PRODUCTION, worker="aio", duration=timedelta(seconds=2)) as jobs:
                async for lease in jobs:
                    seen.append(lease.job_id)
                    await asyncio.sleep(3.0)  # past the duration: kept alive
                    assert lease.lost is None and await lease.check() is None
                    if lease.job_id == second:
                        jobs.stop()  # drains: this job is completed, nothing more claimed
            assert seen == [first, second]
            states = [j.state for j in await auth.jobs(PRODUCTION)]
            assert states == ["completed", "completed"]
            assert "renewed" in [e.kind for e in await auth.events(PRODUCTION) if e.job_id == first]

    asyncio.run(main())


def test_the_async_work_loop_completes_and_claims_the_next_in_one_commit_and_run_fails_a_raising_handlers_job(
    location: str,
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(
                PRODUCTION, policy=leases.RetryPolicy(backoff_base=timedelta(hours=1), backoff_cap=timedelta(hours=1))
            )
            ids = [await auth.request_job(PRODUCTION) for _ in range(4)]
            async with auth.work(PRODUCTION, worker="aio", duration=SECONDS_30, max_jobs=2) as jobs:
                async for lease in jobs:
                    pass
            events = await auth.events(PRODUCTION)
            seq = {(e.job_id, e.kind): e.seq for e in events}
            # The first completion claimed the second job in its commit;
            # at max_jobs the second claimed nothing.
            assert seq[(ids[1], "claimed")] == seq[(ids[0], "completed")] + 1
            assert (ids[2], "claimed") not in seq

            async def handler(lease: AsyncLease) -> Optional[Dict[str, object]]:
                if lease.job_id == ids[2]:
                    raise ValueError("bad input")
                return {"by": "handler"}

            async with auth.work(PRODUCTION, worker="aio", duration=SECONDS_30, exit_when_empty=True) as worker:
                await worker.run(handler)
            failed = await auth.run(lambda a: a.job(PRODUCTION, ids[2]))
            assert failed.state == "requested" and failed.attempt_history[-1].reason == "bad input"
            done = await auth.run(lambda a: a.job(PRODUCTION, ids[3]))
            assert done.state == "completed" and done.facts.metadata == {"by": "handler"}

    asyncio.run(main())


class Abort(BaseException):
    """What a handler raises to end the loop with an error."""


def test_an_async_worker_takes_sigterm_while_it_runs_and_puts_back_the_handlers_it_replaced(location: str) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        sigint_before = signal.getsignal(signal.SIGINT)  # asyncio.run's own, from Python 3.11
        theirs: List[int] = []
        loop.add_signal_handler(signal.SIGTERM, theirs.append, 1)  # the program's own, put back after
        try:
            async with await AsyncAuthority.open(location) as auth:
                await auth.create_production(PRODUCTION)
                ids = [await auth.request_job(PRODUCTION) for _ in range(3)]
                worker = auth.work(PRODUCTION, worker="aio", duration=SECONDS_30)

                async def handler(lease: AsyncLease) -> None:
                    assert signal.getsignal(signal.SIGINT) is not sigint_before
                    os.kill(os.getpid(), signal.SIGTERM)  # the worker's: it drains
                    while not worker.stopping:
                        await asyncio.sleep(0.01)

                await worker.run(handler)
                assert theirs == []
                assert [j.state for j in await auth.jobs(PRODUCTION)] == ["completed", "requested", "requested"]
                assert signal.getsignal(signal.SIGINT) is sigint_before
                os.kill(os.getpid(), signal.SIGTERM)  # the program's again
                for _ in range(500):
                    if theirs:
                        break
                    await asyncio.sleep(0.01)
                assert theirs == [1]

                # Put back also when the loop ends on an error, in both forms.
                async def abort(lease: AsyncLease) -> None:
                    raise Abort()

                with pytest.raises(Abort):
                    await auth.work(PRODUCTION, worker="aio", duration=SECONDS_30).run(abort)
                with pytest.raises(Abort):
                    async with auth.work(PRODUCTION, worker="aio", duration=SECONDS_30) as jobs:
                        async for lease in jobs:
                            assert signal.getsignal(signal.SIGINT) is not sigint_before
                            raise Abort()
                assert signal.getsignal(signal.SIGINT) is sigint_before
                assert [j.state for j in await auth.jobs(PRODUCTION)] == ["completed", "requested", "requested"]
                assert all(e.kind != "claimed" for e in await auth.events(PRODUCTION) if e.job_id == ids[2])
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(500):
                    if len(theirs) == 2:
                        break
                    await asyncio.sleep(0.01)
                assert theirs == [1, 1]
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    # As an interactive process starts: a process started in the background
    # of a script ignores SIGINT, and then neither asyncio.run nor the worker
    # takes it (a signal the process was started ignoring stays ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        asyncio.run(asyncio.wait_for(main(), BOUND_S))
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_async_worker_without_signal_handling_leaves_the_signals_alone_and_gives_back_when_cancelled(
    location: str,
) -> None:
    async def main(production: str, handle_signals: Optional[bool]) -> None:
        sigint_before = signal.getsignal(signal.SIGINT)
        sigterm_before = signal.getsignal(signal.SIGTERM)
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(production)
            await auth.request_job(production)
            started = asyncio.Event()

            async def handler(lease: AsyncLease) -> None:
                assert signal.getsignal(signal.SIGINT) is sigint_before
                assert signal.getsignal(signal.SIGTERM) is sigterm_before
                started.set()
                await asyncio.sleep(600)

            worker = auth.work(production, worker="aio", duration=SECONDS_30, handle_signals=handle_signals)
            task = asyncio.ensure_future(worker.run(handler))
            await asyncio.wait([task, asyncio.ensure_future(started.wait())], return_when=asyncio.FIRST_COMPLETED)
            task.cancel()  # as before: the job is given back
            with pytest.raises(asyncio.CancelledError):
                await task
            assert [str(j.state) for j in await auth.jobs(production)] == ["requested"]
            assert [e.kind for e in await auth.events(production)][-1] == "released"

    asyncio.run(main("off", False))  # turned off, in the main thread
    errors: List[BaseException] = []

    def in_a_thread(production: str, handle_signals: Optional[bool]) -> None:
        try:
            asyncio.run(main(production, handle_signals))
        except BaseException as e:
            errors.append(e)

    # By default a loop in another thread handles none; asked to, it refuses.
    for production, option in (("thread", None), ("asked", True)):
        t = threading.Thread(target=in_a_thread, args=(production, option))
        t.start()
        t.join(60)
        assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError) and "main thread" in str(errors[0]), errors


def test_an_async_wait_for_a_lost_lease_sees_a_coordinators_cancel(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            job_id = await auth.request_job(PRODUCTION)
            lease = await auth.claim(PRODUCTION, worker="aio", duration=timedelta(seconds=3))
            assert lease is not None
            await lease.keep_alive(interval=timedelta(milliseconds=200))
            waiting = asyncio.ensure_future(lease.wait_lost(timedelta(seconds=60)))
            await asyncio.sleep(0.1)
            await auth.cancel(PRODUCTION, job_id)
            why = await asyncio.wait_for(waiting, 60)  # eventually; a stalled host may take seconds
            assert isinstance(why, leases.CancelledError)
            await lease.close()

    asyncio.run(main())


def test_async_retries_priorities_and_redrive_are_those_of_the_blocking_api(location: str) -> None:
    policy = leases.RetryPolicy(max_attempts=2, backoff_base=timedelta(0))

    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION, policy=policy)
            low = await auth.request_job(PRODUCTION, key="low")
            high = await auth.request_job(PRODUCTION, key="high", priority=9)
            later = await auth.request_job(PRODUCTION, key="later", delay=timedelta(days=1))
            for _ in range(policy.max_attempts):
                lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
                assert lease is not None and lease.job_id == high
                await lease.fail_retry("crash")
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert lease is not None and lease.job_id == low
            await lease.fail("broken")
            assert await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30) is None  # later waits
            states = {j.id: j.state for j in await auth.jobs(PRODUCTION)}
            assert states == {low: "failed", high: leases.JobState.DEAD, later: "requested"}
            with pytest.raises(leases.InvalidArgumentError):
                await auth.redrive(PRODUCTION, states=["dead", "requested"])
            assert await auth.redrive(PRODUCTION, states=[leases.JobState.DEAD]) == 1
            await auth.retry_job(PRODUCTION, low)
            with pytest.raises(leases.WrongStateError):
                await auth.retry_job(PRODUCTION, later)
            await auth.set_policy(PRODUCTION, None)
            assert [p.policy for p in auth.sync.iter_productions()] == [leases.RetryPolicy()]
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert lease is not None and lease.job_id == high

    asyncio.run(main())


_T = TypeVar("_T")


class Hops:
    """Counts leases.aio's thread hops (its `_run`) and, per blocking page
    call of an authority, the calls and the threads they ran on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hops = 0
        self.pages: Dict[str, int] = {}
        self.threads: List[int] = []
        self.monkeypatch = monkeypatch
        run = leases.aio._run

        async def counted(call: Callable[[], _T]) -> _T:
            self.hops += 1
            return await run(call)

        monkeypatch.setattr(leases.aio, "_run", counted)

    def count_pages(self, auth: AsyncAuthority, name: str, before: Optional[Callable[[], None]] = None) -> None:
        call = getattr(auth.sync, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.pages[name] = self.pages.get(name, 0) + 1
            self.threads.append(threading.get_ident())
            if before is not None:
                before()
            return call(*args, **kwargs)

        self.monkeypatch.setattr(auth.sync, name, counted)


async def collect(items: Any) -> List[Any]:
    return [item async for item in items]


def test_async_iter_jobs_walks_every_job_once_a_page_per_thread_hop(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            ids = [await auth.request_job(PRODUCTION, key=f"k{i}") for i in range(25)]
            hops = Hops(monkeypatch)
            hops.count_pages(auth, "jobs_page")
            listed = []
            async for job in auth.iter_jobs(PRODUCTION, page_size=10):
                listed.append(job)
                if len(listed) == 5:
                    # States change under the cursor: a job already listed and
                    # one of a later page are claimed (blocking, on purpose:
                    # no hop of the iterator's).
                    assert auth.sync.claim_job(PRODUCTION, ids[0], worker="w", duration=SECONDS_30)
                    assert auth.sync.claim_job(PRODUCTION, ids[20], worker="w", duration=SECONDS_30)
            assert [j.id for j in listed] == ids  # each once, in request order
            # Read a page at a time: the later page saw the claim made meanwhile.
            assert (listed[0].state, listed[20].state) == ("requested", "claimed")
            assert hops.pages == {"jobs_page": 3} and hops.hops == 3
            assert threading.get_ident() not in hops.threads, "a page was read on the event loop's thread"

    asyncio.run(main())


def test_async_iter_events_and_iter_productions_read_a_page_per_thread_hop(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            for name in ("a", "b", "c", "d", "e"):
                await auth.create_production(name)
            for _ in range(7):
                await auth.request_job("c")
            hops = Hops(monkeypatch)
            hops.count_pages(auth, "events_page")
            hops.count_pages(auth, "productions_page")
            events = await collect(auth.iter_events("c", page_size=3))
            assert events == auth.sync.events("c") and len(events) >= 7
            assert hops.hops == hops.pages["events_page"] == -(-len(events) // 3)
            later = await collect(auth.iter_events("c", after=events[4].seq, page_size=3))
            assert later == events[5:]
            before = hops.hops
            productions = await collect(auth.iter_productions(page_size=2))
            assert [p.name for p in productions] == ["a", "b", "c", "d", "e"]
            assert hops.pages["productions_page"] == hops.hops - before == 3
            assert threading.get_ident() not in hops.threads, "a page was read on the event loop's thread"
            assert productions == list(auth.sync.iter_productions())

    asyncio.run(main())


def test_async_iterators_check_their_arguments_at_the_call_before_any_store_access(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            hops = Hops(monkeypatch)
            calls: List[Callable[[], object]] = [
                lambda: auth.iter_jobs(PRODUCTION, page_size=-1),
                lambda: auth.iter_jobs(PRODUCTION, page_size=1001),
                lambda: auth.iter_jobs(PRODUCTION, states=["no-such-state\0"]),
                lambda: auth.iter_jobs(PRODUCTION, key="a\0b"),
                lambda: auth.iter_jobs("a\0b"),
                lambda: auth.iter_events(PRODUCTION, after=-1),
                lambda: auth.iter_events(PRODUCTION, after=2**63),
                lambda: auth.iter_events(PRODUCTION, job_id="a\0b"),
                lambda: auth.iter_productions(page_size=1001),
            ]
            for call in calls:
                with pytest.raises(leases.InvalidArgumentError):
                    call()
            with pytest.raises(TypeError):
                auth.iter_jobs(PRODUCTION, states="requested")
            with pytest.raises(TypeError):
                auth.iter_events(PRODUCTION, kinds=[1])  # type: ignore[list-item]
            with pytest.raises(TypeError):
                auth.iter_productions(page_size=True)
            # Nothing is read before the first step; a store's refusal comes from it.
            missing = auth.iter_jobs("no-such-production")
            assert hops.hops == 0
            with pytest.raises(leases.NotFoundError):
                await missing.__anext__()
            assert hops.hops == 1
            assert [p.name for p in await collect(auth.iter_productions())] == [PRODUCTION]

    asyncio.run(main())


def test_a_cancelled_async_iteration_leaves_the_authority_usable(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            ids = [await auth.request_job(PRODUCTION) for _ in range(3)]
            reading, returned = threading.Event(), threading.Event()
            page = auth.sync.jobs_page

            def slow_page(*args: Any, **kwargs: Any) -> Any:
                reading.set()
                time.sleep(0.3)
                try:
                    return page(*args, **kwargs)
                finally:
                    returned.set()

            monkeypatch.setattr(auth.sync, "jobs_page", slow_page)
            jobs = auth.iter_jobs(PRODUCTION, page_size=2)
            first = asyncio.ensure_future(jobs.__anext__())
            while not reading.is_set():
                await asyncio.sleep(0.01)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            # The page read in the thread had returned before the caller went on,
            # and the cancelled iteration is over.
            assert returned.is_set()
            with pytest.raises(StopAsyncIteration):
                await jobs.__anext__()
            monkeypatch.setattr(auth.sync, "jobs_page", page)
            assert [j.id for j in await collect(auth.iter_jobs(PRODUCTION, page_size=2))] == ids
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert lease is not None and lease.job_id == ids[0]
            await lease.complete()
            assert (await auth.job_counts(PRODUCTION))["completed"] == 1

    asyncio.run(main())


def test_async_paged_reads_and_records_are_those_of_the_blocking_api(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            await auth.create_production("other")
            ids = [await auth.request_job(PRODUCTION, key=f"k{i}", payload=b"x" * i) for i in range(5)]
            lease = await auth.claim_job(PRODUCTION, ids[1], worker="aio", duration=SECONDS_30)
            await lease.complete(metadata={"frames": 2})
            sync = auth.sync
            reads: List[Callable[[Any], Any]] = [
                lambda a: a.jobs_page(PRODUCTION, limit=2),
                lambda a: a.jobs_page(PRODUCTION, states=[leases.JobState.REQUESTED], limit=2),
                lambda a: a.jobs_page(PRODUCTION, key="k3"),
                lambda a: a.jobs_page(PRODUCTION, job_id=ids[4]),
                lambda a: a.events_page(PRODUCTION, kinds=["completed"]),
                lambda a: a.events_page(job_id=ids[1], after=1, limit=1),
                lambda a: a.productions_page(limit=1),
                lambda a: a.job(PRODUCTION, ids[1]),
            ]
            for read in reads:
                got = read(auth)
                assert isinstance(got, Awaitable)
                assert await got == read(sync)
            first = await auth.jobs_page(PRODUCTION, limit=2)
            assert isinstance(first, leases.Page) and first.next is not None
            rest = await auth.jobs_page(PRODUCTION, cursor=first.next, limit=100)
            assert [j.id for j in first.items + rest.items] == ids and rest.next is None
            record = await auth.job(PRODUCTION, ids[1])
            assert isinstance(record, leases.JobRecord) and record.facts.metadata == {"frames": 2}
            counts = await auth.job_counts(PRODUCTION)
            assert (counts["requested"], counts["completed"]) == (4, 1)
            with pytest.raises(leases.NotFoundError):
                await auth.job(PRODUCTION, "00000000-0000-0000-0000-000000000000")
            with pytest.raises(leases.InvalidArgumentError):
                await auth.jobs_page(PRODUCTION, limit=1001)
            with pytest.raises(leases.NotFoundError):
                await auth.job_counts("no-such-production")

    asyncio.run(main())


def test_an_async_execution_finishes_on_success_and_abandons_on_an_exception(
    location: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            done_id = await auth.request_job(PRODUCTION)
            kept_id = await auth.request_job(PRODUCTION)
            lease = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert lease is not None and lease.job_id == done_id
            async with await lease.execution(tmp_path) as run:
                assert isinstance(run, AsyncExecution) and run.lease is lease
                assert done_id in run.temp_path and os.path.dirname(run.final_path) == str(tmp_path)
                assert repr(run) == "<leases.aio.AsyncExecution " + repr(run.sync)[len("<leases.Execution ") :]
                assert repr(run).startswith(f"<leases.aio.AsyncExecution job_id='{done_id}'")
                await asyncio.to_thread(Path(run.temp_path).write_bytes, b"frame")
                run.metadata["frames"] = 1
            assert run.closed and Path(run.final_path).read_bytes() == b"frame"
            assert not Path(run.temp_path).exists()
            record = await auth.job(PRODUCTION, done_id)
            assert record.state == "completed" and record.facts.metadata == {"frames": 1}

            other = await auth.claim(PRODUCTION, worker="aio", duration=SECONDS_30)
            assert other is not None and other.job_id == kept_id
            with pytest.raises(RuntimeError, match="render failed"):
                async with await other.execution(tmp_path) as failed:
                    Path(failed.temp_path).write_bytes(b"partial")
                    raise RuntimeError("render failed")
            assert failed.closed and not Path(failed.temp_path).exists()
            assert not Path(failed.final_path).exists()
            assert (await auth.job(PRODUCTION, kept_id)).state == "claimed"  # the lease is still held
            explicit = await other.execution(tmp_path)
            Path(explicit.temp_path).write_bytes(b"second")
            await explicit.finish(metadata={"frames": 2})
            assert (await auth.job(PRODUCTION, kept_id)).facts.metadata == {"frames": 2}
            with pytest.raises(leases.ClosedError):  # consumed
                await explicit.finish()
            await explicit.abandon()  # idempotent once consumed

    asyncio.run(main())


def test_async_authority_open_takes_the_same_options_as_authority(tmp_path: Path) -> None:
    import inspect

    def options(fn: Any) -> Dict[str, Any]:
        ps = inspect.signature(fn).parameters.values()
        return {p.name: (p.kind, p.default) for p in ps if p.kind is inspect.Parameter.KEYWORD_ONLY}

    assert options(AsyncAuthority.open) == options(leases.Authority.__init__)
    location = str(tmp_path / "missing.db")

    async def main() -> None:
        with pytest.raises(leases.NotFoundError):
            await AsyncAuthority.open(location, must_exist=True)
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(ValueError):
            await AsyncAuthority.open(location, synchronous="OFF")
        async with await AsyncAuthority.open(
            location, synchronous="NORMAL", busy_timeout=timedelta(milliseconds=250)
        ) as auth:
            await auth.create_production(PRODUCTION)
        async with await AsyncAuthority.open(location, must_exist=True) as auth:
            assert await auth.jobs(PRODUCTION) == []

    asyncio.run(main())
