//! Retention and pruning (C ABI revision 1): `RetentionPolicy`,
//! `PruneOptions`, and the calls that set, read and apply them.

use std::path::Path;
use std::time::Duration;

use crate::error::{check, Error, ErrorKind, Result};
use crate::{c_in, opt_ptr, sys, Authority};

/// The longest duration of a retention policy, and of a prune's age: 36500
/// days (`LEASES_MAX_RETENTION_US`).
pub const MAX_RETENTION: Duration = Duration::from_micros(sys::LEASES_MAX_RETENTION_US as u64);

/// How long a production keeps its finished jobs, by state (from when each
/// finished), and its events (from when each was recorded). `None` keeps
/// them for good. `Default` is the library's default: completed and
/// cancelled jobs 7 days, failed and dead jobs 30 days, events 7 days.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RetentionPolicy {
    /// How long a completed job is kept after it finished.
    pub completed: Option<Duration>,
    /// How long a failed job is kept after it finished.
    pub failed: Option<Duration>,
    /// How long a dead job is kept after it finished.
    pub dead: Option<Duration>,
    /// How long a cancelled job is kept after it finished.
    pub cancelled: Option<Duration>,
    /// How long an event is kept after it was recorded.
    pub events: Option<Duration>,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            completed: Some(DAY * 7),
            failed: Some(DAY * 30),
            dead: Some(DAY * 30),
            cancelled: Some(DAY * 7),
            events: Some(DAY * 7),
        }
    }
}

impl RetentionPolicy {
    /// How long completed jobs are kept (`None`: for good).
    pub fn completed(mut self, d: Option<Duration>) -> Self {
        self.completed = d;
        self
    }
    /// How long failed jobs are kept.
    pub fn failed(mut self, d: Option<Duration>) -> Self {
        self.failed = d;
        self
    }
    /// How long dead jobs are kept.
    pub fn dead(mut self, d: Option<Duration>) -> Self {
        self.dead = d;
        self
    }
    /// How long cancelled jobs are kept.
    pub fn cancelled(mut self, d: Option<Duration>) -> Self {
        self.cancelled = d;
        self
    }
    /// How long events are kept.
    pub fn events(mut self, d: Option<Duration>) -> Self {
        self.events = d;
        self
    }

    fn to_sys(self) -> Result<sys::leases_retention_policy> {
        Ok(sys::leases_retention_policy {
            size: std::mem::size_of::<sys::leases_retention_policy>(),
            keep_completed_us: keep_us("completed", self.completed)?,
            keep_failed_us: keep_us("failed", self.failed)?,
            keep_dead_us: keep_us("dead", self.dead)?,
            keep_cancelled_us: keep_us("cancelled", self.cancelled)?,
            keep_events_us: keep_us("events", self.events)?,
        })
    }
}

/// A retention duration in µs: `None` is 0 (for good); `Some` must be a
/// positive whole number of microseconds up to [`MAX_RETENTION`].
fn keep_us(what: &str, d: Option<Duration>) -> Result<i64> {
    let Some(d) = d else { return Ok(0) };
    if d.is_zero() || !d.subsec_nanos().is_multiple_of(1_000) || d > MAX_RETENTION {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} retention {d:?} must be a positive whole number of microseconds up to 36500 days"),
        ));
    }
    Ok(d.as_micros() as i64)
}

fn from_us(us: i64) -> Option<Duration> {
    (us > 0).then(|| Duration::from_micros(us as u64))
}

/// What [`Authority::prune`] deletes: one production or every one, by each
/// production's policy or by an age, with an archive written and synced
/// first, or only counting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneOptions {
    /// One production (`None`: every production).
    pub production: Option<String>,
    /// An age for every finished state and the events (`None`: each policy).
    pub older_than: Option<Duration>,
    /// A JSON Lines file written and synced before anything is deleted.
    pub archive: Option<std::path::PathBuf>,
    /// Delete nothing; count what would be deleted.
    pub dry_run: bool,
}

impl PruneOptions {
    /// Prunes only `production`.
    pub fn production(mut self, production: &str) -> Self {
        self.production = Some(production.to_owned());
        self
    }
    /// Prunes what is older than `d` instead of each policy.
    pub fn older_than(mut self, d: Duration) -> Self {
        self.older_than = Some(d);
        self
    }
    /// Writes what is deleted to `path` first.
    pub fn archive(mut self, path: &Path) -> Self {
        self.archive = Some(path.to_owned());
        self
    }
    /// Counts instead of deleting.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// What [`Authority::prune`] deleted (or, in a dry run, would).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneResult {
    /// Jobs deleted (or that would be).
    pub jobs: u64,
    /// Events deleted (or that would be).
    pub events: u64,
}

impl Authority {
    /// The coordinator's change of a production's retention policy; pruning
    /// applies it from its next batch, and a retention_changed event
    /// records it.
    pub fn set_retention_policy(&self, production: &str, policy: &RetentionPolicy) -> Result<()> {
        let policy = policy.to_sys()?;
        let production = c_in("production", production)?;
        // SAFETY: live handle, valid string, a policy struct with its size set.
        check(unsafe { sys::leases_production_set_retention(self.raw, production.as_ptr(), &policy) })
    }

    /// A production's retention policy.
    pub fn retention_policy(&self, production: &str) -> Result<RetentionPolicy> {
        let production = c_in("production", production)?;
        let mut out = RetentionPolicy::default().to_sys()?;
        // SAFETY: live handle, valid string, an out struct with its size set.
        check(unsafe { sys::leases_production_retention(self.raw, production.as_ptr(), &mut out) })?;
        Ok(RetentionPolicy {
            completed: from_us(out.keep_completed_us),
            failed: from_us(out.keep_failed_us),
            dead: from_us(out.keep_dead_us),
            cancelled: from_us(out.keep_cancelled_us),
            events: from_us(out.keep_events_us),
        })
    }

    /// Deletes the finished jobs and events past their retention, in
    /// batches of at most 64 jobs and 1000 events, each one short
    /// transaction; never a requested or claimed job.
    pub fn prune(&self, options: &PruneOptions) -> Result<PruneResult> {
        let production = options.production.as_deref().map(|p| c_in("production", p)).transpose()?;
        let archive = match &options.archive {
            Some(p) => Some(c_in(
                "path",
                p.to_str().ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "archive path is not valid UTF-8"))?,
            )?),
            None => None,
        };
        let older_than_us = match options.older_than {
            Some(d) => keep_us("older_than", Some(d))?,
            None => 0,
        };
        let o = sys::leases_prune_options {
            size: std::mem::size_of::<sys::leases_prune_options>(),
            flags: if options.dry_run { sys::LEASES_PRUNE_DRY_RUN } else { 0 },
            older_than_us,
        };
        let (mut jobs, mut events) = (0i64, 0i64);
        // SAFETY: live handle, NULL or valid strings, an options struct with
        // its size set, valid out pointers.
        check(unsafe {
            sys::leases_prune(self.raw, opt_ptr(&production), opt_ptr(&archive), &o, &mut jobs, &mut events)
        })?;
        Ok(PruneResult { jobs: jobs.max(0) as u64, events: events.max(0) as u64 })
    }
}
