//! The paged observations and the open options of the C ABI (since revision
//! 1), through the thin `Authority` methods that call them: pages followed
//! to the end list every job once, event pages follow `next` and `more`,
//! one job's record, counts and productions, and `Authority::open_with`.
//! PostgreSQL: tests/postgres.rs.

mod common;

use common::{fresh, TempDir, HOUR, PRODUCTION};
use std::time::Duration;

use leases::{sys, Authority, ErrorKind, Facts, OpenOptions, Synchronous, MAX_DURATION};
use serde_json::Value;

fn parse(json: &str) -> Value {
    serde_json::from_str(json).expect("the library's JSON parses")
}

#[test]
fn job_pages_followed_to_the_end_list_every_job_once() {
    let (_dir, auth) = fresh("pages");
    let ids: Vec<String> = (0..7).map(|_| auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let (mut listed, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let page = parse(&auth.jobs_page_json(PRODUCTION, None, None, None, cursor.as_deref(), 3).unwrap());
        pages += 1;
        listed.extend(page["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap().to_owned()));
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!((listed, pages), (ids.clone(), 3));
    let _lease = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();
    let claimed = parse(&auth.jobs_page_json(PRODUCTION, Some("claimed"), None, None, None, 0).unwrap());
    assert_eq!(claimed["jobs"][0]["id"], ids[0].as_str());
    assert_eq!(claimed["jobs"].as_array().unwrap().len(), 1);
    let err = auth.jobs_page_json(PRODUCTION, Some("running"), None, None, None, 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err =
        auth.jobs_page_json(PRODUCTION, None, None, None, None, sys::LEASES_MAX_PAGE_SIZE as u32 + 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_page_of_jobs_with_facts_carries_each_completed_jobs_facts_in_one_call() {
    let (_dir, auth) = fresh("pagefacts");
    let ids: Vec<String> = (0..4).map(|_| auth.request_job(PRODUCTION, None, b"").unwrap()).collect();
    let first = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();
    first.complete(&Facts::new().metadata("frames", 24).provenance("tool", "render")).unwrap();
    let second = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();
    second.complete(&Facts::new()).unwrap(); // publishing nothing
    let _held = auth.claim(PRODUCTION, "w", HOUR).unwrap().unwrap();

    let plain = parse(&auth.jobs_page_json(PRODUCTION, None, None, None, None, 0).unwrap());
    let page = parse(&auth.jobs_page_facts_json(PRODUCTION, None, None, None, None, 0).unwrap());
    assert_eq!(page["jobs"], plain["jobs"]);
    assert!(plain.get("facts").is_none());
    let facts = page["facts"].as_object().unwrap();
    assert_eq!(facts.len(), 2, "an entry for each completed job, none for the others");
    for id in &ids[..2] {
        let record = parse(&auth.job_json(PRODUCTION, id).unwrap());
        assert_eq!(facts[id.as_str()], record["facts"]);
    }
    assert_eq!(facts[ids[0].as_str()]["metadata"]["frames"], 24);
    let one = parse(&auth.jobs_page_facts_json(PRODUCTION, None, None, None, None, 1).unwrap());
    assert_eq!(one["facts"].as_object().unwrap().keys().collect::<Vec<_>>(), vec![&ids[0]]);
    let err = auth.jobs_page_facts_json("nope", None, None, None, None, 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[test]
fn event_pages_records_counts_and_productions() {
    let (_dir, auth) = fresh("events");
    let id = auth.request_job(PRODUCTION, Some("k"), b"payload").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w", HOUR).unwrap();
    lease.complete(&leases::Facts::new()).unwrap();
    let (mut kinds, mut after) = (Vec::new(), 0u64);
    loop {
        let page = parse(&auth.events_page_json(Some(PRODUCTION), None, None, after, 1).unwrap());
        kinds.extend(page["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap().to_owned()));
        after = page["next"].as_u64().unwrap();
        if !page["more"].as_bool().unwrap() {
            break;
        }
    }
    assert_eq!(kinds, ["production_created", "requested", "claimed", "completed"]);
    let timeline = parse(&auth.events_page_json(None, Some(&id), Some("claimed"), 0, 0).unwrap());
    assert_eq!(timeline["events"].as_array().unwrap().len(), 1);

    let record = parse(&auth.job_json(PRODUCTION, &id).unwrap());
    assert_eq!((record["state"].as_str(), record["payload_size"].as_i64()), (Some("completed"), Some(7)));
    let counts = parse(&auth.job_counts_json(PRODUCTION).unwrap());
    assert_eq!((counts["completed"].as_i64(), counts["requested"].as_i64()), (Some(1), Some(0)));

    auth.create_production("a").unwrap();
    let first = parse(&auth.productions_page_json(None, 1).unwrap());
    assert_eq!(first["productions"][0]["name"], "a");
    let second = parse(&auth.productions_page_json(first["next"].as_str(), 1).unwrap());
    assert_eq!(second["productions"][0]["name"], PRODUCTION);
    assert!(second["next"].is_null());
}

#[test]
#[allow(deprecated)] // the raw C struct of 0.1.0 still opens, deprecated
fn open_with_options_must_exist_and_refuses_bad_values() {
    let dir = TempDir::new("openwith");
    let mut o = leases::open_options();
    o.flags = sys::LEASES_OPEN_MUST_EXIST;
    assert_eq!(Authority::open_with(dir.db(), &o).unwrap_err().kind(), ErrorKind::NotFound);
    assert!(!dir.db().exists());
    o.flags = 0;
    o.synchronous = sys::LEASES_SYNCHRONOUS_NORMAL;
    o.busy_timeout_us = 250_000;
    Authority::open_with(dir.db(), &o).unwrap().create_production(PRODUCTION).unwrap();
    o.synchronous = 9;
    assert_eq!(Authority::open_with(dir.db(), &o).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let mut o = leases::open_options();
    o.flags = sys::LEASES_OPEN_MUST_EXIST;
    assert!(Authority::open_with(dir.db(), &o).unwrap().jobs(PRODUCTION).unwrap().is_empty());
}

/// Rust opens with options of its own, a builder (`OpenOptions`), never the
/// raw C struct: `must_exist`, `synchronous` as an enum, `busy_timeout` as a
/// `Duration` by the rule of every duration.
#[test]
fn rust_opens_with_a_typed_options_builder_never_the_raw_c_struct() {
    let dir = TempDir::new("typedopen");
    let err = OpenOptions::new().must_exist(true).open(dir.db()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(!dir.db().exists());
    let auth = OpenOptions::new()
        .synchronous(Synchronous::Normal)
        .busy_timeout(Duration::from_millis(250))
        .open(dir.db())
        .unwrap();
    auth.create_production(PRODUCTION).unwrap();
    drop(auth);
    for bad in [Duration::ZERO, Duration::from_nanos(1500), MAX_DURATION + Duration::from_micros(1)] {
        let err = OpenOptions::new().busy_timeout(bad).open(dir.db()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidDuration, "{bad:?}");
    }
    let mut o = OpenOptions::new();
    o.must_exist(true).synchronous(Synchronous::Extra);
    assert!(o.open(dir.db()).unwrap().jobs(PRODUCTION).unwrap().is_empty());
    assert_eq!(OpenOptions::new(), OpenOptions::default());
}
