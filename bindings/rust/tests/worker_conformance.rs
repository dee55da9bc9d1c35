//! The worker loop's shared conformance suite (tests/vectors/worker_loop.json,
//! docs/workers.md "how a face plugs in") run against the Rust face,
//! `Worker` on the library's one loop, on both stores: every scenario, the
//! failure-reason rule, the back-off sequence, and the zero values.
//!
//! Rust's idiom for each action: complete returns facts; error:TEXT returns
//! `Err(TEXT)` (recorded through `Display`); fail:TEXT and release call
//! `Lease::fail` and `Lease::release` (the worker finds the lease settled);
//! panic:TEXT panics; settle completes the lease itself; wait runs until the
//! test stopped the loop; hang runs until its lease ends; cancelled has the
//! test cancel its job through the authority, as a coordinator does, then
//! waits for `wait_lost` to report `Cancelled` and returns `Err` (nothing
//! to publish: the worker's settle is refused, and the job stays cancelled).

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use leases::serde_json::{self, Value};
use leases::{AttemptEnding, Authority, Error, ErrorKind, Facts, JobState, Lease, Worker, WorkerConfig};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/worker_loop.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A vector's text: hex segments, each repeated `times`.
fn bytes(segments: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for seg in segments.as_array().unwrap() {
        let hex = seg["hex"].as_str().unwrap();
        let one: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        for _ in 0..seg["times"].as_u64().unwrap_or(1) {
            out.extend_from_slice(&one);
        }
    }
    out
}

fn newest_attempt(auth: &Authority, production: &str, id: &str) -> leases::Attempt {
    auth.job(production, id).unwrap().history.pop().expect("an attempt")
}

fn done() -> Facts {
    Facts::new().metadata("done", true)
}

/// Runs one scenario of the vector file on `auth`, in production `production`.
fn run_scenario(auth: &Authority, production: &str, sc: &Value) {
    let name = sc["name"].as_str().unwrap();
    auth.create_production(production).unwrap();
    let jobs: Vec<String> = sc["jobs"].as_array().unwrap().iter().map(|j| j.as_str().unwrap().to_string()).collect();
    let ids: Vec<String> = jobs.iter().map(|a| auth.request_job(production, None, a.as_bytes()).unwrap()).collect();
    let opts = &sc["options"];
    let stop_mode = sc["stop"].as_str();
    let mut config = WorkerConfig::new(production, "rs-conformance", Duration::from_secs(60))
        .exit_when_empty(stop_mode.is_none())
        .max_jobs(opts["max_jobs"].as_u64().unwrap_or(0))
        .concurrency(opts["concurrency"].as_u64().unwrap_or(0) as u32);
    if let Some(ms) = opts["drain_timeout_ms"].as_u64() {
        config = config.drain_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = opts["interval_ms"].as_u64() {
        config = config.keep_alive_interval(Duration::from_millis(ms));
    }
    let worker = Worker::new(auth, config).unwrap();
    let stop = worker.stop_handle();
    let concurrency = opts["concurrency"].as_u64().unwrap_or(1).max(1) as usize;
    let out_before_stop = concurrency.min(jobs.len());
    let started = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    // The cancelled action: a handler asks the coordinator thread (the
    // test's side) to cancel its job, and records what its lease reported.
    let cancelled = jobs.iter().filter(|j| *j == "cancelled").count();
    let (ask, asks) = mpsc::channel::<(String, mpsc::Sender<()>)>();
    let heard: Mutex<Vec<Option<ErrorKind>>> = Mutex::new(Vec::new());
    let handler = |lease: &Lease| -> Result<Facts, String> {
        started.fetch_add(1, Ordering::SeqCst);
        let action = String::from_utf8(lease.payload().unwrap()).unwrap();
        let (verb, text) = action.split_once(':').unwrap_or((action.as_str(), ""));
        match verb {
            "complete" => Ok(done()),
            "error" => Err(text.to_string()),
            "fail" => {
                lease.fail(text).unwrap();
                Ok(done())
            }
            "release" => {
                lease.release().unwrap();
                Ok(done())
            }
            "panic" => panic!("{text}"),
            "settle" => {
                lease.complete(&done()).unwrap();
                Ok(done())
            }
            "wait" => {
                while !stopped.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(done())
            }
            "hang" => {
                while lease.wait_lost(Duration::from_millis(100), None).unwrap().is_none() {}
                Ok(done())
            }
            "cancelled" => {
                let (tell, told) = mpsc::channel();
                ask.send((lease.job_id().to_string(), tell)).unwrap();
                told.recv_timeout(Duration::from_secs(60)).expect("the coordinator cancelled the job");
                // The cancel reaches the kept-alive lease at its next renewal.
                let why = lease.wait_lost(Duration::from_secs(60), None).unwrap();
                heard.lock().unwrap().push(why.as_ref().map(Error::kind));
                Err(why.map_or_else(|| "the cancel never reached the handler".to_string(), |e| e.to_string()))
            }
            other => panic!("unknown action {other}"),
        }
    };
    let report = std::thread::scope(|s| {
        if cancelled > 0 {
            s.spawn(move || {
                for _ in 0..cancelled {
                    let (id, tell) = asks.recv_timeout(Duration::from_secs(60)).expect("a cancelled job's handler ran");
                    auth.cancel(production, &id).unwrap();
                    tell.send(()).unwrap();
                }
            });
        }
        if let Some(mode) = stop_mode {
            let (stop, started, stopped) = (&stop, &started, &stopped);
            s.spawn(move || {
                let until = Instant::now() + Duration::from_secs(30);
                while started.load(Ordering::SeqCst) < out_before_stop {
                    assert!(Instant::now() < until, "{name}: the jobs never ran");
                    std::thread::sleep(Duration::from_millis(5));
                }
                match mode {
                    "drain" => stop.stop(),
                    "give_back" => stop.give_back(),
                    other => panic!("unknown stop {other}"),
                }
                stopped.store(true, Ordering::SeqCst);
            });
        }
        worker.run(handler)
    });
    let report = report.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        *heard.lock().unwrap(),
        vec![Some(ErrorKind::Cancelled); cancelled],
        "{name}: what the cancelled leases reported"
    );
    let want_end = sc["end"].as_str().unwrap();
    assert_eq!(report.drain_timed_out, want_end == "gave_back", "{name}: the loop's end, {report:?}");
    for (i, (id, want)) in ids.iter().zip(sc["states"].as_array().unwrap()).enumerate() {
        let state = auth.job(production, id).unwrap().job.state;
        assert_eq!(state, JobState::parse(want.as_str().unwrap()), "{name}: job {i} ({})", jobs[i]);
    }
    if let Some(attempt) = sc.get("attempt") {
        let got = newest_attempt(auth, production, &ids[0]);
        assert_eq!(got.ending, AttemptEnding::parse(attempt["ending"].as_str().unwrap()), "{name}");
        match attempt.get("reason") {
            Some(reason) => assert_eq!(got.reason.as_deref(), reason.as_str(), "{name}"),
            None if jobs[0].starts_with("panic:") => {
                let text = &jobs[0]["panic:".len()..];
                assert_eq!(got.reason.unwrap(), format!("worker: the handler panicked: {text}"), "{name}");
            }
            None => {}
        }
    }
}

on_both_stores!(
    every_scenario_of_the_shared_suite_runs_as_the_vectors_say,
    a_handlers_error_becomes_the_attempts_reason_by_the_one_rule,
    the_zero_values_mean_what_the_vectors_say,
    a_loop_whose_claims_fail_backs_off_by_the_shared_sequence,
);

fn every_scenario_of_the_shared_suite_runs_as_the_vectors_say(s: &Store) {
    let v = vectors();
    for (i, sc) in v["scenarios"].as_array().unwrap().iter().enumerate() {
        run_scenario(&s.auth, &format!("scenario-{i}"), sc);
    }
}

/// A Rust error's text is always UTF-8 (`Display` writes a `String`), so
/// the vectors with invalid UTF-8 are not expressible through a handler's
/// error; they are skipped here, and the rule itself runs on those bytes
/// in Go and C. The others go through `Display`.
fn a_handlers_error_becomes_the_attempts_reason_by_the_one_rule(s: &Store) {
    let auth = &s.auth;
    let v = vectors();
    let mut ran = 0;
    for case in v["reasons"].as_array().unwrap() {
        let Ok(error) = String::from_utf8(bytes(&case["error"])) else { continue };
        let want = String::from_utf8(bytes(&case["reason"])).unwrap();
        let id = auth.request_job(PRODUCTION, None, b"").unwrap();
        let worker = Worker::new(auth, WorkerConfig::new(PRODUCTION, "rs-reasons", HOUR).max_jobs(1)).unwrap();
        // A Box<dyn Error> from a String: the bound callers use most.
        let report =
            worker.run(|_| Err::<Facts, Box<dyn std::error::Error + Send + Sync>>(error.clone().into())).unwrap();
        assert_eq!(report.retried, 1, "{}", case["name"]);
        assert_eq!(newest_attempt(auth, PRODUCTION, &id).reason.as_deref(), Some(want.as_str()), "{}", case["name"]);
        ran += 1;
    }
    assert_eq!(ran, 4, "the UTF-8 cases of the vectors");
}

fn the_zero_values_mean_what_the_vectors_say(s: &Store) {
    let auth = &s.auth;
    let v = vectors();
    assert_eq!(v["zero_values"]["max_jobs"], "no limit");
    assert_eq!(v["zero_values"]["concurrency"], "one lease out at a time");
    assert_eq!(v["zero_values"]["drain_timeout"], "a drain waits as long as the jobs take");
    let ids: Vec<String> = (0..3).map(|_| auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let out = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let config = WorkerConfig::new(PRODUCTION, "rs-zero", HOUR)
        .max_jobs(0)
        .concurrency(0)
        .drain_timeout(Duration::ZERO)
        .exit_when_empty(true);
    let worker = Worker::new(auth, config).unwrap();
    let stop = worker.stop_handle();
    let report = worker
        .run(|_| {
            let now = out.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            stop.stop(); // a drain with drain timeout 0: the job runs on, 600 ms, and completes
            std::thread::sleep(Duration::from_millis(600));
            out.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, Error>(done())
        })
        .unwrap();
    assert_eq!(most.load(Ordering::SeqCst), 1, "concurrency 0 is one lease out at a time");
    assert!(!report.drain_timed_out, "drain timeout 0 waits as long as the job takes");
    assert_eq!(job_state(auth, &ids[0]), JobState::Completed);
    // max jobs 0 is no limit: a worker with no stop takes all that is left.
    let report = Worker::new(auth, WorkerConfig::new(PRODUCTION, "rs-zero", HOUR).max_jobs(0).exit_when_empty(true))
        .unwrap()
        .run(|_| Ok::<_, Error>(done()))
        .unwrap();
    assert_eq!(report.completed, 2);
    assert!(ids.iter().all(|id| job_state(auth, id) == JobState::Completed));
}

/// The back-off is observed on a real loop: claims kept failing (through a
/// handle with a 1 ms busy timeout: on SQLite another handle's edit holds
/// the writer lock; on PostgreSQL a psql session holds the jobs table in
/// EXCLUSIVE mode, so a look reads the job and the claim's row lock waits
/// past its lock_timeout) pause by the shared sequence; once the lock is
/// free the loop claims, and the sequence starts again.
fn a_loop_whose_claims_fail_backs_off_by_the_shared_sequence(s: &Store) {
    let v = vectors();
    let want: Vec<u64> = v["backoff_us"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    let holder = &s.auth;
    let id = holder.request_job(PRODUCTION, None, b"").unwrap();
    let auth = leases::OpenOptions::new().busy_timeout(Duration::from_millis(1)).open(&s.location).unwrap();
    // SQLite: an edit's claim takes the writer lock. (On PostgreSQL an edit's
    // claim would only lock the job's row, which another claim skips: it
    // finds nothing to claim, which is no failure.)
    let edit = s.schema().is_none().then(|| {
        let edit = holder.edit().unwrap();
        let held = edit.claim(PRODUCTION, "holder", HOUR).unwrap();
        (edit, held)
    });
    let table = s.schema().map(|schema| schema.lock_jobs_table());
    let worker = Worker::new(&auth, WorkerConfig::new(PRODUCTION, "rs-backoff", HOUR).max_jobs(1)).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    let report = std::thread::scope(|scope| {
        let run = scope.spawn(|| worker.run(|_| Ok::<_, Error>(done())));
        let until = Instant::now() + Duration::from_secs(30);
        while seen.len() < 4 {
            assert!(Instant::now() < until, "seen {seen:?}");
            if let Some(st) = worker.stats().unwrap() {
                if st.failed_claims > 0 {
                    seen.insert(st.failed_claims, st.backoff.as_micros() as u64);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some((edit, _held)) = edit {
            edit.abort();
        }
        drop(table);
        run.join().unwrap().unwrap()
    });
    for (n, us) in &seen {
        assert_eq!(*us, want[*n as usize - 1], "the pause after {n} failed claims");
    }
    assert_eq!(report.completed, 1, "once the lock is free the loop claims");
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}
