//! Safe Rust projection of **libleases**, a job-lease authority: workers claim
//! jobs of a *production* and receive an owning [`Lease`]; the authority (a
//! SQLite file and its private clock, or a PostgreSQL database and its
//! server's clock) decides every transition.
//!
//! The crate links `libleases.so` through [`sys`], the raw declarations of
//! `include/leases.h`. It was written for C ABI [`ABI_VERSION`];
//! [`Authority::open`] refuses a library reporting another one
//! ([`ErrorKind::AbiMismatch`]).
//!
//! ```
//! use std::time::Duration;
//! use leases::{Authority, Facts};
//!
//! # fn main() -> Result<(), leases::Error> {
//! # let dir = std::env::temp_dir().join(format!("leases-doc-lib-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let auth = Authority::open(dir.join("jobs.db"))?; // creates or migrates the file
//! auth.create_production("nightly")?;
//! let job_id = auth.request_job("nightly", Some("frame-1"), b"render frame 1")?;
//!
//! // None when nothing is claimable.
//! let lease = auth.claim("nightly", "w1", Duration::from_secs(30))?.expect("a job");
//! assert_eq!(lease.job_id(), job_id);
//! lease.renew(Duration::from_secs(30))?;
//! lease.complete(&Facts::new().metadata("frames", 1).provenance("tool", "render"))?;
//!
//! let jobs = auth.jobs("nightly")?;
//! assert_eq!(jobs[0].state, leases::JobState::Completed);
//! # drop(auth);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```
//!
//! # Rules worth knowing
//!
//! - Durations are [`std::time::Duration`]: zero, over 24 h, or a fractional
//!   number of microseconds returns `Err(InvalidDuration)` before any call
//!   into the library. Nothing is rounded, and no call takes a "now".
//! - Dropping a [`Lease`] frees local memory only: it never writes, renews or
//!   releases. An unreleased claim lasts until its expiry or a coordinator
//!   [`cancel`](Authority::cancel).
//! - A failed operation leaves a lease active locally; its next use asks the
//!   store again. Successful `release`, `fail` or `complete` closes it.
//! - Errors never show a claim secret or a token; neither does `Debug` of a
//!   [`Lease`] or a [`Token`].
//!
//! See `docs/rust.md` in the repository for linking, threads and the error table.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod duration;
mod error;
mod listing;
mod pages;
mod retention;
mod retry;
pub mod sys;
mod worker;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::path::{Path, PathBuf};
use std::ptr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use duration::{duration_us, format_duration, MAX_DURATION};
pub use error::{Error, ErrorKind, Result};
pub use listing::{Attempt, AttemptEnding, Event, Facts, Job, JobRecord, JobState, Output, Production, PublishedFacts};
pub use pages::{EventPages, JobPages, ProductionPages};
pub use retention::{PruneOptions, PruneResult, RetentionPolicy, MAX_RETENTION};
pub use retry::{RequestOptions, RetryPolicy, MAX_ATTEMPTS, MAX_DELAY, MAX_PRIORITY};
/// The JSON crate used by [`Facts`] values (re-exported so callers can use the
/// same version).
pub use serde_json;
pub use worker::{stop_on_signals, Canceller, StopHandle, Worker, WorkerConfig, WorkerReport, WorkerStats, MAX_WAIT};

/// The C ABI version this crate was generated for (`LEASES_ABI_VERSION`).
pub const ABI_VERSION: u32 = sys::LEASES_ABI_VERSION;
/// The revision of that ABI this crate needs at least (`LEASES_ABI_REVISION`):
/// a library of this or a later revision fits.
pub const ABI_REVISION: u32 = sys::LEASES_ABI_REVISION;

/// Longest production, worker, job key or fact key, in bytes.
pub const MAX_NAME_LEN: usize = sys::LEASES_MAX_NAME_LEN;
/// Longest failure reason, in bytes.
pub const MAX_REASON_LEN: usize = sys::LEASES_MAX_REASON_LEN;
/// Largest job payload, in bytes.
pub const MAX_PAYLOAD_LEN: usize = sys::LEASES_MAX_PAYLOAD_LEN;
/// Longest exported token, in bytes.
pub const MAX_TOKEN_LEN: usize = sys::LEASES_MAX_TOKEN_LEN;

/// The ABI version of the loaded library (`leases_abi_version()`).
pub fn library_abi_version() -> u32 {
    // SAFETY: no arguments; works in every process state.
    unsafe { sys::leases_abi_version() }
}

/// The ABI revision of the loaded library (`leases_abi_revision()`).
pub fn library_abi_revision() -> u32 {
    // SAFETY: no arguments; works in every process state.
    unsafe { sys::leases_abi_revision() }
}

/// The release version of the loaded library, e.g. `"0.1.0"`.
pub fn library_version() -> &'static str {
    // SAFETY: a static NUL-terminated string owned by the library, never freed
    // (the library is never unloaded).
    unsafe { CStr::from_ptr(sys::leases_version()) }.to_str().unwrap_or("unknown")
}

/// Refuses a library built for another ABI, or of an older revision, than
/// this crate (`found` is the library's ABI number and revision).
fn check_abi((abi, revision): (u32, u32)) -> Result<()> {
    if abi == ABI_VERSION && revision >= ABI_REVISION {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::AbiMismatch,
            format!("libleases.so reports ABI version {abi} revision {revision}, this crate needs ABI version {ABI_VERSION} revision {ABI_REVISION} or later; use a library at least as new as the crate"),
        ))
    }
}

/// The loaded library's (ABI number, revision).
fn library_abi() -> (u32, u32) {
    (library_abi_version(), library_abi_revision())
}

// ---- helpers ----------------------------------------------------------------

/// The input limit of `leases.h` for the parameter named `what`, in bytes.
fn limit_of(what: &str) -> Option<(usize, &'static str)> {
    match what {
        "production" | "worker" | "key" | "job id" => Some((MAX_NAME_LEN, "LEASES_MAX_NAME_LEN")),
        "reason" => Some((MAX_REASON_LEN, "LEASES_MAX_REASON_LEN")),
        "facts" => Some((sys::LEASES_MAX_FACTS_LEN, "LEASES_MAX_FACTS_LEN")),
        "path" | "output dir" => Some((sys::LEASES_MAX_PATH_LEN, "LEASES_MAX_PATH_LEN")),
        _ => None,
    }
}

/// Refuses `len` bytes over `limit` (`name` the header's constant) with
/// `kind`, before anything copies them.
fn check_len(what: &str, len: usize, limit: usize, name: &str, kind: ErrorKind) -> Result<()> {
    if len > limit {
        return Err(Error::new(kind, format!("{what} is {len} bytes, over the limit of {limit} ({name})")));
    }
    Ok(())
}

/// A C string for an input, checked against its limit before it is copied;
/// a NUL byte is refused here (the library would see a shorter string).
fn c_in(what: &str, s: &str) -> Result<CString> {
    if let Some((limit, name)) = limit_of(what) {
        check_len(what, s.len(), limit, name, ErrorKind::InvalidArgument)?;
    }
    CString::new(s).map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("{what} contains a NUL byte")))
}

fn c_path(what: &str, p: &Path) -> Result<CString> {
    let s = p.to_str().ok_or_else(|| Error::new(ErrorKind::InvalidArgument, format!("{what} is not valid UTF-8")))?;
    c_in(what, s)
}

/// Copies a library-allocated string and frees it with `leases_free`.
///
/// # Safety
/// `p` is NULL or a string the library handed out and nobody else frees.
unsafe fn take_string(p: *mut c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the contract above.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: allocated by the library, released exactly once with its free.
    unsafe { sys::leases_free(p.cast()) };
    s
}

/// Unix microseconds as a `SystemTime`.
pub(crate) fn from_unix_us(us: i64) -> SystemTime {
    if us >= 0 {
        UNIX_EPOCH + Duration::from_micros(us as u64)
    } else {
        UNIX_EPOCH - Duration::from_micros(us.unsigned_abs())
    }
}

fn facts_ptr(facts: &Facts) -> Result<Option<CString>> {
    if facts.is_empty() {
        return Ok(None);
    }
    c_in("facts", &facts.to_json_within(sys::LEASES_MAX_FACTS_LEN)?).map(Some)
}

fn opt_ptr(c: &Option<CString>) -> *const c_char {
    c.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

fn opt_in(what: &str, s: Option<&str>) -> Result<Option<CString>> {
    s.map(|s| c_in(what, s)).transpose()
}

/// The C functions that read one page of jobs as JSON: authority,
/// production, states, key, job id, cursor, limit, out.
type JobsPageFn = unsafe extern "C" fn(
    *mut sys::leases_authority,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    u32,
    *mut *mut c_char,
) -> sys::leases_status;

/// Runs a call that writes a library-allocated JSON string to its out
/// pointer, and takes the string.
fn json_out(call: impl FnOnce(*mut *mut c_char) -> sys::leases_status) -> Result<String> {
    let mut out = ptr::null_mut();
    error::check(call(&mut out))?;
    // SAFETY: on success out is a library string we now own.
    Ok(unsafe { take_string(out) })
}

/// `LEASES_OPEN_OPTIONS_INIT`: every option at its default, `size` set.
#[deprecated(note = "open with leases::OpenOptions::new()...open(path) (must_exist, synchronous, busy_timeout)")]
pub fn open_options() -> sys::leases_open_options {
    raw_open_options()
}

fn raw_open_options() -> sys::leases_open_options {
    sys::leases_open_options {
        size: std::mem::size_of::<sys::leases_open_options>(),
        flags: 0,
        synchronous: sys::LEASES_SYNCHRONOUS_DEFAULT,
        busy_timeout_us: 0,
    }
}

// ---- opening with options ---------------------------------------------------

/// SQLite's `PRAGMA synchronous` ([`OpenOptions::synchronous`]), with its
/// meaning: `Normal` can lose the last acknowledged operations on power loss
/// or an operating system crash (not on a crash of the process); `Full`, the
/// default, and `Extra` do not. SQLite only: setting it for a PostgreSQL
/// location is [`ErrorKind::InvalidArgument`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Synchronous {
    /// `NORMAL`.
    Normal,
    /// `FULL`, the default.
    Full,
    /// `EXTRA`.
    Extra,
}

impl Synchronous {
    fn code(self) -> i32 {
        match self {
            Synchronous::Normal => sys::LEASES_SYNCHRONOUS_NORMAL,
            Synchronous::Full => sys::LEASES_SYNCHRONOUS_FULL,
            Synchronous::Extra => sys::LEASES_SYNCHRONOUS_EXTRA,
        }
    }
}

/// How to open an authority (`leases_authority_open_v2`), as a builder in
/// the manner of `std::fs::OpenOptions`; nothing set is
/// [`Authority::open`] exactly.
///
/// ```no_run
/// # fn main() -> Result<(), leases::Error> {
/// use std::time::Duration;
/// use leases::{OpenOptions, Synchronous};
///
/// let auth = OpenOptions::new()
///     .must_exist(true)
///     .synchronous(Synchronous::Normal)
///     .busy_timeout(Duration::from_millis(250))
///     .open("jobs.db")?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    must_exist: bool,
    synchronous: Option<Synchronous>,
    busy_timeout: Option<Duration>,
}

impl OpenOptions {
    /// Every option at its default.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Refuse to create: a location that holds no authority is
    /// [`ErrorKind::NotFound`] and nothing is created (an older schema is
    /// still migrated). Default `false`.
    pub fn must_exist(&mut self, must_exist: bool) -> &mut OpenOptions {
        self.must_exist = must_exist;
        self
    }

    /// SQLite's synchronous mode; default [`Synchronous::Full`].
    pub fn synchronous(&mut self, mode: Synchronous) -> &mut OpenOptions {
        self.synchronous = Some(mode);
        self
    }

    /// How long an operation waits for a lock (SQLite's writer lock; on
    /// PostgreSQL row locks and connections) before [`ErrorKind::Busy`];
    /// default 10 s. A duration by the rule of every duration (positive,
    /// whole microseconds, at most [`MAX_DURATION`]; else
    /// [`ErrorKind::InvalidDuration`] from [`open`](OpenOptions::open)),
    /// waited at millisecond resolution (rounded up).
    pub fn busy_timeout(&mut self, timeout: Duration) -> &mut OpenOptions {
        self.busy_timeout = Some(timeout);
        self
    }

    /// Opens the authority at `path` (as [`Authority::open`]) with these
    /// options. Bad options fail before anything is opened.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Authority> {
        let mut raw = raw_open_options();
        if self.must_exist {
            raw.flags |= sys::LEASES_OPEN_MUST_EXIST;
        }
        if let Some(mode) = self.synchronous {
            raw.synchronous = mode.code();
        }
        if let Some(timeout) = self.busy_timeout {
            raw.busy_timeout_us = duration_us(timeout)?;
        }
        Authority::open_raw(path.as_ref(), &raw)
    }
}

// ---- authority --------------------------------------------------------------

/// An open authority database. Share it between threads (`Send + Sync`: the
/// C handle is thread-safe); dropping it closes the handle. Leases outliving
/// their authority report [`ErrorKind::Closed`].
pub struct Authority {
    raw: *mut sys::leases_authority,
}

// SAFETY: include/leases.h: "leases_authority: safe to share between threads".
unsafe impl Send for Authority {}
// SAFETY: as above.
unsafe impl Sync for Authority {}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Drop for Authority {
    fn drop(&mut self) {
        // SAFETY: we own the handle; close accepts any handle value.
        unsafe { sys::leases_authority_close(self.raw) }
    }
}

impl Authority {
    /// Opens the authority database at `path`, creating or migrating it.
    ///
    /// `path` is a SQLite file, or a `postgres://` / `postgresql://`
    /// connection URL, which selects the PostgreSQL store (its clock is the
    /// server's; see `docs/postgres.md`). A `&str` or `String` is
    /// `AsRef<Path>`, so a URL is passed as it is, byte for byte, to
    /// `leases_authority_open`. A failed open is [`ErrorKind::Storage`]; its
    /// message never shows a URL's password.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), leases::Error> {
    /// let auth = leases::Authority::open("postgres://worker@db.internal/leases?sslmode=require")?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Fails with [`ErrorKind::InvalidArgument`] for a path that is not
    /// UTF-8 (the library takes UTF-8 text), and with
    /// [`ErrorKind::AbiMismatch`] before opening anything when the loaded
    /// library was built for another ABI than [`ABI_VERSION`].
    pub fn open(path: impl AsRef<Path>) -> Result<Authority> {
        check_abi(library_abi())?;
        let path = c_path("path", path.as_ref())?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid C string, valid out pointer.
        error::check(unsafe { sys::leases_authority_open(path.as_ptr(), &mut raw) })?;
        Ok(Authority { raw })
    }

    /// Opens with the raw C struct of `leases_authority_open_v2`, as 0.1.0
    /// did; open with [`OpenOptions`] instead.
    #[deprecated(note = "open with leases::OpenOptions::new()...open(path) (must_exist, synchronous, busy_timeout)")]
    pub fn open_with(path: impl AsRef<Path>, options: &sys::leases_open_options) -> Result<Authority> {
        Authority::open_raw(path.as_ref(), options)
    }

    fn open_raw(path: &Path, options: &sys::leases_open_options) -> Result<Authority> {
        check_abi(library_abi())?;
        let path = c_path("path", path)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid C string, an options struct whose size the caller
        // set (open_options does), valid out pointer.
        error::check(unsafe { sys::leases_authority_open_v2(path.as_ptr(), options, &mut raw) })?;
        Ok(Authority { raw })
    }

    /// The raw handle, for calls into [`sys`]. It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::leases_authority {
        self.raw
    }

    /// Creates a production; creating an existing name succeeds.
    pub fn create_production(&self, name: &str) -> Result<()> {
        let name = c_in("production", name)?;
        // SAFETY: live handle, valid C string.
        error::check(unsafe { sys::leases_production_create(self.raw, name.as_ptr()) })
    }

    /// Requests a job and returns its id. With a `key` the request is
    /// idempotent: the same key and payload return the same job; the same key
    /// with another payload is [`ErrorKind::WrongState`]. `None` or `""`
    /// means no key.
    pub fn request_job(&self, production: &str, key: Option<&str>, payload: &[u8]) -> Result<String> {
        check_len("payload", payload.len(), MAX_PAYLOAD_LEN, "LEASES_MAX_PAYLOAD_LEN", ErrorKind::InvalidArgument)?;
        let production = c_in("production", production)?;
        let key = key.map(|k| c_in("key", k)).transpose()?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid strings, payload pointer valid for its length.
        error::check(unsafe {
            sys::leases_job_request(
                self.raw,
                production.as_ptr(),
                opt_ptr(&key),
                payload.as_ptr(),
                payload.len(),
                &mut out,
            )
        })?;
        // SAFETY: on success out is a library string we now own.
        Ok(unsafe { take_string(out) })
    }

    /// Claims the next claimable job of `production` (FIFO by request; an
    /// expired claim is claimable again) for `duration`. `Ok(None)` when no
    /// job is claimable.
    pub fn claim(&self, production: &str, worker: &str, duration: Duration) -> Result<Option<Lease>> {
        let us = duration_us(duration)?;
        let production = c_in("production", production)?;
        let worker = c_in("worker", worker)?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid strings, valid out pointer.
        let st = unsafe { sys::leases_claim(self.raw, production.as_ptr(), worker.as_ptr(), us, &mut out) };
        if st == sys::LEASES_NOTHING_TO_CLAIM {
            return Ok(None);
        }
        error::check(st)?;
        Lease::from_raw(out).map(Some)
    }

    /// Claims the job `job_id` of `production` for `duration`.
    pub fn claim_job(&self, production: &str, job_id: &str, worker: &str, duration: Duration) -> Result<Lease> {
        let us = duration_us(duration)?;
        let production = c_in("production", production)?;
        let job_id = c_in("job id", job_id)?;
        let worker = c_in("worker", worker)?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid strings, valid out pointer.
        error::check(unsafe {
            sys::leases_claim_job(self.raw, production.as_ptr(), job_id.as_ptr(), worker.as_ptr(), us, &mut out)
        })?;
        Lease::from_raw(out)
    }

    /// Coordinator cancel by job id (no secret). Works on requested and
    /// claimed jobs, and is not blocked by a clock regression: it is the
    /// recovery tool. The holder's next operation fails as
    /// [`ErrorKind::Cancelled`].
    pub fn cancel(&self, production: &str, job_id: &str) -> Result<()> {
        let production = c_in("production", production)?;
        let job_id = c_in("job id", job_id)?;
        // SAFETY: live handle, valid strings.
        error::check(unsafe { sys::leases_cancel(self.raw, production.as_ptr(), job_id.as_ptr()) })
    }

    /// Turns a token exported by [`Lease::export_token`] (maybe in another
    /// process) back into an active lease, after checking production, job
    /// and secret against the current state.
    pub fn import_token(&self, token: &str) -> Result<Lease> {
        // Every malformed token is a bad token, also one too long to be one
        // (refused before it is copied) or one the C string cannot carry.
        check_len("token", token.len(), MAX_TOKEN_LEN, "LEASES_MAX_TOKEN_LEN", ErrorKind::BadToken)?;
        let token = CString::new(token).map_err(|_| Error::new(ErrorKind::BadToken, "token contains a NUL byte"))?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid string, valid out pointer.
        error::check(unsafe { sys::leases_lease_import(self.raw, token.as_ptr(), &mut out) })?;
        Lease::from_raw(out)
    }

    /// The jobs of `production` in request order. Observations: attribution
    /// and expiry, never a secret.
    pub fn jobs(&self, production: &str) -> Result<Vec<Job>> {
        let production = c_in("production", production)?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid string, valid out pointer.
        error::check(unsafe { sys::leases_jobs_json(self.raw, production.as_ptr(), &mut out) })?;
        // SAFETY: on success out is a library string we now own.
        listing::parse_jobs(&unsafe { take_string(out) })
    }

    /// Events with a sequence number above `after`, oldest first, of one
    /// production or (`None`) of every production.
    pub fn events(&self, production: Option<&str>, after: u64) -> Result<Vec<Event>> {
        let production = production.map(|p| c_in("production", p)).transpose()?;
        let after = i64::try_from(after)
            .map_err(|_| Error::new(ErrorKind::InvalidArgument, "after is larger than the largest sequence number"))?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid string or NULL, valid out pointer.
        error::check(unsafe { sys::leases_events_json(self.raw, opt_ptr(&production), after, &mut out) })?;
        // SAFETY: on success out is a library string we now own.
        listing::parse_events(&unsafe { take_string(out) })
    }

    /// One page of jobs as the library's JSON, `{"jobs": [...], "next":
    /// cursor or null}` (docs/c-api.md): `states` a comma-separated list,
    /// `None` for no filter, `cursor` the previous page's `next`, `limit` 0
    /// for the default page size.
    pub fn jobs_page_json(
        &self,
        production: &str,
        states: Option<&str>,
        key: Option<&str>,
        job_id: Option<&str>,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<String> {
        self.read_jobs_page(sys::leases_jobs_page_json, production, states, key, job_id, cursor, limit)
    }

    /// The page of [`jobs_page_json`](Self::jobs_page_json) with the facts of
    /// its completed jobs, read in the same call: `{"jobs": [...], "next":
    /// cursor or null, "facts": {job id: facts, ...}}`, each facts object as
    /// in [`job_json`](Self::job_json) (none for jobs not completed).
    pub fn jobs_page_facts_json(
        &self,
        production: &str,
        states: Option<&str>,
        key: Option<&str>,
        job_id: Option<&str>,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<String> {
        self.read_jobs_page(sys::leases_jobs_page_facts_json, production, states, key, job_id, cursor, limit)
    }

    /// One page of jobs read by `read`, a C function with the parameters of
    /// `leases_jobs_page_json` (with or without the facts).
    #[allow(clippy::too_many_arguments)]
    fn read_jobs_page(
        &self,
        read: JobsPageFn,
        production: &str,
        states: Option<&str>,
        key: Option<&str>,
        job_id: Option<&str>,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<String> {
        let production = c_in("production", production)?;
        let (states, key) = (opt_in("states", states)?, opt_in("key", key)?);
        let (job_id, cursor) = (opt_in("job id", job_id)?, opt_in("cursor", cursor)?);
        // SAFETY: read is one of the page functions; live handle, valid
        // strings or NULL, valid out pointer.
        json_out(|out| unsafe {
            read(
                self.raw,
                production.as_ptr(),
                opt_ptr(&states),
                opt_ptr(&key),
                opt_ptr(&job_id),
                opt_ptr(&cursor),
                limit,
                out,
            )
        })
    }

    /// One page of events as the library's JSON, `{"events": [...], "next":
    /// seq, "more": bool}`: of one production or every one, of one job, of
    /// some kinds (comma-separated), after a sequence number.
    pub fn events_page_json(
        &self,
        production: Option<&str>,
        job_id: Option<&str>,
        kinds: Option<&str>,
        after: u64,
        limit: u32,
    ) -> Result<String> {
        let (production, job_id) = (opt_in("production", production)?, opt_in("job id", job_id)?);
        let kinds = opt_in("kinds", kinds)?;
        let after = i64::try_from(after)
            .map_err(|_| Error::new(ErrorKind::InvalidArgument, "after is larger than the largest sequence number"))?;
        // SAFETY: live handle, valid strings or NULL, valid out pointer.
        json_out(|out| unsafe {
            sys::leases_events_page_json(
                self.raw,
                opt_ptr(&production),
                opt_ptr(&job_id),
                opt_ptr(&kinds),
                after,
                limit,
                out,
            )
        })
    }

    /// One job's record as the library's JSON: the listing's fields,
    /// `payload_size`, `requested_at_unix_us`, `updated_at_unix_us`, `facts`.
    pub fn job_json(&self, production: &str, job_id: &str) -> Result<String> {
        let (production, job_id) = (c_in("production", production)?, c_in("job id", job_id)?);
        // SAFETY: live handle, valid strings, valid out pointer.
        json_out(|out| unsafe { sys::leases_job_json(self.raw, production.as_ptr(), job_id.as_ptr(), out) })
    }

    /// One page of productions as the library's JSON, `{"productions":
    /// [...], "next": cursor or null}`.
    pub fn productions_page_json(&self, cursor: Option<&str>, limit: u32) -> Result<String> {
        let cursor = opt_in("cursor", cursor)?;
        // SAFETY: live handle, valid string or NULL, valid out pointer.
        json_out(|out| unsafe { sys::leases_productions_page_json(self.raw, opt_ptr(&cursor), limit, out) })
    }

    /// The production's jobs counted by state, as the library's JSON.
    pub fn job_counts_json(&self, production: &str) -> Result<String> {
        let production = c_in("production", production)?;
        // SAFETY: live handle, valid string, valid out pointer.
        json_out(|out| unsafe { sys::leases_job_counts_json(self.raw, production.as_ptr(), out) })
    }

    /// Begins an edit: one write transaction holding the database writer
    /// lock until [`Edit::commit`] or [`Edit::abort`] (or drop, which
    /// aborts). Keep it short; may fail with [`ErrorKind::Busy`].
    pub fn edit(&self) -> Result<Edit<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid out pointer.
        error::check(unsafe { sys::leases_edit_begin(self.raw, &mut out) })?;
        Ok(Edit { authority: self, raw: out })
    }
}

// ---- leases -----------------------------------------------------------------

/// An owning lease on one job. `Send` and `Sync`: the library serializes
/// operations on one lease.
///
/// Operations take `&self`: a failed one (expired, lost, cancelled, busy, …)
/// leaves the lease active locally and the next use asks the store again;
/// a successful `release`, `fail` or `complete` closes it, after which every
/// operation reports [`ErrorKind::Closed`].
///
/// ```
/// use std::time::Duration;
/// use leases::{Authority, ErrorKind};
///
/// # fn main() -> Result<(), leases::Error> {
/// # let dir = std::env::temp_dir().join(format!("leases-doc-lease-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let auth = Authority::open(dir.join("jobs.db"))?;
/// auth.create_production("nightly")?;
/// auth.request_job("nightly", None, b"")?;
/// let lease = auth.claim("nightly", "w1", Duration::from_secs(30))?.expect("a job");
///
/// // Hand the claim to another process through a file or pipe, never an argument.
/// let token = lease.export_token()?;
/// let same = auth.import_token(token.as_str())?;
/// assert_eq!(same.job_id(), lease.job_id());
///
/// same.release()?;
/// assert_eq!(lease.renew(Duration::from_secs(30)).unwrap_err().kind(), ErrorKind::WrongState);
/// # drop(auth);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(())
/// # }
/// ```
///
/// Dropping it frees local memory only; it never writes, renews or releases.
/// `Debug` shows production, job and worker, never the secret.
pub struct Lease {
    raw: *mut sys::leases_lease,
    job_id: String,
    production: String,
    worker: String,
    /// False for a lease a worker loop handed out: the loop frees it.
    owned: bool,
}

// SAFETY: include/leases.h: "leases_lease: safe to share; operations on one
// lease are serialized". The cached strings are immutable.
unsafe impl Send for Lease {}
// SAFETY: as above.
unsafe impl Sync for Lease {}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("production", &self.production)
            .field("job_id", &self.job_id)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: we own the handle; free is local memory only.
            unsafe { sys::leases_lease_free(self.raw) }
        }
    }
}

impl Lease {
    /// Wraps a lease handle the library just handed out, reading its local
    /// attributes. On failure the handle is freed (local memory only; the
    /// claim itself stays until expiry).
    fn from_raw(raw: *mut sys::leases_lease) -> Result<Lease> {
        let mut lease =
            Lease { raw, job_id: String::new(), production: String::new(), worker: String::new(), owned: true };
        lease.job_id = lease.string(sys::leases_lease_job_id)?;
        lease.production = lease.string(sys::leases_lease_production)?;
        lease.worker = lease.string(sys::leases_lease_worker)?;
        Ok(lease)
    }

    /// Wraps a lease a worker loop handed out (`leases_worker_next`): the
    /// loop keeps it and frees it when the job is settled.
    pub(crate) fn borrowed(raw: *mut sys::leases_lease) -> Result<Lease> {
        let mut lease =
            Lease { raw, job_id: String::new(), production: String::new(), worker: String::new(), owned: false };
        lease.job_id = lease.string(sys::leases_lease_job_id)?;
        lease.production = lease.string(sys::leases_lease_production)?;
        lease.worker = lease.string(sys::leases_lease_worker)?;
        Ok(lease)
    }

    fn string(
        &self,
        get: unsafe extern "C" fn(*const sys::leases_lease, *mut *mut c_char) -> sys::leases_status,
    ) -> Result<String> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid out pointer.
        error::check(unsafe { get(self.raw, &mut out) })?;
        // SAFETY: on success out is a library string we now own.
        Ok(unsafe { take_string(out) })
    }

    /// The raw handle, for calls into [`sys`]. It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::leases_lease {
        self.raw
    }

    /// The job id.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The production name.
    pub fn production(&self) -> &str {
        &self.production
    }

    /// The worker attribution given at claim.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// The claimed job's payload bytes, the worker's input. Reads the store;
    /// works while the lease is active or pending in an edit.
    pub fn payload(&self) -> Result<Vec<u8>> {
        let mut p: *mut u8 = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live handle, valid out pointers.
        error::check(unsafe { sys::leases_lease_payload(self.raw, &mut p, &mut len) })?;
        if p.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: the library allocated `len` readable bytes at `p`.
        let bytes = unsafe { std::slice::from_raw_parts(p, len) }.to_vec();
        // SAFETY: allocated by the library, released exactly once with its free.
        unsafe { sys::leases_free(p.cast()) };
        Ok(bytes)
    }

    /// The expiry last confirmed by the authority (local; no store access).
    pub fn expiry(&self) -> Result<SystemTime> {
        let mut us = 0i64;
        // SAFETY: live handle, valid out pointer.
        error::check(unsafe { sys::leases_lease_expiry(self.raw, &mut us) })?;
        Ok(from_unix_us(us))
    }

    /// Sets the expiry to now + `duration`. It must extend the current expiry
    /// ([`ErrorKind::NotExtended`] otherwise) and commit before it
    /// ([`ErrorKind::Expired`] otherwise).
    pub fn renew(&self, duration: Duration) -> Result<()> {
        let us = duration_us(duration)?;
        // SAFETY: live handle.
        error::check(unsafe { sys::leases_lease_renew(self.raw, us) })
    }

    /// Gives the job back (it becomes requested again). Success closes the lease.
    pub fn release(&self) -> Result<()> {
        // SAFETY: live handle.
        error::check(unsafe { sys::leases_lease_release(self.raw) })
    }

    /// Marks the job failed with `reason` (may be empty, at most
    /// [`MAX_REASON_LEN`] bytes). Success closes the lease.
    pub fn fail(&self, reason: &str) -> Result<()> {
        let reason = c_in("reason", reason)?;
        // SAFETY: live handle, valid string.
        error::check(unsafe { sys::leases_lease_fail(self.raw, reason.as_ptr()) })
    }

    /// Completes the job, publishing `facts` (use `&Facts::new()` for none).
    /// Success closes the lease.
    pub fn complete(&self, facts: &Facts) -> Result<()> {
        let facts = facts_ptr(facts)?;
        // SAFETY: live handle, valid string or NULL.
        error::check(unsafe { sys::leases_lease_complete(self.raw, opt_ptr(&facts)) })
    }

    /// Completes the job as [`complete`](Lease::complete) does and claims
    /// the production's next claimable job for the same worker for
    /// `duration`, in one commit. `Ok(None)` when nothing was claimable (the
    /// completion committed all the same). A refused completion is its
    /// error, and nothing is claimed; success closes this lease.
    pub fn complete_and_claim_next(&self, facts: &Facts, duration: Duration) -> Result<Option<Lease>> {
        let us = duration_us(duration)?;
        let facts = facts_ptr(facts)?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid string or NULL, valid out pointer.
        error::check(unsafe { sys::leases_lease_complete_and_claim_next(self.raw, opt_ptr(&facts), us, &mut out) })?;
        if out.is_null() {
            return Ok(None);
        }
        Lease::from_raw(out).map(Some)
    }

    /// Exports this active lease as a [`Token`] for another process. The
    /// token is a credential: keep it out of logs and argument lists.
    pub fn export_token(&self) -> Result<Token> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: live handle, valid out pointer.
        error::check(unsafe { sys::leases_lease_export(self.raw, &mut out) })?;
        // SAFETY: on success out is a library string we now own; it is
        // overwritten before it goes back to the library's allocator.
        let text = unsafe {
            let (text, len) = {
                let bytes = CStr::from_ptr(out).to_bytes();
                (String::from_utf8_lossy(bytes).into_owned(), bytes.len())
            };
            ptr::write_bytes(out, 0, len);
            sys::leases_free(out.cast());
            text
        };
        Ok(Token(text))
    }

    /// Begins an execution of the reference executor: reserves a temporary
    /// output file in `output_dir` and names the final one (both contain the
    /// job id and a fresh nonce).
    pub fn execution(&self, output_dir: impl AsRef<Path>) -> Result<Execution> {
        let dir = c_path("output dir", output_dir.as_ref())?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid string, valid out pointer.
        error::check(unsafe { sys::leases_execution_begin(self.raw, dir.as_ptr(), &mut out) })?;
        // SAFETY: out is a live execution; its paths are valid until it is consumed.
        let (temp, fin) = unsafe {
            let path = |p: *const c_char| {
                if p.is_null() {
                    PathBuf::new()
                } else {
                    PathBuf::from(CStr::from_ptr(p).to_string_lossy().into_owned())
                }
            };
            (path(sys::leases_execution_temp_path(out)), path(sys::leases_execution_final_path(out)))
        };
        Ok(Execution { raw: out, temp, fin })
    }
}

/// An exported lease token: a credential. `Debug` redacts it and there is no
/// `Display`; read it with [`Token::as_str`] only to hand it to another
/// process through a file or pipe. Its memory is overwritten on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The token text (74 ASCII characters for version 1).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        std::hint::black_box(&bytes);
    }
}

// ---- edits ------------------------------------------------------------------

/// One write transaction on an [`Authority`], which it borrows. Claims made
/// in it are pending until [`commit`](Edit::commit) succeeds; a failed,
/// aborted or dropped edit closes them. `Send` but not `Sync`: use it from
/// one thread at a time. Dropping it aborts (rolls back: nothing is written).
///
/// ```
/// use std::time::Duration;
/// use leases::{Authority, Facts};
///
/// # fn main() -> Result<(), leases::Error> {
/// # let dir = std::env::temp_dir().join(format!("leases-doc-edit-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let auth = Authority::open(dir.join("jobs.db"))?;
/// auth.create_production("nightly")?;
/// auth.request_job("nightly", None, b"")?;
///
/// let edit = auth.edit()?;
/// let pending = edit.claim("nightly", "w1", Duration::from_secs(5))?.expect("a job");
/// edit.complete(&pending, &Facts::new().metadata("inline", true))?;
/// edit.commit()?; // claim and completion publish together, or not at all
/// # drop(auth);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(())
/// # }
/// ```
///
/// The edit borrows its authority, so the authority cannot be closed under it:
///
/// ```compile_fail,E0505
/// let auth = leases::Authority::open("jobs.db").unwrap();
/// let edit = auth.edit().unwrap();
/// drop(auth); // error: `auth` is borrowed by `edit`
/// edit.commit().unwrap();
/// ```
pub struct Edit<'a> {
    authority: &'a Authority,
    raw: *mut sys::leases_edit,
}

// SAFETY: include/leases.h: an edit may be called from several threads, one
// at a time; !Sync keeps it to one at a time.
unsafe impl Send for Edit<'_> {}

impl fmt::Debug for Edit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Edit").finish_non_exhaustive()
    }
}

impl Drop for Edit<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the edit; abort accepts a consumed one.
        unsafe { sys::leases_edit_abort(self.raw) }
    }
}

impl<'a> Edit<'a> {
    /// The authority this edit writes to.
    pub fn authority(&self) -> &'a Authority {
        self.authority
    }

    /// The raw handle, for calls into [`sys`]. It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::leases_edit {
        self.raw
    }

    /// Claims the next job inside the edit; the lease is pending (its own
    /// operations report [`ErrorKind::Closed`]) until the edit commits.
    /// `Ok(None)` when no job is claimable.
    pub fn claim(&self, production: &str, worker: &str, duration: Duration) -> Result<Option<Lease>> {
        let us = duration_us(duration)?;
        let production = c_in("production", production)?;
        let worker = c_in("worker", worker)?;
        let mut out = ptr::null_mut();
        // SAFETY: live edit, valid strings, valid out pointer.
        let st = unsafe { sys::leases_edit_claim(self.raw, production.as_ptr(), worker.as_ptr(), us, &mut out) };
        if st == sys::LEASES_NOTHING_TO_CLAIM {
            return Ok(None);
        }
        error::check(st)?;
        Lease::from_raw(out).map(Some)
    }

    /// Completes `lease` (one this edit claimed, or an active one) inside
    /// the edit; `facts` are published only if the edit commits.
    pub fn complete(&self, lease: &Lease, facts: &Facts) -> Result<()> {
        let facts = facts_ptr(facts)?;
        // SAFETY: live edit and lease, valid string or NULL.
        error::check(unsafe { sys::leases_edit_complete(self.raw, lease.raw, opt_ptr(&facts)) })
    }

    /// Commits the edit. It is consumed also when the commit fails; then its
    /// pending leases are closed and leases it completed stay active.
    pub fn commit(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: we own the edit; commit consumes it.
        error::check(unsafe { sys::leases_edit_commit(raw) })
    }

    /// Rolls the edit back (the same as dropping it).
    pub fn abort(self) {}
}

// ---- reference executor -----------------------------------------------------

/// An execution of the reference executor, begun by [`Lease::execution`].
/// Write the output to [`temp_path`](Execution::temp_path), then
/// [`finish`](Execution::finish). `Send`, not `Sync`. Dropping an unfinished
/// execution abandons it: its own files are removed; the store is not touched.
pub struct Execution {
    raw: *mut sys::leases_execution,
    temp: PathBuf,
    fin: PathBuf,
}

// SAFETY: include/leases.h: "leases_execution: use from one thread at a time".
unsafe impl Send for Execution {}

impl fmt::Debug for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution")
            .field("temp_path", &self.temp)
            .field("final_path", &self.fin)
            .field("consumed", &self.raw.is_null())
            .finish()
    }
}

impl Drop for Execution {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: we own the execution; abandon consumes it.
            unsafe { sys::leases_execution_abandon(self.raw) }
        }
    }
}

impl Execution {
    /// The temporary file to write the output to.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// The final file name the output is renamed to by `finish`.
    pub fn final_path(&self) -> &Path {
        &self.fin
    }

    /// Fsyncs and renames the temporary file to the final name, then
    /// completes the lease registering the output together with `facts`.
    ///
    /// The execution is consumed (later calls report [`ErrorKind::Closed`])
    /// except when the library refuses the facts with
    /// [`ErrorKind::InvalidArgument`]: then nothing happened and it can be
    /// finished again or abandoned. A rejected completion (expired, lost,
    /// cancelled) removes only this execution's files.
    pub fn finish(&mut self, facts: &Facts) -> Result<()> {
        if self.raw.is_null() {
            return Err(Error::new(ErrorKind::Closed, "execution is already finished or abandoned"));
        }
        let facts = facts_ptr(facts)?;
        // SAFETY: live execution, valid string or NULL.
        let st = unsafe { sys::leases_execution_finish(self.raw, opt_ptr(&facts)) };
        if st != sys::LEASES_INVALID_ARGUMENT {
            self.raw = ptr::null_mut();
        }
        error::check(st)
    }

    /// Removes this execution's files and consumes it (the same as dropping it).
    pub fn abandon(self) {}
}

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_refuses_a_library_with_another_abi_version() {
        assert!(check_abi((ABI_VERSION, ABI_REVISION)).is_ok());
        let err = check_abi((ABI_VERSION + 1, ABI_REVISION)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AbiMismatch);
        assert_eq!(err.status(), None);
        assert!(err.to_string().contains(&format!("ABI version {} revision", ABI_VERSION + 1)), "{err}");
    }

    #[test]
    fn open_refuses_a_library_of_an_older_revision_naming_both() {
        assert!(check_abi((ABI_VERSION, ABI_REVISION + 1)).is_ok());
        let err = check_abi((ABI_VERSION, ABI_REVISION - 1)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AbiMismatch);
        let text = err.to_string();
        assert!(text.contains(&format!("revision {},", ABI_REVISION - 1)), "{text}");
        assert!(text.contains(&format!("revision {} or later", ABI_REVISION)), "{text}");
    }

    #[test]
    fn the_loaded_library_is_of_this_abi_and_at_least_this_revision() {
        assert_eq!(library_abi_version(), ABI_VERSION);
        assert!(library_abi_revision() >= ABI_REVISION);
    }

    #[test]
    fn unix_microseconds_map_to_system_time_exactly() {
        assert_eq!(from_unix_us(0), UNIX_EPOCH);
        assert_eq!(from_unix_us(1_500_000).duration_since(UNIX_EPOCH).unwrap(), Duration::from_micros(1_500_000));
        assert_eq!(UNIX_EPOCH.duration_since(from_unix_us(-5)).unwrap(), Duration::from_micros(5));
    }
}
