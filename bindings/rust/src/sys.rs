//! Raw declarations of `include/leases.h`, one for one (the `-sys` layer),
//! generated from include/leases.h by abi/leases_abi.py (make abi-generate); do not edit.
//!
//! Everything here is `unsafe` and follows the header's ownership rules; the
//! safe API in the crate root is the supported way in.
#![allow(non_camel_case_types)]
// Each item is documented where it is declared: include/leases.h.
#![allow(missing_docs)]

use std::os::raw::{c_char, c_int, c_void};

/// The ABI this module declares (`LEASES_ABI_VERSION`).
pub const LEASES_ABI_VERSION: u32 = 1;
/// The revision of that ABI this module declares (`LEASES_ABI_REVISION`).
pub const LEASES_ABI_REVISION: u32 = 1;
pub const LEASES_MAX_DURATION_US: i64 = 86_400_000_000;
pub const LEASES_MAX_NAME_LEN: usize = 200;
pub const LEASES_MAX_REASON_LEN: usize = 4_096;
pub const LEASES_MAX_PAYLOAD_LEN: usize = 1_048_576;
pub const LEASES_MAX_FACTS_LEN: usize = 1_048_576;
pub const LEASES_MAX_PATH_LEN: usize = 4_096;
pub const LEASES_MAX_TOKEN_LEN: usize = 128;
pub const LEASES_MAX_WAIT_US: i64 = 86_400_000_000;
pub const LEASES_MAX_PRIORITY: usize = 1_000;
pub const LEASES_MAX_ATTEMPTS: usize = 1_000;
pub const LEASES_MAX_DELAY_US: i64 = 31_622_400_000_000;
pub const LEASES_MAX_PAGE_SIZE: usize = 1_000;
pub const LEASES_MAX_CURSOR_LEN: usize = 1_024;
pub const LEASES_MAX_RETENTION_US: i64 = 3_153_600_000_000_000;
pub const LEASES_DEFAULT_PAGE_SIZE: u32 = 100;
pub const LEASES_OPEN_MUST_EXIST: i32 = 1;
pub const LEASES_SYNCHRONOUS_DEFAULT: i32 = 0;
pub const LEASES_SYNCHRONOUS_NORMAL: i32 = 1;
pub const LEASES_SYNCHRONOUS_FULL: i32 = 2;
pub const LEASES_SYNCHRONOUS_EXTRA: i32 = 3;
pub const LEASES_WORKER_EXIT_WHEN_EMPTY: i32 = 1;
pub const LEASES_RESULT_COMPLETE: i32 = 1;
pub const LEASES_RESULT_FAIL_RETRY: i32 = 2;
pub const LEASES_RESULT_FAIL: i32 = 3;
pub const LEASES_RESULT_RELEASE: i32 = 4;
pub const LEASES_RESULT_SETTLED: i32 = 5;
pub const LEASES_STOP_DRAIN: i32 = 1;
pub const LEASES_STOP_GIVE_BACK: i32 = 2;
pub const LEASES_WORKER_RUNNING: i32 = 0;
pub const LEASES_WORKER_STOPPED: i32 = 1;
pub const LEASES_WORKER_GAVE_BACK: i32 = 2;
pub const LEASES_WORKER_FAILED: i32 = 3;
pub const LEASES_PRUNE_DRY_RUN: i32 = 1;

/// Opaque handle types: each object has its own, so a lease can never be
/// passed where an authority is expected.
#[repr(C)]
pub struct leases_authority {
    _private: [u8; 0],
}
#[repr(C)]
pub struct leases_edit {
    _private: [u8; 0],
}
#[repr(C)]
pub struct leases_lease {
    _private: [u8; 0],
}
#[repr(C)]
pub struct leases_execution {
    _private: [u8; 0],
}
#[repr(C)]
pub struct leases_canceller {
    _private: [u8; 0],
}
#[repr(C)]
pub struct leases_worker {
    _private: [u8; 0],
}

/// The header's structs, field for field (set `size` to `size_of`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_request_options {
    pub size: usize,
    pub priority: i32,
    pub run_at_unix_us: i64,
    pub delay_us: i64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_retry_policy {
    pub size: usize,
    pub max_attempts: i32,
    pub jitter_percent: i32,
    pub backoff_base_us: i64,
    pub backoff_cap_us: i64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_open_options {
    pub size: usize,
    pub flags: i32,
    pub synchronous: i32,
    pub busy_timeout_us: i64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_worker_options {
    pub size: usize,
    pub flags: i32,
    pub concurrency: i32,
    pub max_jobs: i64,
    pub interval_us: i64,
    pub drain_timeout_us: i64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_retention_policy {
    pub size: usize,
    pub keep_completed_us: i64,
    pub keep_failed_us: i64,
    pub keep_dead_us: i64,
    pub keep_cancelled_us: i64,
    pub keep_events_us: i64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct leases_prune_options {
    pub size: usize,
    pub flags: i32,
    pub older_than_us: i64,
}

pub type leases_status = c_int;

pub const LEASES_OK: leases_status = 0;
pub const LEASES_INVALID_ARGUMENT: leases_status = 1;
pub const LEASES_INVALID_DURATION: leases_status = 2;
pub const LEASES_NOT_FOUND: leases_status = 3;
pub const LEASES_NOTHING_TO_CLAIM: leases_status = 4;
pub const LEASES_WRONG_STATE: leases_status = 5;
pub const LEASES_LEASE_LOST: leases_status = 6;
pub const LEASES_EXPIRED: leases_status = 7;
pub const LEASES_CANCELLED: leases_status = 8;
pub const LEASES_NOT_EXTENDED: leases_status = 9;
pub const LEASES_CLOCK_REGRESSED: leases_status = 10;
pub const LEASES_CLOSED: leases_status = 11;
pub const LEASES_BAD_TOKEN: leases_status = 12;
pub const LEASES_BUSY: leases_status = 13;
pub const LEASES_STORAGE: leases_status = 14;
pub const LEASES_OUTCOME_UNKNOWN: leases_status = 15;
pub const LEASES_SCHEMA_TOO_NEW: leases_status = 16;
pub const LEASES_FORKED: leases_status = 17;
pub const LEASES_INTERNAL: leases_status = 18;
pub const LEASES_INTERRUPTED: leases_status = 19;

#[rustfmt::skip]
extern "C" {
    pub fn leases_abi_version() -> u32;
    pub fn leases_abi_revision() -> u32;
    pub fn leases_version() -> *const c_char;
    pub fn leases_status_name(status: leases_status) -> *const c_char;
    pub fn leases_last_error() -> *const c_char;
    pub fn leases_last_error_job_id() -> *const c_char;
    pub fn leases_free(p: *mut c_void);
    pub fn leases_authority_open(path: *const c_char, out: *mut *mut leases_authority) -> leases_status;
    pub fn leases_authority_close(authority: *mut leases_authority);
    pub fn leases_production_create(authority: *mut leases_authority, name: *const c_char) -> leases_status;
    pub fn leases_job_request(authority: *mut leases_authority, production: *const c_char, key: *const c_char, payload: *const u8, payload_len: usize, out_job_id: *mut *mut c_char) -> leases_status;
    pub fn leases_claim(authority: *mut leases_authority, production: *const c_char, worker: *const c_char, duration_us: i64, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_claim_job(authority: *mut leases_authority, production: *const c_char, job_id: *const c_char, worker: *const c_char, duration_us: i64, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_cancel(authority: *mut leases_authority, production: *const c_char, job_id: *const c_char) -> leases_status;
    pub fn leases_lease_renew(lease: *mut leases_lease, duration_us: i64) -> leases_status;
    pub fn leases_lease_release(lease: *mut leases_lease) -> leases_status;
    pub fn leases_lease_fail(lease: *mut leases_lease, reason: *const c_char) -> leases_status;
    pub fn leases_lease_complete(lease: *mut leases_lease, facts_json: *const c_char) -> leases_status;
    pub fn leases_lease_expiry(lease: *const leases_lease, out_expiry_unix_us: *mut i64) -> leases_status;
    pub fn leases_lease_job_id(lease: *const leases_lease, out_job_id: *mut *mut c_char) -> leases_status;
    pub fn leases_lease_payload(lease: *const leases_lease, out_payload: *mut *mut u8, out_payload_len: *mut usize) -> leases_status;
    pub fn leases_lease_production(lease: *const leases_lease, out_production: *mut *mut c_char) -> leases_status;
    pub fn leases_lease_worker(lease: *const leases_lease, out_worker: *mut *mut c_char) -> leases_status;
    pub fn leases_lease_export(lease: *const leases_lease, out_token: *mut *mut c_char) -> leases_status;
    pub fn leases_lease_import(authority: *mut leases_authority, token: *const c_char, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_lease_free(lease: *mut leases_lease);
    pub fn leases_canceller_new(out: *mut *mut leases_canceller) -> leases_status;
    pub fn leases_canceller_cancel(canceller: *mut leases_canceller) -> leases_status;
    pub fn leases_canceller_free(canceller: *mut leases_canceller);
    pub fn leases_claim_wait(authority: *mut leases_authority, production: *const c_char, worker: *const c_char, duration_us: i64, wait_us: i64, canceller: *mut leases_canceller, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_lease_keep_alive(lease: *mut leases_lease, duration_us: i64, interval_us: i64) -> leases_status;
    pub fn leases_lease_keep_alive_stop(lease: *mut leases_lease) -> leases_status;
    pub fn leases_lease_check(lease: *const leases_lease, out_reason: *mut leases_status) -> leases_status;
    pub fn leases_lease_wait_lost(lease: *const leases_lease, timeout_us: i64, canceller: *mut leases_canceller, out_reason: *mut leases_status) -> leases_status;
    pub fn leases_edit_begin(authority: *mut leases_authority, out: *mut *mut leases_edit) -> leases_status;
    pub fn leases_edit_claim(edit: *mut leases_edit, production: *const c_char, worker: *const c_char, duration_us: i64, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_edit_complete(edit: *mut leases_edit, lease: *mut leases_lease, facts_json: *const c_char) -> leases_status;
    pub fn leases_edit_commit(edit: *mut leases_edit) -> leases_status;
    pub fn leases_edit_abort(edit: *mut leases_edit);
    pub fn leases_jobs_json(authority: *mut leases_authority, production: *const c_char, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_events_json(authority: *mut leases_authority, production: *const c_char, after_seq: i64, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_job_request_v2(authority: *mut leases_authority, production: *const c_char, key: *const c_char, payload: *const u8, payload_len: usize, options: *const leases_request_options, out_job_id: *mut *mut c_char) -> leases_status;
    pub fn leases_production_create_v2(authority: *mut leases_authority, name: *const c_char, policy: *const leases_retry_policy) -> leases_status;
    pub fn leases_production_set_policy(authority: *mut leases_authority, production: *const c_char, policy: *const leases_retry_policy) -> leases_status;
    pub fn leases_lease_fail_retry(lease: *mut leases_lease, reason: *const c_char, delay_us: i64) -> leases_status;
    pub fn leases_job_retry(authority: *mut leases_authority, production: *const c_char, job_id: *const c_char) -> leases_status;
    pub fn leases_production_redrive(authority: *mut leases_authority, production: *const c_char, state: *const c_char, out_count: *mut i64) -> leases_status;
    pub fn leases_execution_begin(lease: *mut leases_lease, output_dir: *const c_char, out: *mut *mut leases_execution) -> leases_status;
    pub fn leases_execution_temp_path(execution: *const leases_execution) -> *const c_char;
    pub fn leases_execution_final_path(execution: *const leases_execution) -> *const c_char;
    pub fn leases_execution_finish(execution: *mut leases_execution, facts_json: *const c_char) -> leases_status;
    pub fn leases_execution_abandon(execution: *mut leases_execution);
    pub fn leases_jobs_page_json(authority: *mut leases_authority, production: *const c_char, states: *const c_char, key: *const c_char, job_id: *const c_char, cursor: *const c_char, limit: u32, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_jobs_page_facts_json(authority: *mut leases_authority, production: *const c_char, states: *const c_char, key: *const c_char, job_id: *const c_char, cursor: *const c_char, limit: u32, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_events_page_json(authority: *mut leases_authority, production: *const c_char, job_id: *const c_char, kinds: *const c_char, after_seq: i64, limit: u32, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_job_json(authority: *mut leases_authority, production: *const c_char, job_id: *const c_char, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_productions_page_json(authority: *mut leases_authority, cursor: *const c_char, limit: u32, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_job_counts_json(authority: *mut leases_authority, production: *const c_char, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_authority_open_v2(location: *const c_char, options: *const leases_open_options, out: *mut *mut leases_authority) -> leases_status;
    pub fn leases_lease_complete_and_claim_next(lease: *mut leases_lease, facts_json: *const c_char, duration_us: i64, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_worker_new(authority: *mut leases_authority, production: *const c_char, worker: *const c_char, duration_us: i64, options: *const leases_worker_options, out: *mut *mut leases_worker) -> leases_status;
    pub fn leases_worker_next(worker: *mut leases_worker, wait_us: i64, out: *mut *mut leases_lease) -> leases_status;
    pub fn leases_worker_settle(worker: *mut leases_worker, lease: *mut leases_lease, outcome: i32, text: *const c_char, text_len: usize) -> leases_status;
    pub fn leases_worker_stop(worker: *mut leases_worker, mode: i32) -> leases_status;
    pub fn leases_worker_wait(worker: *mut leases_worker, timeout_us: i64, canceller: *mut leases_canceller, out_end: *mut i32) -> leases_status;
    pub fn leases_worker_stats_json(worker: *mut leases_worker, out_json: *mut *mut c_char) -> leases_status;
    pub fn leases_worker_free(worker: *mut leases_worker);
    pub fn leases_production_set_retention(authority: *mut leases_authority, production: *const c_char, policy: *const leases_retention_policy) -> leases_status;
    pub fn leases_production_retention(authority: *mut leases_authority, production: *const c_char, out: *mut leases_retention_policy) -> leases_status;
    pub fn leases_prune(authority: *mut leases_authority, production: *const c_char, archive_path: *const c_char, options: *const leases_prune_options, out_jobs: *mut i64, out_events: *mut i64) -> leases_status;
}

/// `include/leases_testing.h`: present only in the test build of the library
/// (`build/test/libleases.so`), declared only with the `testing` feature.
#[cfg(feature = "testing")]
pub mod testing {
    #[allow(unused_imports)]
    use super::*;

    #[rustfmt::skip]
    extern "C" {
        pub fn leases_testing_set_clock(authority: *mut leases_authority, now_unix_us: i64) -> leases_status;
        pub fn leases_testing_set_clock_sequence(authority: *mut leases_authority, samples_unix_us: *const i64, count: usize) -> leases_status;
        pub fn leases_testing_set_safety_poll(authority: *mut leases_authority, poll_us: i64) -> leases_status;
        pub fn leases_testing_open(path: *const c_char, busy_timeout_us: i64, out: *mut *mut leases_authority) -> leases_status;
        pub fn leases_testing_pragma(authority: *mut leases_authority, name: *const c_char, out_value: *mut *mut c_char) -> leases_status;
        pub fn leases_testing_lose_commit_acks(authority: *mut leases_authority) -> leases_status;
        pub fn leases_testing_panic() -> leases_status;
        pub fn leases_testing_lost_track(text: *const c_char, as_error: u32, out_copy: *mut *mut c_char) -> leases_status;
    }
}
