//! Typed observations (`Job`, `Event`, `JobRecord`, `Production`) parsed
//! from the C JSON listings, and `Facts`, the completion payload written as
//! `facts_json`.

use std::path::PathBuf;
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
    /// Its retry policy's attempts are used up (terminal; a coordinator may
    /// redrive it).
    Dead,
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
            JobState::Dead => "dead",
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
            "dead" => JobState::Dead,
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
    /// 0 ..= [`MAX_PRIORITY`](crate::MAX_PRIORITY); higher is claimed first.
    pub priority: u32,
    /// When a requested job is or becomes claimable (its run-at, the end of
    /// its delay or backoff), or when a claimed one becomes claimable again
    /// should its claim lapse; `None` once finished.
    pub claimable_at: Option<SystemTime>,
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
    fn time(&self, k: &str) -> Result<SystemTime> {
        self.opt_time(k)?.ok_or_else(|| bad(&format!("{k} missing")))
    }
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
        priority: o
            .opt_i64("priority")?
            .map_or(Ok(0), |p| u32::try_from(p).map_err(|_| bad("priority is out of range")))?,
        claimable_at: o.opt_time("claimable_at_unix_us")?,
    })
}

fn event_from(m: &Map<String, Value>) -> Result<Event> {
    let o = Obj(m);
    Ok(Event {
        seq: o.u64("seq")?,
        at: o.time("at_unix_us")?,
        production: o.string("production")?,
        job_id: o.opt_string("job_id")?,
        kind: o.string("kind")?,
        worker: o.opt_string("worker")?,
        expiry: o.opt_time("expiry_unix_us")?,
        detail: o.opt_string("detail")?,
    })
}

/// The items of a listing that is a JSON array.
fn array<T>(text: &str, item: impl Fn(&Map<String, Value>) -> Result<T>) -> Result<Vec<T>> {
    let v = parse(text)?;
    if !v.is_array() {
        return Err(bad("not an array"));
    }
    items(Some(&v), "the listing", item)
}

pub(crate) fn parse_jobs(text: &str) -> Result<Vec<Job>> {
    array(text, job_from)
}

pub(crate) fn parse_events(text: &str) -> Result<Vec<Event>> {
    array(text, event_from)
}

/// How an attempt (a claim) ended. An ending this crate does not know yet
/// is kept as [`AttemptEnding::Other`] with its text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptEnding {
    /// Completed by its claim.
    Completed,
    /// Failed for good (`fail`).
    Failed,
    /// Failed as retryable (`fail_retry`).
    Retry,
    /// Given back (`release`).
    Released,
    /// Its expiry passed.
    Expired,
    /// The coordinator cancelled the job.
    Cancelled,
    /// An ending added after this crate was written, as the record spells it.
    Other(String),
}

impl AttemptEnding {
    /// The spelling of the record (`"retry"`, …).
    pub fn as_str(&self) -> &str {
        match self {
            AttemptEnding::Completed => "completed",
            AttemptEnding::Failed => "failed",
            AttemptEnding::Retry => "retry",
            AttemptEnding::Released => "released",
            AttemptEnding::Expired => "expired",
            AttemptEnding::Cancelled => "cancelled",
            AttemptEnding::Other(s) => s,
        }
    }

    /// The ending a record spells `s`; never fails.
    pub fn parse(s: &str) -> AttemptEnding {
        match s {
            "completed" => AttemptEnding::Completed,
            "failed" => AttemptEnding::Failed,
            "retry" => AttemptEnding::Retry,
            "released" => AttemptEnding::Released,
            "expired" => AttemptEnding::Expired,
            "cancelled" => AttemptEnding::Cancelled,
            other => AttemptEnding::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for AttemptEnding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One ended claim of a job, from its record's attempt history.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The job's attempt count when it was claimed (a redrive starts again from 1).
    pub number: u64,
    /// The worker attribution of the claim.
    pub worker: String,
    /// When it was claimed, on the authority's clock.
    pub claimed_at: SystemTime,
    /// When it ended.
    pub ended_at: SystemTime,
    /// How it ended.
    pub ending: AttemptEnding,
    /// The reason given, if any.
    pub reason: Option<String>,
}

/// One output file a completion registered (an execution's `finish`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Output {
    /// The final file: the output directory, `/`, the job id, `.`, the nonce, `.out`.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// The execution's nonce (hex), also in the file name.
    pub nonce: String,
}

/// What a job's completion published: metadata and provenance as the JSON
/// values published, and the registered outputs. Empty before a completion.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct PublishedFacts {
    /// Metadata entries.
    pub metadata: Map<String, Value>,
    /// Provenance entries.
    pub provenance: Map<String, Value>,
    /// Output files, in registration order.
    pub outputs: Vec<Output>,
}

/// One job's full record ([`Authority::job`](crate::Authority::job)): its
/// listing fields, payload size, times, published facts and the newest
/// ended attempts. Never a secret.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct JobRecord {
    /// The fields a listing shows.
    pub job: Job,
    /// The payload's size in bytes (the payload itself: [`Lease::payload`](crate::Lease::payload)).
    pub payload_size: u64,
    /// When the job was requested, on the authority's clock.
    pub requested_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
    /// What its completion published.
    pub facts: PublishedFacts,
    /// The newest ended claims (at most `LEASES_ATTEMPT_HISTORY_LEN`, 20),
    /// oldest first.
    pub history: Vec<Attempt>,
}

impl JobRecord {
    /// Reads a record from the JSON of `leases_job_json` (also what the
    /// CLI's `leases job show --json` prints). Unknown members are ignored.
    pub fn from_json(text: &str) -> Result<JobRecord> {
        let Value::Object(m) = parse(text)? else { return Err(bad("a job record is not an object")) };
        let o = Obj(&m);
        let facts = match m.get("facts") {
            Some(Value::Object(f)) => f,
            _ => return Err(bad("facts missing")),
        };
        let half = |k: &str| match facts.get(k) {
            None => Ok(Map::new()),
            Some(Value::Object(h)) => Ok(h.clone()),
            Some(_) => Err(bad(&format!("facts.{k} is not an object"))),
        };
        let outputs = items(facts.get("outputs"), "facts.outputs", |out| {
            let o = Obj(out);
            Ok(Output {
                path: o.string("path")?.into(),
                size: o.u64("size")?,
                sha256: o.string("sha256")?,
                nonce: o.string("nonce")?,
            })
        })?;
        let history = items(m.get("attempt_history"), "attempt_history", |a| {
            let o = Obj(a);
            Ok(Attempt {
                number: o.u64("number")?,
                worker: o.string("worker")?,
                claimed_at: o.time("claimed_at_unix_us")?,
                ended_at: o.time("ended_at_unix_us")?,
                ending: AttemptEnding::parse(&o.string("ending")?),
                reason: o.opt_string("reason")?,
            })
        })?;
        Ok(JobRecord {
            job: job_from(&m)?,
            payload_size: o.u64("payload_size")?,
            requested_at: o.time("requested_at_unix_us")?,
            updated_at: o.time("updated_at_unix_us")?,
            facts: PublishedFacts { metadata: half("metadata")?, provenance: half("provenance")?, outputs },
            history,
        })
    }
}

/// A production, as its listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Production {
    /// Its id (a lowercase UUID).
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was created, on the authority's clock.
    pub created_at: SystemTime,
}

fn production_from(m: &Map<String, Value>) -> Result<Production> {
    let o = Obj(m);
    Ok(Production { id: o.string("id")?, name: o.string("name")?, created_at: o.time("created_at_unix_us")? })
}

fn parse(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| bad(&e.to_string()))
}

/// The objects of an array member (absent: none), each read by `item`.
fn items<T>(v: Option<&Value>, what: &str, item: impl Fn(&Map<String, Value>) -> Result<T>) -> Result<Vec<T>> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|i| match i {
                Value::Object(m) => item(m),
                _ => Err(bad(&format!("an item of {what} is not an object"))),
            })
            .collect(),
        Some(_) => Err(bad(&format!("{what} is not an array"))),
    }
}

/// One page of a listing: its items (from the member `member`, read by
/// `item`) and its object, for the paging members.
fn page<T>(
    text: &str,
    member: &str,
    item: impl Fn(&Map<String, Value>) -> Result<T>,
) -> Result<(Vec<T>, Map<String, Value>)> {
    let Value::Object(m) = parse(text)? else { return Err(bad("a page is not an object")) };
    if !matches!(m.get(member), Some(Value::Array(_))) {
        return Err(bad(&format!("{member} missing")));
    }
    Ok((items(m.get(member), member, item)?, m))
}

/// A jobs page: its jobs and the next page's cursor (`None`: the last page).
pub(crate) fn parse_jobs_page(text: &str) -> Result<(Vec<Job>, Option<String>)> {
    let (jobs, m) = page(text, "jobs", job_from)?;
    Ok((jobs, Obj(&m).opt_string("next")?))
}

/// A productions page: its productions and the next page's cursor.
pub(crate) fn parse_productions_page(text: &str) -> Result<(Vec<Production>, Option<String>)> {
    let (productions, m) = page(text, "productions", production_from)?;
    Ok((productions, Obj(&m).opt_string("next")?))
}

/// An events page: its events, the `after` of the next call, and whether
/// more can be listed now.
pub(crate) fn parse_events_page(text: &str) -> Result<(Vec<Event>, u64, bool)> {
    let (events, m) = page(text, "events", event_from)?;
    let more = match m.get("more") {
        Some(Value::Bool(b)) => *b,
        _ => return Err(bad("more is not a boolean")),
    };
    Ok((events, Obj(&m).u64("next")?, more))
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
        for s in [
            JobState::Requested,
            JobState::Claimed,
            JobState::Completed,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Dead,
        ] {
            assert_eq!(JobState::parse(s.as_str()), s);
        }
    }

    #[test]
    fn a_listing_that_is_not_the_documented_shape_is_still_an_error() {
        assert_eq!(parse_jobs("{}").unwrap_err().kind(), ErrorKind::Internal);
        assert_eq!(parse_jobs(r#"[{"id":"x"}]"#).unwrap_err().kind(), ErrorKind::Internal);
    }
}
