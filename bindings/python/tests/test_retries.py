"""Retries, run-at and priorities through the Python surface, on
SQLite and on PostgreSQL: retry policies, retryable failures, the dead
state, claim order, delays and run-at times on the authority's clock,
redrives and the attempt history; bad input is a typed error that writes
nothing. Tests that move the authority's clock need the test library."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Iterator, List

import pytest

import leases
from leases import AttemptEnding, JobState, RetryPolicy

import _testing
from conftest import PRODUCTION, SECONDS_30, T0

# Retries at once: no test waits out a backoff it does not test.
NO_BACKOFF = RetryPolicy(max_attempts=3, backoff_base=timedelta(0), jitter_percent=0)
DAY = timedelta(days=1)
MAX_DELAY = timedelta(microseconds=leases._abi.MAX_DELAY_US)


@pytest.fixture
def store(location: str) -> Iterator[leases.Authority]:
    with leases.Authority(location) as a:
        a.create_production(PRODUCTION, policy=NO_BACKOFF)
        yield a


@pytest.fixture
def clocked(store: leases.Authority) -> Iterator[leases.Authority]:
    """The store with its clock frozen at T0 (test library only)."""
    _testing.set_clock(store, T0)
    yield store


def claim(auth: leases.Authority, duration: timedelta = SECONDS_30) -> leases.Lease:
    lease = auth.claim(PRODUCTION, worker="w1", duration=duration)
    assert lease is not None
    return lease


def nothing_to_claim(auth: leases.Authority) -> bool:
    return auth.claim(PRODUCTION, worker="w1", duration=SECONDS_30) is None


def snapshot(auth: leases.Authority) -> Dict[str, Any]:
    """What a refused call must leave unchanged: every job, the production's
    policy and the event log."""
    [production] = [p for p in auth.iter_productions() if p.name == PRODUCTION]
    return {
        "jobs": auth.jobs(PRODUCTION),
        "policy": production.policy,
        "events": [(e.seq, e.kind) for e in auth.events()],
    }


def policy_of(auth: leases.Authority, name: str = PRODUCTION) -> RetryPolicy:
    [policy] = [p.policy for p in auth.iter_productions() if p.name == name]
    assert policy is not None
    return policy


# ---- policies ----------------------------------------------------------------


def test_retry_policy_defaults_are_the_librarys_default_policy(store: leases.Authority) -> None:
    store.create_production("plain")
    assert policy_of(store, "plain") == RetryPolicy()
    assert RetryPolicy() == RetryPolicy(25, timedelta(seconds=1), timedelta(hours=1), 20)


def test_a_production_created_with_a_policy_lists_it(store: leases.Authority) -> None:
    policy = RetryPolicy(max_attempts=7, backoff_base=timedelta(milliseconds=250), backoff_cap=DAY, jitter_percent=0)
    store.create_production("custom", policy=policy)
    assert policy_of(store, "custom") == policy
    store.create_production("custom", policy=policy)  # the same policy: idempotent
    store.create_production("custom")  # no policy: the production as it is
    assert policy_of(store, "custom") == policy


def test_creating_a_production_with_another_policy_is_wrong_state_and_changes_nothing(store: leases.Authority) -> None:
    before = snapshot(store)
    with pytest.raises(leases.WrongStateError, match="another retry policy"):
        store.create_production(PRODUCTION, policy=RetryPolicy())
    assert snapshot(store) == before


def test_set_policy_changes_the_policy_with_an_event_and_none_restores_the_default(store: leases.Authority) -> None:
    policy = RetryPolicy(max_attempts=1, backoff_base=timedelta(0))
    store.set_policy(PRODUCTION, policy)
    assert policy_of(store) == policy
    store.set_policy(PRODUCTION, None)
    assert policy_of(store) == RetryPolicy()
    assert [e.kind for e in store.events(PRODUCTION)].count("policy_changed") == 2
    with pytest.raises(leases.NotFoundError):
        store.set_policy("no-such-production", policy)


def test_a_changed_policy_applies_to_the_attempts_that_end_after_it(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = claim(store)
    store.set_policy(PRODUCTION, RetryPolicy(max_attempts=1, backoff_base=timedelta(0)))
    lease.fail_retry("after the change")
    assert store.job(PRODUCTION, job).state == JobState.DEAD


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: RetryPolicy(max_attempts=0), leases.InvalidArgumentError),
        (lambda: RetryPolicy(max_attempts=1001), leases.InvalidArgumentError),
        (lambda: RetryPolicy(max_attempts=2**32 + 5), leases.InvalidArgumentError),
        (lambda: RetryPolicy(max_attempts=True), TypeError),
        (lambda: RetryPolicy(jitter_percent=-1), leases.InvalidArgumentError),
        (lambda: RetryPolicy(jitter_percent=101), leases.InvalidArgumentError),
        (lambda: RetryPolicy(backoff_base=timedelta(seconds=-1)), leases.InvalidArgumentError),
        (lambda: RetryPolicy(backoff_base=timedelta(hours=2)), leases.InvalidArgumentError),  # above the cap
        (lambda: RetryPolicy(backoff_cap=MAX_DELAY + timedelta(microseconds=1)), leases.InvalidArgumentError),
        (lambda: RetryPolicy(backoff_base=1), TypeError),  # type: ignore[arg-type]  # a bare number is no duration
    ],
)
def test_a_retry_policy_out_of_its_bounds_is_refused_when_made(make: Callable[[], Any], error: type) -> None:
    with pytest.raises(error):
        make()


def test_a_policy_that_is_no_retry_policy_is_refused_and_changes_nothing(store: leases.Authority) -> None:
    before = snapshot(store)
    with pytest.raises(TypeError):
        store.set_policy(PRODUCTION, {"max_attempts": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.create_production("other", policy=3)  # type: ignore[arg-type]
    assert snapshot(store) == before
    assert [p.name for p in store.iter_productions()] == [PRODUCTION]


# ---- retryable failures and the dead state -------------------------------------


def test_a_poison_job_is_dead_after_exactly_max_attempts_retryable_failures(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION, key="poison")
    for attempt in range(1, NO_BACKOFF.max_attempts + 1):
        assert store.job(PRODUCTION, job).state == JobState.REQUESTED
        lease = claim(store)
        assert lease.job_id == job
        lease.fail_retry(f"crash {attempt}")
    record = store.job(PRODUCTION, job)
    assert record.state == JobState.DEAD and record.state == "dead"
    assert record.attempts == NO_BACKOFF.max_attempts
    assert [(a.number, a.ending, a.reason) for a in record.attempt_history] == [
        (1, AttemptEnding.RETRY, "crash 1"), (2, AttemptEnding.RETRY, "crash 2"), (3, AttemptEnding.RETRY, "crash 3")
    ]
    assert nothing_to_claim(store)
    assert store.job_counts(PRODUCTION)[JobState.DEAD] == 1
    assert [j.id for j in store.iter_jobs(PRODUCTION, states=[JobState.DEAD])] == [job]
    kinds = [e.kind for e in store.events(PRODUCTION) if e.job_id == job]
    assert kinds.count("retry") == NO_BACKOFF.max_attempts and kinds[-1] == "dead"
    with pytest.raises(leases.WrongStateError):
        store.claim_job(PRODUCTION, job, worker="w1", duration=SECONDS_30)


@pytest.mark.testlib
def test_a_poison_job_that_kills_its_worker_is_dead_after_exactly_max_attempts_claims(
    clocked: leases.Authority,
) -> None:
    job = clocked.request_job(PRODUCTION)
    duration = timedelta(seconds=10)
    for attempt in range(NO_BACKOFF.max_attempts):
        _testing.set_clock(clocked, T0 + attempt * duration)
        lease = claim(clocked, duration)  # the worker dies holding it
        assert lease.job_id == job
        lease.close()
    _testing.set_clock(clocked, T0 + NO_BACKOFF.max_attempts * duration - timedelta(microseconds=1))
    assert clocked.job(PRODUCTION, job).state == JobState.CLAIMED
    _testing.set_clock(clocked, T0 + NO_BACKOFF.max_attempts * duration)
    assert nothing_to_claim(clocked)
    record = clocked.job(PRODUCTION, job)
    assert record.state == JobState.DEAD and record.attempts == NO_BACKOFF.max_attempts
    assert [a.ending for a in record.attempt_history] == [AttemptEnding.EXPIRED] * NO_BACKOFF.max_attempts


def test_fail_stays_terminal_whatever_attempts_are_left(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    claim(store).fail("bad input")
    record = store.job(PRODUCTION, job)
    assert (record.state, record.attempts, record.reason) == (JobState.FAILED, 1, "bad input")
    assert [a.ending for a in record.attempt_history] == [AttemptEnding.FAILED]
    assert nothing_to_claim(store)


def test_the_attempt_history_records_each_ended_claim_in_order(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    claim(store).fail_retry("disk full")
    claim(store).release()
    last = store.claim(PRODUCTION, worker="w2", duration=SECONDS_30)
    assert last is not None
    last.complete()
    record = store.job(PRODUCTION, job)
    history = record.attempt_history
    assert all(isinstance(a, leases.Attempt) for a in history)
    assert [(a.number, a.worker, a.ending, a.reason) for a in history] == [
        (1, "w1", AttemptEnding.RETRY, "disk full"),
        (2, "w1", AttemptEnding.RELEASED, None),
        (3, "w2", AttemptEnding.COMPLETED, None),
    ]
    assert all(a.claimed_at <= a.ended_at for a in history)
    assert history[0].ended_at <= history[1].claimed_at
    assert record.state == JobState.COMPLETED and record.attempts == 3


def test_a_retry_before_the_first_claim_ends_has_an_empty_history(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    assert store.job(PRODUCTION, job).attempt_history == ()
    claim(store)
    assert store.job(PRODUCTION, job).attempt_history == ()


def test_fail_retry_refuses_a_bad_delay_or_reason_and_keeps_the_claim(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION)
    lease = claim(store)
    before = snapshot(store)
    # 0 would be the library's "the policy's backoff": refused, never reinterpreted.
    for bad in (timedelta(0), timedelta(seconds=-1), MAX_DELAY + timedelta(microseconds=1)):
        with pytest.raises(leases.InvalidArgumentError):
            lease.fail_retry("x", delay=bad)
    with pytest.raises(TypeError):
        lease.fail_retry("x", delay=5)  # type: ignore[arg-type]
    with pytest.raises(leases.InvalidArgumentError):
        lease.fail_retry("bad\0reason")
    with pytest.raises(leases.InvalidArgumentError):
        lease.fail_retry("r" * (leases._abi.MAX_REASON_LEN + 1))
    assert snapshot(store) == before
    assert lease.check() is None
    lease.fail_retry()  # no reason, the policy's backoff (none)
    assert store.job(PRODUCTION, job).attempt_history[0].reason is None
    with pytest.raises(leases.ClosedError):
        lease.fail_retry()


@pytest.mark.testlib
def test_fail_retry_with_a_delay_returns_the_job_exactly_after_it(clocked: leases.Authority) -> None:
    job = clocked.request_job(PRODUCTION)
    claim(clocked).fail_retry("later", delay=timedelta(seconds=5))
    assert clocked.job(PRODUCTION, job).claimable_at == T0 + timedelta(seconds=5)
    _testing.set_clock(clocked, T0 + timedelta(seconds=5) - timedelta(microseconds=1))
    assert nothing_to_claim(clocked)
    _testing.set_clock(clocked, T0 + timedelta(seconds=5))
    assert claim(clocked).job_id == job


@pytest.mark.testlib
def test_fail_retry_without_a_delay_waits_the_policys_backoff(clocked: leases.Authority) -> None:
    clocked.set_policy(PRODUCTION, RetryPolicy(backoff_base=timedelta(seconds=2), jitter_percent=0))
    job = clocked.request_job(PRODUCTION)
    claim(clocked).fail_retry()
    assert clocked.job(PRODUCTION, job).claimable_at == T0 + timedelta(seconds=2)
    claim_again_at = T0 + timedelta(seconds=2)
    _testing.set_clock(clocked, claim_again_at - timedelta(microseconds=1))
    assert nothing_to_claim(clocked)
    _testing.set_clock(clocked, claim_again_at)
    claim(clocked).fail_retry()  # attempt 2 backs off 2 s · 2
    assert clocked.job(PRODUCTION, job).claimable_at == claim_again_at + timedelta(seconds=4)


# ---- claim order, delays and run-at ----------------------------------------------


def test_claim_next_serves_higher_priority_first_then_request_order(store: leases.Authority) -> None:
    low = store.request_job(PRODUCTION, key="low")
    high = store.request_job(PRODUCTION, key="high", priority=leases._abi.MAX_PRIORITY)
    mid_1 = store.request_job(PRODUCTION, key="mid-1", priority=5)
    mid_2 = store.request_job(PRODUCTION, key="mid-2", priority=5)
    assert {j.id: j.priority for j in store.jobs(PRODUCTION)} == {low: 0, high: 1000, mid_1: 5, mid_2: 5}
    assert [claim(store).job_id for _ in range(4)] == [high, mid_1, mid_2, low]


@pytest.mark.testlib
def test_a_delayed_job_is_not_claimable_one_microsecond_before_its_time(clocked: leases.Authority) -> None:
    job = clocked.request_job(PRODUCTION, delay=timedelta(seconds=10))
    due = T0 + timedelta(seconds=10)
    assert clocked.job(PRODUCTION, job).claimable_at == due
    _testing.set_clock(clocked, due - timedelta(microseconds=1))
    assert nothing_to_claim(clocked)
    with pytest.raises(leases.WrongStateError, match="not claimable before"):
        clocked.claim_job(PRODUCTION, job, worker="w1", duration=SECONDS_30)
    _testing.set_clock(clocked, due)
    assert claim(clocked).job_id == job


@pytest.mark.testlib
def test_a_run_at_job_becomes_claimable_at_its_time_on_the_authoritys_clock(clocked: leases.Authority) -> None:
    at = T0 + timedelta(minutes=3)
    job = clocked.request_job(PRODUCTION, run_at=at)
    assert clocked.job(PRODUCTION, job).claimable_at == at
    _testing.set_clock(clocked, at - timedelta(microseconds=1))
    assert nothing_to_claim(clocked)
    _testing.set_clock(clocked, at)
    assert claim(clocked).job_id == job


@pytest.mark.testlib
def test_a_run_at_in_the_past_means_now_and_never_jumps_the_queue(clocked: leases.Authority) -> None:
    first = clocked.request_job(PRODUCTION, key="first")
    past = clocked.request_job(PRODUCTION, key="past", run_at=T0 - timedelta(days=30))
    epoch = clocked.request_job(PRODUCTION, key="epoch", run_at=_testing.EPOCH)
    assert clocked.job(PRODUCTION, past).claimable_at == T0
    assert [claim(clocked).job_id for _ in range(3)] == [first, past, epoch]


def test_a_zero_delay_is_claimable_at_once(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION, delay=timedelta(0))
    assert claim(store).job_id == job


def test_a_repeated_keyed_request_keeps_the_first_requests_options(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION, key="k", priority=3)
    assert store.request_job(PRODUCTION, key="k", priority=9, delay=DAY) == job
    record = store.job(PRODUCTION, job)
    assert record.priority == 3 and record.claimable_at is not None
    assert claim(store).job_id == job


@pytest.mark.parametrize(
    "options, error",
    [
        ({"priority": -1}, leases.InvalidArgumentError),
        ({"priority": 1001}, leases.InvalidArgumentError),
        ({"priority": 2**32 + 1}, leases.InvalidArgumentError),  # ctypes would wrap it to 1
        ({"priority": True}, TypeError),
        ({"priority": 1.5}, TypeError),
        ({"delay": timedelta(seconds=-1)}, leases.InvalidArgumentError),
        ({"delay": MAX_DELAY + timedelta(microseconds=1)}, leases.InvalidArgumentError),
        ({"delay": 10}, TypeError),
        ({"run_at": datetime(2030, 1, 1)}, leases.InvalidArgumentError),  # naive: no zone to trust
        ({"run_at": "2030-01-01T00:00:00Z"}, TypeError),
        ({"run_at": datetime.max.replace(tzinfo=T0.tzinfo)}, leases.InvalidArgumentError),  # past 366 days
        ({"delay": timedelta(seconds=1), "run_at": T0}, leases.InvalidArgumentError),
        ({"priorty": 5}, TypeError),  # a misspelled option is never ignored
    ],
)
def test_bad_request_options_are_a_typed_error_and_write_nothing(
    store: leases.Authority, options: Dict[str, Any], error: type
) -> None:
    before = snapshot(store)
    with pytest.raises(error):
        store.request_job(PRODUCTION, key="k", **options)
    assert snapshot(store) == before


# ---- redrive -----------------------------------------------------------------------


def finished_jobs(auth: leases.Authority) -> Dict[str, str]:
    """One job in each finished state (failed, dead, cancelled, completed)
    and one still requested: state -> job id."""
    ids = {s: auth.request_job(PRODUCTION, key=s) for s in ("failed", "dead", "cancelled", "completed", "requested")}
    auth.claim_job(PRODUCTION, ids["failed"], worker="w1", duration=SECONDS_30).fail("broken")
    for _ in range(NO_BACKOFF.max_attempts):
        auth.claim_job(PRODUCTION, ids["dead"], worker="w1", duration=SECONDS_30).fail_retry("crash")
    auth.cancel(PRODUCTION, ids["cancelled"])
    auth.claim_job(PRODUCTION, ids["completed"], worker="w1", duration=SECONDS_30).complete()
    assert {s: auth.job(PRODUCTION, j).state for s, j in ids.items()} == {s: s for s in ids}
    return ids


def test_redrive_requests_the_jobs_of_the_given_states_again_with_attempts_reset(store: leases.Authority) -> None:
    ids = finished_jobs(store)
    assert store.redrive(PRODUCTION, states=[JobState.DEAD, "failed"]) == 2
    for state in ("dead", "failed"):
        record = store.job(PRODUCTION, ids[state])
        assert (record.state, record.attempts) == (JobState.REQUESTED, 0)
        assert record.attempt_history  # the old attempts are kept
    assert store.job(PRODUCTION, ids["cancelled"]).state == JobState.CANCELLED
    assert store.job(PRODUCTION, ids["completed"]).state == JobState.COMPLETED
    assert store.redrive(PRODUCTION, states=iter([JobState.DEAD])) == 0
    assert store.redrive(PRODUCTION, states=("cancelled", "cancelled")) == 1
    kinds = [e.kind for e in store.events(PRODUCTION)]
    assert kinds.count("redriven") == 3
    # A redriven dead job gets the policy's attempts afresh.
    lease = store.claim_job(PRODUCTION, ids["dead"], worker="w1", duration=SECONDS_30)
    lease.fail_retry()
    assert store.job(PRODUCTION, ids["dead"]).state == JobState.REQUESTED


def test_redrive_with_a_state_it_does_not_take_redrives_nothing(store: leases.Authority) -> None:
    finished_jobs(store)
    before = snapshot(store)
    for states in (["dead", "requested"], ["completed"], ["claimed"], ["running"], []):
        with pytest.raises(leases.InvalidArgumentError):
            store.redrive(PRODUCTION, states=states)
    for bad in ("dead", b"dead", [3], None):
        with pytest.raises(TypeError):
            store.redrive(PRODUCTION, states=bad)  # type: ignore[arg-type]
    assert snapshot(store) == before
    with pytest.raises(leases.NotFoundError):
        store.redrive("no-such-production", states=["dead"])


def test_retry_job_redrives_one_failed_dead_or_cancelled_job(store: leases.Authority) -> None:
    ids = finished_jobs(store)
    for state in ("failed", "dead", "cancelled"):
        store.retry_job(PRODUCTION, ids[state])
        record = store.job(PRODUCTION, ids[state])
        assert (record.state, record.attempts) == (JobState.REQUESTED, 0)
    assert {claim(store).job_id for _ in range(4)} == {ids[s] for s in ("failed", "dead", "cancelled", "requested")}


def test_retry_job_of_a_job_in_another_state_is_wrong_state_and_changes_nothing(store: leases.Authority) -> None:
    ids = finished_jobs(store)
    claimed = store.request_job(PRODUCTION, key="claimed")
    store.claim_job(PRODUCTION, claimed, worker="w1", duration=SECONDS_30)
    before = snapshot(store)
    for job in (ids["completed"], ids["requested"], claimed):
        with pytest.raises(leases.WrongStateError):
            store.retry_job(PRODUCTION, job)
    with pytest.raises(leases.NotFoundError):
        store.retry_job(PRODUCTION, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(leases.InvalidArgumentError):
        store.retry_job(PRODUCTION, "")
    assert snapshot(store) == before


# ---- records -----------------------------------------------------------------------


def test_job_state_and_attempt_ending_parse_unknown_spellings_as_plain_str() -> None:
    assert JobState.parse("dead") is JobState.DEAD and f"{JobState.DEAD}" == "dead"
    assert AttemptEnding.parse("retry") is AttemptEnding.RETRY and str(AttemptEnding.RETRY) == "retry"
    assert AttemptEnding.parse("vanished") == "vanished" and not isinstance(AttemptEnding.parse("vanished"), AttemptEnding)


def test_records_carry_priority_claimable_time_and_attempts(store: leases.Authority) -> None:
    job = store.request_job(PRODUCTION, priority=7, delay=DAY)
    [listed] = store.jobs(PRODUCTION)
    record = store.job(PRODUCTION, job)
    for j in (listed, record):
        assert (j.priority, j.attempts, j.state) == (7, 0, JobState.REQUESTED)
        # The delay runs from the authority's time of the request.
        assert record.requested_at is not None and j.claimable_at == record.requested_at + DAY
