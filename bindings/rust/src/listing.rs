//! Typed observations (`Job`, `Event`) parsed from the C JSON listings, and
//! `Facts`, the completion payload written as `facts_json`.

use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::from_unix_us;

/// The state of a job. A state this crate does not know yet (a newer
/// library may add one) is kept as [`JobState::Other`] with its text, so a
/// listing never fails because of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting to be claimed (also after a release).
    Requested,
    /// Held by a claim (which may have expired: then it is claimable again).
    Claimed,
    /// Completed by its claim.
    Completed,
    /// Failed by its claim.
    Failed,
    /// Cancelled by the coordinator.
    Cancelled,
    /// A state added after this crate was written, as the listing spells it.
    Other(String),
}

impl JobState {
    /// The spelling used by every listing (`"requested"`, …).
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Requested => "requested",
            JobState::Claimed => "claimed",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Other(s) => s,
        }
    }

    /// The state a listing spells `s`; never fails (see [`JobState::Other`]).
    pub fn parse(s: &str) -> JobState {
        match s {
            "requested" => JobState::Requested,
            "claimed" => JobState::Claimed,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            other => JobState::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An observation of one job: attribution and expiry, never a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Job {
    /// The job id (a lowercase UUID).
    pub id: String,
    /// The production name.
    pub production: String,
    /// The caller's key, if the job was requested with one.
    pub key: Option<String>,
    /// The current state.
    pub state: JobState,
    /// The worker attribution of the current claim.
    pub worker: Option<String>,
    /// When the current claim was made.
    pub claimed_at: Option<SystemTime>,
    /// When the current claim expires (exclusive).
    pub expiry: Option<SystemTime>,
    /// How many claims the job has had.
    pub attempts: u64,
    /// The failure reason, for a failed job.
    pub reason: Option<String>,
}

/// One entry of the authority's event log. It never carries a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// Sequence number, increasing; pass the last one seen as `after`.
    pub seq: u64,
    /// When it happened, on the authority's clock.
    pub at: SystemTime,
    /// The production name.
    pub production: String,
    /// The job, for job events.
    pub job_id: Option<String>,
    /// `"requested"`, `"claimed"`, `"renewed"`, `"released"`, `"failed"`,
    /// `"completed"`, `"cancelled"`, `"claim_expired"`, `"production_created"`, …
    pub kind: String,
    /// The worker attribution, for claim events.
    pub worker: Option<String>,
    /// The claim's expiry, for claim events.
    pub expiry: Option<SystemTime>,
    /// Extra detail (a failure reason, why a claim expired, …).
    pub detail: Option<String>,
}

fn bad(what: &str) -> Error {
    Error::new(ErrorKind::Internal, format!("libleases returned a listing this crate cannot read: {what}"))
}

struct Obj<'a>(&'a Map<String, Value>);

impl Obj<'_> {
    fn string(&self, k: &str) -> Result<String> {
        self.opt_string(k)?.ok_or_else(|| bad(&format!("{k} missing")))
    }
    fn opt_string(&self, k: &str) -> Result<Option<String>> {
        match self.0.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(&format!("{k} is not a string"))),
        }
    }
    fn opt_i64(&self, k: &str) -> Result<Option<i64>> {
        match self.0.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| bad(&format!("{k} is not an integer"))),
        }
    }
    fn u64(&self, k: &str) -> Result<u64> {
        self.opt_i64(k)?
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| bad(&format!("{k} is not a non-negative integer")))
    }
    fn opt_time(&self, k: &str) -> Result<Option<SystemTime>> {
        Ok(self.opt_i64(k)?.map(from_unix_us))
    }
}

fn objects(text: &str) -> Result<Vec<Map<String, Value>>> {
    let v: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let Value::Array(items) = v else { return Err(bad("not an array")) };
    items
        .into_iter()
        .map(|i| match i {
            Value::Object(m) => Ok(m),
            _ => Err(bad("an item is not an object")),
        })
        .collect()
}

fn job_from(m: &Map<String, Value>) -> Result<Job> {
    let o = Obj(m);
    Ok(Job {
        id: o.string("id")?,
        production: o.string("production")?,
        key: o.opt_string("key")?,
        state: JobState::parse(&o.string("state")?),
        worker: o.opt_string("worker")?,
        claimed_at: o.opt_time("claimed_at_unix_us")?,
        expiry: o.opt_time("expiry_unix_us")?,
        attempts: o.u64("attempts")?,
        reason: o.opt_string("reason")?,
    })
}

fn event_from(m: &Map<String, Value>) -> Result<Event> {
    let o = Obj(m);
    Ok(Event {
        seq: o.u64("seq")?,
        at: o.opt_time("at_unix_us")?.ok_or_else(|| bad("at_unix_us missing"))?,
        production: o.string("production")?,
        job_id: o.opt_string("job_id")?,
        kind: o.string("kind")?,
        worker: o.opt_string("worker")?,
        expiry: o.opt_time("expiry_unix_us")?,
        detail: o.opt_string("detail")?,
    })
}

pub(crate) fn parse_jobs(text: &str) -> Result<Vec<Job>> {
    objects(text)?.iter().map(job_from).collect()
}

pub(crate) fn parse_events(text: &str) -> Result<Vec<Event>> {
    objects(text)?.iter().map(event_from).collect()
}

/// What a completion publishes: metadata and provenance entries with JSON
/// values. Published only by a committed completion, and then all together.
///
/// ```
/// use leases::Facts;
/// use leases::serde_json::json;
///
/// let facts = Facts::new()
///     .metadata("frames", 24)
///     .metadata("camera", json!({"lens": "35mm"}))
///     .provenance("tool", "render 2.1");
/// assert_eq!(
///     facts.to_json(),
///     r#"{"metadata":{"camera":{"lens":"35mm"},"frames":24},"provenance":{"tool":"render 2.1"}}"#
/// );
/// assert!(Facts::new().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    metadata: Map<String, Value>,
    provenance: Map<String, Value>,
}

impl Facts {
    /// No facts.
    pub fn new() -> Facts {
        Facts::default()
    }

    /// Adds (or replaces) a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Facts {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds (or replaces) a provenance entry.
    pub fn provenance(mut self, key: impl Into<String>, value: impl Into<Value>) -> Facts {
        self.provenance.insert(key.into(), value.into());
        self
    }

    /// True when there is nothing to publish.
    pub fn is_empty(&self) -> bool {
        self.metadata.is_empty() && self.provenance.is_empty()
    }

    /// The `facts_json` text of the C API: `{"metadata": {...}, "provenance": {...}}`,
    /// leaving out an empty half.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out).expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }

    /// [`to_json`](Facts::to_json), but refused with
    /// [`ErrorKind::InvalidArgument`] as soon as the text would pass `limit`
    /// bytes: the serialization stops there, so oversize facts are never
    /// copied whole.
    pub(crate) fn to_json_within(&self, limit: usize) -> Result<String> {
        let mut out = Bounded { buf: Vec::new(), limit };
        if self.write_json(&mut out).is_err() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("facts are over the limit of {limit} bytes (LEASES_MAX_FACTS_LEN)"),
            ));
        }
        Ok(String::from_utf8(out.buf).expect("serde_json writes UTF-8"))
    }

    /// Writes `{"metadata": {...}, "provenance": {...}}`, leaving out an empty half.
    fn write_json(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        w.write_all(b"{")?;
        let mut first = true;
        for (name, half) in [("metadata", &self.metadata), ("provenance", &self.provenance)] {
            if half.is_empty() {
                continue;
            }
            if !first {
                w.write_all(b",")?;
            }
            first = false;
            write!(w, "\"{name}\":")?;
            serde_json::to_writer(&mut *w, half)?;
        }
        w.write_all(b"}")
    }
}

/// A writer that fails once more than `limit` bytes were written to it.
struct Bounded {
    buf: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_state_added_later_is_kept_as_other_with_its_text() {
        let text = r#"[{"id":"0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d","production":"p","key":null,
            "state":"paused","worker":null,"claimed_at_unix_us":null,"expiry_unix_us":null,
            "attempts":0,"reason":null}]"#;
        let jobs = parse_jobs(text).expect("an unknown state must not fail the listing");
        assert_eq!(jobs[0].state, JobState::Other("paused".to_string()));
        assert_eq!(jobs[0].state.as_str(), "paused");
        assert_eq!(jobs[0].state.to_string(), "paused");
    }

    #[test]
    fn every_known_state_round_trips_through_its_spelling() {
        for s in [JobState::Requested, JobState::Claimed, JobState::Completed, JobState::Failed, JobState::Cancelled] {
            assert_eq!(JobState::parse(s.as_str()), s);
        }
    }

    #[test]
    fn a_listing_that_is_not_the_documented_shape_is_still_an_error() {
        assert_eq!(parse_jobs("{}").unwrap_err().kind(), ErrorKind::Internal);
        assert_eq!(parse_jobs(r#"[{"id":"x"}]"#).unwrap_err().kind(), ErrorKind::Internal);
    }
}
