"""The Python face of the one worker loop (docs/workers.md): the shared
conformance suite (tests/vectors/worker_loop.json) on both stores, the
options of work(), concurrency in a thread pool and in asyncio tasks, and
Ctrl-C/SIGTERM draining a worker with its own thread pool, and an
asyncio.run worker, in a real process."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import threading
import time
from datetime import timedelta
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import leases
import leases.aio

import _pg
from conftest import PRODUCTION, SECONDS_30, load_vectors
from test_workers import EVENTUALLY, PROMPT, kinds, spawn, states

VECTORS = load_vectors("worker_loop.json")


@pytest.fixture
def store(location: str) -> Iterator[leases.Authority]:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION)
        yield a


def text_of(segments: List[Dict[str, Any]]) -> bytes:
    return b"".join(bytes.fromhex(s["hex"]) * int(s.get("times", 1)) for s in segments)


class Panic(RuntimeError):
    """What a handler raises for the vector's panic action."""


class Coordinator:
    """The test's side of the cancelled action: a thread that cancels,
    through the authority, as a coordinator does, each job a running
    handler names; and what each such handler's lease reported."""

    def __init__(self, store: leases.Authority, jobs: int) -> None:
        self.asks: "queue.Queue[Tuple[str, threading.Event]]" = queue.Queue()
        self.heard: List[Optional[leases.LeasesError]] = []
        self.failures: List[BaseException] = []
        self.thread = threading.Thread(target=self.serve, args=(store, jobs), daemon=True)
        self.thread.start()

    def serve(self, store: leases.Authority, jobs: int) -> None:
        for _ in range(jobs):
            try:
                job, done = self.asks.get(timeout=EVENTUALLY)
                store.cancel(PRODUCTION, job)
                done.set()
            except BaseException as e:  # the handler waits on: the test reports it
                self.failures.append(e)
                return

    def cancel(self, lease: leases.Lease) -> None:
        """Has the handler's job cancelled, and returns once it was."""
        done = threading.Event()
        self.asks.put((lease.job_id, done))
        assert done.wait(EVENTUALLY), "the coordinator never cancelled the job"


def scenario_handler(stopped: threading.Event, started: "threading.Semaphore", coordinator: Coordinator) -> Any:
    def handler(lease: leases.Lease) -> Optional[Dict[str, Any]]:
        started.release()
        action = lease.payload.decode()
        if action == "complete":
            return {"done": True}
        if action.startswith("error:"):
            raise ValueError(action[len("error:"):])
        if action.startswith("panic:"):
            raise Panic(action[len("panic:"):])
        if action.startswith("fail:"):
            lease.fail(action[len("fail:"):])
        elif action == "release":
            lease.release()
        elif action == "settle":
            lease.complete()
        elif action == "wait":
            assert stopped.wait(EVENTUALLY)
            return {"done": True}
        elif action == "hang":
            lease.wait_lost(timedelta(seconds=EVENTUALLY))
        elif action == "cancelled":
            coordinator.cancel(lease)
            # The cancel reaches the kept-alive lease at its next renewal;
            # with nothing to publish, the handler returns.
            coordinator.heard.append(lease.wait_lost(timedelta(seconds=EVENTUALLY)))
        return None

    return handler


@pytest.mark.parametrize("case", VECTORS["scenarios"], ids=[s["name"] for s in VECTORS["scenarios"]])
def test_every_shared_loop_scenario_ends_as_the_vector_says(store: leases.Authority, case: Dict[str, Any]) -> None:
    ids = [store.request_job(PRODUCTION, payload=action.encode()) for action in case["jobs"]]
    o = case["options"]
    options: Dict[str, Any] = {}
    if "concurrency" in o:
        options["concurrency"] = o["concurrency"]
    if "max_jobs" in o:
        options["max_jobs"] = o["max_jobs"]
    if "drain_timeout_ms" in o:
        options["drain_timeout"] = timedelta(milliseconds=o["drain_timeout_ms"])
    if "interval_ms" in o:
        options["interval"] = timedelta(milliseconds=o["interval_ms"])
    stop = case.get("stop")
    worker = store.work(
        PRODUCTION, worker="conformance", duration=SECONDS_30, exit_when_empty=stop is None,
        handle_signals=False, **options,
    )
    stopped = threading.Event()
    started = threading.Semaphore(0)
    cancelled = case["jobs"].count("cancelled")
    coordinator = Coordinator(store, cancelled)
    if stop is not None:
        want = min(o.get("concurrency", 1), len(ids))

        def stopper() -> None:
            # Once that many handlers run, as every face does: the loop's
            # "out" counts a claim under way too, which a stop then ends
            # (on PostgreSQL a claim takes long enough to be seen so).
            # Past EVENTUALLY it stops anyway: the states then fail the test.
            deadline = time.monotonic() + EVENTUALLY
            for _ in range(want):
                started.acquire(timeout=max(0.0, deadline - time.monotonic()))
            if stop == "drain":
                worker.stop()
            else:
                worker._stop(leases._abi.STOP_GIVE_BACK)
            stopped.set()

        threading.Thread(target=stopper, daemon=True).start()
    worker.run(scenario_handler(stopped, started, coordinator))
    coordinator.thread.join(EVENTUALLY)
    assert not coordinator.failures
    assert len(coordinator.heard) == cancelled, "a cancelled job's handler did not run"
    for why in coordinator.heard:
        assert isinstance(why, leases.CancelledError), f"the handler's lease reported {why!r}, not the cancel"
    assert worker.stats()["state"] == case["end"]
    assert [str(store.job(PRODUCTION, j).state) for j in ids] == case["states"]
    if "attempt" in case:
        attempt = store.job(PRODUCTION, ids[0]).attempt_history[-1]
        assert attempt.ending == case["attempt"]["ending"]
        if "reason" in case["attempt"]:
            assert attempt.reason == case["attempt"]["reason"]
    worker.close()


@pytest.mark.parametrize("case", VECTORS["reasons"], ids=[r["name"] for r in VECTORS["reasons"]])
def test_a_handler_exceptions_text_becomes_the_reason_by_the_shared_rule(
    store: leases.Authority, case: Dict[str, Any]
) -> None:
    store.set_policy(PRODUCTION, leases.RetryPolicy(backoff_base=timedelta(hours=1), backoff_cap=timedelta(hours=1)))
    job = store.request_job(PRODUCTION)
    # The error's bytes as Python holds undecodable text: lone surrogates.
    message = text_of(case["error"]).decode("utf-8", "surrogateescape")

    def handler(lease: leases.Lease) -> None:
        raise ValueError(message)

    store.work(PRODUCTION, worker="w", duration=SECONDS_30, exit_when_empty=True).run(handler)
    attempt = store.job(PRODUCTION, job).attempt_history[-1]
    assert attempt.ending == "retry"
    assert (attempt.reason or "").encode() == text_of(case["reason"])


def test_an_exception_without_text_gives_its_class_name_as_the_reason(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)

    def handler(lease: leases.Lease) -> None:
        raise LookupError()  # no text

    store.work(PRODUCTION, worker="w", duration=SECONDS_30, exit_when_empty=True).run(handler)
    assert store.job(PRODUCTION, job).attempt_history[-1].reason == "LookupError"


@contextlib.contextmanager
def claims_held(location: str, holder: leases.Authority) -> Iterator[None]:
    """Every claim through another handle with a 1 ms busy timeout fails
    while the block runs: on SQLite an edit of holder holds the writer lock;
    on PostgreSQL a transaction holds the jobs table in EXCLUSIVE mode, which
    lets a look read the job but makes the claim's row lock wait past its
    lock_timeout."""
    if location.endswith(".db"):
        edit = holder.edit()
        assert edit.claim(PRODUCTION, worker="holder", duration=SECONDS_30) is not None  # the writer lock
        try:
            yield
        finally:
            edit.abort()
    else:
        with _pg.holding(location, "LOCK TABLE leases_jobs IN EXCLUSIVE MODE"):
            yield


def test_a_loop_whose_claims_fail_backs_off_by_the_shared_sequence(location: str) -> None:
    with leases.Authority(location) as holder, leases.Authority(
        location, busy_timeout=timedelta(milliseconds=1)
    ) as auth, contextlib.ExitStack() as held:
        holder.create_production(PRODUCTION)
        holder.request_job(PRODUCTION)
        worker = auth.work(PRODUCTION, worker="w", duration=SECONDS_30, handle_signals=False)
        got: List[leases.Lease] = []
        held.enter_context(claims_held(location, holder))
        seen: Dict[int, int] = {}

        def run() -> None:
            for lease in worker:
                got.append(lease)
                lease.release()
                worker.stop()

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + EVENTUALLY
        while len(seen) < 4 and time.monotonic() < deadline:
            s = worker.stats()
            if s["failed_claims"] > 0:
                seen[s["failed_claims"]] = s["backoff_us"]
            time.sleep(0.005)
        held.close()
        t.join(EVENTUALLY)
        assert len(got) == 1, "once the lock is free the loop claims"
        assert len(seen) >= 4
        for n, us in seen.items():
            assert us == VECTORS["backoff_us"][n - 1], f"the pause after {n} failed claims"
        worker.close()


def test_concurrency_n_runs_n_handlers_at_once_in_a_thread_pool(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(8)]
    together = threading.Barrier(4, timeout=EVENTUALLY)
    threads = set()

    def handler(lease: leases.Lease) -> Dict[str, Any]:
        threads.add(threading.get_ident())
        together.wait()  # four handlers run at once, or this breaks
        return {"ok": True}

    store.work(PRODUCTION, worker="pool", duration=SECONDS_30, exit_when_empty=True, concurrency=4).run(handler)
    assert states(store) == ["completed"] * len(ids)
    assert len(threads) == 4


def test_concurrency_n_runs_n_handlers_at_once_in_asyncio_tasks(location: str) -> None:
    async def main() -> None:
        async with await leases.aio.AsyncAuthority.open(location) as auth:
            await auth.create_production(PRODUCTION)
            for _ in range(6):
                await auth.request_job(PRODUCTION)
            running = 0
            most = 0

            async def handler(lease: leases.aio.AsyncLease) -> Dict[str, Any]:
                nonlocal running, most
                running += 1
                most = max(most, running)
                await asyncio.sleep(0.3)
                running -= 1
                return {"ok": True}

            worker = auth.work(PRODUCTION, worker="tasks", duration=SECONDS_30, exit_when_empty=True, concurrency=3)
            await worker.run(handler)
            assert most == 3
            assert [str(j.state) for j in await auth.jobs(PRODUCTION)] == ["completed"] * 6

    asyncio.run(main())


def test_an_unknown_work_option_is_a_type_error(store: leases.Authority) -> None:
    for bad in ({"bogus_option": 1}, {"max_job": 5}):
        with pytest.raises(TypeError, match=next(iter(bad))):
            store.work(PRODUCTION, worker="w", duration=SECONDS_30, **bad)  # type: ignore[arg-type]


def test_max_jobs_0_means_no_limit_as_everywhere(store: leases.Authority) -> None:
    for _ in range(3):
        store.request_job(PRODUCTION)
    seen = [lease.job_id for lease in store.work(PRODUCTION, worker="w", duration=SECONDS_30, max_jobs=0, exit_when_empty=True)]
    assert len(seen) == 3 and states(store) == ["completed"] * 3


class Boom(Exception):
    """What a handler raises in the tests of the loop's forms."""


def boom(lease: leases.Lease) -> None:
    raise Boom("the disk is full")


# The reason of a job a bare `for` was left with, unsettled.
LEFT_UNSETTLED = (
    "worker: the loop was left with the job unsettled (an exception, break or return through a for loop without with)"
)


def one_job_ends_as(store: leases.Authority, production: str, run: Any) -> Any:
    """Requests one job of a new production, runs one form of the loop
    over it (run(worker)), and returns the job's newest attempt."""
    store.create_production(production)
    job = store.request_job(production)
    run(store.work(production, worker="loop", duration=SECONDS_30, exit_when_empty=True, handle_signals=False))
    assert store.job(production, job).state != "claimed", "the loop left the job claimed"
    return store.job(production, job).attempt_history[-1]


def test_a_handler_exception_fails_the_job_for_a_retry_with_its_text_in_every_form_of_the_loop(
    store: leases.Authority, location: str
) -> None:
    def with_run(worker: leases.Worker) -> None:
        worker.run(boom)

    def with_worker(worker: leases.Worker) -> None:
        with pytest.raises(Boom):
            with worker as jobs:
                for lease in jobs:
                    boom(lease)

    def with_lease(worker: leases.Worker) -> None:
        with pytest.raises(Boom):
            for lease in worker:
                with lease:
                    boom(lease)

    def with_lease_caught(worker: leases.Worker) -> None:
        for lease in worker:  # the body goes on: the loop too
            try:
                with lease:
                    boom(lease)
            except Boom:
                pass

    def async_with_worker(worker: leases.Worker) -> None:
        async def main() -> None:
            with pytest.raises(Boom):
                async with leases.aio.AsyncWorker(worker) as jobs:
                    async for lease in jobs:
                        boom(lease.sync)

        asyncio.run(main())

    def async_with_lease(worker: leases.Worker) -> None:
        async def main() -> None:
            with pytest.raises(Boom):
                async for lease in leases.aio.AsyncWorker(worker):
                    async with lease:
                        boom(lease.sync)

        asyncio.run(main())

    forms = {"run": with_run, "with worker": with_worker, "with lease": with_lease,
             "with lease, caught": with_lease_caught, "async with worker": async_with_worker,
             "async with lease": async_with_lease}
    ended = {name: one_job_ends_as(store, f"form-{n}", form) for n, (name, form) in enumerate(forms.items())}
    assert {name: (str(a.ending), a.reason) for name, a in ended.items()} == {
        name: ("retry", "the disk is full") for name in forms
    }


def test_a_job_that_ended_under_its_handler_is_settled_as_ended_and_the_loop_goes_on(
    store: leases.Authority, caplog: pytest.LogCaptureFixture
) -> None:
    # A coordinator's cancel ends the claim under the running handler: the
    # lease is lost, not closed by the handler. The loop hands the job's
    # result over all the same (the store refuses it: the job stays
    # cancelled), frees its slot, and goes on to the next job.
    caplog.set_level("INFO", logger="leases.worker")
    for form in ("for", "run"):
        store.create_production(form)
        first, second = store.request_job(form), store.request_job(form)
        worker = store.work(form, worker="w", duration=SECONDS_30, exit_when_empty=True, handle_signals=False)

        def handler(lease: leases.Lease) -> None:
            if lease.job_id == first:
                store.cancel(form, first)
                assert lease.check() is not None

        done = threading.Event()

        def loop() -> None:
            if form == "run":
                worker.run(handler)
            else:
                for lease in worker:
                    handler(lease)
            done.set()

        threading.Thread(target=loop, daemon=True).start()
        assert done.wait(EVENTUALLY), f"{form}: the loop hung on the job that ended under its handler"
        assert [str(store.job(form, j).state) for j in (first, second)] == ["cancelled", "completed"], form
        assert worker.stats()["state"] == "stopped"
    assert any("ended before it was settled" in r.getMessage() for r in caplog.records)


def test_leaving_a_loop_inside_with_early_without_an_exception_gives_the_job_back(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    with store.work(PRODUCTION, worker="loop", duration=SECONDS_30, handle_signals=False) as jobs:
        for lease in jobs:
            break
    assert store.job(PRODUCTION, job).attempt_history[-1].ending == "released"
    store.create_production("async")
    job = store.request_job("async")

    async def main() -> None:
        async with leases.aio.AsyncWorker(store.work("async", worker="loop", duration=SECONDS_30,
                                                     handle_signals=False)) as jobs:
            async for lease in jobs:
                break

    asyncio.run(main())
    assert store.job("async", job).attempt_history[-1].ending == "released"


def test_a_bare_for_left_with_the_job_unsettled_fails_it_for_a_retry_whatever_left_it(store: leases.Authority) -> None:
    # A bare `for` (no `with`) cannot tell an exception from `break`: its
    # generator is closed without being told why. An exception in a handler
    # fails its job for a retry in every face, so every early exit of a bare
    # `for` does, at once (no garbage collection needed), with a reason that
    # says what happened; the job is claimable again after the back-off.
    def by_exception(worker: leases.Worker) -> None:
        with pytest.raises(Boom):
            for lease in worker:
                boom(lease)

    def by_break(worker: leases.Worker) -> None:
        for lease in worker:
            break

    def by_return(worker: leases.Worker) -> None:
        for lease in worker:
            return

    def by_async_exception(worker: leases.Worker) -> None:
        async def main() -> None:
            with pytest.raises(Boom):
                async for lease in leases.aio.AsyncWorker(worker):
                    boom(lease.sync)

        asyncio.run(main())

    forms = {"exception": by_exception, "break": by_break, "return": by_return, "async exception": by_async_exception}
    ended = {name: one_job_ends_as(store, f"bare-{n}", form) for n, (name, form) in enumerate(forms.items())}
    assert {name: (str(a.ending), a.reason) for name, a in ended.items()} == {
        name: ("retry", LEFT_UNSETTLED) for name in forms
    }


def test_a_bare_async_for_left_with_the_job_unsettled_fails_it_while_the_worker_lives(store: leases.Authority) -> None:
    # The worker outlives the loop here (it is still referenced): leaving
    # `async for` must still end the job's claim, not keep it alive until the
    # worker goes.
    job = store.request_job(PRODUCTION)

    async def main() -> None:
        jobs = leases.aio.AsyncWorker(store.work(PRODUCTION, worker="loop", duration=SECONDS_30, handle_signals=False))
        with pytest.raises(Boom):
            async for lease in jobs:
                boom(lease.sync)
        deadline = time.monotonic() + EVENTUALLY
        while store.job(PRODUCTION, job).state == "claimed" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        attempt = store.job(PRODUCTION, job).attempt_history[-1]
        assert (str(attempt.ending), attempt.reason) == ("retry", LEFT_UNSETTLED)
        await jobs.close()

    asyncio.run(main())


def test_a_bare_for_that_settled_its_job_before_leaving_leaves_it_as_settled(store: leases.Authority) -> None:
    # Giving the job back on purpose is one call before `break`.
    job = store.request_job(PRODUCTION)
    for lease in store.work(PRODUCTION, worker="loop", duration=SECONDS_30, handle_signals=False):
        lease.release()
        break
    assert store.job(PRODUCTION, job).attempt_history[-1].ending == "released"
    assert store.job(PRODUCTION, job).attempt_history[-1].reason in (None, "")


def test_an_idle_worker_costs_postgresql_at_most_a_few_looks_a_second() -> None:
    # The slices of leases_worker_next that let Ctrl-C reach Python each end
    # with a look on PostgreSQL: slices of about a second, not 100 ms. A look
    # reads leases_hwm once; the server's statistics count the reads (their
    # lag, about a second, is why the window is long).
    for schema in _pg.fresh_schema():

        def looks() -> int:
            return int(schema.query(
                "SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables "
                "WHERE schemaname = current_schema() AND relname = 'leases_hwm'"
            ))

        with leases.Authority(schema.url) as auth:
            auth.create_production(PRODUCTION)
            worker = auth.work(PRODUCTION, worker="idle", duration=SECONDS_30, handle_signals=False)
            t = threading.Thread(target=worker.run, args=(lambda lease: None,))
            t.start()
            try:
                time.sleep(2)  # waiting, and its statistics flushed
                before, since = looks(), time.monotonic()
                time.sleep(6)
                seen, took = looks() - before, time.monotonic() - since
            finally:
                worker.stop()
                t.join(EVENTUALLY)
            assert seen > 0, "the look counter counts nothing: the test would prove nothing"
            # 1 s slices and the safety poll: about 2 a second; 100 ms slices: about 10.
            assert seen <= 3 * took, f"{seen} looks in {took:.1f} s of idling"


def test_a_stop_ends_an_idle_workers_wait_at_once_not_when_its_slice_ends(
    store: leases.Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases._worker, "_SLICE_US", 3_600_000_000)  # an hour: only the stop can end it
    worker = store.work(PRODUCTION, worker="idle", duration=SECONDS_30, handle_signals=False)
    t = threading.Thread(target=worker.run, args=(lambda lease: None,))
    t.start()
    deadline = time.monotonic() + EVENTUALLY
    while worker.stats()["out"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # until its waiting claim is under way
    sent = time.monotonic()
    worker.stop()
    t.join(EVENTUALLY)
    assert not t.is_alive()
    assert time.monotonic() - sent < PROMPT
    assert worker.stats()["state"] == "stopped"


def kill(p: Any) -> None:
    """Kills a process that hung, once it wrote every thread's stack to its
    stderr (work_loop_process.py's SIGUSR1), which the failure then shows."""
    p.send_signal(signal.SIGUSR1)
    time.sleep(1)
    p.kill()


def read_until(p: Any, count: int, prefix: str) -> None:
    """Reads the process's lines until count of them start with prefix; a
    process that does not print them within EVENTUALLY is killed, failing."""
    seen = 0
    killer = threading.Timer(EVENTUALLY, kill, (p,))
    killer.start()
    try:
        while seen < count:
            line = p.stdout.readline()
            assert line, f"the process ended (or was killed) before {count} {prefix!r} lines"
            seen += line.startswith(prefix)
    finally:
        killer.cancel()


def finish(p: Any) -> Tuple[str, str]:
    """The rest of the process's output once it has ended (killed, failing,
    if it has not within EVENTUALLY), read through the same buffers as the
    lines read before."""
    killer = threading.Timer(EVENTUALLY, kill, (p,))
    killer.start()
    try:
        out, err = p.stdout.read(), p.stderr.read()
        p.wait()
    finally:
        killer.cancel()
    return out, err


# The jobs of these processes run until the loop says it is stopping (or
# until they are given back), never for a time: whatever the host's load,
# exactly the jobs started before the signal run, and none starts after.


def test_ctrl_c_drains_a_worker_with_its_own_thread_pool(store: leases.Authority, location: str) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(4)]
    p = spawn(location, "w-pool", "run", "until-stop", "", "2")
    read_until(p, 2, "started")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = finish(p)
    assert p.returncode == 0, err
    ended = float(out.split("ended ")[1].split()[0])
    assert "started" not in out and "drained 2" in out, out
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after SIGINT"
    assert sorted(str(j.state) for j in store.jobs(PRODUCTION)) == ["completed"] * 2 + ["requested"] * 2
    assert sum("claimed" in kinds(store, j) for j in ids) == 2


def test_a_second_ctrl_c_gives_the_jobs_of_a_thread_pool_back_at_once(store: leases.Authority, location: str) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(2)]
    p = spawn(location, "w-pool2", "run", "until-lost", "", "2")
    read_until(p, 2, "started")
    p.send_signal(signal.SIGINT)
    # At once: the first signal's handler may still be running (it printed
    # this line as it began): the next signal is a second one all the same.
    read_until(p, 1, "noticed")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = finish(p)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    ended = float(out.split("ended ")[1].split()[0])
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after the second SIGINT"
    assert states(store) == ["requested", "requested"]
    assert all(kinds(store, j)[-1] == "released" for j in ids)


def test_a_second_ctrl_c_that_comes_while_the_first_is_handled_still_gives_the_jobs_back(
    store: leases.Authority, location: str
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(2)]
    p = spawn(location, "w-pool4", "run", "until-lost", "", "2", env={"SECOND_SIGINT_WHEN_NOTICED": "1"})
    read_until(p, 2, "started")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)  # the process sends the second one itself, from the first one's handler
    out, err = finish(p)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    ended = float(out.split("ended ")[1].split()[0])
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after the signals"
    assert states(store) == ["requested", "requested"]
    assert all(kinds(store, j)[-1] == "released" for j in ids)


def test_sigterm_drains_a_worker_with_its_own_thread_pool(store: leases.Authority, location: str) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    p = spawn(location, "w-pool3", "run", "until-stop", "", "2")
    read_until(p, 2, "started")
    p.send_signal(signal.SIGTERM)
    out, err = finish(p)
    assert p.returncode == 0, err
    # The two running jobs finish; nothing is started after the signal.
    assert "started" not in out and "drained 2" in out, out
    assert sorted(str(j.state) for j in store.jobs(PRODUCTION)) == ["completed", "completed", "requested"]
    assert sum("claimed" in kinds(store, j) for j in ids) == 2


# The asyncio face drains on signals as the thread pool does: asyncio.run's
# main task runs AsyncWorker.run with one task or three, or `async for`
# inside `async with` (one job at a time).
AIO_FORMS = [
    pytest.param("aio-run", 1, id="run-1-task"),
    pytest.param("aio-run", 3, id="run-3-tasks"),
    pytest.param("aio-for", 1, id="async-for"),
]


def aio_drains_on(signum: int, store: leases.Authority, location: str, mode: str, concurrency: int) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(concurrency + 2)]
    p = spawn(location, f"w-{mode}", mode, "until-stop", "", str(concurrency))
    read_until(p, concurrency, "started")
    sent = time.monotonic()
    p.send_signal(signum)
    out, err = finish(p)
    assert p.returncode == 0, (out, err)
    ended = float(out.split("ended ")[1].split()[0])
    # The running jobs finish; nothing is claimed after the signal; the
    # handlers asyncio.run had (and SIGTERM's default) are back.
    assert "started" not in out and f"drained {concurrency}" in out and "restored" in out, out
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after the signal"
    assert sorted(states(store)) == ["completed"] * concurrency + ["requested"] * 2
    assert sum("claimed" in kinds(store, j) for j in ids) == concurrency


@pytest.mark.parametrize("mode, concurrency", AIO_FORMS)
def test_ctrl_c_drains_an_asyncio_worker(store: leases.Authority, location: str, mode: str, concurrency: int) -> None:
    aio_drains_on(signal.SIGINT, store, location, mode, concurrency)


@pytest.mark.parametrize("mode, concurrency", AIO_FORMS)
def test_sigterm_drains_an_asyncio_worker(store: leases.Authority, location: str, mode: str, concurrency: int) -> None:
    aio_drains_on(signal.SIGTERM, store, location, mode, concurrency)


@pytest.mark.parametrize("mode, concurrency", AIO_FORMS)
def test_a_second_ctrl_c_gives_the_jobs_of_an_asyncio_worker_back_at_once(
    store: leases.Authority, location: str, mode: str, concurrency: int
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(concurrency)]
    p = spawn(location, f"w-{mode}-2", mode, "until-lost", "", str(concurrency))
    read_until(p, concurrency, "started")
    p.send_signal(signal.SIGINT)
    read_until(p, 1, "noticed")  # the first is taken in: the next one is a second
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = finish(p)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    assert "drained" not in out, out
    ended = float(out.split("ended ")[1].split()[0])
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after the second SIGINT"
    assert states(store) == ["requested"] * concurrency
    assert all(kinds(store, j)[-1] == "released" for j in ids)


@pytest.mark.parametrize("mode, concurrency", AIO_FORMS)
def test_sigterm_past_the_drain_timeout_gives_an_asyncio_workers_jobs_back(
    store: leases.Authority, location: str, mode: str, concurrency: int
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(concurrency)]
    p = spawn(location, f"w-{mode}-3", mode, "600", "0.3", str(concurrency))
    read_until(p, concurrency, "started")
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = finish(p)
    assert p.returncode == 1 and "drain timeout passed" in err, (out, err)
    assert all(j in err for j in ids), err
    ended = float(out.split("ended ")[1].split()[0])
    # After the 0.3 s drain timeout, not the 600 s jobs: seconds for a
    # stalled host.
    assert 0.3 <= ended - sent < 0.3 + PROMPT, ended - sent
    assert states(store) == ["requested"] * concurrency
    assert all(kinds(store, j)[-1] == "released" for j in ids)
