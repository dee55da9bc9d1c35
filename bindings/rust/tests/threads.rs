//! Threads: the thread-safety promises of the types, and many threads
//! claiming from one production at the same time without a double claim.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};

use common::*;
use leases::{Authority, Edit, Execution, Facts, JobState, Lease};

fn send<T: Send>() {}
fn sync<T: Sync>() {}

#[test]
fn authority_is_send_and_sync_leases_are_send_edits_and_executions_are_send() {
    send::<Authority>();
    sync::<Authority>();
    send::<Lease>();
    sync::<Lease>();
    send::<Edit<'static>>();
    send::<Execution>();
    send::<leases::Error>();
    sync::<leases::Error>();
}

#[test]
fn threads_claiming_at_the_same_time_never_get_the_same_job() {
    const JOBS: usize = 40;
    const THREADS: usize = 8;
    let (_dir, auth) = fresh("threads");
    let ids: HashSet<String> = (0..JOBS).map(|_| auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let claimed = Mutex::new(Vec::new());
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (auth, claimed, barrier) = (&auth, &claimed, &barrier);
            s.spawn(move || {
                barrier.wait();
                while let Some(lease) = auth.claim(PRODUCTION, &format!("w{t}"), HOUR).unwrap() {
                    claimed.lock().unwrap().push(lease);
                }
            });
        }
    });
    let leases = claimed.into_inner().unwrap();
    let got: HashSet<String> = leases.iter().map(|l| l.job_id().to_string()).collect();
    assert_eq!(leases.len(), JOBS, "every job claimed exactly once");
    assert_eq!(got, ids);
    assert!(auth.jobs(PRODUCTION).unwrap().iter().all(|j| j.state == JobState::Claimed && j.attempts == 1));
}

#[test]
fn threads_racing_for_one_job_produce_exactly_one_owner() {
    const THREADS: usize = 6;
    let (_dir, auth) = fresh("race");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let auth = Arc::new(auth);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (auth, barrier, id) = (Arc::clone(&auth), Arc::clone(&barrier), id.clone());
            std::thread::spawn(move || {
                barrier.wait();
                auth.claim_job(PRODUCTION, &id, &format!("w{t}"), HOUR)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let owners: Vec<&Lease> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(owners.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert_eq!(e.kind(), leases::ErrorKind::WrongState, "{e}");
        }
    }
    owners[0].complete(&Facts::new()).unwrap();
}

#[test]
fn a_lease_moves_to_another_thread_and_finishes_there() {
    let (_dir, auth) = fresh("move");
    let (id, lease) = claimed(&auth, "w1");
    std::thread::spawn(move || lease.complete(&Facts::new())).join().unwrap().unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}
