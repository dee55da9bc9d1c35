//! A `postgres://` or `postgresql://` location selects the PostgreSQL store
//! (several hosts): `Authority::open` passes the URL to the library unchanged (a
//! `&str`, `String` or `Path` made from it), the whole API works on it, a
//! token crosses between two handles, the clock seam replaces the server's
//! clock (`--features testing`), and an open failure never shows the URL's
//! password.
//!
//! Each test runs in a fresh schema of `$LEASES_TEST_PG_URL`, created and
//! dropped with `psql`. Without a server the tests fail when
//! `LEASES_REQUIRE_PG` is set (as under `tests/pg/cluster.sh run`), and
//! otherwise return early saying why.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pg::Schema;
use common::PRODUCTION;
use leases::{Authority, ErrorKind, Facts, JobState};

const PASSWORD: &str = "SECRETPW";

/// The production's events right after the job completed. Each test has a
/// schema of its own and no other writer of it runs, so the process reads its
/// own committed events at once (docs/postgres.md).
fn settled_events(auth: &Authority, job_id: &str) -> Vec<leases::Event> {
    let events = auth.events(Some(PRODUCTION), 0).unwrap();
    assert!(events.iter().any(|e| e.job_id.as_deref() == Some(job_id) && e.kind == "completed"));
    events
}

#[test]
fn a_postgres_url_opens_the_postgresql_store_for_the_whole_lifecycle() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let first = auth.request_job(PRODUCTION, Some("frame-1"), b"\x00\xffone").unwrap();
    let second = auth.request_job(PRODUCTION, Some("frame-2"), b"").unwrap();
    assert_eq!(auth.request_job(PRODUCTION, Some("frame-1"), b"\x00\xffone").unwrap(), first);

    let lease = auth.claim(PRODUCTION, "w1", Duration::from_secs(30)).unwrap().expect("a job");
    assert_eq!(lease.job_id(), first);
    assert_eq!(lease.payload().unwrap(), b"\x00\xffone");
    let before = lease.expiry().unwrap();
    lease.renew(Duration::from_secs(300)).unwrap();
    assert!(lease.expiry().unwrap() > before);
    lease.complete(&Facts::new().metadata("frames", 1).provenance("tool", "rust")).unwrap();

    let jobs = auth.jobs(PRODUCTION).unwrap();
    assert_eq!(jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), [first.as_str(), second.as_str()]);
    assert_eq!(
        (jobs[0].state.clone(), jobs[0].worker.as_deref(), jobs[0].attempts),
        (JobState::Completed, Some("w1"), 1)
    );
    assert_eq!(jobs[1].state, JobState::Requested);

    let events = settled_events(&auth, &first);
    let kinds: Vec<&str> =
        events.iter().filter(|e| e.job_id.as_deref() == Some(first.as_str())).map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["requested", "claimed", "renewed", "completed"]);
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    let last = events.last().unwrap().seq;
    assert!(auth.events(Some(PRODUCTION), last).unwrap().is_empty());

    // The rows are in the PostgreSQL schema: the URL was not taken for a file name.
    assert_eq!(schema.query("SELECT count(*) FROM leases_jobs"), "2");
    assert_eq!(
        schema.query(&format!(
            "SELECT string_agg(kind || ':' || key || '=' || value_json, ',' ORDER BY kind) \
             FROM leases_facts WHERE job_id = '{first}'"
        )),
        r#"metadata:frames=1,provenance:tool="rust""#
    );
}

#[test]
fn a_url_as_string_path_or_postgresql_scheme_reaches_the_library_unchanged() {
    let Some(schema) = Schema::new() else { return };
    let alt = format!("postgresql{}", &schema.url[schema.url.find("://").unwrap()..]);
    Authority::open(schema.url.clone()).unwrap().create_production("by-string").unwrap();
    Authority::open(Path::new(&schema.url)).unwrap().create_production("by-path").unwrap();
    Authority::open(PathBuf::from(&alt)).unwrap().create_production("by-postgresql-scheme").unwrap();
    assert_eq!(
        schema.query("SELECT string_agg(name, ',' ORDER BY name) FROM leases_productions"),
        "by-path,by-postgresql-scheme,by-string"
    );
}

#[test]
fn a_token_exported_on_one_handle_is_imported_through_a_second_handle() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w1", Duration::from_secs(60)).unwrap();
    let token = lease.export_token().unwrap();
    {
        let other = Authority::open(&schema.url).unwrap();
        let again = other.import_token(token.as_str()).unwrap();
        assert_eq!((again.job_id(), again.worker()), (id.as_str(), "w1"));
        assert_eq!(again.expiry().unwrap(), lease.expiry().unwrap());
        again.renew(Duration::from_secs(120)).unwrap();
        again.complete(&Facts::new().metadata("by", "second handle")).unwrap();
    }
    assert_eq!(common::job_state(&auth, &id), JobState::Completed);
    // The claim is finished, for every copy of it.
    assert_eq!(lease.renew(Duration::from_secs(180)).unwrap_err().kind(), ErrorKind::WrongState);
}

#[test]
fn a_cancel_through_one_handle_is_seen_by_the_holder_on_another() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let worker_side = Authority::open(&schema.url).unwrap();
    let lease = worker_side.claim(PRODUCTION, "w1", Duration::from_secs(30)).unwrap().expect("a job");
    auth.cancel(PRODUCTION, &id).unwrap();
    assert_eq!(lease.complete(&Facts::new()).unwrap_err().kind(), ErrorKind::Cancelled);
}

#[test]
fn an_edit_on_postgresql_publishes_only_at_commit() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let edit = auth.edit().unwrap();
    let pending = edit.claim(PRODUCTION, "w1", Duration::from_secs(5)).unwrap().expect("a job");
    edit.complete(&pending, &Facts::new().metadata("inline", true)).unwrap();
    assert_eq!(schema.query("SELECT state FROM leases_jobs"), "requested", "nothing published before commit");
    edit.commit().unwrap();
    assert_eq!(common::job_state(&auth, &id), JobState::Completed);
}

#[cfg(feature = "testing")]
#[test]
fn on_postgresql_the_seam_clock_replaces_the_servers_and_a_clock_behind_the_mark_regresses() {
    use leases::testing::set_clock;
    use std::time::{SystemTime, UNIX_EPOCH};

    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_900_000_000); // 2030, far from the server's clock
    set_clock(&auth, Some(t0)).unwrap();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim_job(PRODUCTION, &id, "w1", Duration::from_micros(30_000_001)).unwrap();
    assert_eq!(lease.expiry().unwrap(), t0 + Duration::from_micros(30_000_001));
    assert!(lease.expiry().unwrap() > SystemTime::now() + Duration::from_secs(3600), "not the server's clock");
    set_clock(&auth, Some(t0 + Duration::from_secs(10))).unwrap();
    lease.renew(Duration::from_secs(30)).unwrap();
    assert_eq!(lease.expiry().unwrap(), t0 + Duration::from_secs(40));

    set_clock(&auth, Some(t0 + Duration::from_secs(5))).unwrap(); // behind the mark (t0 + 10 s)
    assert_eq!(lease.renew(Duration::from_secs(60)).unwrap_err().kind(), ErrorKind::ClockRegressed);
    assert_eq!(auth.claim(PRODUCTION, "w2", Duration::from_secs(30)).unwrap_err().kind(), ErrorKind::ClockRegressed);
    assert_eq!(lease.expiry().unwrap(), t0 + Duration::from_secs(40), "a rejection changes nothing");

    set_clock(&auth, Some(t0 + Duration::from_secs(10))).unwrap(); // caught up
    lease.complete(&Facts::new()).unwrap();
    assert_eq!(common::job_state(&auth, &id), JobState::Completed);
}

#[test]
fn a_failed_postgresql_open_is_a_storage_error_without_the_password() {
    let Err(err) = Authority::open(format!("postgres://u:{PASSWORD}@127.0.0.1:1/x")) else {
        panic!("opening a server that is not there succeeded");
    };
    assert_eq!(err.kind(), ErrorKind::Storage);
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(PASSWORD), "the password leaked: {text}");
        assert!(text.contains("127.0.0.1:1"), "the message names the server: {text}");
    }
}

#[test]
fn a_location_that_is_not_utf8_is_an_invalid_argument_and_opens_nothing() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = common::TempDir::new("pg-non-utf8");
    let path = dir.path().join(OsStr::from_bytes(b"jobs-\xff.db"));
    let Err(err) = Authority::open(&path) else { panic!("a non-UTF-8 path was accepted") };
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file was created");
}

#[test]
fn pages_records_and_open_options_work_on_postgres() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let first = auth.request_job(PRODUCTION, Some("k1"), b"").unwrap();
    let second = auth.request_job(PRODUCTION, Some("k2"), b"").unwrap();
    let page: serde_json::Value =
        serde_json::from_str(&auth.jobs_page_json(PRODUCTION, None, None, None, None, 1).unwrap()).unwrap();
    assert_eq!(page["jobs"][0]["id"], first.as_str());
    let rest: serde_json::Value =
        serde_json::from_str(&auth.jobs_page_json(PRODUCTION, None, None, None, page["next"].as_str(), 1).unwrap())
            .unwrap();
    assert_eq!(rest["jobs"][0]["id"], second.as_str());
    assert!(rest["next"].is_null());
    let record: serde_json::Value = serde_json::from_str(&auth.job_json(PRODUCTION, &second).unwrap()).unwrap();
    assert_eq!(record["key"], "k2");

    let sqlite_only = leases::OpenOptions::new().synchronous(leases::Synchronous::Full).open(&schema.url);
    assert_eq!(sqlite_only.unwrap_err().kind(), ErrorKind::InvalidArgument); // a SQLite setting
    let mut o = leases::OpenOptions::new();
    o.must_exist(true);
    assert_eq!(o.open(&schema.url).unwrap().jobs(PRODUCTION).unwrap().len(), 2);
    let Some(empty) = Schema::new() else { return };
    assert_eq!(o.open(&empty.url).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn complete_and_claim_next_completes_and_claims_in_one_commit_on_postgresql() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::check_complete_and_claim_next(&auth);
}

// ---- the worker runtime on PostgreSQL ------------------------------------------

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

fn state(auth: &Authority, id: &str) -> JobState {
    auth.jobs(PRODUCTION).unwrap().into_iter().find(|j| j.id == id).unwrap().state
}

#[test]
fn on_postgresql_a_waiting_claim_wakes_when_another_handle_commits_a_request() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    // Another handle: its commit reaches this one's waiter by NOTIFY.
    common::expect_a_request_to_wake_a_waiting_claim(&auth, &Authority::open(&schema.url).unwrap());
}

#[test]
fn on_postgresql_a_canceller_ends_a_wait_and_claims_nothing() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let canceller = leases::Canceller::new().unwrap();
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            canceller.cancel().unwrap();
        });
        auth.claim_wait(PRODUCTION, "w", MINUTE, HOUR, Some(&canceller)).unwrap_err()
    });
    assert!(err.is_interrupted(), "{err}");
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    assert!(auth.claim_wait(PRODUCTION, "w", MINUTE, HOUR, Some(&canceller)).unwrap_err().is_interrupted());
    assert_eq!(state(&auth, &id), JobState::Requested);
}

#[test]
fn on_postgresql_a_cancel_through_another_handle_reaches_a_kept_alive_lease() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let id = auth.request_job(PRODUCTION, None, b"").unwrap();
    let lease = auth.claim(PRODUCTION, "w", Duration::from_secs(3)).unwrap().unwrap();
    lease.keep_alive(Duration::from_secs(3), Some(Duration::from_millis(100))).unwrap();
    Authority::open(&schema.url).unwrap().cancel(PRODUCTION, &id).unwrap();
    let why = lease.wait_lost(HOUR, None).unwrap().expect("the lease is over");
    assert_eq!(why.kind(), ErrorKind::Cancelled);
    assert!(why.is_not_held());
}

#[test]
fn on_postgresql_keep_alive_holds_a_lease_for_many_of_its_durations() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::expect_keep_alive_to_hold_a_lease_for_many_of_its_durations(&auth);
}

#[test]
fn on_postgresql_a_worker_drains_and_past_its_drain_timeout_releases() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    let first = auth.request_job(PRODUCTION, None, b"").unwrap();
    let second = auth.request_job(PRODUCTION, None, b"").unwrap();
    let config = leases::WorkerConfig::new(PRODUCTION, "rs-worker", Duration::from_secs(2));
    let worker = leases::Worker::new(&auth, config.clone()).unwrap();
    let stop = worker.stop_handle();
    let report = worker
        .run(move |_| {
            stop.stop();
            Ok::<_, leases::Error>(Facts::new().metadata("drained", true))
        })
        .unwrap();
    assert_eq!((report.claimed, report.completed), (1, 1));
    assert_eq!(state(&auth, &first), JobState::Completed);
    assert_eq!(state(&auth, &second), JobState::Requested);

    let worker = leases::Worker::new(&auth, config.drain_timeout(Duration::from_millis(200))).unwrap();
    let stop = worker.stop_handle();
    let report = worker
        .run(move |lease| {
            stop.stop();
            lease.wait_lost(Duration::from_secs(30), None).unwrap(); // until the worker gives it back
            Ok::<_, leases::Error>(Facts::new())
        })
        .unwrap();
    assert!(report.drain_timed_out);
    assert_eq!(state(&auth, &second), JobState::Requested);
}

#[test]
#[ignore = "a child worker of the PostgreSQL SIGTERM tests"]
fn child_worker() {
    common::child::run();
}

#[test]
fn on_postgresql_a_sigterm_mid_job_drains_the_worker_process_and_its_job_completes() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::child::expect_a_signal_mid_job_drains_a_worker_process(&auth, &schema.url, "child_worker", libc::SIGTERM);
}

#[test]
fn on_postgresql_a_sigterm_past_the_drain_timeout_releases_the_job_of_a_worker_process() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::child::expect_a_signal_past_the_drain_timeout_releases_the_job(
        &auth,
        &schema.url,
        "child_worker",
        libc::SIGTERM,
    );
}

#[test]
fn on_postgresql_a_sigterm_drains_every_running_handler_of_a_concurrent_worker_process() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::child::expect_a_signal_drains_every_running_handler_of_a_concurrent_worker(
        &auth,
        &schema.url,
        "child_worker",
        libc::SIGTERM,
    );
}

#[test]
fn on_postgresql_a_second_sigint_gives_the_running_jobs_of_a_worker_process_back_at_once() {
    let Some(schema) = Schema::new() else { return };
    let auth = schema.open();
    common::child::expect_a_second_signal_gives_the_running_jobs_back_at_once(
        &auth,
        &schema.url,
        "child_worker",
        libc::SIGINT,
    );
}
