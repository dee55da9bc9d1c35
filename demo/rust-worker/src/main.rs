//! Demo worker in Rust: a `leases::Worker` (waiting claims, each lease kept
//! alive) on one production until the queue is empty and the stop file
//! exists; it reads each payload, "works", and completes with metadata.
//! Prints no token: only counts on exit.
//!
//!   leases-demo-worker DB PRODUCTION WORKER WORK_MS STOP_FILE
use std::path::Path;
use std::process::ExitCode;
use std::thread::sleep;
use std::time::Duration;

use leases::{Authority, Facts, Worker, WorkerConfig};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: leases-demo-worker DB PRODUCTION WORKER WORK_MS STOP_FILE");
        return ExitCode::from(2);
    }
    let (db, production, worker, stop) = (&args[1], &args[2], &args[3], Path::new(&args[5]));
    let work = Duration::from_millis(args[4].parse().unwrap_or(100));
    match run(db, production, worker, work, stop) {
        Ok(done) => {
            eprintln!("{worker}: {done} job(s) completed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{worker}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(db: &str, production: &str, worker: &str, work: Duration, stop: &Path) -> leases::Result<u64> {
    let auth = Authority::open(db)?;
    // Waiting claims, each lease kept alive while it works; run returns once a
    // 100 ms wait found nothing, and the stop file is looked at then.
    let config = WorkerConfig::new(production, worker, Duration::from_secs(10)).exit_when_empty(true);
    let loop_ = Worker::new(&auth, config)?;
    let mut done = 0;
    loop {
        let name = worker.to_string();
        let report = loop_.run(move |lease| {
            let payload = lease.payload()?;
            sleep(work);
            Ok::<_, leases::Error>(
                Facts::new()
                    .metadata("bytes", payload.len())
                    .metadata("language", "rust")
                    .provenance("worker", name.as_str()),
            )
        })?;
        done += report.completed;
        if stop.exists() {
            return Ok(done);
        }
    }
}
