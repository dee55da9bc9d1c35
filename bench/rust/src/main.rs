//! rustbench: the Rust rows of `make bench`, through the `leases` crate.
//!   rustbench cycle DB N      claim -> complete of N jobs, two commits each
//!   rustbench boundary DB N   ns per call of leases::library_abi_version()
//!                             and Lease::expiry() (leases_lease_expiry)
//!   rustbench worker DB N C   the N jobs already requested at DB (a file or
//!                             a postgres:// URL) drained by leases::Worker
//!                             (exit_when_empty, concurrency C) with a no-op
//!                             handler, timed from the Worker's creation to
//!                             run()'s return
//! Prints one JSON line like every row of the bench.
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PROD: &str = "bench";
const HOUR: Duration = Duration::from_secs(3600);

fn filled(db: &str, n: u64) -> leases::Result<leases::Authority> {
    let auth = leases::Authority::open(db)?;
    auth.create_production(PROD)?;
    for _ in 0..n {
        auth.request_job(PROD, None, b"payload-0123456789")?;
    }
    Ok(auth)
}

/// CPU time (user + sys) of this process so far, in ns, and its voluntary
/// context switches (all threads).
fn usage() -> (f64, f64) {
    // SAFETY: a zeroed rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as f64 * 1e9
        + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as f64 * 1e3;
    (cpu, ru.ru_nvcsw as f64)
}

fn worker(db: &str, n: u64, c: u32) -> leases::Result<String> {
    let auth = leases::Authority::open(db)?;
    let handled = AtomicU64::new(0);
    let (cpu0, cs0) = usage();
    let t = Instant::now();
    let w = leases::Worker::new(
        &auth,
        leases::WorkerConfig::new(PROD, "w", Duration::from_secs(60)).concurrency(c).exit_when_empty(true),
    )?;
    let report = w.run(|_lease| {
        handled.fetch_add(1, Ordering::Relaxed);
        Ok::<_, leases::Error>(leases::Facts::default())
    })?;
    let secs = t.elapsed().as_secs_f64();
    let (cpu1, cs1) = usage();
    let (cpu, cs) = ((cpu1 - cpu0) / n as f64, (cs1 - cs0) / n as f64);
    let got = handled.load(Ordering::Relaxed);
    if got != n || report.completed != n {
        eprintln!("rustbench: the handler ran {got} times and {} jobs were completed, for {n} jobs", report.completed);
        std::process::exit(1);
    }
    Ok(format!("{{\"ops\":{},\"secs\":{:.6},\"cpu_ns\":{:.0},\"extra\":{{\"vcsw\":{:.3}}}}}", n, secs, cpu, cs))
}

fn run(mode: &str, db: &str, n: u64) -> leases::Result<String> {
    match mode {
        "cycle" => {
            let auth = filled(db, n)?;
            let facts = leases::Facts::default();
            let t = Instant::now();
            for _ in 0..n {
                let lease = auth.claim(PROD, "w", HOUR)?.expect("a requested job");
                lease.complete(&facts)?;
            }
            Ok(format!("{{\"ops\":{},\"secs\":{:.6}}}", n, t.elapsed().as_secs_f64()))
        }
        "boundary" => {
            let auth = filled(db, 1)?;
            let lease = auth.claim(PROD, "w", HOUR)?.expect("a requested job");
            let t = Instant::now();
            for _ in 0..n {
                black_box(leases::library_abi_version());
            }
            let abi_ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
            let t = Instant::now();
            for _ in 0..n {
                black_box(lease.expiry()?);
            }
            let exp_ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
            Ok(format!("{{\"ops\":{},\"ns_op\":{:.2},\"extra\":{{\"expiry_ns\":{:.2}}}}}", n, abi_ns, exp_ns))
        }
        _ => panic!("unknown mode {mode}"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let is_worker = args.len() == 5 && args[1] == "worker";
    if args.len() != 4 && !is_worker {
        eprintln!("usage: rustbench cycle|boundary DB N | rustbench worker DB N C");
        return ExitCode::from(2);
    }
    let n: u64 = args[3].parse().expect("N");
    let out = if is_worker { worker(&args[2], n, args[4].parse().expect("C")) } else { run(&args[1], &args[2], n) };
    match out {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rustbench: {e}");
            ExitCode::FAILURE
        }
    }
}
