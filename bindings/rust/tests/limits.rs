//! Limits in Rust: sizes and integer ranges are checked before any
//! large copy or conversion, with a clear error and nothing written; and the
//! names rule of tests/vectors/names.json (docs/decisions.md, Names).

mod common;

use common::*;
use leases::{Authority, ErrorKind, Facts, JobState};

fn events(auth: &Authority) -> usize {
    auth.events(None, 0).unwrap().len()
}

#[test]
fn an_oversize_payload_is_refused_before_the_call_and_writes_nothing() {
    let (_dir, auth) = fresh("limit-payload");
    let before = events(&auth);
    let payload = vec![0u8; leases::MAX_PAYLOAD_LEN + 1];
    let err = auth.request_job(PRODUCTION, Some("big"), &payload).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(err.status(), None, "refused by the crate, before the library copied it");
    assert!(err.message().contains("LEASES_MAX_PAYLOAD_LEN"), "{err}");
    assert_eq!(events(&auth), before);
    // The limit itself is a valid payload.
    auth.request_job(PRODUCTION, Some("max"), &payload[..leases::MAX_PAYLOAD_LEN]).unwrap();
}

#[test]
fn oversize_strings_are_refused_before_they_are_copied_and_write_nothing() {
    let (dir, auth) = fresh("limit-strings");
    let (_id, lease) = claimed(&auth, "w");
    let before = events(&auth);
    let name = "n".repeat(leases::MAX_NAME_LEN + 1);
    for err in [
        auth.create_production(&name).unwrap_err(),
        auth.request_job(PRODUCTION, Some(&name), b"").unwrap_err(),
        auth.claim(PRODUCTION, &name, HOUR).unwrap_err(),
        lease.fail(&"r".repeat(leases::MAX_REASON_LEN + 1)).unwrap_err(),
        lease.complete(&Facts::new().metadata("big", "x".repeat(leases::sys::LEASES_MAX_FACTS_LEN))).unwrap_err(),
        Authority::open(dir.path().join("p".repeat(leases::sys::LEASES_MAX_PATH_LEN))).unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.status(), None, "{err}");
        assert!(err.message().contains("over the limit"), "{err}");
    }
    let err = auth.import_token(&"t".repeat(leases::MAX_TOKEN_LEN + 1)).unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::BadToken, None));
    assert_eq!(events(&auth), before);
    // At the limits the same calls go through.
    lease.fail(&"r".repeat(leases::MAX_REASON_LEN)).unwrap();
    auth.create_production(&"n".repeat(leases::MAX_NAME_LEN)).unwrap();
}

#[test]
fn an_event_sequence_beyond_i64_is_refused_not_wrapped() {
    let (_dir, auth) = fresh("limit-after");
    let err = auth.events(None, u64::MAX).unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::InvalidArgument, None));
    let err = auth.events(None, 1 << 63).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(auth.events(None, i64::MAX as u64).unwrap().is_empty());
}

/// Every name the vectors accept works as a production, a key and a worker;
/// every refused one is `InvalidArgument` naming the problem, and writes nothing.
#[test]
fn names_follow_the_shared_names_vectors() {
    let (_dir, auth) = fresh("names");
    let v = vectors("names.json");
    for case in v["accepted"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        auth.create_production(name).unwrap_or_else(|e| panic!("{name:?} ({}): {e}", case["why"]));
        let id = auth.request_job(PRODUCTION, Some(name), b"").unwrap();
        let lease = auth.claim_job(PRODUCTION, &id, name, HOUR).unwrap();
        assert_eq!(lease.worker(), name);
        lease.complete(&Facts::new().metadata(name, true)).unwrap();
        assert_eq!(job_state(&auth, &id), JobState::Completed);
    }
    let before = events(&auth);
    for case in v["refused"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let errs = [
            auth.create_production(name).unwrap_err(),
            auth.request_job(PRODUCTION, Some(name), b"").unwrap_err(),
            auth.claim(PRODUCTION, name, HOUR).unwrap_err(),
        ];
        for err in errs {
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{name:?} ({})", case["why"]);
            for part in case["error_contains"].as_array().unwrap() {
                assert!(err.message().contains(part.as_str().unwrap()), "{name:?}: {err} lacks {part}");
            }
        }
    }
    assert_eq!(events(&auth), before, "a refused name wrote something");
}
