//! Retries, run-at and priorities (C ABI revision 1): `RetryPolicy`,
//! `RequestOptions`, and the calls that take them or redrive jobs.

use std::ptr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{check, Error, ErrorKind, Result};
use crate::{c_in, check_len, format_duration, opt_ptr, sys, take_string, Authority, JobState, Lease, MAX_PAYLOAD_LEN};

/// The longest delay, run-at distance and backoff cap: 366 days
/// (`LEASES_MAX_DELAY_US`).
pub const MAX_DELAY: Duration = Duration::from_micros(sys::LEASES_MAX_DELAY_US as u64);
/// The highest priority (`LEASES_MAX_PRIORITY`); 0 is the lowest.
pub const MAX_PRIORITY: u32 = sys::LEASES_MAX_PRIORITY as u32;
/// The most attempts a policy may allow (`LEASES_MAX_ATTEMPTS`).
pub const MAX_ATTEMPTS: u32 = sys::LEASES_MAX_ATTEMPTS as u32;

/// A production's retry policy: how many claims a job gets before it is
/// [`JobState::Dead`], and how long it waits after each one that ended
/// without completion. The wait after attempt n is `backoff_base · 2^(n-1)`,
/// scaled by a random factor within ±`jitter_percent` %, then capped at
/// `backoff_cap`.
///
/// `Default` is the library's default (`LEASES_RETRY_POLICY_INIT`): 25
/// attempts, 1 s doubling to a cap of 1 h, ±20 % jitter. Change fields with
/// the builder methods; the library checks the bounds (1 ..
/// [`MAX_ATTEMPTS`] attempts, jitter 0 .. 100, `backoff_base` ..=
/// `backoff_cap` ..= [`MAX_DELAY`], whole microseconds) and refuses others
/// with [`ErrorKind::InvalidArgument`], writing nothing.
///
/// ```
/// use std::time::Duration;
/// use leases::RetryPolicy;
///
/// let policy = RetryPolicy::default().max_attempts(3).backoff_base(Duration::ZERO);
/// assert_eq!((policy.max_attempts, policy.backoff_cap), (3, Duration::from_secs(3600)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Claims a job may have; once that many ended without completion it
    /// is dead.
    pub max_attempts: u32,
    /// The wait after the first attempt (zero: retry at once).
    pub backoff_base: Duration,
    /// The longest wait.
    pub backoff_cap: Duration,
    /// The jitter, in percent of the wait, either way.
    pub jitter_percent: u32,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 25,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(3600),
            jitter_percent: 20,
        }
    }
}

impl RetryPolicy {
    /// The default policy (the same as `RetryPolicy::default()`).
    pub fn new() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// Sets the number of claims a job may have.
    pub fn max_attempts(mut self, n: u32) -> RetryPolicy {
        self.max_attempts = n;
        self
    }

    /// Sets the wait after the first attempt.
    pub fn backoff_base(mut self, d: Duration) -> RetryPolicy {
        self.backoff_base = d;
        self
    }

    /// Sets the longest wait.
    pub fn backoff_cap(mut self, d: Duration) -> RetryPolicy {
        self.backoff_cap = d;
        self
    }

    /// Sets the jitter in percent.
    pub fn jitter_percent(mut self, p: u32) -> RetryPolicy {
        self.jitter_percent = p;
        self
    }

    /// The C struct, or `InvalidArgument` for a value the struct cannot
    /// carry exactly (nothing is rounded or clamped; ranges are the
    /// library's to check).
    fn to_sys(self) -> Result<sys::leases_retry_policy> {
        Ok(sys::leases_retry_policy {
            size: std::mem::size_of::<sys::leases_retry_policy>(),
            max_attempts: to_i32("max_attempts", self.max_attempts)?,
            jitter_percent: to_i32("jitter_percent", self.jitter_percent)?,
            backoff_base_us: delay_us("backoff_base", self.backoff_base)?,
            backoff_cap_us: delay_us("backoff_cap", self.backoff_cap)?,
        })
    }
}

/// How a job is requested ([`Authority::request_job_with`]): its priority
/// (0 ..= [`MAX_PRIORITY`], higher is claimed first) and when it becomes
/// claimable, at a run-at time or after a delay, both on the authority's
/// clock (the caller never supplies "now"). The default is priority 0,
/// claimable at once: exactly [`Authority::request_job`].
///
/// A run-at in the past means now. Giving both a run-at and a delay is
/// [`ErrorKind::InvalidArgument`] from the request, as is a delay over
/// [`MAX_DELAY`] or a run-at further ahead than that; a delay or run-at that
/// is not a whole number of microseconds is refused before the call
/// (nothing is rounded).
///
/// ```
/// use std::time::Duration;
/// use leases::RequestOptions;
///
/// let urgent = RequestOptions::new().priority(10);
/// let later = RequestOptions::new().delay(Duration::from_secs(60));
/// assert_eq!((urgent.priority, later.delay), (10, Some(Duration::from_secs(60))));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RequestOptions {
    /// 0 ..= [`MAX_PRIORITY`]; higher is claimed first.
    pub priority: u32,
    /// Claimable from this authority time on.
    pub run_at: Option<SystemTime>,
    /// Claimable this long after the request, on the authority's clock.
    pub delay: Option<Duration>,
}

impl RequestOptions {
    /// Priority 0, claimable at once.
    pub fn new() -> RequestOptions {
        RequestOptions::default()
    }

    /// Sets the priority.
    pub fn priority(mut self, p: u32) -> RequestOptions {
        self.priority = p;
        self
    }

    /// Makes the job claimable from `t` on (an authority time, as the
    /// records carry them).
    pub fn run_at(mut self, t: SystemTime) -> RequestOptions {
        self.run_at = Some(t);
        self
    }

    /// Makes the job claimable `d` after the request.
    pub fn delay(mut self, d: Duration) -> RequestOptions {
        self.delay = Some(d);
        self
    }

    fn to_sys(self) -> Result<sys::leases_request_options> {
        Ok(sys::leases_request_options {
            size: std::mem::size_of::<sys::leases_request_options>(),
            priority: to_i32("priority", self.priority)?,
            run_at_unix_us: self.run_at.map_or(Ok(0), unix_us)?,
            delay_us: self.delay.map_or(Ok(0), |d| delay_us("delay", d))?,
        })
    }
}

fn to_i32(what: &str, v: u32) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("{what} {v} is out of range")))
}

/// A delay or backoff as whole microseconds up to [`MAX_DELAY`]; zero is
/// passed as zero (its meaning is the field's).
fn delay_us(what: &str, d: Duration) -> Result<i64> {
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {} is not a whole number of microseconds (nothing is rounded)", format_duration(d)),
        ));
    }
    if d > MAX_DELAY {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {} is longer than the limit of 366 days", format_duration(d)),
        ));
    }
    // d <= 366 days, so the microsecond count fits an i64.
    Ok(d.as_micros() as i64)
}

/// An authority time as unix microseconds (before 1970 is negative, which
/// the library takes as a time in the past: now).
fn unix_us(t: SystemTime) -> Result<i64> {
    let (d, sign) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d, 1),
        Err(e) => (e.duration(), -1),
    };
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "run_at is not a whole number of microseconds (nothing is rounded)",
        ));
    }
    i64::try_from(d.as_micros())
        .map(|us| sign * us)
        .map_err(|_| Error::new(ErrorKind::InvalidArgument, "run_at is out of range"))
}

impl Authority {
    /// Creates a production with a retry policy. Creating an existing name
    /// succeeds if its policy is the same, and is [`ErrorKind::WrongState`]
    /// if it differs (change it with [`set_retry_policy`](Authority::set_retry_policy)).
    /// [`create_production`](Authority::create_production) gives the default
    /// policy and returns an existing production whatever its policy.
    pub fn create_production_with_policy(&self, name: &str, policy: &RetryPolicy) -> Result<()> {
        let policy = policy.to_sys()?;
        let name = c_in("production", name)?;
        // SAFETY: live handle, valid string, a policy struct with its size set.
        check(unsafe { sys::leases_production_create_v2(self.raw, name.as_ptr(), &policy) })
    }

    /// The coordinator's change of a production's policy
    /// (`RetryPolicy::default()` restores the default). It applies to every
    /// attempt that ends after it; a `policy_changed` event records it.
    pub fn set_retry_policy(&self, production: &str, policy: &RetryPolicy) -> Result<()> {
        let policy = policy.to_sys()?;
        let production = c_in("production", production)?;
        // SAFETY: live handle, valid string, a policy struct with its size set.
        check(unsafe { sys::leases_production_set_policy(self.raw, production.as_ptr(), &policy) })
    }

    /// [`request_job`](Authority::request_job) with a priority and a run-at
    /// or delay. A repeated keyed request returns the existing job as it is:
    /// the first request's options stand.
    pub fn request_job_with(
        &self,
        production: &str,
        key: Option<&str>,
        payload: &[u8],
        options: &RequestOptions,
    ) -> Result<String> {
        check_len("payload", payload.len(), MAX_PAYLOAD_LEN, "LEASES_MAX_PAYLOAD_LEN", ErrorKind::InvalidArgument)?;
        let options = options.to_sys()?;
        let production = c_in("production", production)?;
        let key = key.map(|k| c_in("key", k)).transpose()?;
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid strings, payload valid for its length,
        // an options struct with its size set, valid out pointer.
        check(unsafe {
            sys::leases_job_request_v2(
                self.raw,
                production.as_ptr(),
                opt_ptr(&key),
                payload.as_ptr(),
                payload.len(),
                &options,
                &mut out,
            )
        })?;
        // SAFETY: on success out is a library string we now own.
        Ok(unsafe { take_string(out) })
    }

    /// The coordinator's redrive of one failed, dead or cancelled job (no
    /// secret): it becomes requested and claimable at once with its attempts
    /// reset to 0 (its history keeps the old ones). Any other state is
    /// [`ErrorKind::WrongState`].
    pub fn retry_job(&self, production: &str, job_id: &str) -> Result<()> {
        let (production, job_id) = (c_in("production", production)?, c_in("job id", job_id)?);
        // SAFETY: live handle, valid strings.
        check(unsafe { sys::leases_job_retry(self.raw, production.as_ptr(), job_id.as_ptr()) })
    }

    /// Redrives every job of `production` in `state` (`Failed`, `Dead` or
    /// `Cancelled`; any other is [`ErrorKind::InvalidArgument`]) as
    /// [`retry_job`](Authority::retry_job) does each, and returns how many.
    /// It runs in transactions of a few hundred jobs: each job's redrive is
    /// atomic, the whole is not, so after an error list the jobs to see what
    /// is left.
    pub fn redrive(&self, production: &str, state: &JobState) -> Result<u64> {
        let production = c_in("production", production)?;
        let state = c_in("state", state.as_str())?;
        let mut count = 0i64;
        // SAFETY: live handle, valid strings, valid out pointer.
        check(unsafe { sys::leases_production_redrive(self.raw, production.as_ptr(), state.as_ptr(), &mut count) })?;
        Ok(count.max(0) as u64)
    }
}

impl Lease {
    /// Fails the job as retryable: the attempt ends and the job returns to
    /// the queue after `delay` (`None`: the policy's backoff for this
    /// attempt; else 1 µs ..= [`MAX_DELAY`], whole microseconds), or becomes
    /// [`JobState::Dead`] if this was its last attempt. `reason` may be
    /// empty (at most [`MAX_REASON_LEN`](crate::MAX_REASON_LEN) bytes). The
    /// claim must be unexpired. Success closes the lease.
    ///
    /// `Some(Duration::ZERO)` is [`ErrorKind::InvalidArgument`]: the C call
    /// reads 0 as "the policy's backoff", which `None` says; a retry at once
    /// is a policy whose `backoff_base` is zero.
    pub fn fail_retry(&self, reason: &str, delay: Option<Duration>) -> Result<()> {
        let us = match delay {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "a retry delay must be positive (None: the policy's backoff)",
                ))
            }
            Some(d) => delay_us("delay", d)?,
        };
        let reason = c_in("reason", reason)?;
        // SAFETY: live handle, valid string.
        check(unsafe { sys::leases_lease_fail_retry(self.raw, reason.as_ptr(), us) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_the_librarys_retry_policy_init() {
        let p = RetryPolicy::default().to_sys().unwrap();
        assert_eq!(
            (p.max_attempts, p.jitter_percent, p.backoff_base_us, p.backoff_cap_us),
            (25, 20, 1_000_000, 3_600_000_000)
        );
        assert_eq!(p.size, std::mem::size_of::<sys::leases_retry_policy>());
        assert_eq!(RetryPolicy::new(), RetryPolicy::default());
    }

    #[test]
    fn a_run_at_maps_to_unix_microseconds_exactly_either_side_of_1970() {
        assert_eq!(unix_us(UNIX_EPOCH + Duration::from_micros(1_500_001)).unwrap(), 1_500_001);
        assert_eq!(unix_us(UNIX_EPOCH - Duration::from_micros(7)).unwrap(), -7);
        let err = unix_us(UNIX_EPOCH + Duration::from_nanos(1_500)).unwrap_err();
        assert_eq!((err.kind(), err.status()), (ErrorKind::InvalidArgument, None));
    }

    #[test]
    fn values_the_c_structs_cannot_carry_are_refused_not_clamped() {
        let err = RetryPolicy::default().max_attempts(u32::MAX).to_sys().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        let err = RequestOptions::new().delay(MAX_DELAY + Duration::from_micros(1)).to_sys().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        let err = RequestOptions::new().priority(u32::MAX).to_sys().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
}
