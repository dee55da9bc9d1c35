//! Fresh PostgreSQL schemas for the tests: each test gets its own schema of
//! `$LEASES_TEST_PG_URL`, created and dropped with `psql`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use leases::Authority;

use super::PRODUCTION;

/// The server's URL, or None (the test then returns) when there is none and
/// none is required.
pub fn server_url() -> Option<String> {
    match std::env::var("LEASES_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            let why = "LEASES_TEST_PG_URL is not set (run under tests/pg/cluster.sh run -- ...)";
            if std::env::var_os("LEASES_REQUIRE_PG").is_some_and(|v| !v.is_empty()) {
                panic!("LEASES_REQUIRE_PG is set but {why}");
            }
            eprintln!("PostgreSQL test skipped: {why}");
            None
        }
    }
}

pub fn psql_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("psql")).find(|f| f.is_file()))
        .unwrap_or_default();
    if let Some(found) = on_path {
        return found;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok()).map(|e| e.path().join("bin").join("psql")).filter(|f| f.is_file()).collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.pop().expect("psql is missing: it comes with the PostgreSQL server tests/pg/cluster.sh installs")
}

/// Runs sql on url; returns the unaligned, tuples-only output.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new(psql_binary())
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .expect("run psql");
    assert!(out.status.success(), "psql failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("psql output is UTF-8").trim_end().to_owned()
}

pub fn with_param(url: &str, kv: &str) -> String {
    format!("{url}{}{kv}", if url.contains('?') { '&' } else { '?' })
}

/// A fresh schema, dropped on drop; `url` makes it the connection's current
/// schema, where the store creates its tables.
pub struct Schema {
    server: String,
    name: String,
    pub url: String,
}

impl Schema {
    pub fn new() -> Option<Schema> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let server = server_url()?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("leases_rs_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
        psql(&server, &format!("CREATE SCHEMA {name}"));
        let url = with_param(&server, &format!("search_path={name}"));
        Some(Schema { server, name, url })
    }

    /// Runs sql with this schema as the current one.
    pub fn query(&self, sql: &str) -> String {
        psql(&self.server, &format!("SET search_path TO {}; {sql}", self.name))
    }

    /// An authority on this schema with production PRODUCTION.
    pub fn open(&self) -> Authority {
        let auth = Authority::open(&self.url).expect("open the PostgreSQL authority");
        auth.create_production(PRODUCTION).expect("create production");
        auth
    }
}

impl Schema {
    /// Holds the schema's jobs table in EXCLUSIVE mode until the returned
    /// lock is dropped: a look still reads the jobs, but a claim's row lock
    /// waits (and fails past its lock_timeout, a short busy timeout). A psql
    /// session runs the statements as they come down its standard input and
    /// says when the lock is held.
    pub fn lock_jobs_table(&self) -> TableLock {
        let mut child = Command::new(psql_binary())
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", &self.server])
            .env("PGOPTIONS", "-c client_min_messages=warning")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run psql");
        let mut stdin = child.stdin.take().expect("psql's standard input");
        write!(
            stdin,
            "SET search_path TO {};\nBEGIN;\nLOCK TABLE leases_jobs IN EXCLUSIVE MODE;\n\\echo held\n",
            self.name
        )
        .and_then(|_| stdin.flush())
        .expect("write to psql");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("psql's standard output")).read_line(&mut line).expect("read psql");
        assert_eq!(line.trim_end(), "held", "psql did not take the lock");
        TableLock { child, stdin: Some(stdin) }
    }
}

/// A psql session holding a jobs table locked; dropping it rolls back.
pub struct TableLock {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for TableLock {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"ROLLBACK;\n");
        } // closed: psql ends
        let status = self.child.wait();
        if !std::thread::panicking() {
            assert!(status.expect("wait for psql").success(), "psql failed");
        }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            psql(&self.server, &format!("DROP SCHEMA {} CASCADE", self.name));
        } else {
            let _ = Command::new(psql_binary())
                .args(["-X", "-q", "-d", &self.server, "-c", &format!("DROP SCHEMA {} CASCADE", self.name)])
                .output();
        }
    }
}
