//! Helpers shared by the integration tests: scratch directories, the shared
//! test vectors, a fresh authority with one production, and test bodies run
//! on both stores.
#![allow(dead_code)]

pub mod pg;

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

/// How soon what must happen promptly (a wait ended by a cancel or a stop)
/// must happen: it takes ~100 ms (the slices); seconds leave room for a
/// stalled CI host, and are still nothing like the hour-long wait.
pub const PROMPT: Duration = Duration::from_secs(10);

/// The duration of a claim kept alive in real time for several durations:
/// renewed every third of it, it survives a host stalled for two thirds of
/// it (over a second).
pub const KEPT_ALIVE: Duration = Duration::from_secs(2);

/// Sleeps until a SHORT claim made just before has expired.
pub fn past_short_expiry() {
    std::thread::sleep(SHORT + Duration::from_millis(300));
}

/// Sleeps until a SHORT claim made just before has expired and its job is
/// claimable again: past the default policy's first backoff (at most 1.2 s).
pub fn past_short_expiry_and_backoff() {
    std::thread::sleep(SHORT + Duration::from_millis(1500));
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

/// An authority with production PRODUCTION on one store, for a test body
/// that runs on both (`on_both_stores!`), and a scratch directory.
pub struct Store {
    pub auth: Authority,
    /// What `Authority::open` was given: a SQLite path or a PostgreSQL URL.
    pub location: String,
    pub scratch: TempDir,
    _schema: Option<pg::Schema>,
}

impl Store {
    pub fn sqlite(tag: &str) -> Store {
        let (scratch, auth) = fresh(tag);
        let location = scratch.db().to_str().expect("UTF-8 scratch path").to_owned();
        Store { auth, location, scratch, _schema: None }
    }

    /// The PostgreSQL schema of the store; None on SQLite.
    pub fn schema(&self) -> Option<&pg::Schema> {
        self._schema.as_ref()
    }

    /// None (the test then returns) when there is no server and none is required.
    pub fn postgres(tag: &str) -> Option<Store> {
        let schema = pg::Schema::new()?;
        let auth = schema.open();
        let location = schema.url.clone();
        Some(Store { auth, location, scratch: TempDir::new(tag), _schema: Some(schema) })
    }
}

/// For each named test body `fn(&Store)`, a test `sqlite::NAME` and a test
/// `postgres::NAME` that run it on a fresh store of each kind.
#[allow(unused_macros)]
macro_rules! on_both_stores {
    ($($body:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $body() {
                super::$body(&crate::common::Store::sqlite(stringify!($body)));
            })*
        }
        mod postgres {
            $(#[test]
            fn $body() {
                let Some(store) = crate::common::Store::postgres(stringify!($body)) else { return };
                super::$body(&store);
            })*
        }
    };
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

/// A request committed through `requester` 200 ms after `waiter` began an
/// hour-long waiting claim wakes it: the lease comes well before the hour,
/// and its job is claimed.
pub fn expect_a_request_to_wake_a_waiting_claim(waiter: &Authority, requester: &Authority) {
    let start = std::time::Instant::now();
    let lease = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            requester.request_job(PRODUCTION, Some("late"), b"").unwrap();
        });
        waiter.claim_wait(PRODUCTION, "w", Duration::from_secs(60), HOUR, None).unwrap()
    });
    let lease = lease.expect("woken by the request");
    assert!(start.elapsed() < Duration::from_secs(30), "woke by the request, not by the hour's bound");
    assert_eq!(job_state(waiter, lease.job_id()), leases::JobState::Claimed);
}

/// A kept-alive lease is still held after three of its durations, and
/// completes: the renewals keep two thirds of each duration as slack, for a
/// loaded or stalled machine.
pub fn expect_keep_alive_to_hold_a_lease_for_many_of_its_durations(auth: &Authority) {
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let d = KEPT_ALIVE;
    let lease = auth.claim(PRODUCTION, "w", d).unwrap().unwrap();
    lease.keep_alive(d, None).unwrap();
    std::thread::sleep(d * 3);
    assert!(lease.check().unwrap().is_none(), "held");
    lease.complete(&leases::Facts::new()).unwrap();
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

/// A real worker process: the test binary re-run as one ignored test
/// (`child_worker`), which runs a `leases::Worker` whose SIGTERM/SIGINT
/// handler stops it. The parent reads its "started <job id>" line, signals
/// it, and checks its exit and the claims' final states.
pub mod child {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, ChildStdout, Command, Stdio};
    use std::time::Duration;

    use leases::{Authority, Facts, Worker, WorkerConfig};

    const LOCATION: &str = "LEASES_RS_CHILD_WORKER";
    const MODE: &str = "LEASES_RS_CHILD_MODE";
    const DRAIN_MS: &str = "LEASES_RS_CHILD_DRAIN_MS";
    const CONCURRENCY: &str = "LEASES_RS_CHILD_CONCURRENCY";

    /// Exit status of a worker that gave its running jobs back (the drain
    /// timeout passed, or a second signal).
    pub const DRAIN_TIMED_OUT: i32 = 3;

    /// The body of the child (call it from an ignored `child_worker` test):
    /// mode "finish" waits for the stop, works 200 ms more and completes;
    /// mode "hang" runs until its lease ends (given back). Its handlers are
    /// `leases::stop_on_signals`'s. Exits 0 when drained, DRAIN_TIMED_OUT
    /// when it gave jobs back.
    pub fn run() {
        let Some(location) = std::env::var_os(LOCATION) else { return };
        let mode = std::env::var(MODE).unwrap();
        let drain_ms: u64 = std::env::var(DRAIN_MS).unwrap().parse().unwrap();
        let concurrency: u32 = std::env::var(CONCURRENCY).map_or(1, |c| c.parse().unwrap());
        let auth = Authority::open(location).unwrap();
        let mut config =
            WorkerConfig::new(super::PRODUCTION, format!("rs-worker-{}", std::process::id()), Duration::from_secs(2))
                .concurrency(concurrency);
        if drain_ms > 0 {
            config = config.drain_timeout(Duration::from_millis(drain_ms));
        }
        let worker = Worker::new(&auth, config).unwrap();
        let stop = worker.stop_handle();
        leases::stop_on_signals(&stop).unwrap();
        println!("ready");
        let report = worker
            .run(move |lease| {
                println!("started {}", lease.job_id());
                if mode == "hang" {
                    while lease.wait_lost(Duration::from_secs(60), None).unwrap().is_none() {}
                    return Ok(Facts::new());
                }
                while !stop.is_stopped() {
                    // The handler's own wait; the lease's loss would end it too.
                    let _ = lease.wait_lost(Duration::from_millis(20), None);
                }
                std::thread::sleep(Duration::from_millis(200));
                Ok::<_, leases::Error>(Facts::new().metadata("drained", true))
            })
            .unwrap();
        println!("report {report:?}");
        std::process::exit(if report.drain_timed_out { DRAIN_TIMED_OUT } else { 0 });
    }

    /// A running child worker on `location` (a SQLite path or a URL).
    pub struct Running {
        child: Child,
        out: Option<BufReader<ChildStdout>>,
    }

    impl Running {
        pub fn spawn(test: &str, location: &str, mode: &str, drain_ms: u64) -> Running {
            Running::spawn_n(test, location, mode, drain_ms, 1)
        }

        pub fn spawn_n(test: &str, location: &str, mode: &str, drain_ms: u64, concurrency: u32) -> Running {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env(CONCURRENCY, concurrency.to_string())
                .args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1", "-q"])
                .env(LOCATION, location)
                .env(MODE, mode)
                .env(DRAIN_MS, drain_ms.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let out = Some(BufReader::new(child.stdout.take().unwrap()));
            Running { child, out }
        }

        /// The rest of the next line that starts with `prefix` (the test
        /// harness prints lines of its own).
        pub fn line(&mut self, prefix: &str) -> String {
            let mut line = String::new();
            let out = self.out.as_mut().unwrap();
            loop {
                line.clear();
                assert!(out.read_line(&mut line).unwrap() > 0, "the child worker ended before printing {prefix:?}");
                if let Some(rest) = line.trim_end().strip_prefix(prefix) {
                    return rest.to_string();
                }
            }
        }

        pub fn signal(&self, sig: libc::c_int) {
            // SAFETY: kill on our own child's pid.
            assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, sig) }, 0);
        }

        /// The exit code; the child must exit by itself within 30 s (its
        /// output closes when it exits; what it still prints is read, so it
        /// never blocks on a full pipe).
        pub fn wait(mut self) -> Option<i32> {
            let mut out = self.out.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut rest = String::new();
                while out.read_line(&mut rest).unwrap_or(0) > 0 {}
                let _ = tx.send(rest);
            });
            let rest = rx.recv_timeout(Duration::from_secs(30)).expect("the child worker did not exit within 30 s");
            let status = self.child.wait().unwrap();
            eprintln!("child worker: {status}; its last output: {rest}");
            status.code()
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn state(auth: &Authority, id: &str) -> leases::JobState {
        auth.jobs(super::PRODUCTION).unwrap().into_iter().find(|j| j.id == id).unwrap().state
    }

    /// A worker process on `location` (`auth`'s database) stopped by `sig`
    /// while its handler runs drains: exit 0, its job completed, the next
    /// one not claimed. `test` names the binary's `child_worker` test.
    pub fn expect_a_signal_mid_job_drains_a_worker_process(
        auth: &Authority,
        location: &str,
        test: &str,
        sig: libc::c_int,
    ) {
        let first = auth.request_job(super::PRODUCTION, None, b"").unwrap();
        let second = auth.request_job(super::PRODUCTION, None, b"").unwrap();
        let mut worker = Running::spawn(test, location, "finish", 0);
        worker.line("ready");
        assert_eq!(worker.line("started "), first);
        worker.signal(sig);
        assert_eq!(worker.wait(), Some(0));
        assert_eq!(state(auth, &first), leases::JobState::Completed);
        assert_eq!(state(auth, &second), leases::JobState::Requested, "claimed after the stop");
    }

    /// A worker process whose handler never returns, stopped by `sig`,
    /// releases its job once its drain timeout (300 ms) passed and exits
    /// DRAIN_TIMED_OUT.
    pub fn expect_a_signal_past_the_drain_timeout_releases_the_job(
        auth: &Authority,
        location: &str,
        test: &str,
        sig: libc::c_int,
    ) {
        let id = auth.request_job(super::PRODUCTION, None, b"").unwrap();
        let mut worker = Running::spawn(test, location, "hang", 300);
        worker.line("ready");
        assert_eq!(worker.line("started "), id);
        assert_eq!(state(auth, &id), leases::JobState::Claimed);
        worker.signal(sig);
        assert_eq!(worker.wait(), Some(DRAIN_TIMED_OUT));
        assert_eq!(state(auth, &id), leases::JobState::Requested, "the claim was left to expire");
    }

    /// Two handlers of a worker process with concurrency 2 run; the first
    /// `sig` drains (both complete, the third job is never claimed).
    pub fn expect_a_signal_drains_every_running_handler_of_a_concurrent_worker(
        auth: &Authority,
        location: &str,
        test: &str,
        sig: libc::c_int,
    ) {
        let ids: Vec<String> = (0..3).map(|_| auth.request_job(super::PRODUCTION, None, b"").unwrap()).collect();
        let mut worker = Running::spawn_n(test, location, "finish", 0, 2);
        worker.line("ready");
        let mut started = [worker.line("started "), worker.line("started ")];
        started.sort();
        let mut first_two = [ids[0].clone(), ids[1].clone()];
        first_two.sort();
        assert_eq!(started, first_two);
        worker.signal(sig);
        assert_eq!(worker.wait(), Some(0));
        assert_eq!(state(auth, &ids[0]), leases::JobState::Completed);
        assert_eq!(state(auth, &ids[1]), leases::JobState::Completed);
        assert_eq!(state(auth, &ids[2]), leases::JobState::Requested, "claimed after the stop");
    }

    /// A worker process (concurrency 2, drain timeout 0: a drain waits as
    /// long as the jobs take) whose handlers run until their leases end:
    /// the first SIGINT drains and the jobs stay claimed; the second gives
    /// them back at once and the process exits DRAIN_TIMED_OUT.
    pub fn expect_a_second_signal_gives_the_running_jobs_back_at_once(
        auth: &Authority,
        location: &str,
        test: &str,
        sig: libc::c_int,
    ) {
        let ids: Vec<String> = (0..2).map(|_| auth.request_job(super::PRODUCTION, None, b"").unwrap()).collect();
        let mut worker = Running::spawn_n(test, location, "hang", 0, 2);
        worker.line("ready");
        worker.line("started ");
        worker.line("started ");
        worker.signal(sig);
        std::thread::sleep(Duration::from_millis(500));
        for id in &ids {
            assert_eq!(state(auth, id), leases::JobState::Claimed, "the first signal only drains");
        }
        worker.signal(sig);
        assert_eq!(worker.wait(), Some(DRAIN_TIMED_OUT));
        for id in &ids {
            assert_eq!(state(auth, id), leases::JobState::Requested, "the second signal gives the jobs back");
        }
    }
}
