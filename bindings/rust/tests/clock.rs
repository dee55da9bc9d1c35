//! The clock policy and the statuses that need the test library
//! (`--features testing`, linked against build/test/libleases.so):
//! clock_regressed, expiry at the authority's clock, busy, internal.
#![cfg(feature = "testing")]

#[macro_use]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use leases::testing::{lose_commit_acks, open_with_busy_timeout, panic_in_library, set_clock};
use leases::{Authority, ErrorKind, Facts, JobState, OpenOptions, Synchronous};

/// A whole-microsecond instant near now.
fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64)
}

#[test]
fn a_clock_behind_the_high_water_mark_rejects_guarded_operations_until_it_catches_up() {
    let (_dir, auth) = fresh("clock-regress");
    let t = t0();
    set_clock(&auth, Some(t)).unwrap();
    let (id, lease) = claimed(&auth, "w1");
    auth.request_job(PRODUCTION, None, b"second").unwrap();

    set_clock(&auth, Some(t - Duration::from_secs(10))).unwrap();
    assert_eq!(auth.claim(PRODUCTION, "w2", HOUR).unwrap_err().kind(), ErrorKind::ClockRegressed);
    assert_eq!(lease.renew(HOUR * 2).unwrap_err().kind(), ErrorKind::ClockRegressed);
    assert_eq!(lease.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::ClockRegressed);
    assert_eq!(job_state(&auth, &id), JobState::Claimed, "a rejection changes nothing");

    set_clock(&auth, Some(t)).unwrap(); // caught up: equal to the mark is fine
    lease.complete(&Facts::new()).unwrap();
    assert!(auth.claim(PRODUCTION, "w2", HOUR).unwrap().is_some());
}

#[test]
fn coordinator_cancel_is_not_blocked_by_a_clock_regression() {
    let (_dir, auth) = fresh("clock-cancel");
    let t = t0();
    set_clock(&auth, Some(t)).unwrap();
    let (id, lease) = claimed(&auth, "w1");
    set_clock(&auth, Some(t - HOUR)).unwrap();
    auth.cancel(PRODUCTION, &id).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Cancelled);
    // Clock regression is checked before cancellation.
    assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::ClockRegressed);
}

#[test]
fn renewal_must_commit_before_the_previous_expiry_which_is_exclusive() {
    let (_dir, auth) = fresh("clock-renew");
    let t = t0();
    set_clock(&auth, Some(t)).unwrap();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w1", Duration::from_secs(10)).unwrap();
    assert_eq!(lease.expiry().unwrap(), t + Duration::from_secs(10), "expiry = authority clock + duration");
    set_clock(&auth, Some(t + Duration::from_secs(10))).unwrap();
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Expired);
    assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::Expired);
}

#[test]
fn renewal_sets_expiry_from_the_authority_clock_and_must_extend_it() {
    let (_dir, auth) = fresh("clock-extend");
    let t = t0();
    set_clock(&auth, Some(t)).unwrap();
    let (_id, lease) = claimed(&auth, "w1");
    set_clock(&auth, Some(t + Duration::from_secs(60))).unwrap();
    lease.renew(HOUR).unwrap();
    assert_eq!(lease.expiry().unwrap(), t + Duration::from_secs(60) + HOUR);
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::NotExtended, "same instant, same expiry");
}

#[test]
fn a_forward_jump_expires_claims_at_once() {
    let (_dir, auth) = fresh("clock-forward");
    let t = t0();
    set_clock(&auth, Some(t)).unwrap();
    let (id, first) = claimed(&auth, "w1");
    set_clock(&auth, Some(t + HOUR * 2)).unwrap();
    let second = auth.claim(PRODUCTION, "w2", HOUR).unwrap().expect("expired claim is claimable again");
    assert_eq!(second.job_id(), id);
    assert_eq!(first.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::LeaseLost);
    second.complete(&Facts::new()).unwrap();
    let kinds: Vec<String> = auth.events(Some(PRODUCTION), 0).unwrap().into_iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&"claim_expired".to_string()), "{kinds:?}");
}

#[test]
fn reopening_keeps_the_high_water_mark() {
    let dir = TempDir::new("clock-reopen");
    let t = t0() + HOUR; // ahead of the real clock
    {
        let auth = Authority::open(dir.db()).unwrap();
        auth.create_production(PRODUCTION).unwrap();
        set_clock(&auth, Some(t)).unwrap();
        claimed(&auth, "w1");
    }
    let auth = Authority::open(dir.db()).unwrap(); // real clock: behind the mark
    auth.request_job(PRODUCTION, None, b"").unwrap();
    assert_eq!(auth.claim(PRODUCTION, "w2", HOUR).unwrap_err().kind(), ErrorKind::ClockRegressed);
}

#[test]
fn busy_when_the_writer_lock_is_not_obtained_within_the_timeout() {
    let dir = TempDir::new("busy");
    let holder = Authority::open(dir.db()).unwrap();
    holder.create_production(PRODUCTION).unwrap();
    holder.request_job(PRODUCTION, None, b"").unwrap();
    let waiter = open_with_busy_timeout(dir.db(), Duration::from_millis(100)).unwrap();
    let edit = holder.edit().unwrap();
    assert_eq!(waiter.claim(PRODUCTION, "w2", HOUR).unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(waiter.edit().unwrap_err().kind(), ErrorKind::Busy);
    edit.abort();
    assert!(waiter.claim(PRODUCTION, "w2", HOUR).unwrap().is_some());
}

#[test]
fn internal_when_the_library_recovers_from_a_panic_and_the_process_goes_on() {
    let err = panic_in_library().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal);
    assert_eq!(err.status(), Some(leases::sys::LEASES_INTERNAL));
    let (_dir, auth) = fresh("internal");
    claimed(&auth, "w1");
}

/// A claim whose outcome is unknown returns no lease, so its error names the
/// job the claim chose (`Error::job_id`, from `leases_last_error_job_id`):
/// for `complete_and_claim_next` the next job, not the completed one.
fn an_outcome_unknown_claim_names_the_job_it_chose_in_job_id(store: &Store) {
    let auth = &store.auth;
    let ids: Vec<String> = (0..3).map(|_| auth.request_job(PRODUCTION, None, b"p").unwrap()).collect();
    let lease = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();
    assert_eq!(lease.job_id(), ids[0]);
    let taken = auth.claim_job(PRODUCTION, &ids[0], "w", HOUR).unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::WrongState);
    assert_eq!(taken.job_id(), Some(ids[0].as_str()), "the job the refused call acted on");
    let bad = auth.claim(PRODUCTION, "", HOUR).unwrap_err();
    assert_eq!((bad.kind(), bad.job_id()), (ErrorKind::InvalidArgument, None));
    lose_commit_acks(auth).unwrap();
    let unknown = lease.complete_and_claim_next(&Facts::new(), HOUR).unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::OutcomeUnknown);
    assert_eq!(unknown.job_id(), Some(ids[1].as_str()));
    let unknown = auth.claim(PRODUCTION, "w", HOUR).unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::OutcomeUnknown);
    assert_eq!(unknown.job_id(), Some(ids[2].as_str()));
    assert!(unknown.to_string().contains(&ids[2]));
}

on_both_stores!(an_outcome_unknown_claim_names_the_job_it_chose_in_job_id);

/// What `OpenOptions` sets reaches SQLite: its synchronous mode and busy
/// timeout (rounded up to whole milliseconds); nothing set is the default.
#[test]
fn rust_open_options_reach_sqlite_as_synchronous_and_busy_timeout() {
    let dir = TempDir::new("typedpragma");
    let pragma = |auth: &Authority, name: &str| {
        let name = std::ffi::CString::new(name).unwrap();
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle, C string, out pointer; the string is ours to free.
        let st = unsafe { leases::sys::testing::leases_testing_pragma(auth.as_raw(), name.as_ptr(), &mut out) };
        assert_eq!(st, leases::sys::LEASES_OK);
        // SAFETY: a library string on success.
        let v = unsafe { std::ffi::CStr::from_ptr(out) }.to_str().unwrap().to_owned();
        // SAFETY: handed out by the library.
        unsafe { leases::sys::leases_free(out.cast()) };
        v
    };
    let auth = OpenOptions::new().open(dir.db()).unwrap();
    assert_eq!((pragma(&auth, "synchronous"), pragma(&auth, "busy_timeout")), ("2".into(), "10000".into()));
    drop(auth);
    let auth = OpenOptions::new()
        .synchronous(Synchronous::Normal)
        .busy_timeout(Duration::from_micros(1500))
        .open(dir.db())
        .unwrap();
    assert_eq!((pragma(&auth, "synchronous"), pragma(&auth, "busy_timeout")), ("1".into(), "2".into()));
    drop(auth);
    let auth = OpenOptions::new().must_exist(true).synchronous(Synchronous::Extra).open(dir.db()).unwrap();
    assert_eq!(pragma(&auth, "synchronous"), "3");
}
