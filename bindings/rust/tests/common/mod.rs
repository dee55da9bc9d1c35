//! Helpers shared by the integration tests: scratch directories, the shared
//! test vectors, and a fresh authority with one production.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leases::{Authority, Lease};
use serde_json::Value;

pub const PRODUCTION: &str = "nightly";
pub const HOUR: Duration = Duration::from_secs(3600);
/// A claim that expires in real time during a test. Long enough to commit
/// on a loaded machine (a claim born expired does not commit), short enough
/// to wait out.
pub const SHORT: Duration = Duration::from_millis(400);

/// Sleeps until a SHORT claim made just before has expired.
pub fn past_short_expiry() {
    std::thread::sleep(SHORT + Duration::from_millis(300));
}

/// A scratch directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::var_os("CARGO_TARGET_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("leases-rs-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn db(&self) -> PathBuf {
        self.0.join("leases.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The checkout root (bindings/rust/../..).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

/// One of tests/vectors/*.json, read at test time.
pub fn vectors(name: &str) -> Value {
    let path = repo_root().join("tests").join("vectors").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// A new authority in its own directory, with production PRODUCTION.
pub fn fresh(tag: &str) -> (TempDir, Authority) {
    let dir = TempDir::new(tag);
    let auth = Authority::open(dir.db()).expect("open authority");
    auth.create_production(PRODUCTION).expect("create production");
    (dir, auth)
}

/// Requests one job and claims it for an hour.
pub fn claimed(auth: &Authority, worker: &str) -> (String, Lease) {
    let id = auth.request_job(PRODUCTION, None, b"payload").expect("request");
    let lease = auth.claim_job(PRODUCTION, &id, worker, HOUR).expect("claim");
    (id, lease)
}

pub fn job_state(auth: &Authority, id: &str) -> leases::JobState {
    auth.jobs(PRODUCTION).expect("jobs").into_iter().find(|j| j.id == id).expect("job listed").state
}

/// A test-only codec of the version-1 token text (docs/tokens.md):
/// "lt1." + base64url-nopad(production[16] | job[16] | secret[16] | crc32c[4]).
pub mod token {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn crc32c(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
            }
        }
        !crc
    }

    fn b64(data: &[u8]) -> String {
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        out
    }

    fn unb64(text: &str) -> Vec<u8> {
        let vals: Vec<u32> =
            text.bytes().map(|c| ALPHABET.iter().position(|&a| a == c).expect("base64url") as u32).collect();
        let mut out = vec![];
        for chunk in vals.chunks(4) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &v)| acc | v << (18 - 6 * i));
            for i in 0..chunk.len() - 1 {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        out
    }

    pub fn uuid_bytes(id: &str) -> [u8; 16] {
        hex(&id.replace('-', "")).try_into().unwrap()
    }

    pub fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    pub fn encode(production: [u8; 16], job: [u8; 16], secret: [u8; 16]) -> String {
        let mut body = [production, job, secret].concat();
        let mut signed = b"lt1.".to_vec();
        signed.extend_from_slice(&body);
        body.extend_from_slice(&crc32c(&signed).to_be_bytes());
        format!("lt1.{}", b64(&body))
    }

    /// (production, job, secret) of a token text.
    pub fn decode(text: &str) -> ([u8; 16], [u8; 16], [u8; 16]) {
        let body = unb64(text.strip_prefix("lt1.").expect("lt1. prefix"));
        assert_eq!(body.len(), 52);
        (body[0..16].try_into().unwrap(), body[16..32].try_into().unwrap(), body[32..48].try_into().unwrap())
    }
}

/// `Lease::complete_and_claim_next` on either store (production PRODUCTION,
/// no jobs yet): the completion and the next claim in one call, `None` when
/// nothing is left, nothing claimed when the completion is refused.
pub fn check_complete_and_claim_next(auth: &Authority) {
    use leases::{ErrorKind, Facts, JobState};
    let first = auth.request_job(PRODUCTION, None, b"").expect("request");
    let second = auth.request_job(PRODUCTION, None, b"").expect("request");
    let lease = auth.claim(PRODUCTION, "w7", HOUR).expect("claim").expect("a job");
    assert_eq!(lease.job_id(), first);
    let err = lease.complete_and_claim_next(&Facts::new(), Duration::ZERO).expect_err("a zero duration");
    assert_eq!(err.kind(), ErrorKind::InvalidDuration);
    let next = lease
        .complete_and_claim_next(&Facts::new().metadata("frames", 3), HOUR)
        .expect("complete and claim")
        .expect("the next job");
    assert_eq!(next.job_id(), second);
    assert_eq!(next.worker(), "w7");
    assert_eq!(job_state(auth, &first), JobState::Completed);
    assert_eq!(job_state(auth, &second), JobState::Claimed);
    assert_eq!(lease.renew(HOUR).expect_err("closed").kind(), ErrorKind::Closed);
    let third = auth.request_job(PRODUCTION, None, b"").expect("request");
    auth.cancel(PRODUCTION, &second).expect("cancel");
    let err = next.complete_and_claim_next(&Facts::new(), HOUR).expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(job_state(auth, &third), JobState::Requested);
    let last = auth.claim(PRODUCTION, "w7", HOUR).expect("claim").expect("a job");
    assert_eq!(last.job_id(), third);
    assert!(last.complete_and_claim_next(&Facts::new(), HOUR).expect("complete").is_none());
    assert_eq!(job_state(auth, &third), JobState::Completed);
}
