//! Typed observations (`Job`, `Event`) parsed from the C JSON listings, and
//! `Facts`, the completion payload written as `facts_json`.

use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::from_unix_us;

/// The state of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
}

impl JobState {
    /// The spelling used by every listing (`"requested"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Requested => "requested",
            JobState::Claimed => "claimed",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<JobState> {
        Some(match s {
            "requested" => JobState::Requested,
            "claimed" => JobState::Claimed,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => return None,
        })
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

pub(crate) fn parse_jobs(text: &str) -> Result<Vec<Job>> {
    objects(text)?
        .iter()
        .map(|m| {
            let o = Obj(m);
            let state = o.string("state")?;
            Ok(Job {
                id: o.string("id")?,
                production: o.string("production")?,
                key: o.opt_string("key")?,
                state: JobState::parse(&state).ok_or_else(|| bad(&format!("unknown state {state:?}")))?,
                worker: o.opt_string("worker")?,
                claimed_at: o.opt_time("claimed_at_unix_us")?,
                expiry: o.opt_time("expiry_unix_us")?,
                attempts: o.u64("attempts")?,
                reason: o.opt_string("reason")?,
            })
        })
        .collect()
}

pub(crate) fn parse_events(text: &str) -> Result<Vec<Event>> {
    objects(text)?
        .iter()
        .map(|m| {
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
        })
        .collect()
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
        let mut root = Map::new();
        if !self.metadata.is_empty() {
            root.insert("metadata".into(), Value::Object(self.metadata.clone()));
        }
        if !self.provenance.is_empty() {
            root.insert("provenance".into(), Value::Object(self.provenance.clone()));
        }
        Value::Object(root).to_string()
    }
}
