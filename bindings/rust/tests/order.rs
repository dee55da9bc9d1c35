//! The rejection order of docs/errors.md, one test per row (the projection of
//! core/order_test.go): when two rejections apply, the earlier row wins.
//! Rows that need a clock behind its mark run with `--features testing`;
//! the others let short claims expire in real time.

mod common;

use std::time::Duration;

use common::*;
use leases::{sys, ErrorKind, Facts};

#[test]
fn order_invalid_argument_and_duration_before_closed() {
    let (_dir, auth) = fresh("order-invalid");
    let (_id, lease) = claimed(&auth, "w");
    lease.release().unwrap();
    assert_eq!(lease.renew(Duration::ZERO).unwrap_err().kind(), ErrorKind::InvalidDuration);
    assert_eq!(lease.fail("bad\0reason").unwrap_err().kind(), ErrorKind::InvalidArgument);
    // The library orders them the same way.
    // SAFETY: live (closed) lease handle.
    assert_eq!(unsafe { sys::leases_lease_renew(lease.as_raw(), 0) }, sys::LEASES_INVALID_DURATION);
    let long = std::ffi::CString::new("r".repeat(leases::MAX_REASON_LEN + 1)).unwrap();
    // SAFETY: live lease handle, valid string.
    assert_eq!(unsafe { sys::leases_lease_fail(lease.as_raw(), long.as_ptr()) }, sys::LEASES_INVALID_ARGUMENT);
}

#[cfg(feature = "testing")]
#[test]
fn order_closed_before_clock_regressed() {
    use leases::testing::set_clock;
    let (_dir, auth) = fresh("order-closed");
    let t = std::time::SystemTime::now();
    set_clock(&auth, Some(t)).unwrap();
    let (_id, lease) = claimed(&auth, "w");
    lease.release().unwrap();
    set_clock(&auth, Some(t - HOUR)).unwrap();
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed);
}

#[cfg(feature = "testing")]
#[test]
fn order_clock_regressed_before_not_found() {
    use leases::testing::set_clock;
    let (_dir, auth) = fresh("order-clock");
    let t = std::time::SystemTime::now();
    set_clock(&auth, Some(t + Duration::from_secs(60))).unwrap();
    claimed(&auth, "w");
    set_clock(&auth, Some(t)).unwrap();
    assert_eq!(auth.claim("no-such-production", "w", HOUR).unwrap_err().kind(), ErrorKind::ClockRegressed);
}

#[test]
fn order_not_found_before_cancelled() {
    let (_dir, auth) = fresh("order-notfound");
    let (id, lease) = claimed(&auth, "w");
    let real = lease.export_token().unwrap();
    auth.cancel(PRODUCTION, &id).unwrap();
    // The same job and secret, but bound to a production this authority does not have.
    let (_production, job, secret) = token::decode(real.as_str());
    let foreign = token::encode(token::uuid_bytes("6f1c2f5e-8a3b-4c1d-9e2f-0a1b2c3d4e5f"), job, secret);
    assert_eq!(auth.import_token(&foreign).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(auth.import_token(real.as_str()).unwrap_err().kind(), ErrorKind::Cancelled);
}

#[test]
fn order_cancelled_before_lease_lost() {
    let (_dir, auth) = fresh("order-cancelled");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let old = auth.claim_job(PRODUCTION, &id, "w1", SHORT).unwrap();
    past_short_expiry_and_backoff();
    let _new = auth.claim(PRODUCTION, "w2", HOUR).unwrap().unwrap();
    auth.cancel(PRODUCTION, &id).unwrap();
    assert_eq!(old.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::Cancelled);
}

#[test]
fn order_lease_lost_before_wrong_state() {
    let (_dir, auth) = fresh("order-lost");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let old = auth.claim_job(PRODUCTION, &id, "w1", SHORT).unwrap();
    past_short_expiry_and_backoff();
    auth.claim(PRODUCTION, "w2", HOUR).unwrap().unwrap().complete(&Facts::new()).unwrap();
    // The job is completed (a wrong state for anyone), but by another claim.
    assert_eq!(old.release().unwrap_err().kind(), ErrorKind::LeaseLost);
}

#[test]
fn order_wrong_state_before_expired() {
    let (_dir, auth) = fresh("order-wrongstate");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w", SHORT).unwrap();
    let other = auth.import_token(lease.export_token().unwrap().as_str()).unwrap();
    other.fail("x").unwrap();
    past_short_expiry();
    assert_eq!(lease.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::WrongState);
}

#[test]
fn order_expired_before_not_extended() {
    let (_dir, auth) = fresh("order-expired");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w", SHORT).unwrap();
    past_short_expiry();
    // A 1µs renewal would also fail to extend; expiry is reported first.
    assert_eq!(lease.renew(Duration::from_micros(1)).unwrap_err().kind(), ErrorKind::Expired);
}
