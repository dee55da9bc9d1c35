"""The worker runtime on SQLite and PostgreSQL: waiting claims (woken, bounded,
interrupted by Ctrl-C, a canceller or a close), keep-alive and the verdicts
of check/lost/wait_lost, and the work loop, in threads and in real worker
processes stopped with SIGTERM and SIGINT, with the claims' final states
checked in the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import leases
from leases._abi import MAX_REASON_LEN

import _testing
from conftest import PRODUCTION, SECONDS_30, T0

HERE = Path(__file__).resolve().parent
MS_100 = timedelta(milliseconds=100)

# How soon something that must happen promptly (a wait ended by a signal, a
# cancel, a stop or a close; a lost claim seen) must happen, in seconds. It
# takes milliseconds; the bound is seconds so that a loaded or stalled CI host
# does not fail it, and is still nothing like the hour the waits would last.
PROMPT = 10.0
# How long something that must happen eventually is awaited.
EVENTUALLY = 60.0


def wake_bound(auth: leases.Authority) -> Optional[float]:
    """How soon a waiter on auth must be woken by the change under test. The
    test library's safety poll is made an hour long, so a generous bound
    still proves the change woke it; the release library keeps its 1 s
    (PostgreSQL) poll, where no time bound can tell the two apart (None:
    only the wake is checked there)."""
    if not _testing.has_seam():
        return None
    _testing.set_safety_poll(auth, timedelta(hours=1))
    return 30.0


@pytest.fixture
def store(location: str) -> Iterator[leases.Authority]:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION)
        yield a


def after(seconds: float, call: Callable[[], object]) -> threading.Timer:
    timer = threading.Timer(seconds, call)
    timer.daemon = True
    timer.start()
    return timer


def states(auth: leases.Authority) -> List[str]:
    return [str(j.state) for j in auth.jobs(PRODUCTION)]


def kinds(auth: leases.Authority, job_id: str) -> List[str]:
    return [e.kind for e in auth.events(PRODUCTION) if e.job_id == job_id]


# ---- waiting claims -----------------------------------------------------------


def test_a_waiting_claim_wakes_when_a_job_is_requested_meanwhile(store: leases.Authority) -> None:
    bound = wake_bound(store)
    after(0.2, lambda: store.request_job(PRODUCTION, payload=b"late"))
    start = time.monotonic()
    lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(minutes=5))
    took = time.monotonic() - start
    assert lease is not None and lease.payload == b"late"
    # Woken by the request's commit, well before the (hour-long) safety poll.
    assert bound is None or took < bound, f"the waiter held the lease {took:.3f} s after it started"


def test_a_waiting_claim_wakes_for_a_request_through_another_handle(location: str, store: leases.Authority) -> None:
    bound = wake_bound(store)
    with leases.Authority(location) as other:
        after(0.2, lambda: other.request_job(PRODUCTION))
        start = time.monotonic()
        lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(minutes=5))
    assert lease is not None
    assert bound is None or time.monotonic() - start < bound


def test_a_waiting_claim_returns_none_once_its_bound_passes(store: leases.Authority) -> None:
    start = time.monotonic()
    assert store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(milliseconds=350)) is None
    took = time.monotonic() - start
    assert 0.3 <= took < EVENTUALLY, took
    assert store.events(PRODUCTION) == [] or all(e.kind != "claimed" for e in store.events(PRODUCTION))


def test_a_wait_of_zero_is_a_plain_claim(store: leases.Authority) -> None:
    assert store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(0)) is None
    store.request_job(PRODUCTION)
    assert store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(0)) is not None


def test_a_canceller_from_another_thread_ends_a_wait_at_once_with_interrupted_error(store: leases.Authority) -> None:
    with leases.Canceller() as canceller:
        after(0.2, canceller.cancel)
        start = time.monotonic()
        with pytest.raises(leases.InterruptedError) as e:
            store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(hours=1), canceller=canceller)
        took = time.monotonic() - start
        assert isinstance(e.value, leases.LeasesError) and e.value.status == 19
        assert took < 0.2 + PROMPT, f"the wait ended {took - 0.2:.3f} s after the cancel"
        assert canceller.cancelled
        # It stays cancelled: a later wait ends at once, and nothing is claimed.
        store.request_job(PRODUCTION)
        with pytest.raises(leases.InterruptedError):
            store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(hours=1), canceller=canceller)
    assert states(store) == ["requested"]


def test_closing_the_authority_ends_a_wait_in_another_thread_with_closed_error(location: str) -> None:
    auth = leases.Authority(location)
    auth.create_production(PRODUCTION)
    errors: List[BaseException] = []

    def wait() -> None:
        try:
            auth.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(hours=1))
        except BaseException as e:
            errors.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    auth.close()
    waiter.join(EVENTUALLY)
    assert not waiter.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], leases.ClosedError), errors


def test_a_wait_rejects_bad_bounds_before_touching_the_store(store: leases.Authority) -> None:
    store.request_job(PRODUCTION)
    with pytest.raises(TypeError):
        store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=5)  # type: ignore[arg-type]
    for bad in (timedelta(microseconds=-1), timedelta(hours=24, microseconds=1)):
        with pytest.raises(leases.InvalidDurationError):
            store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=bad)
    with pytest.raises(TypeError):
        store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=MS_100, canceller=object())  # type: ignore[arg-type]
    assert states(store) == ["requested"]


def test_other_threads_run_while_a_claim_waits(store: leases.Authority) -> None:
    ticks = [0]
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        store.claim(PRODUCTION, worker="w", duration=SECONDS_30, wait=timedelta(seconds=1))
    finally:
        stop.set()
        ticker.join()
    # A ticker that may run ticks ~100 times a second; a held GIL would let
    # it tick once or twice. Ten leaves room for a host ten times slower.
    assert ticks[0] >= 10, f"another thread ran {ticks[0]} times in 1 s of waiting"


def spawn(location: str, *args: str, env: Optional[Dict[str, str]] = None) -> "subprocess.Popen[str]":
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.Popen(
        [sys.executable, str(HERE / "work_loop_process.py"), location, PRODUCTION, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_line(p: "subprocess.Popen[str]", prefix: str) -> str:
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith(prefix):
        p.kill()
        _, err = p.communicate(timeout=30)
        raise AssertionError(f"expected {prefix!r}, got {line!r}; stderr: {err}")
    return line.strip()


def test_ctrl_c_raises_keyboard_interrupt_promptly_during_a_wait(store: leases.Authority, location: str) -> None:
    p = spawn(location, "w-wait", "wait")
    read_line(p, "waiting")
    time.sleep(0.5)  # well inside the hour-long wait
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    line = read_line(p, "interrupted")
    assert p.wait(EVENTUALLY) == 0
    # The 100 ms slices make it ~100 ms; the bound allows a stalled host.
    latency = float(line.split()[1]) - sent
    assert latency < PROMPT, f"KeyboardInterrupt came {latency:.3f} s after SIGINT"
    store.request_job(PRODUCTION)
    assert states(store) == ["requested"]


# ---- keep-alive, check, lost -------------------------------------------------------


def test_keep_alive_keeps_a_lease_held_for_many_times_its_duration(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    # Real time: a host stalled for longer than a duration less an interval
    # (1.8 s here) would lose the claim however well keep-alive works.
    duration = timedelta(seconds=2)
    lease = store.claim(PRODUCTION, worker="w", duration=duration)
    assert lease is not None
    with lease.keep_alive(interval=timedelta(milliseconds=200)):
        time.sleep(3 * 2)
        assert lease.check() is None and lease.lost is None
    lease.complete()
    assert states(store) == ["completed"]
    assert kinds(store, job).count("renewed") >= 6


def test_a_verdict_of_complete_and_claim_next_is_true_of_the_lease_it_is_about(store: leases.Authority) -> None:
    """Only the claim half fails (the new claim would be born expired: a
    duration shorter than the commit takes): nothing commits, and the lease
    being completed still holds its claim. No "not held" error, lost stays
    None, its keep-alive goes on renewing, and complete() succeeds."""
    first = store.request_job(PRODUCTION)
    second = store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=timedelta(minutes=1))
    assert lease is not None and lease.job_id == first
    with lease.keep_alive(interval=timedelta(milliseconds=5)):
        with pytest.raises(leases.LeasesError) as raised:
            lease.complete_and_claim_next(duration=timedelta(microseconds=1))
        assert lease.lost is None, f"the lease was reported over: {lease.lost!r}"
        assert not isinstance(raised.value, leases.NotHeldError), repr(raised.value)
        assert isinstance(raised.value, leases.InvalidDurationError), repr(raised.value)
        assert second in str(raised.value), "the message names the job the claim chose"
        assert store.job(PRODUCTION, second).state == "requested"
        renewed = kinds(store, first).count("renewed")
        until = time.monotonic() + EVENTUALLY
        while kinds(store, first).count("renewed") <= renewed and time.monotonic() < until:
            time.sleep(0.01)
        assert kinds(store, first).count("renewed") > renewed, "the keep-alive stopped"
        assert lease.lost is None
    # Asked once its renewals have stopped: a check racing a renewal's
    # commit can see the mark that renewal moved.
    assert lease.check() is None and lease.lost is None
    lease.complete()
    assert store.job(PRODUCTION, first).state == "completed"


def test_leaving_keep_alive_stops_the_renewals(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=timedelta(seconds=1))
    assert lease is not None
    with lease.keep_alive(interval=timedelta(milliseconds=100)):
        until = time.monotonic() + EVENTUALLY
        while kinds(store, job).count("renewed") < 1 and time.monotonic() < until:
            time.sleep(0.05)
    renewed = kinds(store, job).count("renewed")
    assert renewed >= 1
    time.sleep(0.5)
    assert kinds(store, job).count("renewed") == renewed, "a renewal was written after the keep-alive stopped"
    lease.release()


def test_closing_a_kept_alive_lease_stops_its_renewals(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=timedelta(seconds=1))
    assert lease is not None
    lease.keep_alive(interval=timedelta(milliseconds=100))
    time.sleep(0.3)
    lease.close()  # frees local memory: never writes, and the renewer stops first
    renewed = kinds(store, job).count("renewed")
    time.sleep(0.5)
    assert kinds(store, job).count("renewed") == renewed


def test_a_coordinators_cancel_reaches_a_kept_alive_lease_within_one_interval(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=timedelta(seconds=3))
    assert lease is not None
    lease.keep_alive(interval=timedelta(milliseconds=200))
    assert lease.lost is None
    store.cancel(PRODUCTION, job)
    start = time.monotonic()
    why = lease.wait_lost(timedelta(seconds=EVENTUALLY))
    took = time.monotonic() - start
    assert isinstance(why, leases.CancelledError) and isinstance(why, leases.NotHeldError), why
    # One 200 ms interval; the bound allows a stalled host, and is far below
    # what a lease not kept alive would take to learn it (never).
    assert took < 0.2 + PROMPT, f"the cancel reached the lease after {took:.3f} s"
    assert isinstance(lease.lost, leases.CancelledError)
    with pytest.raises(leases.CancelledError):
        lease.complete()


def test_check_returns_the_verdict_without_writing(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    assert lease.check() is None
    assert lease.lost is None  # nothing watches it: nothing is known yet
    store.cancel(PRODUCTION, job)
    before = len(store.events(PRODUCTION))
    verdict = lease.check()
    assert isinstance(verdict, leases.CancelledError), verdict
    assert verdict.message.startswith("cancelled")
    assert len(store.events(PRODUCTION)) == before
    assert isinstance(lease.lost, leases.CancelledError)  # check found it


def test_a_settled_lease_is_known_closed(store: leases.Authority) -> None:
    store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    lease.complete()
    assert isinstance(lease.lost, leases.ClosedError)
    assert isinstance(lease.wait_lost(timedelta(hours=1)), leases.ClosedError)


def test_wait_lost_returns_none_when_its_timeout_passes_and_a_canceller_ends_it(store: leases.Authority) -> None:
    store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    start = time.monotonic()
    assert lease.wait_lost(timedelta(milliseconds=250)) is None
    assert 0.2 <= time.monotonic() - start < EVENTUALLY
    with leases.Canceller() as c:
        after(0.1, c.cancel)
        with pytest.raises(leases.InterruptedError):
            lease.wait_lost(canceller=c)


def test_keep_alive_rejects_bad_durations_and_needs_one_for_an_imported_lease(store: leases.Authority) -> None:
    store.request_job(PRODUCTION)
    lease = store.claim(PRODUCTION, worker="w", duration=SECONDS_30)
    assert lease is not None
    with pytest.raises(leases.InvalidDurationError):
        lease.keep_alive(interval=timedelta(seconds=30))  # not below the duration
    with pytest.raises(leases.InvalidDurationError):
        lease.keep_alive(timedelta(0))
    with pytest.raises(TypeError):
        lease.keep_alive(30)  # type: ignore[arg-type]
    imported = store.import_token(lease.export_token())
    with pytest.raises(TypeError, match="needs a duration"):
        imported.keep_alive()
    with imported.keep_alive(SECONDS_30):
        assert imported.lost is None
    lease.release()


@pytest.mark.testlib
def test_keep_alive_reports_expiry_when_the_authoritys_clock_jumps_forward(auth: leases.Authority) -> None:
    _testing.set_clock(auth, T0)
    auth.request_job(PRODUCTION)
    lease = auth.claim(PRODUCTION, worker="w", duration=timedelta(seconds=2))
    assert lease is not None
    lease.keep_alive(interval=timedelta(milliseconds=100))
    _testing.set_clock(auth, T0 + timedelta(minutes=1))
    why = lease.wait_lost(timedelta(seconds=EVENTUALLY))
    assert isinstance(why, leases.ExpiredError), why


# ---- the work loop -----------------------------------------------------------------


def test_the_work_loop_keeps_each_job_alive_and_completes_what_the_body_leaves(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION, payload=str(i).encode()) for i in range(3)]
    seen = []
    # 2 s: a real-time claim kept alive every third of it survives a host
    # stalled for a second.
    for lease in store.work(PRODUCTION, worker="loop", duration=timedelta(seconds=2), exit_when_empty=True):
        seen.append(lease.payload)
        if lease.job_id == ids[0]:
            time.sleep(3.0)  # longer than the claim's duration: kept alive
            assert lease.lost is None
        if lease.job_id == ids[1]:
            lease.complete(metadata={"by": "body"})
    assert seen == [b"0", b"1", b"2"]
    assert states(store) == ["completed"] * 3
    assert "renewed" in kinds(store, ids[0])
    assert all(j.worker == "loop" for j in store.jobs(PRODUCTION))


def test_leaving_the_work_loop_inside_with_by_break_gives_the_running_job_back(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    with store.work(PRODUCTION, worker="loop", duration=SECONDS_30) as jobs:
        for lease in jobs:
            break
    assert states(store) == ["requested"]
    assert kinds(store, job)[-1] == "released"


def test_a_coordinators_cancel_reaches_the_body_of_the_work_loop(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    for lease in store.work(PRODUCTION, worker="loop", duration=timedelta(seconds=1), max_jobs=1):
        store.cancel(PRODUCTION, job)
        assert isinstance(lease.wait_lost(timedelta(seconds=EVENTUALLY)), leases.CancelledError)
    assert states(store) == ["cancelled"]


def test_stop_from_another_thread_ends_a_waiting_work_loop_at_once(store: leases.Authority) -> None:
    worker = store.work(PRODUCTION, worker="loop", duration=SECONDS_30)
    after(0.2, worker.stop)
    start = time.monotonic()
    assert list(worker) == []
    assert time.monotonic() - start < 0.2 + PROMPT
    assert worker.stopping


def test_a_work_loop_in_a_thread_drains_then_gives_the_job_back_after_the_drain_timeout(store: leases.Authority) -> None:
    first, second = store.request_job(PRODUCTION), store.request_job(PRODUCTION)
    worker = store.work(PRODUCTION, worker="thread", duration=SECONDS_30, drain_timeout=timedelta(milliseconds=300))
    outcome: List[Optional[BaseException]] = []
    started = threading.Event()

    def run() -> None:
        try:
            for lease in worker:
                started.set()
                lease.wait_lost(timedelta(seconds=20))  # a job that outlives the drain timeout
                lease.complete()
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(EVENTUALLY)
    worker.stop()
    t.join(EVENTUALLY)
    assert not t.is_alive()
    assert worker.drain_timed_out
    assert len(outcome) == 1 and isinstance(outcome[0], leases.ClosedError), outcome
    assert [j.state for j in store.jobs(PRODUCTION)] == ["requested", "requested"]
    assert kinds(store, first)[-1] == "released" and kinds(store, second) == ["requested"]


def test_work_loops_in_several_threads_share_an_authority_and_never_share_a_job(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(24)]
    seen: List[List[str]] = [[] for _ in range(4)]

    def run(n: int) -> None:
        for lease in store.work(PRODUCTION, worker=f"t{n}", duration=SECONDS_30, exit_when_empty=True):
            seen[n].append(lease.job_id)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    claimed = [j for s in seen for j in s]
    assert sorted(claimed) == sorted(ids), "a job was claimed twice or never"
    assert states(store) == ["completed"] * len(ids)
    by_worker = {j.id: j.worker for j in store.jobs(PRODUCTION)}
    assert all(by_worker[j] == f"t{n}" for n, s in enumerate(seen) for j in s)


def event(auth: leases.Authority, job_id: str, kind: str) -> leases.Event:
    (e,) = [e for e in auth.events(PRODUCTION) if e.job_id == job_id and e.kind == kind]
    return e


def test_the_work_loop_completes_each_job_and_claims_the_next_in_one_commit(
    store: leases.Authority
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    seen = [lease.job_id for lease in store.work(PRODUCTION, worker="loop", duration=SECONDS_30, exit_when_empty=True)]
    assert seen == ids
    assert states(store) == ["completed"] * 3
    # The last job's complete_and_claim_next found nothing; the loop then
    # waited as before and ended on the empty production.
    for done, nxt in zip(ids, ids[1:]):
        # Nothing between the completion and the next claim: one commit.
        completed, claimed = event(store, done, "completed"), event(store, nxt, "claimed")
        assert claimed.seq == completed.seq + 1 and claimed.worker == "loop"


def test_the_work_loop_at_max_jobs_completes_its_last_job_without_claiming_another(
    store: leases.Authority
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    seen = [lease.job_id for lease in store.work(PRODUCTION, worker="loop", duration=SECONDS_30, max_jobs=2)]
    assert seen == ids[:2]
    assert states(store) == ["completed", "completed", "requested"]
    assert kinds(store, ids[2]) == ["requested"]


def test_a_stopped_work_loop_completes_the_running_job_without_claiming_another(
    store: leases.Authority
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(2)]
    worker = store.work(PRODUCTION, worker="loop", duration=SECONDS_30)
    seen = []
    for lease in worker:
        seen.append(lease.job_id)
        worker.stop()
    assert seen == ids[:1]
    assert states(store) == ["completed", "requested"]
    assert kinds(store, ids[1]) == ["requested"]


def test_the_work_loop_claims_on_its_own_after_a_job_the_body_failed_or_settled(
    store: leases.Authority
) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    for lease in store.work(PRODUCTION, worker="loop", duration=SECONDS_30, exit_when_empty=True):
        if lease.job_id == ids[0]:
            lease.fail_retry("bad input", delay=timedelta(hours=1))
        elif lease.job_id == ids[1]:
            lease.complete(metadata={"by": "body"})
    # The body's own completion, then the loop's for the last job (which
    # found nothing to claim); no job was completed twice.
    assert states(store) == ["requested", "completed", "completed"]
    assert store.job(PRODUCTION, ids[0]).attempt_history[-1].ending == "retry"
    assert kinds(store, ids[1]).count("completed") == 1


def test_run_completes_each_job_with_its_handlers_metadata_and_claims_the_next_in_one_commit(
    store: leases.Authority
) -> None:
    ids = [store.request_job(PRODUCTION, payload=str(i).encode()) for i in range(3)]
    worker = store.work(PRODUCTION, worker="run", duration=SECONDS_30, exit_when_empty=True)
    worker.run(lambda lease: {"payload": lease.payload.decode()} if lease.job_id != ids[1] else None)
    metadata = [store.job(PRODUCTION, j).facts.metadata for j in ids]
    assert metadata == [{"payload": "0"}, {}, {"payload": "2"}]
    assert states(store) == ["completed"] * 3


def test_run_fails_the_job_of_a_raising_handler_for_a_retry_and_goes_on(
    store: leases.Authority, caplog: pytest.LogCaptureFixture
) -> None:
    store.set_policy(PRODUCTION, leases.RetryPolicy(backoff_base=timedelta(hours=1), backoff_cap=timedelta(hours=1)))
    ids = [store.request_job(PRODUCTION) for _ in range(4)]

    def handler(lease: leases.Lease) -> Optional[Dict[str, object]]:
        if lease.job_id == ids[0]:
            raise ValueError("bad input\0 \udc80" + "é" * MAX_REASON_LEN)
        if lease.job_id == ids[1]:
            return {"not json": float("nan")}
        if lease.job_id == ids[2]:
            lease.fail("unrenderable")  # settled by the handler: left as it is
        return None

    store.work(PRODUCTION, worker="run", duration=SECONDS_30, exit_when_empty=True).run(handler)
    assert [str(j.state) for j in store.jobs(PRODUCTION)] == ["requested", "requested", "failed", "completed"]
    for job in ids[:2]:
        (attempt,) = store.job(PRODUCTION, job).attempt_history
        assert attempt.ending == "retry" and attempt.reason is not None
    reason = store.job(PRODUCTION, ids[0]).attempt_history[0].reason or ""
    assert reason.startswith("bad input \ufffdéé") and len(reason.encode()) <= MAX_REASON_LEN
    assert "not JSON" in (store.job(PRODUCTION, ids[1]).attempt_history[0].reason or "")
    assert kinds(store, ids[2]).count("failed") == 1 and "completed" not in kinds(store, ids[2])
    assert "the handler failed" in caplog.text


def test_run_gives_the_job_back_and_ends_on_a_base_exception(store: leases.Authority) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(2)]

    def handler(lease: leases.Lease) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.work(PRODUCTION, worker="run", duration=SECONDS_30, handle_signals=False).run(handler)
    assert states(store) == ["requested", "requested"]
    assert kinds(store, ids[0])[-1] == "released" and kinds(store, ids[1]) == ["requested"]


def test_the_work_loop_checks_its_arguments_before_the_store(store: leases.Authority) -> None:
    with pytest.raises(leases.InvalidDurationError):
        store.work(PRODUCTION, worker="w", duration=timedelta(0))
    with pytest.raises(ValueError):
        store.work(PRODUCTION, worker="w", duration=SECONDS_30, max_jobs=-1)
    with pytest.raises(leases.InvalidArgumentError):
        store.work(PRODUCTION, worker="w\0", duration=SECONDS_30)
    with pytest.raises(leases.NotFoundError):
        list(store.work("no-such-production", worker="w", duration=SECONDS_30))
    worker = store.work(PRODUCTION, worker="w", duration=SECONDS_30, exit_when_empty=True)
    assert list(worker) == []
    with pytest.raises(RuntimeError):
        iter(worker)


def test_signal_handling_needs_the_main_thread(store: leases.Authority) -> None:
    errors: List[BaseException] = []

    def run() -> None:
        try:
            list(store.work(PRODUCTION, worker="w", duration=SECONDS_30, handle_signals=True))
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(EVENTUALLY)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)


# ---- worker processes and signals --------------------------------------------------


def test_sigterm_mid_job_lets_the_job_finish_and_claims_nothing_more(store: leases.Authority, location: str) -> None:
    ids = [store.request_job(PRODUCTION) for _ in range(3)]
    p = spawn(location, "w-term", "work", "until-stop")  # the job ends once the loop stops claiming
    read_line(p, "looping")
    started = read_line(p, "started").split()[1]
    assert started == ids[0]
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "drained 1" in out
    assert [j.state for j in store.jobs(PRODUCTION)] == ["completed", "requested", "requested"]
    assert all("claimed" not in kinds(store, j) for j in ids[1:])


def test_sigterm_mid_job_past_the_drain_timeout_gives_the_job_back(store: leases.Authority, location: str) -> None:
    job = store.request_job(PRODUCTION)
    p = spawn(location, "w-drain", "work", "600", "0.3")
    read_line(p, "looping")
    read_line(p, "started")
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    ended = float(out.split("ended ")[1].split()[0])
    assert p.returncode == 1, (out, err)
    assert "drain timeout passed" in err and job in err
    # After the 0.3 s drain timeout, not the 600 s body: seconds for a
    # stalled host.
    assert 0.3 <= ended - sent < 0.3 + PROMPT, ended - sent
    assert states(store) == ["requested"]
    assert kinds(store, job)[-1] == "released"
    # Claimable again at once by another worker.
    assert store.claim(PRODUCTION, worker="next", duration=SECONDS_30) is not None


def test_ctrl_c_while_the_work_loop_waits_ends_it_promptly(store: leases.Authority, location: str) -> None:
    p = spawn(location, "w-int", "work", "0")
    read_line(p, "looping")
    time.sleep(0.5)  # the loop is waiting for a job
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "drained 0" in out
    noticed = float(out.split("noticed ")[1].split()[0])
    ended = float(out.split("ended ")[1].split()[0])
    # The 1 s slices make it at most ~1 s; the bounds allow a stalled host.
    assert noticed - sent < PROMPT, f"the waiting loop noticed SIGINT after {noticed - sent:.3f} s"
    assert ended - sent < PROMPT, f"the loop ended {ended - sent:.3f} s after SIGINT"


def test_a_second_ctrl_c_gives_the_running_job_back_and_raises_keyboard_interrupt(
    store: leases.Authority, location: str
) -> None:
    job = store.request_job(PRODUCTION)
    p = spawn(location, "w-int2", "work", "600")
    read_line(p, "looping")
    read_line(p, "started")
    p.send_signal(signal.SIGINT)
    read_line(p, "noticed")
    read_line(p, "stopping")  # the first is taken in: the next one is a second
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    assert states(store) == ["requested"]
    assert kinds(store, job)[-1] == "released"


def test_a_killed_worker_process_leaves_a_claim_that_expires(store: leases.Authority, location: str) -> None:
    job = store.request_job(PRODUCTION)
    p = spawn(location, "w-kill", "work", "600")
    read_line(p, "looping")
    read_line(p, "started")
    p.kill()
    p.wait(30)
    # Nothing renews it any more: it expires within its 1 s duration, and a
    # waiting claim gets the job as soon as it does.
    lease = store.claim(PRODUCTION, worker="next", duration=SECONDS_30, wait=timedelta(seconds=EVENTUALLY))
    assert lease is not None and lease.job_id == job
    assert "claim_expired" in kinds(store, job)
