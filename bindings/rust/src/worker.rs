//! The worker runtime: waiting claims and their [`Canceller`], keep-alive and
//! the "is it still mine?" questions on a [`Lease`], and [`Worker`], the loop
//! that claims, keeps alive, runs a handler and settles each job, stopping
//! cleanly on a [`StopHandle`] (docs/rust.md, "Writing a worker").

use std::ffi::CString;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{self, Error, ErrorKind, Result};
use crate::{c_in, duration_us, format_duration, sys, Authority, Facts, Lease};

/// The longest wait of [`Authority::claim_wait`] and [`Lease::wait_lost`]: 24 hours, inclusive.
pub const MAX_WAIT: Duration = Duration::from_micros(sys::LEASES_MAX_WAIT_US as u64);

/// The C `wait_us` of a wait bound: 0 ..= 24 h in whole microseconds, or
/// `Err(InvalidArgument)` (the status the library gives a wait out of range).
/// A wait decides nothing about a lease, but it is not rounded either.
pub(crate) fn wait_us(what: &str, d: Duration) -> Result<i64> {
    if d > MAX_WAIT {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {} is longer than the limit of 24h", format_duration(d)),
        ));
    }
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {} is not a whole number of microseconds (nothing is rounded)", format_duration(d)),
        ));
    }
    // d <= 24 h, so the microsecond count fits an i64.
    Ok(d.as_micros() as i64)
}

fn canceller_ptr(c: Option<&Canceller>) -> *mut sys::leases_canceller {
    c.map_or(ptr::null_mut(), |c| c.raw)
}

// ---- canceller --------------------------------------------------------------

/// Ends the waits it is given ([`Authority::claim_wait`],
/// [`Lease::wait_lost`]) with [`ErrorKind::Interrupted`], now and later: it
/// stays cancelled. `Send + Sync`: share it by reference (scoped threads) or
/// in an `Arc`, and [`cancel`](Canceller::cancel) from any thread. Waits
/// borrow it, so it outlives them, as `leases.h` requires. Not for signal
/// handlers (`leases_canceller_cancel` is not async-signal-safe): a signal
/// handler calls [`StopHandle::stop`].
pub struct Canceller {
    raw: *mut sys::leases_canceller,
}

// SAFETY: include/leases.h: "leases_canceller: safe to share; cancel it from any thread".
unsafe impl Send for Canceller {}
// SAFETY: as above.
unsafe impl Sync for Canceller {}

impl fmt::Debug for Canceller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Canceller").finish_non_exhaustive()
    }
}

impl Drop for Canceller {
    fn drop(&mut self) {
        // SAFETY: we own the handle; no wait borrows it any more.
        unsafe { sys::leases_canceller_free(self.raw) }
    }
}

impl Canceller {
    /// A new canceller, not cancelled.
    pub fn new() -> Result<Canceller> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid out pointer.
        error::check(unsafe { sys::leases_canceller_new(&mut raw) })?;
        Ok(Canceller { raw })
    }

    /// Cancels every wait given this canceller, running or to come.
    pub fn cancel(&self) -> Result<()> {
        // SAFETY: live handle; the library serializes.
        error::check(unsafe { sys::leases_canceller_cancel(self.raw) })
    }

    /// The raw handle, for calls into [`sys`]. It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::leases_canceller {
        self.raw
    }
}

// ---- waiting claim ------------------------------------------------------------

impl Authority {
    /// Claims the next claimable job like [`claim`](Authority::claim),
    /// waiting up to `wait` (at most [`MAX_WAIT`], whole microseconds;
    /// zero is `claim`) for one to become claimable. While it waits it writes
    /// nothing and holds no lock; it wakes when a request or a release commits
    /// (in this process, another process on the same SQLite file, any host on
    /// PostgreSQL) and when a claim expires on the authority's clock.
    ///
    /// `Ok(None)` when `wait` passed; [`ErrorKind::Interrupted`] when
    /// `canceller` is or gets cancelled (nothing claimed);
    /// [`ErrorKind::Closed`] when the authority closes meanwhile. `wait` is
    /// this host's patience, measured on its monotonic clock; it decides
    /// nothing about the lease. Blocks only the calling thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// # fn main() -> Result<(), leases::Error> {
    /// # let dir = std::env::temp_dir().join(format!("leases-doc-wait-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let auth = leases::Authority::open(dir.join("jobs.db"))?;
    /// auth.create_production("nightly")?;
    /// let cancel = leases::Canceller::new()?;
    /// std::thread::scope(|s| {
    ///     s.spawn(|| auth.request_job("nightly", None, b"late"));
    ///     let lease = auth.claim_wait("nightly", "w1", Duration::from_secs(30), Duration::from_secs(60), Some(&cancel));
    ///     assert!(lease.unwrap().is_some()); // woken by the request, not after a minute
    /// });
    /// # drop(auth);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn claim_wait(
        &self,
        production: &str,
        worker: &str,
        duration: Duration,
        wait: Duration,
        canceller: Option<&Canceller>,
    ) -> Result<Option<Lease>> {
        let us = duration_us(duration)?;
        let wait = wait_us("wait", wait)?;
        let production = c_in("production", production)?;
        let worker = c_in("worker", worker)?;
        let mut out = ptr::null_mut();
        // SAFETY: live handles, valid strings, valid out pointer; the
        // canceller outlives the call (borrowed).
        let st = unsafe {
            sys::leases_claim_wait(
                self.raw,
                production.as_ptr(),
                worker.as_ptr(),
                us,
                wait,
                canceller_ptr(canceller),
                &mut out,
            )
        };
        if st == sys::LEASES_NOTHING_TO_CLAIM {
            return Ok(None);
        }
        error::check(st)?;
        Lease::from_raw(out).map(Some)
    }
}

// ---- keep-alive, check, wait_lost ------------------------------------------------

/// The reason the library just reported on this thread, as an error
/// (`None` for `LEASES_OK`).
fn reason(status: sys::leases_status) -> Option<Error> {
    (status != sys::LEASES_OK).then(|| Error::from_status(status))
}

impl Lease {
    /// Keeps the lease alive in the background: renews it by the rules of
    /// [`renew(duration)`](Lease::renew) every `interval` (`None`: a third of
    /// `duration`; else at least 1 ms and below `duration`). It stops when the
    /// lease closes, at [`stop_keep_alive`](Lease::stop_keep_alive), when the
    /// `Lease` is dropped (which still writes nothing), when the authority
    /// closes, and when a renewal is rejected or its retries give up; then
    /// [`check`](Lease::check) and [`wait_lost`](Lease::wait_lost) say why.
    /// Calling it again replaces the running renewer. `docs/workers.md` says
    /// how long a duration must be.
    pub fn keep_alive(&self, duration: Duration, interval: Option<Duration>) -> Result<()> {
        let us = duration_us(duration)?;
        let interval_us = interval.map(duration_us).transpose()?.unwrap_or(0);
        // SAFETY: live handle.
        error::check(unsafe { sys::leases_lease_keep_alive(self.raw, us, interval_us) })
    }

    /// Stops the keep-alive, if one runs, and returns once no renewal can be
    /// written any more. The lease stays as it is.
    pub fn stop_keep_alive(&self) -> Result<()> {
        // SAFETY: live handle.
        error::check(unsafe { sys::leases_lease_keep_alive_stop(self.raw) })
    }

    /// Asks the store, without writing, whether the lease still holds its
    /// claim now on the authority's clock: `Ok(None)` it does,
    /// `Ok(Some(reason))` it does not, `reason` being the error its next
    /// operation would get ([`ErrorKind::Cancelled`], `Expired`, `LeaseLost`,
    /// `Closed`, `ClockRegressed`, …; [`Error::is_not_held`] for the first
    /// three). `Err` only when it could not ask (busy, storage, …), which says
    /// nothing about the claim.
    pub fn check(&self) -> Result<Option<Error>> {
        let mut why = sys::LEASES_OK;
        // SAFETY: live handle, valid out pointer.
        error::check(unsafe { sys::leases_lease_check(self.raw, &mut why) })?;
        Ok(reason(why))
    }

    /// Waits until this process knows the lease is over — its keep-alive was
    /// rejected or gave up, it closed here, an operation or
    /// [`check`](Lease::check) found the claim over — at most `timeout` (at
    /// most [`MAX_WAIT`]). `Ok(Some(reason))` as for `check`; `Ok(None)` when
    /// the timeout passed first; [`ErrorKind::Interrupted`] when `canceller`
    /// ended the wait. A coordinator's cancel reaches a kept-alive lease
    /// within one renewal interval.
    pub fn wait_lost(&self, timeout: Duration, canceller: Option<&Canceller>) -> Result<Option<Error>> {
        let us = wait_us("timeout", timeout)?;
        let mut why = sys::LEASES_OK;
        // SAFETY: live handles, valid out pointer; the canceller outlives the call.
        error::check(unsafe { sys::leases_lease_wait_lost(self.raw, us, canceller_ptr(canceller), &mut why) })?;
        Ok(reason(why))
    }
}

// ---- worker ---------------------------------------------------------------------

/// What a [`Worker`] does. Build it with [`WorkerConfig::new`] and the
/// methods that set the optional parts. Every zero means what it means in
/// every face of libleases (docs/workers.md, "the one loop").
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    production: String,
    worker: String,
    duration: Duration,
    interval: Option<Duration>,
    drain_timeout: Option<Duration>,
    max_jobs: u64,
    concurrency: u32,
    exit_when_empty: bool,
}

impl WorkerConfig {
    /// Claims of `production` recorded as `worker`, each for `duration`,
    /// renewed by a keep-alive while the handler runs.
    pub fn new(production: impl Into<String>, worker: impl Into<String>, duration: Duration) -> WorkerConfig {
        WorkerConfig {
            production: production.into(),
            worker: worker.into(),
            duration,
            interval: None,
            drain_timeout: None,
            max_jobs: 0,
            concurrency: 1,
            exit_when_empty: false,
        }
    }

    /// The keep-alive's renewal interval (default: a third of the duration).
    pub fn keep_alive_interval(mut self, interval: Duration) -> WorkerConfig {
        self.interval = Some(interval);
        self
    }

    /// After a drain stop, how long the running handlers may go on; then
    /// their jobs are given back (released), their leases report
    /// [`ErrorKind::Closed`], and [`Worker::run`] returns once the handlers
    /// have returned. Default, and zero: a drain waits as long as the jobs
    /// take.
    pub fn drain_timeout(mut self, timeout: Duration) -> WorkerConfig {
        self.drain_timeout = Some(timeout);
        self
    }

    /// Stop after this many claims (per call of [`Worker::run`]; a
    /// completion's claim of the next job counts); 0: no limit.
    pub fn max_jobs(mut self, n: u64) -> WorkerConfig {
        self.max_jobs = n;
        self
    }

    /// Handlers running at once, each on a thread of its own (at most
    /// 1024); 0 is 1, the default.
    pub fn concurrency(mut self, n: u32) -> WorkerConfig {
        self.concurrency = n;
        self
    }

    /// Stop once a claim waiting 100 ms finds nothing.
    pub fn exit_when_empty(mut self, yes: bool) -> WorkerConfig {
        self.exit_when_empty = yes;
        self
    }
}

#[derive(Debug, Default)]
struct StopFlags {
    drain: Arc<AtomicBool>,
    give_back: AtomicBool,
}

/// Stops a [`Worker`]. [`stop`](StopHandle::stop) drains: no new claim,
/// the running handlers finish (up to the drain timeout); a second
/// `stop` — or [`give_back`](StopHandle::give_back) — gives the jobs
/// still running back at once. [`Worker::run`] returns once its handlers
/// have returned. Cheap to clone, `Send + Sync`; both calls are lock-free
/// atomic operations, so async-signal-safe: [`stop_on_signals`] installs
/// SIGINT and SIGTERM handlers that call `stop`. The worker sees a stop
/// within 20 ms.
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<StopFlags>);

impl StopHandle {
    /// Asks the worker to drain and return; when it was asked already,
    /// gives the running jobs back at once (the second Ctrl-C).
    /// Async-signal-safe.
    pub fn stop(&self) {
        if self.0.drain.swap(true, Ordering::SeqCst) {
            self.0.give_back.store(true, Ordering::SeqCst);
        }
    }

    /// Asks the worker to give the running jobs back at once and return.
    /// Async-signal-safe; idempotent.
    pub fn give_back(&self) {
        self.0.drain.store(true, Ordering::SeqCst);
        self.0.give_back.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.drain.load(Ordering::SeqCst)
    }

    /// The drain flag itself: setting it to `true` is a drain stop (for
    /// `signal_hook::flag::register`; a second signal does not give back
    /// through it).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0.drain)
    }

    fn gives_back(&self) -> bool {
        self.0.give_back.load(Ordering::SeqCst)
    }
}

/// The stop the signal handlers of [`stop_on_signals`] reach: a leaked
/// `StopFlags` (one per call, so a handler never sees a freed one).
static SIGNAL_STOP: AtomicPtr<StopFlags> = AtomicPtr::new(ptr::null_mut());

extern "C" fn on_stop_signal(_: libc::c_int) {
    let flags = SIGNAL_STOP.load(Ordering::SeqCst);
    // SAFETY: set from a leaked Arc, never freed.
    if let Some(flags) = unsafe { flags.as_ref() } {
        // StopHandle::stop, by hand: atomics only.
        if flags.drain.swap(true, Ordering::SeqCst) {
            flags.give_back.store(true, Ordering::SeqCst);
        }
    }
}

/// Installs SIGINT and SIGTERM handlers (`sigaction` with `SA_ONSTACK`, as
/// `leases.h` requires, and `SA_RESTART`) that [`stop`](StopHandle::stop)
/// `stop`: the first signal drains the worker, the second gives its running
/// jobs back at once, as in every face of libleases. A later call moves the
/// handlers to its `stop`. Replaces the process's handlers of both signals.
pub fn stop_on_signals(stop: &StopHandle) -> Result<()> {
    let flags = Arc::into_raw(Arc::clone(&stop.0)) as *mut StopFlags;
    SIGNAL_STOP.store(flags, Ordering::SeqCst); // the previous one stays leaked: a handler may hold it
                                                // SAFETY: a plain sigaction with a handler that only touches atomics.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            if libc::sigaction(sig, &sa, ptr::null_mut()) != 0 {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("worker: cannot install a handler of signal {sig}: {}", std::io::Error::last_os_error()),
                ));
            }
        }
    }
    Ok(())
}

/// What one [`Worker::run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Leases claimed.
    pub claimed: u64,
    /// No longer counted (always 0): every completion claims the next job
    /// in its own commit when the loop would claim again anyway.
    pub claimed_in_completion: u64,
    /// Jobs completed with the handler's facts.
    pub completed: u64,
    /// Jobs given back: the drain timeout passed or a give-back stop.
    pub released: u64,
    /// Jobs failed for a retry because the handler returned `Err` or
    /// panicked: each comes back after the production's backoff, or is dead
    /// once its attempts are used up.
    pub retried: u64,
    /// Jobs the handler settled itself (an [`Execution`](crate::Execution)'s
    /// finish, `fail`, `release`): the worker left them as they were.
    pub by_handler: u64,
    /// Jobs the worker could not settle (the claim was already gone, or the
    /// store failed); their claims end at their expiry, or were already over.
    pub unsettled: u64,
    /// The loop gave running jobs back: the drain timeout passed, or a
    /// give-back stop (the second signal).
    pub drain_timed_out: bool,
}

/// The loop's counters now ([`Worker::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// "running", "stopped", "gave_back" or "failed".
    pub state: String,
    /// Leases out (or being claimed).
    pub out: u64,
    /// Leases claimed.
    pub claimed: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Attempts failed (for a retry or for good).
    pub failed: u64,
    /// Jobs given back.
    pub released: u64,
    /// Jobs the handler settled itself.
    pub settled: u64,
    /// Consecutive failed claims.
    pub failed_claims: u64,
    /// The pause they set before the next claim (zero after a claim that
    /// succeeded or found nothing).
    pub backoff: Duration,
}

/// A worker loop on one production, on the library's one loop (the
/// `leases_worker` handle, docs/workers.md): it hands out leases already
/// kept alive to [`concurrency`](WorkerConfig::concurrency) threads of
/// its own, each calling the handler; the library completes each job with
/// the [`Facts`] the handler returns (claiming the next job in the same
/// commit when it would claim again anyway), and owns back-off, max jobs,
/// exit-when-empty, drain and the drain timeout. A handler that returns
/// `Err(e)` fails the attempt for a retry (the production's backoff) with
/// `e`'s `Display` text as the reason; one that panics, with `worker: the
/// handler panicked: ` and the panic's message. A handler may settle the
/// lease itself (an [`Execution`](crate::Execution)'s finish, `fail`,
/// `release`); the worker then leaves it as it is.
///
/// `Send + Sync` (a static assertion in `tests/worker.rs` keeps it so):
/// [`run`](Worker::run) takes `&self`, so several threads may run the same
/// worker at once, sharing its stop. Dropping a `Worker` never writes to
/// the store; every write happens inside `run`.
///
/// ```
/// use std::time::Duration;
/// use leases::{Authority, Facts, Worker, WorkerConfig};
///
/// # fn main() -> Result<(), leases::Error> {
/// # let dir = std::env::temp_dir().join(format!("leases-doc-worker-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let auth = Authority::open(dir.join("jobs.db"))?;
/// auth.create_production("render")?;
/// auth.request_job("render", None, b"frame 1")?;
///
/// let config = WorkerConfig::new("render", "render-host-1", Duration::from_secs(120))
///     .concurrency(4)
///     .drain_timeout(Duration::from_secs(30))
///     .exit_when_empty(true); // a service leaves this off and stops on SIGTERM
/// let worker = Worker::new(&auth, config)?;
/// // leases::stop_on_signals(&worker.stop_handle())?; // 1st Ctrl-C drains, 2nd gives back
/// let report = worker.run(|lease| {
///     let frame = lease.payload()?;
///     Ok::<_, leases::Error>(Facts::new().metadata("bytes", frame.len()))
/// })?;
/// assert_eq!(report.completed, 1);
/// # drop(auth);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Worker<'a> {
    authority: &'a Authority,
    config: WorkerConfig,
    production: CString,
    worker: CString,
    stop: StopHandle,
    /// The handles of the running `run`s, for [`stats`](Worker::stats).
    current: Mutex<Vec<RawWorker>>,
}

/// A `leases_worker` handle, freed on drop.
#[derive(Debug)]
struct RawWorker(*mut sys::leases_worker);

// SAFETY: include/leases.h: "leases_worker: safe to share".
unsafe impl Send for RawWorker {}
// SAFETY: as above.
unsafe impl Sync for RawWorker {}

impl Drop for RawWorker {
    fn drop(&mut self) {
        // SAFETY: we own the handle; every thread using it has returned.
        unsafe { sys::leases_worker_free(self.0) }
    }
}

/// How long one `leases_worker_next` waits (a stop ends it at once).
const NEXT_WAIT_US: i64 = 1_000_000;
/// How often `run` looks at its stop flags.
const WATCH_US: i64 = 20_000;

impl<'a> Worker<'a> {
    /// Checks `config` ([`ErrorKind::InvalidArgument`],
    /// [`ErrorKind::InvalidDuration`]) before any store access.
    pub fn new(authority: &'a Authority, config: WorkerConfig) -> Result<Worker<'a>> {
        for (what, name) in [("production", &config.production), ("worker", &config.worker)] {
            if name.is_empty() {
                return Err(Error::new(ErrorKind::InvalidArgument, format!("worker: {what} must not be empty")));
            }
        }
        let production = c_in("production", &config.production)?;
        let worker = c_in("worker", &config.worker)?;
        let w = Worker {
            authority,
            config,
            production,
            worker,
            stop: StopHandle::default(),
            current: Mutex::new(Vec::new()),
        };
        drop(w.handle()?); // the library checks the options; nothing is claimed
        Ok(w)
    }

    fn handle(&self) -> Result<RawWorker> {
        let c = &self.config;
        let options = sys::leases_worker_options {
            size: std::mem::size_of::<sys::leases_worker_options>(),
            flags: if c.exit_when_empty { sys::LEASES_WORKER_EXIT_WHEN_EMPTY } else { 0 },
            concurrency: i32::try_from(c.concurrency).unwrap_or(i32::MAX),
            max_jobs: i64::try_from(c.max_jobs).unwrap_or(i64::MAX),
            interval_us: c.interval.map(duration_us).transpose()?.unwrap_or(0),
            drain_timeout_us: c.drain_timeout.map(|d| wait_us("worker: drain timeout", d)).transpose()?.unwrap_or(0),
        };
        let mut raw = ptr::null_mut();
        // SAFETY: live authority, valid strings and options, valid out pointer.
        error::check(unsafe {
            sys::leases_worker_new(
                self.authority.raw,
                self.production.as_ptr(),
                self.worker.as_ptr(),
                duration_us(c.duration)?,
                &options,
                &mut raw,
            )
        })?;
        Ok(RawWorker(raw))
    }

    /// A handle that stops this worker (clone it into another thread, or
    /// give it to [`stop_on_signals`]).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// The counters of the running [`run`](Worker::run) (the latest one
    /// started, when several run); `None` when none runs.
    pub fn stats(&self) -> Result<Option<WorkerStats>> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let Some(raw) = current.last() else { return Ok(None) };
        stats_of(raw.0).map(Some)
    }
}

/// The counters of a live handle.
fn stats_of(raw: *mut sys::leases_worker) -> Result<WorkerStats> {
    let mut out = ptr::null_mut();
    // SAFETY: a live handle, valid out pointer.
    error::check(unsafe { sys::leases_worker_stats_json(raw, &mut out) })?;
    // SAFETY: on success out is a library string we now own.
    let json = unsafe { crate::take_string(out) };
    let v: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| Error::new(ErrorKind::Internal, format!("worker: stats: {e}")))?;
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(WorkerStats {
        state: v["state"].as_str().unwrap_or_default().to_string(),
        out: n("out"),
        claimed: n("claimed"),
        completed: n("completed"),
        failed: n("failed"),
        released: n("released"),
        settled: n("settled"),
        failed_claims: n("failed_claims"),
        backoff: Duration::from_micros(n("backoff_us")),
    })
}

impl Worker<'_> {
    /// Runs the loop until a stop, `max_jobs` claims, or (with
    /// `exit_when_empty`) an empty production, calling `handler` on
    /// [`concurrency`](WorkerConfig::concurrency) scoped threads; returns
    /// once every handler has returned. `Err` for an unknown production, a
    /// closed authority or another failure of a claim that is not
    /// transient; `busy`, `storage`, `outcome_unknown` and `clock_regressed`
    /// claims are tried again with the loop's back-off (50 ms doubling to
    /// 5 s). A handler's error becomes the attempt's reason through
    /// `Display` (`Box<dyn Error>`, `anyhow::Error`, [`Error`] and `&str`
    /// all work; wrap a `Debug`-only error with `format!("{e:?}")`).
    pub fn run<F, E>(&self, handler: F) -> Result<WorkerReport>
    where
        F: Fn(&Lease) -> std::result::Result<Facts, E> + Sync,
        E: fmt::Display,
    {
        let raw = self.handle()?;
        let ptr = raw.0;
        self.current.lock().unwrap_or_else(|e| e.into_inner()).push(raw);
        let shared = Shared {
            raw: ptr,
            stop: &self.stop,
            drained: AtomicBool::new(false),
            gave_back: AtomicBool::new(false),
            unsettled: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
            error: Mutex::new(None),
        };
        let threads = self.config.concurrency.max(1);
        let end = std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| shared.serve(&handler));
            }
            let end = shared.watch();
            if end.is_err() {
                // The stops can no longer be passed on: end the loop, so
                // the threads return, giving the jobs out back.
                // SAFETY: live handle.
                unsafe { sys::leases_worker_stop(ptr, sys::LEASES_STOP_GIVE_BACK) };
            }
            end
        });
        let stats = stats_of(ptr);
        let raw = {
            let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
            let at = current.iter().position(|w| w.0 == ptr).expect("this run's handle");
            current.remove(at)
        };
        drop(raw);
        let stats = stats?;
        if let Some(e) = shared.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(WorkerReport {
            claimed: stats.claimed,
            claimed_in_completion: 0,
            completed: stats.completed,
            released: stats.released + shared.given_back.into_inner(),
            retried: shared.retried.into_inner(),
            by_handler: stats.settled,
            unsettled: shared.unsettled.into_inner(),
            drain_timed_out: end? == sys::LEASES_WORKER_GAVE_BACK,
        })
    }
}

/// What the threads of one `run` share.
struct Shared<'s> {
    raw: *mut sys::leases_worker,
    stop: &'s StopHandle,
    /// The stops passed on to the loop.
    drained: AtomicBool,
    gave_back: AtomicBool,
    unsettled: AtomicU64,
    retried: AtomicU64,
    given_back: AtomicU64,
    error: Mutex<Option<Error>>,
}

// SAFETY: the handle is safe to share (leases.h); the rest is Sync.
unsafe impl Sync for Shared<'_> {}

impl Shared<'_> {
    /// Passes the stop flags on to the loop, each once: called by the
    /// watching thread every 20 ms, and by a handler's thread before it
    /// settles (a handler that stopped the worker is heard before its
    /// completion would claim the next job).
    fn pass_stop(&self) -> Result<()> {
        if self.stop.gives_back() && !self.gave_back.swap(true, Ordering::SeqCst) {
            self.drained.store(true, Ordering::SeqCst);
            // SAFETY: live handle.
            error::check(unsafe { sys::leases_worker_stop(self.raw, sys::LEASES_STOP_GIVE_BACK) })?;
        } else if self.stop.is_stopped() && !self.drained.swap(true, Ordering::SeqCst) {
            // SAFETY: live handle.
            error::check(unsafe { sys::leases_worker_stop(self.raw, sys::LEASES_STOP_DRAIN) })?;
        }
        Ok(())
    }

    /// Passes the stop flags on to the loop until it ends; its end.
    fn watch(&self) -> Result<i32> {
        loop {
            self.pass_stop()?;
            let mut end = sys::LEASES_WORKER_RUNNING;
            // SAFETY: live handle, valid out pointer.
            error::check(unsafe { sys::leases_worker_wait(self.raw, WATCH_US, ptr::null_mut(), &mut end) })?;
            if end != sys::LEASES_WORKER_RUNNING {
                return Ok(end);
            }
        }
    }
    /// One thread: the next job, the handler, its result, until the loop
    /// hands out nothing more.
    fn serve<F, E>(&self, handler: &F)
    where
        F: Fn(&Lease) -> std::result::Result<Facts, E> + Sync,
        E: fmt::Display,
    {
        loop {
            let mut out = ptr::null_mut();
            // SAFETY: live handle, valid out pointer.
            let st = unsafe { sys::leases_worker_next(self.raw, NEXT_WAIT_US, &mut out) };
            if st == sys::LEASES_NOTHING_TO_CLAIM {
                continue;
            }
            if st != sys::LEASES_OK {
                let mut first = self.error.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert_with(|| Error::from_status(st));
                return;
            }
            if out.is_null() {
                return;
            }
            let lease = match Lease::borrowed(out) {
                Ok(lease) => lease,
                Err(e) => {
                    let text = e.to_string();
                    if self.settle(out, sys::LEASES_RESULT_FAIL_RETRY, text.as_bytes()) != sys::LEASES_OK {
                        self.unsettled.fetch_add(1, Ordering::SeqCst);
                    }
                    continue;
                }
            };
            let result = panic::catch_unwind(AssertUnwindSafe(|| handler(&lease)));
            let (outcome, text) = match result {
                Ok(Ok(facts)) => match crate::facts_ptr(&facts) {
                    Ok(json) => (sys::LEASES_RESULT_COMPLETE, json.map(CString::into_bytes).unwrap_or_default()),
                    Err(e) => (sys::LEASES_RESULT_FAIL_RETRY, e.to_string().into_bytes()),
                },
                Ok(Err(e)) => (sys::LEASES_RESULT_FAIL_RETRY, e.to_string().into_bytes()),
                Err(p) => (sys::LEASES_RESULT_FAIL_RETRY, format!("{HANDLER_PANIC}: {}", panic_text(&*p)).into_bytes()),
            };
            let outcome = if settled_by_handler(&lease) { sys::LEASES_RESULT_SETTLED } else { outcome };
            if let Err(e) = self.pass_stop() {
                self.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
            }
            drop(lease); // the worker's: not freed
            let mut st = self.settle(out, outcome, &text);
            let mut failed = outcome == sys::LEASES_RESULT_FAIL_RETRY;
            if st == sys::LEASES_INVALID_ARGUMENT {
                // Refused before anything was written (facts the library
                // will not take): the attempt fails with why, and the job is
                // never left out.
                let why = Error::from_status(st).to_string();
                st = self.settle(out, sys::LEASES_RESULT_FAIL_RETRY, why.as_bytes());
                failed = true;
            }
            match st {
                sys::LEASES_OK if failed => {
                    self.retried.fetch_add(1, Ordering::SeqCst);
                }
                sys::LEASES_OK => {}
                sys::LEASES_CLOSED => {
                    // The worker gave the job back already (drain timeout, give-back stop).
                    self.given_back.fetch_add(1, Ordering::SeqCst);
                }
                _ => {
                    self.unsettled.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn settle(&self, lease: *mut sys::leases_lease, outcome: i32, text: &[u8]) -> sys::leases_status {
        // SAFETY: a lease this worker handed out, not settled yet; bytes
        // valid for their length.
        unsafe { sys::leases_worker_settle(self.raw, lease, outcome, text.as_ptr().cast(), text.len()) }
    }
}

/// Whether the handler closed the lease itself (a local question: a zero
/// wait asks nothing of the store).
fn settled_by_handler(lease: &Lease) -> bool {
    matches!(lease.wait_lost(Duration::ZERO, None), Ok(Some(e)) if e.kind() == ErrorKind::Closed)
}

/// The reason of an attempt whose handler panicked starts so.
const HANDLER_PANIC: &str = "worker: the handler panicked";

fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str)).unwrap_or("(not text)")
}
