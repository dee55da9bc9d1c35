//! The lease lifecycle through the safe API: request, claim, renew, release,
//! fail, complete, listings, events, and the reference executor.

mod common;

use std::time::{Duration, SystemTime};

use common::*;
use leases::{Authority, ErrorKind, Facts, JobState};

#[test]
fn claim_renew_complete_publishes_and_closes_the_lease() {
    let (_dir, auth) = fresh("lifecycle");
    let id = auth.request_job(PRODUCTION, Some("frame-1"), b"render").unwrap();
    let before = SystemTime::now();
    let lease = auth.claim(PRODUCTION, "w1", Duration::from_secs(30)).unwrap().expect("a job");
    assert_eq!(lease.job_id(), id);
    assert_eq!(lease.production(), PRODUCTION);
    assert_eq!(lease.worker(), "w1");
    let first = lease.expiry().unwrap();
    assert!(first > before + Duration::from_secs(29), "expiry is claim time + duration");

    lease.renew(Duration::from_secs(60)).unwrap();
    assert!(lease.expiry().unwrap() > first, "renewal extends the expiry");

    lease.complete(&Facts::new().metadata("frames", 1).provenance("tool", "render")).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed, "success closes the lease");
}

#[test]
fn a_lease_reads_its_jobs_payload_exactly() {
    let (_dir, auth) = fresh("payload");
    auth.request_job(PRODUCTION, None, b"\x00\xffbinary\x00").unwrap();
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim(PRODUCTION, "w", HOUR).unwrap().expect("a job");
    assert_eq!(lease.payload().unwrap(), b"\x00\xffbinary\x00".to_vec());
    let empty = auth.claim(PRODUCTION, "w", HOUR).unwrap().expect("a job");
    assert!(empty.payload().unwrap().is_empty());
    lease.release().unwrap();
    assert_eq!(lease.payload().unwrap_err().kind(), ErrorKind::Closed);
}

#[test]
fn claim_returns_none_when_nothing_is_claimable() {
    let (_dir, auth) = fresh("none");
    assert!(auth.claim(PRODUCTION, "w1", HOUR).unwrap().is_none());
    let (_id, _lease) = claimed(&auth, "w1");
    assert!(auth.claim(PRODUCTION, "w2", HOUR).unwrap().is_none(), "a held claim is not claimable");
}

#[test]
fn claim_next_is_fifo_by_request_order() {
    let (_dir, auth) = fresh("fifo");
    let ids: Vec<String> = (0..3).map(|i| auth.request_job(PRODUCTION, Some(&format!("k{i}")), b"").unwrap()).collect();
    for id in &ids {
        let lease = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();
        assert_eq!(lease.job_id(), id);
    }
}

#[test]
fn release_makes_the_job_requested_again_and_closes_the_lease() {
    let (_dir, auth) = fresh("release");
    let (id, lease) = claimed(&auth, "w1");
    lease.release().unwrap();
    let job = auth.jobs(PRODUCTION).unwrap().remove(0);
    assert_eq!(job.state, JobState::Requested);
    assert_eq!(job.worker, None, "release clears the attribution");
    assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::Closed);
    let again = auth.claim(PRODUCTION, "w2", HOUR).unwrap().expect("claimable again");
    assert_eq!(again.job_id(), id);
}

#[test]
fn fail_records_the_reason() {
    let (_dir, auth) = fresh("fail");
    let (_id, lease) = claimed(&auth, "w1");
    lease.fail("renderer crashed").unwrap();
    let job = auth.jobs(PRODUCTION).unwrap().remove(0);
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.reason.as_deref(), Some("renderer crashed"));
}

#[test]
fn dropping_a_lease_never_releases_or_writes() {
    let (_dir, auth) = fresh("drop");
    let (id, lease) = claimed(&auth, "w1");
    let events_before = auth.events(Some(PRODUCTION), 0).unwrap().len();
    drop(lease);
    let job = auth.jobs(PRODUCTION).unwrap().remove(0);
    assert_eq!(job.id, id);
    assert_eq!(job.state, JobState::Claimed, "the claim lasts until expiry or cancel");
    assert_eq!(auth.events(Some(PRODUCTION), 0).unwrap().len(), events_before, "drop writes nothing");
    assert!(auth.claim(PRODUCTION, "w2", HOUR).unwrap().is_none());
}

#[test]
fn job_listing_is_typed_and_shows_attribution_without_secret() {
    let (_dir, auth) = fresh("jobs");
    let (id, lease) = claimed(&auth, "w1");
    let token = lease.export_token().unwrap();
    let job = auth.jobs(PRODUCTION).unwrap().remove(0);
    assert_eq!(job.id, id);
    assert_eq!(job.production, PRODUCTION);
    assert_eq!(job.key, None);
    assert_eq!(job.state, JobState::Claimed);
    assert_eq!(job.worker.as_deref(), Some("w1"));
    assert_eq!(job.attempts, 1);
    assert_eq!(job.expiry, Some(lease.expiry().unwrap()));
    assert!(job.claimed_at.unwrap() < job.expiry.unwrap());
    assert!(!format!("{job:?}").contains(token.as_str()));
}

#[test]
fn events_follow_the_lifecycle_in_order_after_a_sequence_number() {
    let (_dir, auth) = fresh("events");
    let (id, lease) = claimed(&auth, "w1");
    lease.complete(&Facts::new()).unwrap();
    let all = auth.events(None, 0).unwrap();
    let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["production_created", "requested", "claimed", "completed"]);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
    let claim = &all[2];
    assert_eq!(claim.job_id.as_deref(), Some(id.as_str()));
    assert_eq!(claim.worker.as_deref(), Some("w1"));
    assert!(claim.expiry.is_some());
    let after = auth.events(Some(PRODUCTION), all[1].seq).unwrap();
    assert_eq!(after.len(), 2);
    assert_eq!(auth.events(Some("other"), 0).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn request_with_a_key_is_idempotent() {
    let (_dir, auth) = fresh("idem");
    let a = auth.request_job(PRODUCTION, Some("k"), b"same").unwrap();
    let b = auth.request_job(PRODUCTION, Some("k"), b"same").unwrap();
    assert_eq!(a, b);
    assert_eq!(auth.request_job(PRODUCTION, Some("k"), b"other").unwrap_err().kind(), ErrorKind::WrongState);
    assert_ne!(auth.request_job(PRODUCTION, None, b"same").unwrap(), a, "no key: always a new job");
    assert_eq!(auth.jobs(PRODUCTION).unwrap()[0].key.as_deref(), Some("k"));
}

#[test]
fn lease_debug_shows_attribution_but_never_the_secret_or_token() {
    let (_dir, auth) = fresh("debug");
    let (id, lease) = claimed(&auth, "w1");
    let token = lease.export_token().unwrap();
    let shown = format!("{lease:?} {token:?}");
    assert!(shown.contains(&id) && shown.contains("w1"), "{shown}");
    assert!(!shown.contains(token.as_str()), "{shown}");
    let body = token.as_str().strip_prefix("lt1.").unwrap();
    assert!(!shown.contains(&body[..16]), "no part of the token: {shown}");
    assert_eq!(format!("{token:?}"), "Token(<redacted>)");
}

#[test]
fn leases_of_a_dropped_authority_report_closed() {
    let dir = TempDir::new("authclose");
    let auth = Authority::open(dir.db()).unwrap();
    auth.create_production(PRODUCTION).unwrap();
    let (_id, lease) = claimed(&auth, "w1");
    drop(auth);
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::Closed);
    let auth = Authority::open(dir.db()).unwrap();
    assert_eq!(auth.jobs(PRODUCTION).unwrap()[0].state, JobState::Claimed, "reopening keeps the claim");
}

#[test]
fn execution_finish_renames_the_output_and_completes_the_job() {
    let (dir, auth) = fresh("exec");
    let (id, lease) = claimed(&auth, "w1");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut run = lease.execution(&out).unwrap();
    assert!(run.temp_path().starts_with(&out) && run.final_path().starts_with(&out));
    assert!(run.temp_path().to_str().unwrap().contains(&id));
    assert_ne!(run.temp_path(), run.final_path());
    std::fs::write(run.temp_path(), b"frame data").unwrap();
    run.finish(&Facts::new().metadata("frames", 1)).unwrap();
    assert_eq!(std::fs::read(run.final_path()).unwrap(), b"frame data");
    assert!(!run.temp_path().exists());
    assert_eq!(job_state(&auth, &id), JobState::Completed);
    assert_eq!(run.finish(&Facts::new()).unwrap_err().kind(), ErrorKind::Closed, "finish consumes");
}

#[test]
fn dropping_an_execution_abandons_only_its_own_files_and_keeps_the_claim() {
    let (dir, auth) = fresh("abandon");
    let (id, lease) = claimed(&auth, "w1");
    let run = lease.execution(dir.path()).unwrap();
    let temp = run.temp_path().to_path_buf();
    std::fs::write(&temp, b"partial").unwrap();
    let other = dir.path().join("keep.txt");
    std::fs::write(&other, b"x").unwrap();
    drop(run);
    assert!(!temp.exists(), "its own temporary file is removed");
    assert!(other.exists());
    assert_eq!(job_state(&auth, &id), JobState::Claimed, "abandon writes nothing to the store");
    lease.complete(&Facts::new()).unwrap();
}

#[test]
fn execution_finish_with_invalid_facts_leaves_it_usable() {
    let (dir, auth) = fresh("execbad");
    let (id, lease) = claimed(&auth, "w1");
    let mut run = lease.execution(dir.path()).unwrap();
    std::fs::write(run.temp_path(), b"ok").unwrap();
    let long_key = "k".repeat(leases::MAX_NAME_LEN + 1);
    let err = run.finish(&Facts::new().metadata(long_key, 1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    run.finish(&Facts::new()).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}

#[test]
fn library_reports_the_abi_this_crate_was_written_for() {
    assert_eq!(leases::library_abi_version(), leases::ABI_VERSION);
    let version = std::fs::read_to_string(repo_root().join("VERSION")).unwrap();
    assert_eq!(leases::library_version(), version.trim());
}

#[test]
fn complete_and_claim_next_completes_and_claims_in_one_commit() {
    let (_dir, auth) = common::fresh("next");
    common::check_complete_and_claim_next(&auth);
}
