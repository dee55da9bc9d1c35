//! The worker runtime: waiting claims and their [`Canceller`], keep-alive and
//! the "is it still mine?" questions on a [`Lease`], and [`Worker`], the loop
//! that claims, keeps alive, runs a handler and settles each job, stopping
//! cleanly on a [`StopHandle`] (docs/rust.md, "Writing a worker").

use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// methods that set the optional parts.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    production: String,
    worker: String,
    duration: Duration,
    interval: Option<Duration>,
    drain_timeout: Option<Duration>,
    max_jobs: u64,
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
            exit_when_empty: false,
        }
    }

    /// The keep-alive's renewal interval (default: a third of the duration).
    pub fn keep_alive_interval(mut self, interval: Duration) -> WorkerConfig {
        self.interval = Some(interval);
        self
    }

    /// After a stop, how long a running handler may go on; then its job is
    /// given back (released) and [`Worker::run`] returns without waiting for
    /// it. Default: none, the running handler always finishes.
    pub fn drain_timeout(mut self, timeout: Duration) -> WorkerConfig {
        self.drain_timeout = Some(timeout);
        self
    }

    /// Stop after this many claims (per call of [`Worker::run`]); 0: no limit.
    pub fn max_jobs(mut self, n: u64) -> WorkerConfig {
        self.max_jobs = n;
        self
    }

    /// Stop once a claim waiting 100 ms finds nothing.
    pub fn exit_when_empty(mut self, yes: bool) -> WorkerConfig {
        self.exit_when_empty = yes;
        self
    }
}

/// Stops a [`Worker`]: no new claim, the running handler finishes (or, past
/// the drain timeout, its job is released), [`Worker::run`] returns. Cheap to
/// clone, `Send + Sync`. [`stop`](StopHandle::stop) is one store into an
/// `AtomicBool`, which is lock-free and so async-signal-safe: call it from a
/// signal handler (installed with `SA_ONSTACK`, as `leases.h` requires) or
/// from any thread; or hand [`flag`](StopHandle::flag) to
/// `signal_hook::flag::register`. The loop waits in slices of at most 100 ms
/// and sees a stop within one slice.
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Asks the worker to drain and return. Async-signal-safe; idempotent.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself: setting it to `true` is [`stop`](StopHandle::stop).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// What one [`Worker::run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Leases claimed.
    pub claimed: u64,
    /// Of `claimed`, those the previous job's completion claimed in its own
    /// commit ([`Lease::complete_and_claim_next`]): one commit for both.
    pub claimed_in_completion: u64,
    /// Jobs completed with the handler's facts.
    pub completed: u64,
    /// Jobs given back: the keep-alive could not start, or the drain timeout
    /// passed.
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
    /// The drain timeout passed: the running job was released and its
    /// handler left to finish on its own thread.
    pub drain_timed_out: bool,
}

/// A worker loop on one production: claims one job at a time with a waiting
/// claim, runs the handler on its own thread with the lease kept alive,
/// completes the job with the [`Facts`] the handler returns (claiming the
/// next job in the same commit, [`Lease::complete_and_claim_next`], when the
/// loop would claim again anyway: not after a stop or at `max_jobs`), or fails it for a
/// retry ([`Lease::fail_retry`] with the production's backoff) when the
/// handler returns `Err` or panics (the attempt's reason says which; the
/// error itself is not shown, as `E` need not be `Display`). A handler may settle
/// the lease itself (an [`Execution`](crate::Execution)'s finish, `fail`,
/// `release`); the worker then leaves it as it is.
///
/// `Send + Sync` (a static assertion in `tests/worker.rs` keeps it so):
/// [`run`](Worker::run) takes `&self`, so several threads may run the same
/// worker at once for concurrency, sharing its stop. Dropping a `Worker`
/// never writes to the store; every write happens inside `run`.
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
///     .drain_timeout(Duration::from_secs(30))
///     .exit_when_empty(true); // a service leaves this off and stops on SIGTERM
/// let worker = Worker::new(&auth, config)?;
/// let stop = worker.stop_handle(); // stop.stop() from a signal handler or another thread
/// let report = worker.run(|lease| {
///     let frame = lease.payload()?;
///     Ok::<_, leases::Error>(Facts::new().metadata("bytes", frame.len()))
/// })?;
/// assert_eq!(report.completed, 1);
/// # drop(stop);
/// # drop(auth);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Worker<'a> {
    authority: &'a Authority,
    config: WorkerConfig,
    stop: StopHandle,
}

/// The wait of one claim: the loop checks its stop flag between slices.
const SLICE: Duration = Duration::from_millis(100);
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(5);

impl<'a> Worker<'a> {
    /// Checks `config` ([`ErrorKind::InvalidArgument`],
    /// [`ErrorKind::InvalidDuration`]) before any store access.
    pub fn new(authority: &'a Authority, config: WorkerConfig) -> Result<Worker<'a>> {
        for (what, name) in [("production", &config.production), ("worker", &config.worker)] {
            c_in(what, name)?;
            if name.is_empty() {
                return Err(Error::new(ErrorKind::InvalidArgument, format!("worker: {what} must not be empty")));
            }
        }
        duration_us(config.duration)?;
        if let Some(interval) = config.interval {
            duration_us(interval)?;
            if interval < Duration::from_millis(1) || interval >= config.duration {
                return Err(Error::new(
                    ErrorKind::InvalidDuration,
                    "worker: the keep-alive interval must be at least 1 ms and below the duration",
                ));
            }
        }
        if let Some(drain) = config.drain_timeout {
            wait_us("worker: drain timeout", drain)?;
        }
        Ok(Worker { authority, config, stop: StopHandle::default() })
    }

    /// A handle that stops this worker (clone it into a signal handler's
    /// static or another thread).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Runs the loop until a stop, `max_jobs` claims, or (with
    /// `exit_when_empty`) an empty production. `Err` for an unknown
    /// production, a closed authority or another failure of a claim that is
    /// not transient; `busy`, `storage`, `outcome_unknown` and
    /// `clock_regressed` claims are tried again with back-off (50 ms doubling
    /// to 5 s). The handler runs on a thread of its own (hence `Send + Sync +
    /// 'static`): past the drain timeout it is left running, its lease then
    /// reporting [`ErrorKind::Closed`].
    pub fn run<F, E>(&self, handler: F) -> Result<WorkerReport>
    where
        F: Fn(&Lease) -> std::result::Result<Facts, E> + Send + Sync + 'static,
    {
        let handler = Arc::new(handler);
        let mut report = WorkerReport::default();
        let mut pause = RETRY_MIN;
        // The next job, when the last completion claimed it in its commit.
        let mut next: Option<Lease> = None;
        loop {
            let lease = match next.take() {
                Some(lease) if self.stop.is_stopped() => {
                    // Claimed by the completion as the stop came: no
                    // handler starts after a stop, so the job goes back.
                    report.claimed += 1;
                    release(&lease, &mut report);
                    break;
                }
                Some(lease) => lease,
                None => {
                    if !self.may_claim(&report) {
                        break;
                    }
                    let c = &self.config;
                    match self.authority.claim_wait(&c.production, &c.worker, c.duration, SLICE, None) {
                        Ok(Some(lease)) => {
                            pause = RETRY_MIN;
                            lease
                        }
                        Ok(None) if c.exit_when_empty => break,
                        Ok(None) => continue,
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::Busy
                                    | ErrorKind::Storage
                                    | ErrorKind::OutcomeUnknown
                                    | ErrorKind::ClockRegressed
                            ) =>
                        {
                            self.pause(pause);
                            pause = (pause * 2).min(RETRY_MAX);
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            report.claimed += 1;
            if !self.handle(lease, &handler, &mut report, &mut next) {
                break;
            }
        }
        Ok(report)
    }

    /// Whether the loop claims another job: no stop, and `max_jobs` leaves
    /// a claim.
    fn may_claim(&self, report: &WorkerReport) -> bool {
        !self.stop.is_stopped() && (self.config.max_jobs == 0 || report.claimed < self.config.max_jobs)
    }

    /// Sleeps `d`, in slices, unless a stop comes first.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stop.is_stopped() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(SLICE));
        }
    }

    /// Runs the handler on one lease, kept alive meanwhile, and settles the
    /// job; false when the drain timeout passed (the job was released). A
    /// completion when the loop would claim again anyway claims the next job
    /// in the same commit into `next`.
    fn handle<F, E>(&self, lease: Lease, handler: &Arc<F>, report: &mut WorkerReport, next: &mut Option<Lease>) -> bool
    where
        F: Fn(&Lease) -> std::result::Result<Facts, E> + Send + Sync + 'static,
    {
        let lease = Arc::new(lease);
        if lease.keep_alive(self.config.duration, self.config.interval).is_err() {
            release(&lease, report);
            return true;
        }
        let (tx, rx) = mpsc::channel::<Option<Facts>>();
        let thread = {
            let (lease, handler) = (Arc::clone(&lease), Arc::clone(handler));
            // A panic drops tx unsent: the job is failed for a retry, the
            // process goes on.
            std::thread::spawn(move || {
                let _ = tx.send(handler(&lease).ok());
            })
        };
        let mut deadline: Option<Instant> = None;
        let outcome = loop {
            if deadline.is_none() && self.stop.is_stopped() {
                deadline = self.config.drain_timeout.map(|t| Instant::now() + t);
            }
            let step = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()).min(SLICE));
            if deadline.is_some() && step.is_zero() {
                break None;
            }
            match rx.recv_timeout(step) {
                Ok(Some(facts)) => break Some(Ok(facts)),
                Ok(None) => break Some(Err(HANDLER_ERR)),
                Err(mpsc::RecvTimeoutError::Disconnected) => break Some(Err(HANDLER_PANIC)),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        };
        match outcome {
            None => {
                // The drain timeout passed: give the job back; the handler's
                // thread finishes on its own (detached), its lease closed.
                drop(thread);
                report.drain_timed_out = true;
                release(&lease, report);
                false
            }
            Some(result) => {
                let _ = thread.join();
                let settled = match result {
                    Ok(facts) if self.may_claim(report) => {
                        lease.complete_and_claim_next(&facts, self.config.duration).map(|claimed| {
                            if claimed.is_some() {
                                report.claimed_in_completion += 1;
                            }
                            *next = claimed;
                            &mut report.completed
                        })
                    }
                    Ok(facts) => lease.complete(&facts).map(|()| &mut report.completed),
                    Err(reason) => lease.fail_retry(reason, None).map(|()| &mut report.retried),
                };
                match settled {
                    Ok(n) => *n += 1,
                    // The handler settled it (an execution's finish, ...).
                    Err(e) if e.kind() == ErrorKind::Closed => report.by_handler += 1,
                    Err(_) => report.unsettled += 1,
                }
                let _ = lease.stop_keep_alive();
                true
            }
        }
    }
}

/// The reasons of the attempts a handler failed.
const HANDLER_ERR: &str = "worker: the handler returned an error";
const HANDLER_PANIC: &str = "worker: the handler panicked";

/// Gives the job back, stopping its keep-alive first.
fn release(lease: &Lease, report: &mut WorkerReport) {
    let _ = lease.stop_keep_alive();
    match lease.release() {
        Ok(()) => report.released += 1,
        Err(e) if e.kind() == ErrorKind::Closed => report.by_handler += 1, // settled by the handler
        Err(_) => report.unsettled += 1,
    }
}
