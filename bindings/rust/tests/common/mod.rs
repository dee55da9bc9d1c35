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
