//! Typed paged listings: iterators over jobs, events and productions that
//! read the C ABI's pages one at a time, and one job's record.

use std::collections::VecDeque;

use crate::error::Result;
use crate::listing::{self, Event, Job, JobRecord, JobState, Production};
use crate::Authority;

/// The items of one listing read so far, and whether the listing is over.
/// A failed read ends the iteration after yielding its error (the iterators
/// are fused), so a loop over `Result`s never spins on a broken store.
struct Pager<T> {
    buffered: VecDeque<T>,
    done: bool,
}

impl<T> Pager<T> {
    fn new() -> Pager<T> {
        Pager { buffered: VecDeque::new(), done: false }
    }

    /// The next item, reading pages with `fetch` (its items, and whether it
    /// was the last page) while none is buffered.
    fn next(&mut self, mut fetch: impl FnMut() -> Result<(Vec<T>, bool)>) -> Option<Result<T>> {
        while self.buffered.is_empty() && !self.done {
            match fetch() {
                Ok((items, last)) => {
                    // An empty page ends the listing even if it claims more:
                    // another read would ask for the same thing again.
                    self.done = last || items.is_empty();
                    self.buffered.extend(items);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        self.buffered.pop_front().map(Ok)
    }
}

/// The jobs of a production in request order, read a page at a time
/// ([`Authority::iter_jobs`]). Each item is a job as its page saw it; every
/// job that existed when the first page was read is listed exactly once,
/// however the jobs change meanwhile. A bad filter, page size or unknown
/// production is the first item's error.
pub struct JobPages<'a> {
    authority: &'a Authority,
    production: String,
    states: String,
    key: Option<String>,
    limit: u32,
    cursor: Option<String>,
    pager: Pager<Job>,
}

impl JobPages<'_> {
    /// Jobs per page: 1 ..= 1000 (`LEASES_MAX_PAGE_SIZE`); 0, the default,
    /// is the library's (100). Set it before the first `next`.
    pub fn page_size(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }

    /// Only the job requested with `key`.
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }
}

impl Iterator for JobPages<'_> {
    type Item = Result<Job>;

    fn next(&mut self) -> Option<Result<Job>> {
        let JobPages { authority, production, states, key, limit, cursor, pager } = self;
        pager.next(|| {
            let states = Some(states.as_str()).filter(|s| !s.is_empty());
            let text = authority.jobs_page_json(production, states, key.as_deref(), None, cursor.as_deref(), *limit)?;
            let (jobs, next) = listing::parse_jobs_page(&text)?;
            *cursor = next;
            Ok((jobs, cursor.is_none()))
        })
    }
}

impl std::iter::FusedIterator for JobPages<'_> {}

/// Events oldest first, read a page at a time ([`Authority::iter_events`]):
/// every event that can be listed now (on PostgreSQL up to the
/// follower-safe horizon, docs/postgres.md). When it ends,
/// [`after`](EventPages::after) is where a later listing resumes.
pub struct EventPages<'a> {
    authority: &'a Authority,
    production: Option<String>,
    job_id: Option<String>,
    kinds: String,
    limit: u32,
    /// The `after` of the next page read.
    read_after: u64,
    /// The sequence number of the last event yielded (or the start).
    after: u64,
    pager: Pager<Event>,
}

impl EventPages<'_> {
    /// Events per page, as [`JobPages::page_size`].
    pub fn page_size(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }

    /// Only the events of one job.
    pub fn job(mut self, job_id: &str) -> Self {
        self.job_id = Some(job_id.to_owned());
        self
    }

    /// Only events of these kinds (`"claimed"`, `"retry"`, `"dead"`, …);
    /// needs a production or a job. Empty: every kind.
    pub fn kinds(mut self, kinds: &[&str]) -> Self {
        self.kinds = kinds.join(",");
        self
    }

    /// The sequence number of the last event this iterator yielded (at
    /// first the `after` it was given): pass it as `after` to resume.
    pub fn after(&self) -> u64 {
        self.after
    }
}

impl Iterator for EventPages<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        let EventPages { authority, production, job_id, kinds, limit, read_after, pager, .. } = self;
        let event = pager.next(|| {
            let kinds = Some(kinds.as_str()).filter(|s| !s.is_empty());
            let text =
                authority.events_page_json(production.as_deref(), job_id.as_deref(), kinds, *read_after, *limit)?;
            let (events, next, more) = listing::parse_events_page(&text)?;
            *read_after = next;
            Ok((events, !more))
        });
        if let Some(Ok(e)) = &event {
            self.after = e.seq;
        }
        event
    }
}

impl std::iter::FusedIterator for EventPages<'_> {}

/// Every production in byte order of its name, read a page at a time
/// ([`Authority::iter_productions`]).
pub struct ProductionPages<'a> {
    authority: &'a Authority,
    limit: u32,
    cursor: Option<String>,
    pager: Pager<Production>,
}

impl ProductionPages<'_> {
    /// Productions per page, as [`JobPages::page_size`].
    pub fn page_size(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }
}

impl Iterator for ProductionPages<'_> {
    type Item = Result<Production>;

    fn next(&mut self) -> Option<Result<Production>> {
        let ProductionPages { authority, limit, cursor, pager } = self;
        pager.next(|| {
            let text = authority.productions_page_json(cursor.as_deref(), *limit)?;
            let (productions, next) = listing::parse_productions_page(&text)?;
            *cursor = next;
            Ok((productions, cursor.is_none()))
        })
    }
}

impl std::iter::FusedIterator for ProductionPages<'_> {}

impl Authority {
    /// The jobs of `production` in request order, in any of `states` (empty:
    /// every state), fetched page by page as the iterator advances.
    ///
    /// ```
    /// # use leases::{Authority, JobState};
    /// # fn main() -> Result<(), leases::Error> {
    /// # let dir = std::env::temp_dir().join(format!("leases-doc-iter-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let auth = Authority::open(dir.join("jobs.db"))?;
    /// auth.create_production("nightly")?;
    /// for _ in 0..5 {
    ///     auth.request_job("nightly", None, b"")?;
    /// }
    /// let waiting = auth.iter_jobs("nightly", &[JobState::Requested]).page_size(2).collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(waiting.len(), 5); // three pages
    /// # drop(auth);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter_jobs(&self, production: &str, states: &[JobState]) -> JobPages<'_> {
        JobPages {
            authority: self,
            production: production.to_owned(),
            states: states.iter().map(JobState::as_str).collect::<Vec<_>>().join(","),
            key: None,
            limit: 0,
            cursor: None,
            pager: Pager::new(),
        }
    }

    /// The events with a sequence number above `after`, oldest first, of
    /// one production or (`None`) of every one, fetched page by page.
    pub fn iter_events(&self, production: Option<&str>, after: u64) -> EventPages<'_> {
        EventPages {
            authority: self,
            production: production.map(str::to_owned),
            job_id: None,
            kinds: String::new(),
            limit: 0,
            read_after: after,
            after,
            pager: Pager::new(),
        }
    }

    /// Every production, in byte order of its name, fetched page by page.
    pub fn iter_productions(&self) -> ProductionPages<'_> {
        ProductionPages { authority: self, limit: 0, cursor: None, pager: Pager::new() }
    }

    /// One job's record: its listing fields, payload size, times, the facts
    /// its completion published and its attempt history. A job of another
    /// production is [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn job(&self, production: &str, job_id: &str) -> Result<JobRecord> {
        JobRecord::from_json(&self.job_json(production, job_id)?)
    }
}
