//! Typed paged listings. `iter_jobs`,
//! `iter_events` and `iter_productions` read the C pages one at a time as
//! they advance; each is tested with more rows than one page, on SQLite and
//! PostgreSQL.

#[macro_use]
mod common;

use common::{Store, HOUR, PRODUCTION};
use leases::{ErrorKind, Facts, JobState};

fn ids(s: &Store, states: &[JobState], page_size: u32) -> Vec<String> {
    s.auth.iter_jobs(PRODUCTION, states).page_size(page_size).map(|j| j.unwrap().id).collect()
}

on_both_stores!(
    iterating_jobs_lists_every_job_once_in_request_order_across_pages,
    iterating_jobs_at_the_default_page_size_reads_past_the_first_page,
    iterating_jobs_keeps_only_the_states_asked_for,
    a_job_changing_while_iterating_is_still_listed_exactly_once,
    a_bad_listing_is_the_first_items_error_and_ends_the_iteration,
    iterating_events_reads_every_page_and_resumes_after_the_last_one_seen,
    iterating_productions_lists_each_once_in_name_order_across_pages,
);

fn iterating_jobs_lists_every_job_once_in_request_order_across_pages(s: &Store) {
    let requested: Vec<String> = (0..7).map(|_| s.auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    for page_size in [1, 2, 3, 7, 1000] {
        assert_eq!(ids(s, &[], page_size), requested, "page size {page_size}");
    }
    let jobs: Vec<leases::Job> = s.auth.iter_jobs(PRODUCTION, &[]).page_size(3).map(Result::unwrap).collect();
    assert_eq!(jobs, s.auth.jobs(PRODUCTION).unwrap(), "the items are the listing's jobs");
}

fn iterating_jobs_at_the_default_page_size_reads_past_the_first_page(s: &Store) {
    let n = leases::sys::LEASES_DEFAULT_PAGE_SIZE as usize + 5;
    let requested: Vec<String> = (0..n).map(|_| s.auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    assert_eq!(ids(s, &[], 0), requested);
}

fn iterating_jobs_keeps_only_the_states_asked_for(s: &Store) {
    let all: Vec<String> = (0..6).map(|_| s.auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    s.auth.claim_job(PRODUCTION, &all[1], "w", HOUR).unwrap().complete(&Facts::new()).unwrap();
    s.auth.claim_job(PRODUCTION, &all[2], "w", HOUR).unwrap().fail("no").unwrap();
    s.auth.cancel(PRODUCTION, &all[4]).unwrap();
    let _held = s.auth.claim_job(PRODUCTION, &all[5], "w", HOUR).unwrap();
    assert_eq!(ids(s, &[JobState::Requested], 1), [all[0].clone(), all[3].clone()]);
    assert_eq!(ids(s, &[JobState::Failed, JobState::Cancelled], 1), [all[2].clone(), all[4].clone()]);
    assert_eq!(ids(s, &[JobState::Claimed, JobState::Claimed], 2), [all[5].clone()], "repeats are ignored");
    assert!(ids(s, &[JobState::Dead], 2).is_empty());
    let by_key: Vec<_> = s.auth.iter_jobs(PRODUCTION, &[]).key("none").collect();
    assert!(by_key.is_empty());
}

fn a_job_changing_while_iterating_is_still_listed_exactly_once(s: &Store) {
    let requested: Vec<String> = (0..4).map(|_| s.auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let mut jobs = s.auth.iter_jobs(PRODUCTION, &[]).page_size(2);
    let first = jobs.next().unwrap().unwrap();
    s.auth.claim_job(PRODUCTION, &requested[3], "w", HOUR).unwrap().complete(&Facts::new()).unwrap();
    s.auth.request_job(PRODUCTION, None, b"").unwrap();
    let rest: Vec<leases::Job> = jobs.map(Result::unwrap).collect();
    let listed: Vec<&str> = std::iter::once(&first).chain(&rest).map(|j| j.id.as_str()).take(4).collect();
    assert_eq!(listed, requested.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rest[2].state, JobState::Completed, "each job as its page saw it");
}

fn a_bad_listing_is_the_first_items_error_and_ends_the_iteration(s: &Store) {
    s.auth.request_job(PRODUCTION, None, b"").unwrap();
    let over = leases::sys::LEASES_MAX_PAGE_SIZE as u32 + 1;
    let cases = [
        (s.auth.iter_jobs(PRODUCTION, &[]).page_size(over).collect::<Vec<_>>(), ErrorKind::InvalidArgument),
        (s.auth.iter_jobs(PRODUCTION, &[JobState::Other("running".into())]).collect(), ErrorKind::InvalidArgument),
        (s.auth.iter_jobs("missing", &[]).collect(), ErrorKind::NotFound),
        (s.auth.iter_jobs("a\0b", &[]).collect(), ErrorKind::InvalidArgument),
    ];
    for (items, kind) in cases {
        assert_eq!(items.len(), 1, "one error, then the end");
        assert_eq!(items[0].as_ref().unwrap_err().kind(), kind);
    }
    let events: Vec<_> = s.auth.iter_events(None, 0).kinds(&["claimed"]).collect();
    assert_eq!(events.len(), 1, "kinds need a production or a job");
    assert_eq!(events[0].as_ref().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let events: Vec<_> = s.auth.iter_events(Some(PRODUCTION), 0).kinds(&["nonsense"]).collect();
    assert_eq!(events[0].as_ref().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let productions: Vec<_> = s.auth.iter_productions().page_size(over).collect();
    assert_eq!(productions.len(), 1);
    assert_eq!(productions[0].as_ref().unwrap_err().kind(), ErrorKind::InvalidArgument);
}

fn iterating_events_reads_every_page_and_resumes_after_the_last_one_seen(s: &Store) {
    let id = s.auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = s.auth.claim_job(PRODUCTION, &id, "w", HOUR).unwrap();
    lease.renew(HOUR * 2).unwrap();
    lease.complete(&Facts::new()).unwrap();
    let all = s.auth.events(Some(PRODUCTION), 0).unwrap();
    let mut events = s.auth.iter_events(Some(PRODUCTION), 0).page_size(2);
    let listed: Vec<leases::Event> = events.by_ref().map(Result::unwrap).collect();
    assert_eq!(listed, all);
    assert_eq!(events.after(), all.last().unwrap().seq);

    let mut partial = s.auth.iter_events(Some(PRODUCTION), 0).page_size(3);
    let seen = partial.next().unwrap().unwrap();
    assert_eq!(partial.after(), seen.seq, "after is the last event yielded, not the last one read");
    let rest: Vec<u64> = s.auth.iter_events(Some(PRODUCTION), partial.after()).map(|e| e.unwrap().seq).collect();
    assert_eq!(rest, all[1..].iter().map(|e| e.seq).collect::<Vec<_>>());

    let later = s.auth.request_job(PRODUCTION, None, b"").unwrap();
    let new: Vec<leases::Event> = s.auth.iter_events(Some(PRODUCTION), events.after()).map(Result::unwrap).collect();
    assert_eq!(
        new.iter().map(|e| (e.kind.as_str(), e.job_id.as_deref())).collect::<Vec<_>>(),
        [("requested", Some(later.as_str()))]
    );

    let timeline: Vec<String> = s
        .auth
        .iter_events(None, 0)
        .job(&id)
        .kinds(&["claimed", "completed"])
        .page_size(1)
        .map(|e| e.unwrap().kind)
        .collect();
    assert_eq!(timeline, ["claimed", "completed"]);
}

fn iterating_productions_lists_each_once_in_name_order_across_pages(s: &Store) {
    for name in ["b", "a", "c", "ab"] {
        s.auth.create_production(name).unwrap();
    }
    let names: Vec<String> = s.auth.iter_productions().page_size(2).map(|p| p.unwrap().name).collect();
    assert_eq!(names, ["a", "ab", "b", "c", PRODUCTION]);
    let productions: Vec<leases::Production> = s.auth.iter_productions().map(Result::unwrap).collect();
    assert!(productions.iter().all(|p| p.id.len() == 36 && p.created_at > std::time::UNIX_EPOCH));
}
