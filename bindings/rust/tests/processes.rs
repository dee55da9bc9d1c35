//! Workers spanning processes: this test binary re-runs itself as child
//! workers (the `child_*` tests, ignored unless a parent sets LEASES_RS_CHILD_DB).

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::process::{Command, Stdio};

use common::*;
use leases::{Authority, Facts, JobState};

const CHILD_DB: &str = "LEASES_RS_CHILD_DB";

fn child(test: &str, db: &std::path::Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1", "-q"]).env(CHILD_DB, db);
    cmd
}

/// Child: imports the token on stdin and completes the lease.
#[test]
#[ignore = "a child worker of a_token_carries_a_claim_to_another_process"]
fn child_complete_from_token() {
    let Some(db) = std::env::var_os(CHILD_DB) else { return };
    let mut token = String::new();
    std::io::stdin().read_to_string(&mut token).unwrap();
    let auth = Authority::open(db).unwrap();
    let lease = auth.import_token(token.trim_end_matches('\n')).unwrap();
    lease.complete(&Facts::new().provenance("process", std::process::id())).unwrap();
}

/// Child: claims until nothing is left, printing one job id per line.
#[test]
#[ignore = "a child worker of processes_claiming_at_the_same_time_never_share_a_job"]
fn child_claim_until_empty() {
    let Some(db) = std::env::var_os(CHILD_DB) else { return };
    let auth = Authority::open(db).unwrap();
    while let Some(lease) = auth.claim(PRODUCTION, &format!("pid-{}", std::process::id()), HOUR).unwrap() {
        println!("claimed {}", lease.job_id());
    }
}

#[test]
fn a_token_carries_a_claim_to_another_process() {
    let (dir, auth) = fresh("proc-token");
    let (id, lease) = claimed(&auth, "parent");
    let token = lease.export_token().unwrap();
    // The token travels through a pipe, never an argument or environment value.
    let mut proc =
        child("child_complete_from_token", &dir.db()).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    proc.stdin.take().unwrap().write_all(token.as_str().as_bytes()).unwrap();
    assert!(proc.wait().unwrap().success(), "the child worker failed");
    assert_eq!(job_state(&auth, &id), JobState::Completed);
    assert_eq!(lease.release().unwrap_err().kind(), leases::ErrorKind::WrongState, "finished through another handle");
}

#[test]
fn processes_claiming_at_the_same_time_never_share_a_job() {
    const JOBS: usize = 30;
    let (dir, auth) = fresh("proc-claim");
    let ids: HashSet<String> = (0..JOBS).map(|_| auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let procs: Vec<_> =
        (0..3).map(|_| child("child_claim_until_empty", &dir.db()).stdout(Stdio::piped()).spawn().unwrap()).collect();
    let mut claimed = vec![];
    for p in procs {
        let out = p.wait_with_output().unwrap();
        assert!(out.status.success(), "a child worker failed");
        let text = String::from_utf8(out.stdout).unwrap();
        claimed.extend(text.lines().filter_map(|l| l.strip_prefix("claimed ")).map(str::to_owned));
    }
    assert_eq!(claimed.len(), JOBS, "every job claimed exactly once");
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), ids);
}
