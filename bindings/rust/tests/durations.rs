//! The duration rule (tests/vectors/durations.json): positive whole
//! microseconds up to 24 h inclusive, rejected before any FFI call, never rounded.

mod common;

use std::time::{Duration, Instant};

use common::*;
use leases::{duration_us, format_duration, ErrorKind, MAX_DURATION};

/// The vector's nanoseconds as a Duration; None when a Duration cannot hold
/// it (negative values: the type rules them out).
fn vector_duration(v: &serde_json::Value) -> Option<Duration> {
    let ns: i128 = v["nanoseconds"].as_str().unwrap().parse().unwrap();
    u64::try_from(ns).ok().map(Duration::from_nanos)
}

#[test]
fn accepted_vector_durations_claim_and_renew_for_exactly_that_many_microseconds() {
    let (_dir, auth) = fresh("dur-ok");
    let v = vectors("durations.json");
    assert_eq!(v["max_us"].as_i64().unwrap() as u128, MAX_DURATION.as_micros());
    for case in v["accepted"].as_array().unwrap() {
        let d = vector_duration(case).unwrap();
        assert_eq!(duration_us(d).unwrap() as u128, d.as_micros(), "{case}");
        let id = auth.request_job(PRODUCTION, None, b"").unwrap();
        let start = Instant::now();
        match auth.claim_job(PRODUCTION, &id, "w", d) {
            Ok(_lease) => {
                let job = auth.jobs(PRODUCTION).unwrap().into_iter().find(|j| j.id == id).unwrap();
                let held = job.expiry.unwrap().duration_since(job.claimed_at.unwrap()).unwrap();
                assert_eq!(held, d, "{case}: not rounded");
            }
            // A claim shorter than its own commit is born expired (a few
            // microseconds always are; on a loaded machine a few
            // milliseconds may be): the duration itself was accepted. Only
            // a call that lasted the whole duration may end so.
            Err(e) => assert!(e.kind() == ErrorKind::Expired && start.elapsed() >= d, "{case}: {e}"),
        }
    }
}

#[test]
fn rejected_vector_durations_fail_with_invalid_duration_before_the_ffi_call() {
    let (_dir, auth) = fresh("dur-bad");
    let (_id, lease) = claimed(&auth, "w");
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let mut unrepresentable = 0;
    for case in vectors("durations.json")["rejected"].as_array().unwrap() {
        let Some(d) = vector_duration(case) else {
            unrepresentable += 1; // negative: std::time::Duration cannot express it
            continue;
        };
        for err in [
            duration_us(d).unwrap_err(),
            auth.claim(PRODUCTION, "w", d).unwrap_err(),
            auth.claim_job(PRODUCTION, lease.job_id(), "w", d).unwrap_err(),
            lease.renew(d).unwrap_err(),
            auth.edit().unwrap().claim(PRODUCTION, "w", d).unwrap_err(),
        ] {
            assert_eq!(err.kind(), ErrorKind::InvalidDuration, "{case}: {err}");
            assert_eq!(err.status(), None, "{case}: rejected by the crate, before the library was called");
        }
    }
    assert!(unrepresentable > 0, "the vectors include negative durations");
    assert_eq!(auth.jobs(PRODUCTION).unwrap()[1].state, leases::JobState::Requested, "nothing was claimed");
}

#[test]
fn zero_sub_microsecond_and_over_24h_durations_are_rejected_not_rounded() {
    for d in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_nanos(999),
        Duration::from_nanos(1_500),
        Duration::from_secs(1) + Duration::from_nanos(1),
        MAX_DURATION + Duration::from_micros(1),
        MAX_DURATION + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        assert_eq!(duration_us(d).unwrap_err().kind(), ErrorKind::InvalidDuration, "{d:?}");
    }
    assert_eq!(duration_us(Duration::from_micros(1)).unwrap(), 1);
    assert_eq!(duration_us(MAX_DURATION).unwrap(), 86_400_000_000, "24 h is inclusive");
}

#[test]
fn an_invalid_duration_wins_over_not_found() {
    let (_dir, auth) = fresh("dur-order");
    let err = auth.claim("no-such-production", "w", Duration::ZERO).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidDuration);
}

#[test]
fn the_library_rejects_invalid_durations_too() {
    // The same rule holds below the crate: raw calls with a bad duration_us.
    let (_dir, auth) = fresh("dur-sys");
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let p = std::ffi::CString::new(PRODUCTION).unwrap();
    let w = std::ffi::CString::new("w").unwrap();
    for us in [0, -1, leases::sys::LEASES_MAX_DURATION_US + 1, i64::MIN] {
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle, valid strings and out pointer.
        let st = unsafe { leases::sys::leases_claim(auth.as_raw(), p.as_ptr(), w.as_ptr(), us, &mut out) };
        assert_eq!(st, leases::sys::LEASES_INVALID_DURATION, "{us}");
        assert!(out.is_null());
    }
}

#[test]
fn durations_in_messages_are_written_as_people_write_them_as_on_every_surface() {
    let v = vectors("durations.json");
    let shown = v["shown"].as_array().unwrap();
    assert!(shown.len() >= 20, "the shared vectors were not read");
    let mut checked = 0;
    for case in shown {
        let Some(d) = vector_duration(case) else { continue };
        assert_eq!(format_duration(d), case["shown"].as_str().unwrap(), "{case}");
        checked += 1;
    }
    assert!(checked >= 20);
    assert_eq!(
        duration_us(Duration::from_secs(48 * 3600)).unwrap_err().message(),
        "duration 48h is longer than the limit of 24h"
    );
    assert_eq!(
        duration_us(Duration::from_nanos(1500)).unwrap_err().message(),
        "duration 1500ns is not a whole number of microseconds (nothing is rounded)"
    );
}
