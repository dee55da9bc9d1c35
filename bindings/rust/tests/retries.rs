//! Retries in Rust: retry policies, retryable failures and the dead state,
//! request options (priority, run-at, delay), and the coordinator's redrives,
//! each rule on SQLite and on PostgreSQL (`on_both_stores!`). Waits never
//! sleep out a backoff: policies without backoff serve, and delays are
//! checked against the authority times the records carry.

#[macro_use]
mod common;

use std::time::Duration;

use common::{Store, HOUR, PRODUCTION};
use leases::{AttemptEnding, Authority, ErrorKind, Facts, JobState, RequestOptions, RetryPolicy, MAX_DELAY};

const MINUTE: Duration = Duration::from_secs(60);

/// A policy of `n` attempts whose retries are claimable at once.
fn at_once(n: u32) -> RetryPolicy {
    RetryPolicy::default().max_attempts(n).backoff_base(Duration::ZERO)
}

fn event_kinds(auth: &Authority, production: &str) -> Vec<String> {
    auth.iter_events(Some(production), 0).map(|e| e.unwrap().kind).collect()
}

fn job(s: &Store, production: &str, id: &str) -> leases::JobRecord {
    s.auth.job(production, id).unwrap()
}

on_both_stores!(
    a_retryable_failure_requeues_the_job_until_its_last_attempt_makes_it_dead,
    a_retry_delay_makes_the_job_claimable_exactly_that_long_after_the_failure,
    a_bad_retry_delay_is_refused_and_leaves_the_lease_active,
    creating_a_production_with_a_policy_is_idempotent_only_for_the_same_policy,
    a_policy_out_of_bounds_is_refused_and_writes_nothing,
    a_changed_policy_applies_to_attempts_that_end_after_it_and_is_recorded,
    claims_follow_priority_then_claimable_time_then_request_order,
    a_run_at_is_an_authority_time_before_which_the_job_is_not_claimable,
    bad_request_options_are_refused_and_request_nothing,
    a_repeated_keyed_request_keeps_the_first_requests_options,
    retry_job_redrives_a_failed_dead_or_cancelled_job_with_attempts_reset,
    redrive_by_state_redrives_every_job_in_that_state_and_refuses_other_states,
);

fn a_retryable_failure_requeues_the_job_until_its_last_attempt_makes_it_dead(s: &Store) {
    let auth = &s.auth;
    auth.create_production_with_policy("twice", &at_once(2)).unwrap();
    let id = auth.request_job("twice", None, b"poison").unwrap();
    auth.claim("twice", "w1", HOUR).unwrap().expect("a job").fail_retry("disk full", None).unwrap();
    let after_one = job(s, "twice", &id);
    assert_eq!((after_one.job.state.clone(), after_one.job.attempts), (JobState::Requested, 1));
    let lease = auth.claim("twice", "w2", HOUR).unwrap().expect("claimable again at once");
    assert_eq!(lease.job_id(), id);
    lease.fail_retry("", None).unwrap();
    assert_eq!(lease.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::Closed, "success closed the lease");

    let record = job(s, "twice", &id);
    assert_eq!((record.job.state.clone(), record.job.attempts), (JobState::Dead, 2));
    assert_eq!(record.job.claimable_at, None, "a finished job is never claimable");
    let history: Vec<_> =
        record.history.iter().map(|a| (a.number, a.worker.as_str(), a.ending.clone(), a.reason.as_deref())).collect();
    assert_eq!(history, [(1, "w1", AttemptEnding::Retry, Some("disk full")), (2, "w2", AttemptEnding::Retry, None)]);
    assert!(record.history.iter().all(|a| a.claimed_at <= a.ended_at));
    assert!(auth.claim("twice", "w3", HOUR).unwrap().is_none(), "a dead job is never claimed");
    assert_eq!(auth.claim_job("twice", &id, "w3", HOUR).unwrap_err().kind(), ErrorKind::WrongState);
    let kinds = event_kinds(auth, "twice");
    assert_eq!(kinds.iter().filter(|k| *k == "retry").count(), 2, "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("dead"), "{kinds:?}");
}

fn a_retry_delay_makes_the_job_claimable_exactly_that_long_after_the_failure(s: &Store) {
    let auth = &s.auth;
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap().fail_retry("later", Some(HOUR)).unwrap();
    let record = job(s, PRODUCTION, &id);
    let ended = record.history.last().expect("the attempt ended").ended_at;
    assert_eq!(record.job.state, JobState::Requested);
    assert_eq!(record.job.claimable_at, Some(ended + HOUR), "the delay runs on the authority's clock from the failure");
    assert!(auth.claim(PRODUCTION, "w", HOUR).unwrap().is_none(), "not claimable before its delay");
    assert_eq!(auth.claim_job(PRODUCTION, &id, "w", HOUR).unwrap_err().kind(), ErrorKind::WrongState);
}

fn a_bad_retry_delay_is_refused_and_leaves_the_lease_active(s: &Store) {
    let auth = &s.auth;
    let (id, lease) = common::claimed(auth, "w");
    for delay in [Duration::ZERO, MAX_DELAY + Duration::from_micros(1), Duration::from_nanos(1_500)] {
        let err = lease.fail_retry("x", Some(delay)).unwrap_err();
        assert_eq!((err.kind(), err.status()), (ErrorKind::InvalidArgument, None), "{delay:?}: {err}");
    }
    let err = lease.fail_retry(&"r".repeat(leases::MAX_REASON_LEN + 1), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let record = job(s, PRODUCTION, &id);
    assert_eq!((record.job.state, record.history.len()), (JobState::Claimed, 0), "nothing changed");
    lease.fail_retry("the longest delay is fine", Some(MAX_DELAY)).unwrap();
    assert_eq!(job(s, PRODUCTION, &id).job.attempts, 1);
}

fn creating_a_production_with_a_policy_is_idempotent_only_for_the_same_policy(s: &Store) {
    let auth = &s.auth;
    let policy = RetryPolicy::new().max_attempts(3).jitter_percent(0).backoff_cap(MINUTE);
    auth.create_production_with_policy("p", &policy).unwrap();
    auth.create_production_with_policy("p", &policy).unwrap();
    let err = auth.create_production_with_policy("p", &policy.max_attempts(4)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongState, "{err}");
    auth.create_production("p").unwrap(); // without a policy: the production as it is
                                          // The default policy is the library's: creating the production made
                                          // without one again with RetryPolicy::default() is the same policy.
    auth.create_production_with_policy(PRODUCTION, &RetryPolicy::default()).unwrap();
    let err = auth.create_production_with_policy(PRODUCTION, &RetryPolicy::default().jitter_percent(21)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongState);
}

fn a_policy_out_of_bounds_is_refused_and_writes_nothing(s: &Store) {
    let auth = &s.auth;
    let d = RetryPolicy::default();
    let bad = [
        d.max_attempts(0),
        d.max_attempts(leases::MAX_ATTEMPTS + 1),
        d.max_attempts(u32::MAX),
        d.jitter_percent(101),
        d.backoff_base(Duration::from_secs(2)).backoff_cap(Duration::from_secs(1)),
        d.backoff_cap(MAX_DELAY + Duration::from_micros(1)),
        d.backoff_base(Duration::from_nanos(1_500)),
    ];
    let events = event_kinds(auth, PRODUCTION).len();
    for policy in bad {
        let err = auth.create_production_with_policy("bad", &policy).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{policy:?}: {err}");
        let err = auth.set_retry_policy(PRODUCTION, &policy).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{policy:?}: {err}");
    }
    let names: Vec<String> = auth.iter_productions().map(|p| p.unwrap().name).collect();
    assert_eq!(names, [PRODUCTION], "no production was created");
    assert_eq!(event_kinds(auth, PRODUCTION).len(), events, "no policy was changed");
    auth.create_production_with_policy("bad", &d.backoff_base(MAX_DELAY).backoff_cap(MAX_DELAY)).unwrap();
    let err = auth.set_retry_policy("missing", &d).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

fn a_changed_policy_applies_to_attempts_that_end_after_it_and_is_recorded(s: &Store) {
    let auth = &s.auth;
    let (id, lease) = common::claimed(auth, "w");
    auth.set_retry_policy(PRODUCTION, &at_once(1)).unwrap();
    lease.fail_retry("", None).unwrap();
    assert_eq!(job(s, PRODUCTION, &id).job.state, JobState::Dead, "the claim taken before the change ended under it");
    assert!(event_kinds(auth, PRODUCTION).contains(&"policy_changed".to_string()));

    auth.set_retry_policy(PRODUCTION, &at_once(2)).unwrap();
    let (id, lease) = common::claimed(auth, "w");
    lease.fail_retry("", None).unwrap();
    assert_eq!(job(s, PRODUCTION, &id).job.state, JobState::Requested);
}

fn claims_follow_priority_then_claimable_time_then_request_order(s: &Store) {
    let auth = &s.auth;
    let req = |o: RequestOptions| auth.request_job_with(PRODUCTION, None, b"", &o).unwrap();
    let plain = req(RequestOptions::new());
    let urgent = req(RequestOptions::new().priority(5));
    let delayed_urgent = req(RequestOptions::new().priority(5).delay(HOUR));
    let past = req(RequestOptions::new().run_at(std::time::UNIX_EPOCH + Duration::from_secs(1)));
    let top = req(RequestOptions::new().priority(leases::MAX_PRIORITY));
    let order: Vec<String> =
        std::iter::from_fn(|| auth.claim(PRODUCTION, "w", HOUR).unwrap()).map(|l| l.job_id().to_owned()).collect();
    assert_eq!(order, [top.clone(), urgent.clone(), plain, past], "a run-at in the past means now: no queue jumping");

    let jobs = auth.jobs(PRODUCTION).unwrap();
    let by_id = |id: &str| jobs.iter().find(|j| j.id == id).unwrap().clone();
    assert_eq!((by_id(&top).priority, by_id(&urgent).priority), (leases::MAX_PRIORITY, 5));
    let delayed = job(s, PRODUCTION, &delayed_urgent);
    assert_eq!((delayed.job.state.clone(), delayed.job.priority), (JobState::Requested, 5));
    assert_eq!(delayed.job.claimable_at, Some(delayed.requested_at + HOUR), "the delay runs from the request");
}

fn a_run_at_is_an_authority_time_before_which_the_job_is_not_claimable(s: &Store) {
    let auth = &s.auth;
    let first = auth.request_job(PRODUCTION, None, b"").unwrap();
    // An authority time, as the records carry them: the first request's.
    let at = job(s, PRODUCTION, &first).requested_at + HOUR;
    auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap().complete(&Facts::new()).unwrap();
    let id = auth.request_job_with(PRODUCTION, None, b"", &RequestOptions::new().run_at(at)).unwrap();
    assert_eq!(job(s, PRODUCTION, &id).job.claimable_at, Some(at));
    assert!(auth.claim(PRODUCTION, "w", HOUR).unwrap().is_none());
    assert_eq!(auth.claim_job(PRODUCTION, &id, "w", HOUR).unwrap_err().kind(), ErrorKind::WrongState);
}

fn bad_request_options_are_refused_and_request_nothing(s: &Store) {
    let auth = &s.auth;
    let first = auth.request_job(PRODUCTION, None, b"").unwrap();
    let now = job(s, PRODUCTION, &first).requested_at;
    let bad = [
        RequestOptions::new().priority(leases::MAX_PRIORITY + 1),
        RequestOptions::new().priority(u32::MAX),
        RequestOptions::new().delay(MAX_DELAY + Duration::from_micros(1)),
        RequestOptions::new().delay(Duration::from_nanos(1_500)),
        RequestOptions::new().delay(MINUTE).run_at(now + MINUTE),
        RequestOptions::new().run_at(now + MAX_DELAY + Duration::from_secs(86_400)),
        RequestOptions::new().run_at(now + Duration::from_nanos(1_500)),
    ];
    for o in bad {
        let err = auth.request_job_with(PRODUCTION, Some("k"), b"", &o).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{o:?}: {err}");
    }
    assert_eq!(auth.jobs(PRODUCTION).unwrap().len(), 1, "nothing was requested");
    let err = auth.request_job_with("missing", None, b"", &RequestOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = auth
        .request_job_with(PRODUCTION, None, &vec![0; leases::MAX_PAYLOAD_LEN + 1], &RequestOptions::new())
        .unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::InvalidArgument, None));
}

fn a_repeated_keyed_request_keeps_the_first_requests_options(s: &Store) {
    let auth = &s.auth;
    let id = auth.request_job_with(PRODUCTION, Some("k"), b"p", &RequestOptions::new().priority(7)).unwrap();
    let again = auth.request_job_with(PRODUCTION, Some("k"), b"p", &RequestOptions::new().delay(HOUR)).unwrap();
    assert_eq!(again, id);
    let record = job(s, PRODUCTION, &id);
    assert_eq!((record.job.priority, record.job.claimable_at), (7, Some(record.requested_at)));
    let err = auth.request_job_with(PRODUCTION, Some("k"), b"other", &RequestOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongState);
}

fn retry_job_redrives_a_failed_dead_or_cancelled_job_with_attempts_reset(s: &Store) {
    let auth = &s.auth;
    auth.create_production_with_policy("once", &at_once(1)).unwrap();
    let dead = auth.request_job("once", None, b"").unwrap();
    auth.claim("once", "w", HOUR).unwrap().unwrap().fail_retry("boom", None).unwrap();
    let failed = auth.request_job("once", None, b"").unwrap();
    auth.claim("once", "w", HOUR).unwrap().unwrap().fail("for good").unwrap();
    let cancelled = auth.request_job("once", None, b"").unwrap();
    auth.cancel("once", &cancelled).unwrap();
    for id in [&dead, &failed, &cancelled] {
        let before = job(s, "once", id);
        auth.retry_job("once", id).unwrap();
        let after = job(s, "once", id);
        assert_eq!((after.job.state, after.job.attempts), (JobState::Requested, 0), "{:?}", before.job.state);
        assert_eq!(after.history, before.history, "the history keeps the old attempts");
    }
    let lease = auth.claim_job("once", &dead, "w", HOUR).unwrap();
    assert_eq!(auth.retry_job("once", &dead).unwrap_err().kind(), ErrorKind::WrongState, "claimed");
    lease.complete(&Facts::new()).unwrap();
    assert_eq!(auth.retry_job("once", &dead).unwrap_err().kind(), ErrorKind::WrongState, "completed");
    assert_eq!(auth.retry_job("once", &failed).unwrap_err().kind(), ErrorKind::WrongState, "requested");
    assert_eq!(job(s, "once", &dead).history.last().unwrap().number, 1, "a redrive counts from 1 again");
    assert_eq!(auth.retry_job("once", "00000000-0000-4000-8000-000000000000").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(auth.retry_job("once", "not-an-id").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(event_kinds(auth, "once").iter().filter(|k| *k == "redriven").count(), 3);
}

fn redrive_by_state_redrives_every_job_in_that_state_and_refuses_other_states(s: &Store) {
    let auth = &s.auth;
    let failed: Vec<String> = (0..3)
        .map(|_| {
            let (id, lease) = common::claimed(auth, "w");
            lease.fail("no").unwrap();
            id
        })
        .collect();
    let cancelled = auth.request_job(PRODUCTION, None, b"").unwrap();
    auth.cancel(PRODUCTION, &cancelled).unwrap();
    for state in [JobState::Requested, JobState::Claimed, JobState::Completed, JobState::Other("bogus".into())] {
        let err = auth.redrive(PRODUCTION, &state).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{state}: {err}");
    }
    assert_eq!(auth.iter_jobs(PRODUCTION, &[JobState::Failed]).count(), 3, "nothing was redriven");
    assert_eq!(auth.redrive(PRODUCTION, &JobState::Dead).unwrap(), 0);
    assert_eq!(auth.redrive(PRODUCTION, &JobState::Failed).unwrap(), 3);
    let requested: Vec<String> = auth.iter_jobs(PRODUCTION, &[JobState::Requested]).map(|j| j.unwrap().id).collect();
    assert_eq!(requested, failed);
    assert_eq!(job(s, PRODUCTION, &cancelled).job.state, JobState::Cancelled, "another state is left alone");
    assert_eq!(auth.redrive(PRODUCTION, &JobState::Cancelled).unwrap(), 1);
    assert_eq!(auth.redrive("missing", &JobState::Failed).unwrap_err().kind(), ErrorKind::NotFound);
}
