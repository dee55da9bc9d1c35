//! The worker runtime on SQLite: waiting claims and their cancellers,
//! keep-alive, check and wait_lost on a lease, and `Worker` (drain, drain
//! timeout, stop from another thread, a real process stopped by SIGTERM
//! mid-job). PostgreSQL: tests/postgres.rs; the worker's one commit per job
//! runs on both stores here (`on_both_stores!`). Timed assertions are upper
//! bounds generous by orders of magnitude; what makes each fail is a wait of
//! an hour that the rule must cut short.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use leases::{
    AttemptEnding, Authority, Canceller, ErrorKind, Facts, JobState, Lease, RetryPolicy, StopHandle, Worker,
    WorkerConfig,
};

const MINUTE: Duration = Duration::from_secs(60);

/// The types a worker shares between threads are Send + Sync, as documented;
/// this fails to compile if one stops being so.
#[test]
fn the_worker_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Authority>();
    send_sync::<Lease>();
    send_sync::<Canceller>();
    send_sync::<StopHandle>();
    send_sync::<Worker<'static>>();
    send_sync::<leases::WorkerReport>();
}

fn events(auth: &Authority) -> usize {
    auth.events(None, 0).unwrap().len()
}

// ---- waiting claims ----------------------------------------------------------

#[test]
fn a_waiting_claim_wakes_when_a_request_commits_on_another_thread() {
    let (_dir, auth) = fresh("wait-wake");
    expect_a_request_to_wake_a_waiting_claim(&auth, &auth);
}

#[test]
fn a_waiting_claim_returns_none_when_its_wait_passes_and_zero_is_a_plain_claim() {
    let (_dir, auth) = fresh("wait-none");
    let start = Instant::now();
    assert!(auth.claim_wait(PRODUCTION, "w", MINUTE, Duration::from_millis(150), None).unwrap().is_none());
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert!(auth.claim_wait(PRODUCTION, "w", MINUTE, Duration::ZERO, None).unwrap().is_none());
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    assert_eq!(auth.claim_wait(PRODUCTION, "w", MINUTE, Duration::ZERO, None).unwrap().unwrap().job_id(), id);
}

#[test]
fn a_canceller_ends_a_wait_from_another_thread_promptly_and_claims_nothing() {
    let (_dir, auth) = fresh("wait-cancel");
    let canceller = Canceller::new().unwrap();
    let (err, took) = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let canceller = &canceller;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            tx.send(Instant::now()).unwrap();
            canceller.cancel().unwrap();
        });
        let err = auth.claim_wait(PRODUCTION, "w", MINUTE, HOUR, Some(canceller)).unwrap_err();
        (err, rx.recv().unwrap().elapsed())
    });
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert!(err.is_interrupted() && !err.is_not_held(), "{err}");
    assert_eq!(err.status(), Some(19));
    assert!(took < PROMPT, "{took:?}");
    // It stays cancelled: a later wait ends at once, and nothing was claimed.
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let again = auth.claim_wait(PRODUCTION, "w", MINUTE, HOUR, Some(&canceller)).unwrap_err();
    assert!(again.is_interrupted());
    assert_eq!(job_state(&auth, &id), JobState::Requested);
}

#[test]
fn is_interrupted_and_is_not_held_classify_every_kind_apart() {
    for kind in ErrorKind::ALL {
        assert!(!(kind.is_interrupted() && kind.is_not_held()), "{kind}");
        assert_eq!(kind.is_interrupted(), kind == ErrorKind::Interrupted, "{kind}");
    }
    assert_eq!(ErrorKind::Interrupted.name(), "interrupted");
}

#[test]
fn closing_the_authority_ends_a_wait_as_closed() {
    let (dir, auth) = fresh("wait-close");
    let other = Authority::open(dir.db()).unwrap();
    let raw = other.as_raw() as usize;
    let err = std::thread::scope(|s| {
        let waiter = s.spawn(|| other.claim_wait(PRODUCTION, "w", MINUTE, HOUR, None));
        std::thread::sleep(Duration::from_millis(200));
        // The handle closes under its waiter (the library allows it; the
        // Authority is forgotten below so it is not closed twice).
        // SAFETY: a live handle; leases_authority_close is safe to call while
        // another thread waits on it.
        unsafe { leases::sys::leases_authority_close(raw as *mut leases::sys::leases_authority) };
        waiter.join().unwrap().unwrap_err()
    });
    std::mem::forget(other);
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    drop(auth);
}

#[test]
fn bad_wait_bounds_are_refused_before_any_call_and_claim_nothing() {
    let (_dir, auth) = fresh("wait-bad");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    for wait in [Duration::from_secs(24 * 3600 + 1), Duration::from_nanos(1500), Duration::MAX] {
        let err = auth.claim_wait(PRODUCTION, "w", MINUTE, wait, None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{wait:?}");
        assert_eq!(err.status(), None, "refused before the call");
    }
    let err = auth.claim_wait(PRODUCTION, "w", Duration::ZERO, MINUTE, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidDuration);
    let err = auth.claim_wait("nope", "w", MINUTE, HOUR, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "at once, no wait");
    assert_eq!(job_state(&auth, &id), JobState::Requested);
    assert!(auth.claim_wait(PRODUCTION, "w", MINUTE, leases::MAX_WAIT, None).unwrap().is_some());
}

// ---- keep-alive, check, wait_lost ---------------------------------------------

#[test]
fn keep_alive_holds_a_lease_for_many_of_its_durations() {
    let (_dir, auth) = fresh("keep");
    expect_keep_alive_to_hold_a_lease_for_many_of_its_durations(&auth);
}

#[test]
fn a_coordinators_cancel_reaches_a_kept_alive_lease_through_wait_lost() {
    let (_dir, auth) = fresh("keep-cancel");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    // Claimed for the keep-alive's duration: a renewer renews when less than
    // duration - interval is left, so a claim an hour long would first renew
    // (and learn of the cancel) an hour later.
    let lease = auth.claim(PRODUCTION, "w", Duration::from_secs(3)).unwrap().unwrap();
    lease.keep_alive(Duration::from_secs(3), Some(Duration::from_millis(100))).unwrap();
    auth.cancel(PRODUCTION, &id).unwrap();
    let start = Instant::now();
    let why = lease.wait_lost(HOUR, None).unwrap().expect("the lease is over");
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(why.kind(), ErrorKind::Cancelled);
    assert!(why.is_not_held());
    assert_eq!(lease.check().unwrap().map(|e| e.kind()), Some(ErrorKind::Cancelled));
}

#[test]
fn wait_lost_returns_none_when_the_timeout_passes_and_a_canceller_ends_it() {
    let (_dir, auth) = fresh("wait-lost");
    let (_id, lease) = claimed(&auth, "w");
    assert!(lease.wait_lost(Duration::from_millis(100), None).unwrap().is_none());
    let canceller = Canceller::new().unwrap();
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            canceller.cancel().unwrap();
        });
        lease.wait_lost(HOUR, Some(&canceller)).unwrap_err()
    });
    assert!(err.is_interrupted());
    assert_eq!(lease.wait_lost(Duration::MAX, None).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert!(lease.check().unwrap().is_none());
}

#[test]
fn stop_keep_alive_stops_renewals_and_the_lease_then_expires() {
    let (_dir, auth) = fresh("keep-stop");
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim(PRODUCTION, "w", SHORT).unwrap().unwrap();
    lease.keep_alive(SHORT, Some(Duration::from_millis(50))).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    lease.stop_keep_alive().unwrap();
    let before = events(&auth);
    past_short_expiry();
    assert_eq!(events(&auth), before, "a renewal was written after stop_keep_alive");
    assert_eq!(lease.check().unwrap().map(|e| e.kind()), Some(ErrorKind::Expired));
}

#[test]
fn dropping_a_kept_alive_lease_stops_its_renewals_and_writes_nothing() {
    let (_dir, auth) = fresh("keep-drop");
    // No backoff after the lapse, so the job is claimable again at its expiry.
    auth.set_retry_policy(PRODUCTION, &leases::RetryPolicy::default().backoff_base(Duration::ZERO)).unwrap();
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim(PRODUCTION, "w", SHORT).unwrap().unwrap();
    lease.keep_alive(SHORT, Some(Duration::from_millis(50))).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    drop(lease);
    let before = events(&auth);
    past_short_expiry();
    assert_eq!(events(&auth), before);
    // The claim lapsed; the job is claimable again once the lapse's backoff
    // (the default policy's: about a second) has passed too.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let mut again = None;
    while again.is_none() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        again = auth.claim(PRODUCTION, "w2", MINUTE).unwrap();
    }
    assert!(again.is_some(), "the claim expired: the job is claimable again");
}

#[test]
fn bad_keep_alive_durations_are_refused_and_the_lease_stays_as_it_is() {
    let (_dir, auth) = fresh("keep-bad");
    let (_id, lease) = claimed(&auth, "w");
    let before = events(&auth);
    assert_eq!(lease.keep_alive(Duration::ZERO, None).unwrap_err().kind(), ErrorKind::InvalidDuration);
    assert_eq!(lease.keep_alive(MINUTE, Some(HOUR)).unwrap_err().kind(), ErrorKind::InvalidDuration);
    assert_eq!(
        lease.keep_alive(MINUTE, Some(Duration::from_micros(10))).unwrap_err().kind(),
        ErrorKind::InvalidDuration
    );
    assert_eq!(events(&auth), before);
    assert!(lease.check().unwrap().is_none());
}

// ---- Worker ----------------------------------------------------------------------

fn config() -> WorkerConfig {
    WorkerConfig::new(PRODUCTION, "rs-worker", Duration::from_secs(2))
}

// A handler that completes each job with its payload as the metadata "payload".
fn payload_as_metadata(lease: &Lease) -> std::result::Result<Facts, leases::Error> {
    let payload = String::from_utf8(lease.payload()?).unwrap();
    Ok(Facts::new().metadata("payload", payload))
}

#[test]
fn a_worker_completes_each_job_with_the_facts_its_handler_returns() {
    let (_dir, auth) = fresh("worker-complete");
    let ids =
        [auth.request_job(PRODUCTION, None, b"one").unwrap(), auth.request_job(PRODUCTION, None, b"two").unwrap()];
    let worker = Worker::new(&auth, config().exit_when_empty(true)).unwrap();
    let report = worker.run(payload_as_metadata).unwrap();
    assert_eq!((report.claimed, report.completed), (2, 2));
    for id in &ids {
        assert_eq!(job_state(&auth, id), JobState::Completed);
    }
}

// ---- one commit per job (both stores) --------------------------------------------

on_both_stores!(
    a_worker_completes_each_job_and_claims_the_next_in_one_commit,
    a_worker_at_max_jobs_or_after_a_stop_completes_without_claiming_another,
    a_worker_fails_a_failing_handlers_job_for_a_retry_and_claims_the_next_on_its_own,
);

fn loop_config() -> WorkerConfig {
    WorkerConfig::new(PRODUCTION, "rs-loop", HOUR)
}

fn request(auth: &Authority, n: usize) -> Vec<String> {
    (0..n).map(|i| auth.request_job(PRODUCTION, None, i.to_string().as_bytes()).unwrap()).collect()
}

fn events_of(auth: &Authority, id: &str, kind: &str) -> Vec<leases::Event> {
    let all = auth.events(Some(PRODUCTION), 0).unwrap();
    all.into_iter().filter(|e| e.job_id.as_deref() == Some(id) && e.kind == kind).collect()
}

fn a_worker_completes_each_job_and_claims_the_next_in_one_commit(s: &Store) {
    let auth = &s.auth;
    let ids = request(auth, 3);
    let worker = Worker::new(auth, loop_config().exit_when_empty(true)).unwrap();
    let report = worker.run(payload_as_metadata).unwrap();
    assert_eq!((report.claimed, report.completed), (3, 3));
    for (i, id) in ids.iter().enumerate() {
        let record = auth.job(PRODUCTION, id).unwrap();
        assert_eq!(record.job.state, JobState::Completed);
        assert_eq!(record.facts.metadata["payload"], i.to_string());
    }
    for pair in ids.windows(2) {
        let (completed, claimed) = (events_of(auth, &pair[0], "completed"), events_of(auth, &pair[1], "claimed"));
        assert_eq!((completed.len(), claimed.len()), (1, 1));
        assert_eq!(claimed[0].seq, completed[0].seq + 1, "nothing between the completion and the next claim");
        assert_eq!(claimed[0].worker.as_deref(), Some("rs-loop"));
    }
}

fn a_worker_at_max_jobs_or_after_a_stop_completes_without_claiming_another(s: &Store) {
    let auth = &s.auth;
    let ids = request(auth, 4);
    let report =
        Worker::new(auth, loop_config().max_jobs(2)).unwrap().run(|_| Ok::<_, leases::Error>(Facts::new())).unwrap();
    assert_eq!((report.claimed, report.completed), (2, 2));
    let (completed, claimed) = (events_of(auth, &ids[0], "completed"), events_of(auth, &ids[1], "claimed"));
    assert_eq!(claimed[0].seq, completed[0].seq + 1, "the first completion claimed the second job in its commit");
    assert!(events_of(auth, &ids[2], "claimed").is_empty(), "the second completion claimed nothing: max_jobs");
    assert_eq!(job_state(auth, &ids[1]), JobState::Completed);
    assert_eq!(job_state(auth, &ids[2]), JobState::Requested);
    let worker = Worker::new(auth, loop_config()).unwrap();
    let stop = worker.stop_handle();
    let report = worker
        .run(move |_| {
            stop.stop();
            Ok::<_, leases::Error>(Facts::new())
        })
        .unwrap();
    assert_eq!((report.claimed, report.completed), (1, 1));
    assert_eq!(job_state(auth, &ids[2]), JobState::Completed);
    assert_eq!(job_state(auth, &ids[3]), JobState::Requested);
    assert!(events_of(auth, &ids[3], "claimed").is_empty(), "claimed after the stop");
}

fn a_worker_fails_a_failing_handlers_job_for_a_retry_and_claims_the_next_on_its_own(s: &Store) {
    let auth = &s.auth;
    auth.set_retry_policy(PRODUCTION, &RetryPolicy::new().backoff_base(HOUR).backoff_cap(HOUR).jitter_percent(0))
        .unwrap();
    let ids = request(auth, 3);
    let (first, second) = (ids[0].clone(), ids[1].clone());
    let worker = Worker::new(auth, loop_config().exit_when_empty(true)).unwrap();
    let report = worker
        .run(move |lease| {
            if lease.job_id() == first {
                return Err("bad input");
            }
            if lease.job_id() == second {
                lease.complete(&Facts::new().metadata("by", "handler")).unwrap();
            }
            Ok(Facts::new())
        })
        .unwrap();
    // The failed job waits out its hour of backoff.
    assert_eq!((report.claimed, report.retried, report.by_handler, report.completed), (3, 1, 1, 1));
    let failed = auth.job(PRODUCTION, &ids[0]).unwrap();
    assert_eq!(failed.job.state, JobState::Requested);
    assert_eq!(failed.history[0].ending, AttemptEnding::Retry);
    assert_eq!(events_of(auth, &ids[1], "completed").len(), 1, "completed twice");
    assert_eq!(auth.job(PRODUCTION, &ids[1]).unwrap().facts.metadata["by"], "handler");
    assert_eq!(job_state(auth, &ids[2]), JobState::Completed);
}

#[test]
fn a_worker_leaves_a_job_its_handler_settled_through_an_execution() {
    let (dir, auth) = fresh("worker-exec");
    let id = auth.request_job(PRODUCTION, None, b"frame").unwrap();
    let worker = Worker::new(&auth, config().max_jobs(1)).unwrap();
    let out = dir.path().to_path_buf();
    let (tx, rx) = mpsc::channel();
    let report = worker
        .run(move |lease| {
            let mut run = lease.execution(&out)?;
            std::fs::write(run.temp_path(), b"rendered").unwrap();
            tx.send(run.final_path().to_path_buf()).unwrap();
            run.finish(&Facts::new().metadata("by", "execution"))?;
            Ok::<_, leases::Error>(Facts::new().metadata("never", "published"))
        })
        .unwrap();
    assert_eq!((report.by_handler, report.completed, report.unsettled), (1, 0, 0));
    assert_eq!(job_state(&auth, &id), JobState::Completed);
    assert!(rx.recv().unwrap().exists());
}

#[test]
fn a_handlers_error_is_the_attempts_reason_through_display_and_a_panic_its_message() {
    let (_dir, auth) = fresh("worker-fail");
    let hour = Duration::from_secs(3600);
    auth.set_retry_policy(
        PRODUCTION,
        &RetryPolicy::new().max_attempts(2).backoff_base(hour).backoff_cap(hour).jitter_percent(0),
    )
    .unwrap();
    let failing = auth.request_job(PRODUCTION, None, b"").unwrap();
    let boxed = auth.request_job(PRODUCTION, None, b"").unwrap();
    let panicking = auth.request_job(PRODUCTION, None, b"").unwrap();
    let worker = Worker::new(&auth, config().max_jobs(1)).unwrap();
    let report = worker.run(|_| Err::<Facts, _>("boom: the disk is full")).unwrap();
    assert_eq!((report.claimed, report.retried, report.released), (1, 1, 0));
    let report = worker
        .run(|_| Err::<Facts, Box<dyn std::error::Error + Send + Sync>>(std::io::Error::other("no space left").into()))
        .unwrap();
    assert_eq!((report.claimed, report.retried, report.released), (1, 1, 0));
    let report = worker.run(|_| -> Result<Facts, leases::Error> { panic!("the handler's own bug") }).unwrap();
    assert_eq!((report.claimed, report.retried, report.released), (1, 1, 0));
    for (id, reason) in [
        (&failing, "boom: the disk is full"),
        (&boxed, "no space left"),
        (&panicking, "worker: the handler panicked: the handler's own bug"),
    ] {
        let record = auth.job(PRODUCTION, id).unwrap();
        assert_eq!(record.job.state, JobState::Requested);
        let attempt = &record.history[0];
        assert_eq!((&attempt.ending, attempt.reason.as_deref()), (&AttemptEnding::Retry, Some(reason)));
        assert_eq!(record.job.claimable_at, Some(attempt.ended_at + hour), "claimable only after the backoff");
    }
}

#[test]
fn a_worker_keeps_the_lease_alive_while_its_handler_runs() {
    let (_dir, auth) = fresh("worker-keep");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let d = KEPT_ALIVE;
    let worker = Worker::new(&auth, WorkerConfig::new(PRODUCTION, "w", d).max_jobs(1)).unwrap();
    let report = worker
        .run(move |lease| {
            std::thread::sleep(d * 3);
            match lease.check()? {
                None => Ok(Facts::new()),
                Some(why) => Err(why),
            }
        })
        .unwrap();
    assert_eq!(report.completed, 1);
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}

#[test]
fn a_stop_from_another_thread_ends_an_idle_worker_promptly() {
    let (_dir, auth) = fresh("worker-stop");
    let worker = Worker::new(&auth, config()).unwrap();
    let stop = worker.stop_handle();
    let (report, took) = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            tx.send(Instant::now()).unwrap();
            stop.stop();
        });
        let report = worker.run(|_| Ok::<_, leases::Error>(Facts::new())).unwrap();
        (report, rx.recv().unwrap().elapsed())
    });
    assert_eq!(report.claimed, 0);
    assert!(took < PROMPT, "{took:?}");
}

#[test]
fn a_stop_lets_the_running_job_finish_and_claims_no_more() {
    let (_dir, auth) = fresh("worker-drain");
    let first = auth.request_job(PRODUCTION, None, b"").unwrap();
    let second = auth.request_job(PRODUCTION, None, b"").unwrap();
    let worker = Worker::new(&auth, config()).unwrap();
    let stop = worker.stop_handle();
    let report = worker
        .run(move |_| {
            stop.stop();
            std::thread::sleep(Duration::from_millis(300)); // still running after the stop
            Ok::<_, leases::Error>(Facts::new().metadata("drained", true))
        })
        .unwrap();
    assert_eq!((report.claimed, report.completed, report.drain_timed_out), (1, 1, false));
    assert_eq!(job_state(&auth, &first), JobState::Completed);
    assert_eq!(job_state(&auth, &second), JobState::Requested);
}

#[test]
fn past_the_drain_timeout_the_running_job_is_released_and_its_handler_sees_its_lease_closed() {
    let (_dir, auth) = fresh("worker-timeout");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let events_after_run;
    let report;
    let (tx, rx) = mpsc::channel();
    {
        let worker = Worker::new(&auth, config().drain_timeout(Duration::from_millis(200))).unwrap();
        let stop = worker.stop_handle();
        report = worker
            .run(move |lease| {
                stop.stop();
                // Runs on past the drain timeout, until its lease ends.
                let why = lease.wait_lost(Duration::from_secs(30), None).unwrap();
                tx.send(why.map(|e| e.kind())).unwrap();
                Ok::<_, leases::Error>(Facts::new())
            })
            .unwrap();
        events_after_run = events(&auth);
    } // dropping the worker never writes
    assert!(report.drain_timed_out);
    assert_eq!(report.released, 1);
    assert_eq!(job_state(&auth, &id), JobState::Requested);
    // The handler found its lease closed: the worker gave the job back.
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)).unwrap(), Some(ErrorKind::Closed));
    assert_eq!(events(&auth), events_after_run, "something wrote after run returned");
}

#[test]
fn concurrency_runs_n_handlers_at_once_on_threads_of_the_worker() {
    let (_dir, auth) = fresh("worker-concurrency");
    request(&auth, 4);
    let gate = Barrier::new(4); // passes only when four handlers run at once
    let worker = Worker::new(&auth, config().concurrency(4).exit_when_empty(true)).unwrap();
    let report = worker
        .run(|_| {
            gate.wait();
            Ok::<_, leases::Error>(Facts::new())
        })
        .unwrap();
    assert_eq!((report.claimed, report.completed), (4, 4));
}

#[test]
fn a_second_stop_gives_the_running_jobs_back_at_once() {
    let (_dir, auth) = fresh("worker-give-back");
    let ids = request(&auth, 2);
    let worker = Worker::new(&auth, config().concurrency(2)).unwrap(); // no drain timeout: a drain waits
    let stop = worker.stop_handle();
    let started = Barrier::new(2);
    let report = worker
        .run(|lease| {
            if started.wait().is_leader() {
                stop.stop();
                std::thread::sleep(Duration::from_millis(300));
                assert!(lease.check().unwrap().is_none(), "the first stop only drains");
                stop.stop();
            }
            lease.wait_lost(Duration::from_secs(30), None).unwrap();
            Ok::<_, leases::Error>(Facts::new())
        })
        .unwrap();
    assert!(report.drain_timed_out);
    assert_eq!((report.released, report.completed), (2, 0));
    for id in &ids {
        assert_eq!(job_state(&auth, id), JobState::Requested);
    }
}

#[test]
fn a_worker_refuses_bad_configs_before_any_store_access() {
    let (_dir, auth) = fresh("worker-bad");
    let before = events(&auth);
    let bad = |c: WorkerConfig| Worker::new(&auth, c).unwrap_err().kind();
    assert_eq!(bad(WorkerConfig::new("", "w", MINUTE)), ErrorKind::InvalidArgument);
    assert_eq!(bad(WorkerConfig::new(PRODUCTION, "w\0x", MINUTE)), ErrorKind::InvalidArgument);
    assert_eq!(bad(WorkerConfig::new(PRODUCTION, "w", Duration::ZERO)), ErrorKind::InvalidDuration);
    assert_eq!(bad(config().keep_alive_interval(HOUR)), ErrorKind::InvalidDuration);
    assert_eq!(bad(config().drain_timeout(Duration::MAX)), ErrorKind::InvalidArgument);
    let worker = Worker::new(&auth, WorkerConfig::new("nope", "w", MINUTE)).unwrap();
    assert_eq!(worker.run(|_| Ok::<_, leases::Error>(Facts::new())).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(events(&auth), before);
}

#[test]
fn several_threads_run_one_worker_and_each_job_is_done_once() {
    let (_dir, auth) = fresh("worker-threads");
    for i in 0..12 {
        auth.request_job(PRODUCTION, None, format!("{i}").as_bytes()).unwrap();
    }
    let worker = Worker::new(&auth, config().exit_when_empty(true)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reports: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let done = Arc::clone(&done);
                s.spawn(|| {
                    worker.run(move |_| {
                        done.store(true, Ordering::SeqCst);
                        Ok::<_, leases::Error>(Facts::new())
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    assert_eq!(reports.iter().map(|r| r.completed).sum::<u64>(), 12);
    assert!(auth.jobs(PRODUCTION).unwrap().iter().all(|j| j.state == JobState::Completed));
}

// ---- a real worker process ---------------------------------------------------------

#[test]
#[ignore = "a child worker of the SIGTERM tests"]
fn child_worker() {
    child::run();
}

#[test]
fn a_sigterm_mid_job_drains_the_worker_process_and_its_job_completes() {
    let (dir, auth) = fresh("proc-drain");
    child::expect_a_signal_mid_job_drains_a_worker_process(
        &auth,
        dir.db().to_str().unwrap(),
        "child_worker",
        libc::SIGTERM,
    );
}

#[test]
fn a_sigterm_drains_every_running_handler_of_a_concurrent_worker_process() {
    let (dir, auth) = fresh("proc-drain-n");
    child::expect_a_signal_drains_every_running_handler_of_a_concurrent_worker(
        &auth,
        dir.db().to_str().unwrap(),
        "child_worker",
        libc::SIGTERM,
    );
}

#[test]
fn a_second_sigint_gives_the_running_jobs_of_a_worker_process_back_at_once() {
    let (dir, auth) = fresh("proc-give-back");
    child::expect_a_second_signal_gives_the_running_jobs_back_at_once(
        &auth,
        dir.db().to_str().unwrap(),
        "child_worker",
        libc::SIGINT,
    );
}

#[test]
fn a_sigint_past_the_drain_timeout_releases_the_job_of_a_worker_process() {
    let (dir, auth) = fresh("proc-timeout");
    child::expect_a_signal_past_the_drain_timeout_releases_the_job(
        &auth,
        dir.db().to_str().unwrap(),
        "child_worker",
        libc::SIGINT,
    );
}
