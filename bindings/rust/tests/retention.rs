//! Retention and pruning in Rust, on SQLite and on PostgreSQL
//! (`on_both_stores!`): the policy set and read back, a prune by age with an
//! archive and as a dry run, and bad input refused.

#[macro_use]
mod common;

use std::time::Duration;

use common::{Store, HOUR, PRODUCTION};
use leases::{ErrorKind, Facts, PruneOptions, RetentionPolicy};

on_both_stores!(the_retention_policy_is_set_and_read_back, a_prune_deletes_only_finished_jobs_with_its_archive);

fn the_retention_policy_is_set_and_read_back(s: &Store) {
    let auth = &s.auth;
    assert_eq!(auth.retention_policy(PRODUCTION).unwrap(), RetentionPolicy::default());
    let kept = RetentionPolicy::default().completed(None).failed(Some(HOUR * 36));
    auth.set_retention_policy(PRODUCTION, &kept).unwrap();
    assert_eq!(auth.retention_policy(PRODUCTION).unwrap(), kept);
    let bad = kept.events(Some(Duration::from_nanos(1)));
    assert_eq!(auth.set_retention_policy(PRODUCTION, &bad).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(auth.retention_policy("nope").unwrap_err().kind(), ErrorKind::NotFound);
}

fn a_prune_deletes_only_finished_jobs_with_its_archive(s: &Store) {
    let auth = &s.auth;
    let done = auth.request_job(PRODUCTION, Some("a"), b"").unwrap();
    auth.claim(PRODUCTION, "w", HOUR).unwrap().expect("a job").complete(&Facts::new()).unwrap();
    let waiting = auth.request_job(PRODUCTION, Some("b"), b"").unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let dry = PruneOptions::default().older_than(Duration::from_micros(1)).dry_run(true);
    assert_eq!(auth.prune(&dry).unwrap().jobs, 1);
    let archive = s.scratch.db().with_extension("archive.jsonl");
    let o = PruneOptions::default().older_than(Duration::from_micros(1)).archive(&archive);
    assert_eq!(auth.prune(&o).unwrap().jobs, 1);
    assert_eq!(auth.job(PRODUCTION, &done).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(auth.job(PRODUCTION, &waiting).unwrap().job.state, leases::JobState::Requested);
    assert!(std::fs::read_to_string(&archive).unwrap().contains(&done));
}
