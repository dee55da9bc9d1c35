"""The Python face of the one worker loop (docs/workers.md): the shared
conformance suite (tests/vectors/worker_loop.json) on both stores, the
options of work(), concurrency in a thread pool and in asyncio tasks, and
Ctrl-C/SIGTERM draining a worker with its own thread pool in a real
process."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from datetime import timedelta
from typing import Any, Dict, Iterator, List, Optional

import pytest

import leases
import leases.aio

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


def scenario_handler(stopped: threading.Event) -> Any:
    def handler(lease: leases.Lease) -> Optional[Dict[str, Any]]:
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
    stop = case.get("stop")
    worker = store.work(
        PRODUCTION, worker="conformance", duration=SECONDS_30, exit_when_empty=stop is None,
        handle_signals=False, **options,
    )
    stopped = threading.Event()
    if stop is not None:
        want = min(o.get("concurrency", 1), len(ids))

        def stopper() -> None:
            deadline = time.monotonic() + EVENTUALLY
            while worker.stats()["out"] < want and time.monotonic() < deadline:
                time.sleep(0.01)
            if stop == "drain":
                worker.stop()
            else:
                worker._stop(leases._abi.STOP_GIVE_BACK)
            stopped.set()

        threading.Thread(target=stopper, daemon=True).start()
    worker.run(scenario_handler(stopped))
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


def test_a_loop_whose_claims_fail_backs_off_by_the_shared_sequence(location: str) -> None:
    if not location.endswith(".db"):
        pytest.skip("SQLite's writer lock makes claims fail on demand; the sequence is the loop's on either store")
    with leases.Authority(location) as holder, leases.Authority(
        location, busy_timeout=timedelta(milliseconds=1)
    ) as auth:
        holder.create_production(PRODUCTION)
        holder.request_job(PRODUCTION)
        worker = auth.work(PRODUCTION, worker="w", duration=SECONDS_30, handle_signals=False)
        got: List[leases.Lease] = []
        edit = holder.edit()
        assert edit.claim(PRODUCTION, worker="holder", duration=SECONDS_30) is not None  # the writer lock
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
        edit.abort()
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


def test_leaving_with_on_an_exception_fails_the_job_for_a_retry_as_run_does(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with store.work(PRODUCTION, worker="loop", duration=SECONDS_30) as jobs:
            for lease in jobs:
                raise Boom("the disk is full")
    attempt = store.job(PRODUCTION, job).attempt_history[-1]
    assert attempt.ending == "retry" and attempt.reason == "the disk is full"
    # break (no exception): the job is given back.
    for lease in store.work(PRODUCTION, worker="loop", duration=SECONDS_30):
        break


def read_until(p: Any, count: int, prefix: str) -> None:
    """Reads the process's lines until count of them start with prefix; a
    process that does not print them within EVENTUALLY is killed, failing."""
    seen = 0
    killer = threading.Timer(EVENTUALLY, p.kill)
    killer.start()
    try:
        while seen < count:
            line = p.stdout.readline()
            assert line, f"the process ended (or was killed) before {count} {prefix!r} lines"
            seen += line.startswith(prefix)
    finally:
        killer.cancel()


def test_ctrl_c_drains_a_worker_with_its_own_thread_pool(store: leases.Authority, location: str) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(4)]
    p = spawn(location, "w-pool", "run", "1.0", "", "2")
    read_until(p, 2, "started")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    ended = float(out.split("ended ")[1].split()[0])
    assert p.returncode == 0, err
    assert "drained 2" in out, out
    assert ended - sent < PROMPT, f"still running {ended - sent:.1f} s after SIGINT"
    assert sorted(str(j.state) for j in store.jobs(PRODUCTION)) == ["completed"] * 2 + ["requested"] * 2
    assert sum("claimed" in kinds(store, j) for j in ids) == 2


def test_a_second_ctrl_c_gives_the_jobs_of_a_thread_pool_back_at_once(store: leases.Authority, location: str) -> None:
    for _ in range(2):
        store.request_job(PRODUCTION)
    p = spawn(location, "w-pool2", "run", "600", "", "2")
    read_until(p, 2, "started")
    p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + PROMPT
    while "noticed" not in (line := p.stdout.readline() if p.stdout else "") and time.monotonic() < deadline:
        pass
    time.sleep(0.3)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    ended = float(out.split("ended ")[1].split()[0])
    assert ended - sent < PROMPT
    assert states(store) == ["requested", "requested"]


def test_sigterm_drains_a_worker_with_its_own_thread_pool(store: leases.Authority, location: str) -> None:
    for _ in range(3):
        store.request_job(PRODUCTION)
    p = spawn(location, "w-pool3", "run", "3.0", "", "2")
    read_until(p, 2, "started")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    # The two running jobs finish; nothing is started after the signal.
    assert "started" not in out and "drained 2" in out, out
    assert sorted(str(j.state) for j in store.jobs(PRODUCTION)) == ["completed", "completed", "requested"]
