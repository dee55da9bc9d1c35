"""leases.aio on SQLite and PostgreSQL: the blocking calls run in threads, so
the event loop keeps running while a claim waits for a lock; a claim whose
caller was cancelled is released; results and exceptions are those of the
blocking API."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Dict, List, Optional

import pytest

import leases
from leases.aio import AsyncAuthority, AsyncLease

from conftest import PRODUCTION, SECONDS_30


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
            lease = await asyncio.wait_for(claim, 5)
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
            assert time.monotonic() - start < 2

    asyncio.run(main())


def test_the_async_work_loop_keeps_jobs_alive_and_drains_on_stop(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            first = await auth.request_job(PRODUCTION)
            second = await auth.request_job(PRODUCTION)
            seen = []
            async with auth.work(PRODUCTION, worker="aio", duration=timedelta(milliseconds=600)) as jobs:
                async for lease in jobs:
                    seen.append(lease.job_id)
                    await asyncio.sleep(1.0)  # past the duration: kept alive
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
            assert failed.state == "requested" and failed.attempt_history[-1].reason == "ValueError: bad input"
            done = await auth.run(lambda a: a.job(PRODUCTION, ids[3]))
            assert done.state == "completed" and done.facts.metadata == {"by": "handler"}

    asyncio.run(main())


def test_an_async_wait_for_a_lost_lease_sees_a_coordinators_cancel(location: str) -> None:
    async def main() -> None:
        async with await AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            job_id = await auth.request_job(PRODUCTION)
            lease = await auth.claim(PRODUCTION, worker="aio", duration=timedelta(seconds=3))
            assert lease is not None
            await lease.keep_alive(interval=timedelta(milliseconds=200))
            waiting = asyncio.ensure_future(lease.wait_lost(timedelta(seconds=20)))
            await asyncio.sleep(0.1)
            await auth.cancel(PRODUCTION, job_id)
            why = await asyncio.wait_for(waiting, 5)
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
