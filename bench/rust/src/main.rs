//! rustbench: the Rust rows of `make bench`, through the `leases` crate.
//!   rustbench cycle DB N      claim -> complete of N jobs, two commits each
//!   rustbench boundary DB N   ns per call of leases::library_abi_version()
//!                             and Lease::expiry() (leases_lease_expiry)
//! Prints one JSON line like every row of the bench.
use std::hint::black_box;
use std::process::ExitCode;
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
    if args.len() != 4 {
        eprintln!("usage: rustbench cycle|boundary DB N");
        return ExitCode::from(2);
    }
    let n: u64 = args[3].parse().expect("N");
    match run(&args[1], &args[2], n) {
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
