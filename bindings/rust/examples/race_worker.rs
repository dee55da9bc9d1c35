//! The Rust worker of the multi-language race (tests/reliability/race_test.go).
//! Same loop and history schema as every other worker
//! (tests/reliability/race_worker_test.go): one JSON line per call and per
//! return, written unbuffered so a kill -9 loses at most the line in flight.
//! It also fails retryably (after a delay or the backoff) half of its
//! failures, and one time in five before a claim acts as a coordinator
//! (request with a priority and a delay or run-at, cancel, retry one job,
//! redrive). Built with the `testing` feature (as `make test-reliability`
//! builds it), it also makes clock faults through the test library's clock
//! seam, as the C worker does: one iteration in eight its clock steps a
//! little back (1-5 ms), jumps forward (5-30 ms) or goes right again, and one
//! request in four is sampled a day ahead with priority 5. Under a fault the
//! seam freezes the clock at the wall clock plus the skew, set just after
//! each call line (which carries the skew, skew_us), and no lease is kept
//! alive. LEASES_RACE_CLOCK_FAULTS=0 turns the faults off. Built by `make test-reliability`; it needs the environment the race sets.
use std::env;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leases::{Authority, Error, Facts, JobState, Lease, RequestOptions};

type Outcome<'a> = Result<(), &'a Error>;

const PRODUCTION: &str = "race";

fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

fn quote(s: &str) -> String {
    leases::serde_json::Value::from(s).to_string()
}

struct Worker {
    name: String,
    log: File,
    n: u64,
    rng: u64,
    // The jobs it requested and failed, for its coordinator calls.
    mine: Vec<String>,
    failed: Vec<String>,
    // Clock faults: on (a testing build, not turned off), and the skew in force (µs).
    faults: bool,
    skew: i64,
}

const AHEAD_US: i64 = 24 * 3600 * 1_000_000;

impl Worker {
    fn rnd(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        lo + (self.rng >> 33) % (hi - lo + 1)
    }

    fn write(&mut self, line: String) {
        self.log.write_all(line.as_bytes()).expect("write the history");
    }

    fn call(&mut self, auth: &Authority, op: &str, lease: &str, job: &str, dur_us: u64) -> u64 {
        self.n += 1;
        let head = format!(
            "{{\"w\":{},\"n\":{},\"ev\":\"call\",\"op\":\"{op}\",\"lease\":{},\"job\":{},\"dur_us\":{dur_us}",
            quote(&self.name),
            self.n,
            quote(lease),
            quote(job),
        );
        self.write_call(auth, head);
        self.n
    }

    // Writes a call line (with the skew in force) and sets the clock for the call.
    fn write_call(&mut self, auth: &Authority, head: String) {
        let line = format!("{head},\"skew_us\":{},\"t\":{}}}\n", self.skew, now_us());
        self.write(line);
        if self.faults {
            set_clock(auth, self.skew);
        }
    }

    fn ret(&mut self, id: u64, res: Outcome<'_>, job: &str, expiry: i64) {
        let (kind, msg) = match res {
            Ok(()) => ("ok".to_string(), String::new()),
            Err(e) => (e.kind().name().to_string(), e.to_string()),
        };
        self.ret_kind(id, &kind, &msg, job, expiry);
    }

    fn ret_kind(&mut self, id: u64, kind: &str, msg: &str, job: &str, expiry: i64) {
        let t = now_us();
        let line = format!(
            "{{\"w\":{},\"n\":{id},\"ev\":\"ret\",\"kind\":{},\"job\":{},\"expiry_unix_us\":{expiry},\"msg\":{},\"t\":{t}}}\n",
            quote(&self.name),
            quote(kind),
            quote(job),
            quote(msg)
        );
        self.write(line);
    }
}

impl Worker {
    fn pick(&mut self, failed: bool) -> Option<String> {
        let pool = if failed && !self.failed.is_empty() { &self.failed } else { &self.mine };
        if pool.is_empty() {
            return None;
        }
        let len = pool.len() as u64;
        let i = self.rnd(0, len - 1) as usize;
        let pool = if failed && !self.failed.is_empty() { &self.failed } else { &self.mine };
        Some(pool[i].clone())
    }

    fn coordinate(&mut self, auth: &Authority) {
        let r = self.rnd(0, 9);
        if r < 5 {
            self.n += 1;
            let id = self.n;
            let key = format!("{}-{id}", self.name);
            let mut prio = self.rnd(0, 2);
            let was = self.skew;
            if self.faults && self.rnd(0, 3) == 0 {
                // Sampled a day ahead.
                self.skew = AHEAD_US;
                prio = 5;
            }
            let mut o = RequestOptions::new().priority(prio as u32);
            let (mut delay, mut run_at) = (0u64, 0i64);
            match self.rnd(0, 11) {
                0..=3 => {
                    delay = self.rnd(1, 200) * 1000;
                    o = o.delay(Duration::from_micros(delay));
                }
                4..=6 => {
                    run_at = now_us() + self.rnd(0, 200) as i64 * 1000;
                    o = o.run_at(UNIX_EPOCH + Duration::from_micros(run_at as u64));
                }
                _ => {}
            }
            let head = format!(
                "{{\"w\":{},\"n\":{id},\"ev\":\"call\",\"op\":\"request\",\"key\":{},\"prio\":{prio},\"dur_us\":{delay},\"run_at_us\":{run_at}",
                quote(&self.name),
                quote(&key),
            );
            self.write_call(auth, head);
            match auth.request_job_with(PRODUCTION, Some(&key), key.as_bytes(), &o) {
                Ok(job) => {
                    self.ret(id, Ok(()), &job, 0);
                    self.mine.push(job);
                }
                Err(e) => self.ret(id, Err(&e), "", 0),
            }
            self.skew = was;
        } else if r < 9 {
            let cancel = r < 7;
            let Some(job) = self.pick(!cancel) else { return };
            let id = self.call(auth, if cancel { "cancel" } else { "retry_job" }, "", &job, 0);
            let res = if cancel { auth.cancel(PRODUCTION, &job) } else { auth.retry_job(PRODUCTION, &job) };
            self.ret(id, res.as_ref().copied(), &job, 0);
        } else {
            let (state, st) = match self.rnd(0, 2) {
                0 => ("failed", JobState::Failed),
                1 => ("dead", JobState::Dead),
                _ => ("cancelled", JobState::Cancelled),
            };
            self.n += 1;
            let id = self.n;
            let head = format!(
                "{{\"w\":{},\"n\":{id},\"ev\":\"call\",\"op\":\"redrive\",\"state\":\"{state}\"",
                quote(&self.name),
            );
            self.write_call(auth, head);
            let res = auth.redrive(PRODUCTION, &st).map(|_| ());
            self.ret(id, res.as_ref().copied(), "", 0);
        }
    }
}

// Freezes the authority's clock at the wall clock plus skew (0: the real clock).
#[cfg(feature = "testing")]
fn set_clock(auth: &Authority, skew: i64) {
    let at = (skew != 0).then(|| {
        let us = now_us() + skew;
        UNIX_EPOCH + Duration::from_micros(us as u64)
    });
    leases::testing::set_clock(auth, at).expect("set the test clock");
}

#[cfg(not(feature = "testing"))]
fn set_clock(_: &Authority, _: i64) {}

fn expiry_us(lease: &Lease) -> i64 {
    lease.expiry().ok().and_then(|e| e.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_micros() as i64)
}

fn main() {
    let var = |k: &str| env::var(k).unwrap_or_else(|_| panic!("{k} is set by the race"));
    let append = |p: String| OpenOptions::new().create(true).append(true).open(p).expect("open for append");
    let mut w = Worker {
        name: var("LEASES_RACE_WORKER"),
        log: append(var("LEASES_RACE_LOG")),
        n: 0,
        mine: Vec::new(),
        failed: Vec::new(),
        faults: cfg!(feature = "testing") && env::var("LEASES_RACE_CLOCK_FAULTS").map_or(true, |v| v != "0"),
        skew: 0,
        rng: var("LEASES_RACE_SEED").parse::<u64>().unwrap_or(1).wrapping_mul(2654435761) | 1,
    };
    let mut tokens = append(var("LEASES_RACE_TOKENS"));
    let run = Duration::from_millis(var("LEASES_RACE_RUN_MS").parse().unwrap_or(1000));
    let auth = Authority::open(var("LEASES_RACE_DB")).expect("open the authority");
    let start = Instant::now();
    let mut it = 0u64;
    while start.elapsed() < run {
        it += 1;
        if it.is_multiple_of(25) {
            println!("jobs: {:?}", auth.jobs(PRODUCTION));
            println!("events: {:?}", auth.events(Some(PRODUCTION), 0));
        }
        if w.faults && w.rnd(0, 7) == 0 {
            w.skew = match w.rnd(0, 2) {
                0 => -(w.rnd(1, 5) as i64) * 1000,
                1 => w.rnd(5, 30) as i64 * 1000,
                _ => 0,
            };
        }
        if w.rnd(0, 4) == 0 {
            w.coordinate(&auth);
        }
        let d = w.rnd(30, 150);
        let waiting = w.rnd(0, 1) == 0; // one claim in two waits, 0-300 ms
        let id = w.call(&auth, if waiting { "claim_wait" } else { "claim" }, "", "", d * 1000);
        let label = format!("{}:{id}", w.name);
        let name = w.name.clone();
        let claimed = if waiting {
            let wait = Duration::from_millis(w.rnd(0, 300));
            auth.claim_wait(PRODUCTION, &name, Duration::from_millis(d), wait, None)
        } else {
            auth.claim(PRODUCTION, &name, Duration::from_millis(d))
        };
        let lease = match claimed {
            Ok(Some(l)) => l,
            Ok(None) => {
                w.ret_kind(id, "nothing_to_claim", "", "", 0);
                if !waiting {
                    sleep(Duration::from_millis(5));
                }
                continue;
            }
            Err(e) => {
                w.ret(id, Err(&e), "", 0);
                continue;
            }
        };
        let job = lease.job_id().to_string();
        w.ret(id, Ok(()), &job, expiry_us(&lease));
        if let Ok(tok) = lease.export_token() {
            tokens.write_all(format!("{}\n", tok.as_str()).as_bytes()).expect("write the token");
        }
        sleep(Duration::from_millis(w.rnd(0, 60)));
        if w.rnd(0, 2) == 0 && w.skew == 0 {
            // Kept alive while it works; its renewals are not in the history,
            // and stopping it reports the last confirmed expiry.
            let id = w.call(&auth, "keep_alive", &label, &job, d * 1000);
            let res = lease.keep_alive(Duration::from_millis(d), None);
            w.ret(id, res.as_ref().copied(), &job, 0);
            sleep(Duration::from_millis(w.rnd(50, 300)));
            let id = w.call(&auth, "stop_keep_alive", &label, &job, 0);
            let _ = lease.stop_keep_alive();
            w.ret(id, Ok(()), &job, expiry_us(&lease));
        }
        if w.rnd(0, 2) == 0 {
            let d = w.rnd(30, 200);
            let id = w.call(&auth, "renew", &label, &job, d * 1000);
            match lease.renew(Duration::from_millis(d)) {
                Ok(()) => w.ret(id, Ok(()), &job, expiry_us(&lease)),
                Err(e) => w.ret(id, Err(&e), &job, 0),
            }
        }
        sleep(Duration::from_millis(w.rnd(0, 40)));
        let r = w.rnd(0, 9);
        let op = if r < 2 {
            "release"
        } else if r < 3 && w.rnd(0, 1) == 0 {
            "fail_retry"
        } else if r < 3 {
            "fail"
        } else {
            "complete"
        };
        let delay = if op == "fail_retry" && w.rnd(0, 1) == 0 { w.rnd(1, 50) * 1000 } else { 0 };
        let id = w.call(&auth, op, &label, &job, delay);
        let res = match op {
            "release" => lease.release(),
            "fail_retry" => {
                lease.fail_retry(&format!("race retry by {name}"), (delay > 0).then(|| Duration::from_micros(delay)))
            }
            "fail" => lease.fail(&format!("race failure by {name}")),
            _ => lease.complete(&Facts::new().metadata("by", name.as_str()).metadata("lease", label.as_str())),
        };
        if op == "fail" && res.is_ok() {
            w.failed.push(job.clone());
        }
        w.ret(id, res.as_ref().copied(), &job, 0);
    }
}
