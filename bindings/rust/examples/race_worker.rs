//! The Rust worker of the multi-language race (tests/reliability/race_test.go).
//! Same loop and history schema as every other worker
//! (tests/reliability/race_worker_test.go): one JSON line per call and per
//! return, written unbuffered so a kill -9 loses at most the line in flight.
//! Built by `make test-reliability`; it needs the environment the race sets.
use std::env;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leases::{Authority, Error, Facts, Lease};

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
}

impl Worker {
    fn rnd(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        lo + (self.rng >> 33) % (hi - lo + 1)
    }

    fn write(&mut self, line: String) {
        self.log.write_all(line.as_bytes()).expect("write the history");
    }

    fn call(&mut self, op: &str, lease: &str, job: &str, dur_us: u64) -> u64 {
        self.n += 1;
        let line = format!(
            "{{\"w\":{},\"n\":{},\"ev\":\"call\",\"op\":\"{op}\",\"lease\":{},\"job\":{},\"dur_us\":{dur_us},\"t\":{}}}\n",
            quote(&self.name),
            self.n,
            quote(lease),
            quote(job),
            now_us()
        );
        self.write(line);
        self.n
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
        let d = w.rnd(30, 150);
        let waiting = w.rnd(0, 1) == 0; // one claim in two waits, 0-300 ms
        let id = w.call(if waiting { "claim_wait" } else { "claim" }, "", "", d * 1000);
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
        if w.rnd(0, 2) == 0 {
            // Kept alive while it works; its renewals are not in the history,
            // and stopping it reports the last confirmed expiry.
            let id = w.call("keep_alive", &label, &job, d * 1000);
            let res = lease.keep_alive(Duration::from_millis(d), None);
            w.ret(id, res.as_ref().copied(), &job, 0);
            sleep(Duration::from_millis(w.rnd(50, 300)));
            let id = w.call("stop_keep_alive", &label, &job, 0);
            let _ = lease.stop_keep_alive();
            w.ret(id, Ok(()), &job, expiry_us(&lease));
        }
        if w.rnd(0, 2) == 0 {
            let d = w.rnd(30, 200);
            let id = w.call("renew", &label, &job, d * 1000);
            match lease.renew(Duration::from_millis(d)) {
                Ok(()) => w.ret(id, Ok(()), &job, expiry_us(&lease)),
                Err(e) => w.ret(id, Err(&e), &job, 0),
            }
        }
        sleep(Duration::from_millis(w.rnd(0, 40)));
        let r = w.rnd(0, 9);
        let op = if r < 2 {
            "release"
        } else if r < 3 {
            "fail"
        } else {
            "complete"
        };
        let id = w.call(op, &label, &job, 0);
        let res = match op {
            "release" => lease.release(),
            "fail" => lease.fail(&format!("race failure by {name}")),
            _ => lease.complete(&Facts::new().metadata("by", name.as_str()).metadata("lease", label.as_str())),
        };
        w.ret(id, res.as_ref().copied(), &job, 0);
    }
}
