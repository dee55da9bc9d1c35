//! Edits: one write transaction; pending leases; claim-and-complete atomically.

mod common;

use common::*;
use leases::{ErrorKind, Facts, JobState};

#[test]
fn a_lease_claimed_in_an_edit_is_pending_until_commit() {
    let (_dir, auth) = fresh("edit-pending");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    let lease = edit.claim(PRODUCTION, "w1", HOUR).unwrap().expect("a job");
    assert_eq!(lease.job_id(), id);
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed, "pending");
    assert_eq!(lease.export_token().unwrap_err().kind(), ErrorKind::Closed, "pending");
    edit.commit().unwrap();
    lease.renew(HOUR).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Claimed);
}

#[test]
fn an_aborted_edit_closes_its_pending_leases_and_writes_nothing() {
    let (_dir, auth) = fresh("edit-abort");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    let lease = edit.claim(PRODUCTION, "w1", HOUR).unwrap().unwrap();
    edit.abort();
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(job_state(&auth, &id), JobState::Requested);
}

#[test]
fn dropping_an_edit_aborts_it() {
    let (_dir, auth) = fresh("edit-drop");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = {
        let edit = auth.edit().unwrap();
        edit.claim(PRODUCTION, "w1", HOUR).unwrap().unwrap()
    };
    assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(job_state(&auth, &id), JobState::Requested);
    assert!(auth.claim(PRODUCTION, "w2", HOUR).unwrap().is_some(), "the writer lock was given back");
}

#[test]
fn one_edit_can_claim_and_complete_atomically() {
    let (_dir, auth) = fresh("edit-inline");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    let lease = edit.claim(PRODUCTION, "w1", HOUR).unwrap().unwrap();
    edit.complete(&lease, &Facts::new().metadata("inline", true)).unwrap();
    edit.commit().unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed, "completion closed it");
    let kinds: Vec<String> = auth.events(Some(PRODUCTION), 0).unwrap().into_iter().map(|e| e.kind).collect();
    assert!(kinds.ends_with(&["claimed".to_string(), "completed".to_string()]), "{kinds:?}");
}

#[test]
fn an_active_lease_completed_in_an_aborted_edit_stays_active() {
    let (_dir, auth) = fresh("edit-active");
    let (id, lease) = claimed(&auth, "w1");
    let edit = auth.edit().unwrap();
    edit.complete(&lease, &Facts::new()).unwrap();
    drop(edit);
    assert_eq!(job_state(&auth, &id), JobState::Claimed);
    lease.complete(&Facts::new()).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}

#[test]
fn completing_the_same_lease_twice_in_one_edit_is_wrong_state() {
    let (_dir, auth) = fresh("edit-twice");
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    let lease = edit.claim(PRODUCTION, "w1", HOUR).unwrap().unwrap();
    edit.complete(&lease, &Facts::new()).unwrap();
    assert_eq!(edit.complete(&lease, &Facts::new()).unwrap_err().kind(), ErrorKind::WrongState);
    edit.commit().unwrap();
}

#[test]
fn a_rejection_inside_an_edit_keeps_the_edit_usable() {
    let (_dir, auth) = fresh("edit-reject");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    assert_eq!(edit.claim("missing", "w1", HOUR).unwrap_err().kind(), ErrorKind::NotFound);
    let lease = edit.claim(PRODUCTION, "w1", HOUR).unwrap().unwrap();
    assert!(edit.claim(PRODUCTION, "w1", HOUR).unwrap().is_none(), "nothing more to claim");
    edit.commit().unwrap();
    assert_eq!(lease.job_id(), id);
    assert_eq!(job_state(&auth, &id), JobState::Claimed);
}

#[test]
fn an_edit_holds_the_writer_lock_until_it_ends() {
    let (dir, auth) = fresh("edit-lock");
    let edit = auth.edit().unwrap();
    assert!(std::ptr::eq(edit.authority(), &auth));
    // Another handle's write waits for the lock; commit releases it in time.
    let other = leases::Authority::open(dir.db()).unwrap();
    let waiter = std::thread::spawn(move || other.request_job(PRODUCTION, None, b"later").map(|_| ()));
    std::thread::sleep(std::time::Duration::from_millis(100));
    edit.commit().unwrap();
    waiter.join().unwrap().unwrap();
    assert_eq!(auth.jobs(PRODUCTION).unwrap().len(), 1);
}
