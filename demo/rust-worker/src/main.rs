//! Demo worker in Rust: claims jobs of one production until the stop file
//! exists, reads each payload, "works", and completes with metadata.
//! Prints no token: only counts on exit.
//!
//!   leases-demo-worker DB PRODUCTION WORKER WORK_MS STOP_FILE
use std::path::Path;
use std::process::ExitCode;
use std::thread::sleep;
use std::time::Duration;

use leases::{Authority, ErrorKind, Facts};

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

fn run(db: &str, production: &str, worker: &str, work: Duration, stop: &Path) -> leases::Result<u32> {
    let auth = Authority::open(db)?;
    let mut done = 0;
    loop {
        let lease = match auth.claim(production, worker, Duration::from_secs(10)) {
            Ok(Some(lease)) => lease,
            Ok(None) if stop.exists() => return Ok(done),
            Ok(None) => {
                sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Busy => continue,
            Err(e) => return Err(e),
        };
        let payload = lease.payload()?;
        sleep(work);
        let facts = Facts::new()
            .metadata("bytes", payload.len())
            .metadata("language", "rust")
            .provenance("worker", worker);
        match lease.complete(&facts) {
            Ok(()) => done += 1,
            // e.g. cancelled by the coordinator meanwhile: report, go on.
            Err(e) => eprintln!("{worker}: job {}: {}", lease.job_id(), e.kind().name()),
        }
    }
}
