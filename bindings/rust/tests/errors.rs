//! Every error kind, driven through real library statuses where the release
//! library can produce them (clock, busy and internal need the test library:
//! tests/clock.rs; forked: tests/forked.rs), and the status table itself.

mod common;

use std::ffi::CStr;
use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

use common::*;
use leases::{Authority, Error, ErrorKind, Facts};

fn kind<T: std::fmt::Debug>(r: Result<T, Error>) -> ErrorKind {
    let err = r.unwrap_err();
    assert!(err.status().is_some() || err.kind() == ErrorKind::AbiMismatch || err.kind() == ErrorKind::InvalidDuration);
    err.kind()
}

#[test]
fn error_kinds_match_the_shared_status_vectors_and_the_library() {
    let statuses = vectors("statuses.json");
    let statuses = statuses.as_array().unwrap();
    assert_eq!(statuses.len(), ErrorKind::ALL.len(), "ok plus a kind per rejection (AbiMismatch has no status)");
    for s in statuses {
        let code = s["code"].as_i64().unwrap() as i32;
        let name = s["name"].as_str().unwrap();
        // SAFETY: static string owned by the library.
        let lib = unsafe { CStr::from_ptr(leases::sys::leases_status_name(code)) }.to_str().unwrap();
        assert_eq!(lib, name, "leases_status_name({code})");
        if code == 0 {
            assert_eq!(ErrorKind::from_code(0), None, "ok is not an error");
            continue;
        }
        let k = ErrorKind::from_code(code).unwrap_or_else(|| panic!("no ErrorKind for {code}"));
        assert_eq!(k.name(), name);
        // Every projection names the status after its stem: ErrorKind::WrongState.
        assert_eq!(format!("{k:?}"), s["stem"].as_str().unwrap(), "the variant is named after the status");
        assert_eq!(k.is_not_held(), s["not_held"].as_bool().unwrap(), "{name}: is_not_held");
        assert_eq!(k.code(), Some(code));
        assert_eq!(k.to_string(), name);
    }
    assert_eq!(ErrorKind::from_code(statuses.len() as i32), None, "the code after the last");
    assert_eq!(ErrorKind::from_code(-1), None);
    assert_eq!(ErrorKind::AbiMismatch.code(), None, "detected by the crate; no C status");
    assert_eq!(ErrorKind::ALL.len(), statuses.len(), "every rejection status plus AbiMismatch");
}

/// The library's message passes through, so every surface says the same:
/// how this lease ended its claim, and that a settled lease is closed.
#[test]
fn a_settled_lease_says_how_this_lease_ended_its_claim_and_that_a_settled_lease_is_closed() {
    let (_dir, auth) = fresh("e-settled");
    type Settle = fn(&leases::Lease) -> Result<(), Error>;
    let endings: [(&str, Settle); 3] =
        [("completed", |l| l.complete(&Facts::new())), ("released", |l| l.release()), ("failed", |l| l.fail("broken"))];
    for (how, settle) in endings {
        let (id, lease) = claimed(&auth, "w");
        settle(&lease).unwrap();
        let err = lease.complete(&Facts::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(
            err.to_string(),
            format!(
                "closed: lease for job {id} is closed: this lease already {how} the job; \
                 a lease is closed once it has completed, released or failed its claim"
            )
        );
    }
}

#[test]
fn a_cancelled_claim_is_not_held() {
    let (_dir, auth) = fresh("e-not-held");
    let (id, lease) = claimed(&auth, "w");
    auth.cancel(PRODUCTION, &id).unwrap();
    let err = lease.renew(HOUR).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(err.is_not_held() && err.kind().is_not_held());
    assert!(!ErrorKind::WrongState.is_not_held() && !ErrorKind::AbiMismatch.is_not_held());
}

#[test]
fn invalid_argument_for_empty_malformed_and_nul_input() {
    // Oversize inputs are refused by the crate before any copy: tests/limits.rs.
    let (_dir, auth) = fresh("e-invalid");
    assert_eq!(kind(auth.create_production("")), ErrorKind::InvalidArgument);
    assert_eq!(kind(auth.claim_job(PRODUCTION, "NOT-A-UUID", "w", HOUR)), ErrorKind::InvalidArgument);
    let (_id, lease) = claimed(&auth, "w");
    assert_eq!(kind(lease.complete(&Facts::new().metadata("k".repeat(201), 1))), ErrorKind::InvalidArgument);
    let err = auth.create_production("a\0b").unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::InvalidArgument, None), "a NUL byte is refused by the crate");
}

#[test]
fn invalid_duration_for_zero() {
    let (_dir, auth) = fresh("e-duration");
    assert_eq!(kind(auth.claim(PRODUCTION, "w", Duration::ZERO)), ErrorKind::InvalidDuration);
}

#[test]
fn not_found_for_an_unknown_production_or_job() {
    let (_dir, auth) = fresh("e-notfound");
    assert_eq!(kind(auth.claim("missing", "w", HOUR)), ErrorKind::NotFound);
    assert_eq!(
        kind(auth.claim_job(PRODUCTION, "0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d", "w", HOUR)),
        ErrorKind::NotFound
    );
    assert_eq!(kind(auth.jobs("missing")), ErrorKind::NotFound);
}

#[test]
fn nothing_to_claim_is_ok_none_and_its_status_maps_to_its_kind() {
    let (_dir, auth) = fresh("e-nothing");
    assert!(auth.claim(PRODUCTION, "w", HOUR).unwrap().is_none());
    let p = std::ffi::CString::new(PRODUCTION).unwrap();
    let mut out = std::ptr::null_mut();
    // SAFETY: live handle, valid strings and out pointer.
    let st = unsafe { leases::sys::leases_claim(auth.as_raw(), p.as_ptr(), p.as_ptr(), 1_000_000, &mut out) };
    assert_eq!(ErrorKind::from_code(st), Some(ErrorKind::NothingToClaim));
    assert!(out.is_null());
}

#[test]
fn wrong_state_when_cancelling_a_completed_job() {
    let (_dir, auth) = fresh("e-wrongstate");
    let (id, lease) = claimed(&auth, "w");
    lease.complete(&Facts::new()).unwrap();
    assert_eq!(kind(auth.cancel(PRODUCTION, &id)), ErrorKind::WrongState);
}

#[test]
fn lease_lost_when_another_claim_took_over_after_expiry() {
    let (_dir, auth) = fresh("e-lost");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let first = auth.claim_job(PRODUCTION, &id, "w1", SHORT).unwrap();
    past_short_expiry_and_backoff();
    let second = auth.claim(PRODUCTION, "w2", HOUR).unwrap().expect("expired claim is claimable");
    assert_eq!(second.job_id(), id);
    assert_eq!(kind(first.renew(HOUR)), ErrorKind::LeaseLost);
    assert_eq!(kind(first.complete(&Facts::new())), ErrorKind::LeaseLost, "still active locally; asks again");
    second.complete(&Facts::new()).unwrap();
}

#[test]
fn expired_when_releasing_after_the_expiry() {
    let (_dir, auth) = fresh("e-expired");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w1", SHORT).unwrap();
    past_short_expiry();
    assert_eq!(kind(lease.release()), ErrorKind::Expired);
    assert_eq!(kind(lease.renew(HOUR)), ErrorKind::Expired);
}

#[test]
fn cancelled_when_the_coordinator_cancelled_the_job() {
    let (_dir, auth) = fresh("e-cancelled");
    let (id, lease) = claimed(&auth, "w");
    auth.cancel(PRODUCTION, &id).unwrap();
    assert_eq!(kind(lease.complete(&Facts::new())), ErrorKind::Cancelled);
    assert_eq!(job_state(&auth, &id), leases::JobState::Cancelled);
}

#[test]
fn not_extended_when_a_renewal_would_not_move_the_expiry_later() {
    let (_dir, auth) = fresh("e-notextended");
    let (_id, lease) = claimed(&auth, "w");
    assert_eq!(kind(lease.renew(Duration::from_secs(1))), ErrorKind::NotExtended);
    lease.renew(HOUR * 2).unwrap();
}

#[test]
fn closed_after_the_lease_finished() {
    let (_dir, auth) = fresh("e-closed");
    let (_id, lease) = claimed(&auth, "w");
    lease.release().unwrap();
    assert_eq!(kind(lease.release()), ErrorKind::Closed);
    assert_eq!(kind(lease.export_token()), ErrorKind::Closed);
}

#[test]
fn bad_token_for_a_malformed_token() {
    let (_dir, auth) = fresh("e-badtoken");
    assert_eq!(kind(auth.import_token("lt1.not-a-token")), ErrorKind::BadToken);
}

#[test]
fn storage_when_the_file_is_not_a_database() {
    let dir = TempDir::new("e-storage");
    let path = dir.db();
    std::fs::write(&path, b"this is not a database, and it must stay untouched").unwrap();
    assert_eq!(kind(Authority::open(&path)), ErrorKind::Storage);
    assert_eq!(std::fs::read(&path).unwrap(), b"this is not a database, and it must stay untouched");
}

#[test]
fn schema_too_new_for_a_file_written_by_a_newer_library() {
    let dir = TempDir::new("e-schema");
    let path = dir.db();
    drop(Authority::open(&path).unwrap());
    assert!(
        !dir.path().join("leases.db-wal").exists()
            || std::fs::metadata(dir.path().join("leases.db-wal")).unwrap().len() == 0
    );
    // PRAGMA user_version lives at byte 60 of the SQLite header (big-endian).
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(60)).unwrap();
    f.write_all(&999u32.to_be_bytes()).unwrap();
    drop(f);
    assert_eq!(kind(Authority::open(&path)), ErrorKind::SchemaTooNew);
}

#[test]
fn outcome_unknown_is_a_distinct_kind_from_every_rejection() {
    // A commit whose fsync fails cannot be provoked portably; the kind is
    // checked against the shared table above. Callers must be able to tell
    // it from a rejection.
    let k = ErrorKind::from_code(leases::sys::LEASES_OUTCOME_UNKNOWN).unwrap();
    assert_eq!(k, ErrorKind::OutcomeUnknown);
    assert_eq!(k.name(), "outcome_unknown");
}

#[test]
fn errors_implement_std_error_and_display_the_kind_and_message() {
    let (_dir, auth) = fresh("e-display");
    let err = auth.claim("missing", "w", HOUR).unwrap_err();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err.clone());
    let text = boxed.to_string();
    assert!(text.starts_with("not_found: ") && text.contains("missing"), "{text}");
    assert!(!text.starts_with("not_found: not_found"), "{text}");
    assert!(!err.message().is_empty());
}

#[test]
fn no_error_message_ever_contains_a_secret_or_token() {
    let (_dir, auth) = fresh("e-secret");
    let (id, lease) = claimed(&auth, "w");
    let token = lease.export_token().unwrap();
    let body = token.as_str()["lt1.".len()..].to_string();
    let mut errors = vec![];
    errors.push(lease.renew(Duration::from_secs(1)).unwrap_err());
    let mut tampered = token.as_str().to_string();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    errors.push(auth.import_token(&tampered).unwrap_err());
    errors.push(auth.import_token(&format!("{} ", token.as_str())).unwrap_err());
    auth.cancel(PRODUCTION, &id).unwrap();
    errors.push(lease.complete(&Facts::new()).unwrap_err());
    errors.push(auth.import_token(token.as_str()).unwrap_err());
    for err in &errors {
        let shown = format!("{err} {err:?}");
        for window in body.as_bytes().windows(12) {
            assert!(!shown.contains(std::str::from_utf8(window).unwrap()), "{shown}");
        }
    }
}
