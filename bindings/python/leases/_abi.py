"""The C ABI's tables for the leases package (limits, statuses, declarations),
generated from include/leases.h by abi/leases_abi.py (make abi-generate); do not edit."""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Tuple

# The ABI this package was generated for: the loaded library must report the
# same ABI number and at least this revision (docs/ABI.md).
ABI_VERSION = 1
ABI_REVISION = 1

MAX_DURATION_US = 86_400_000_000
MAX_NAME_LEN = 200
MAX_REASON_LEN = 4_096
MAX_PAYLOAD_LEN = 1_048_576
MAX_FACTS_LEN = 1_048_576
MAX_PATH_LEN = 4_096
MAX_TOKEN_LEN = 128
MAX_WAIT_US = 86_400_000_000
MAX_PRIORITY = 1_000
MAX_ATTEMPTS = 1_000
MAX_DELAY_US = 31_622_400_000_000
MAX_PAGE_SIZE = 1_000
MAX_CURSOR_LEN = 1_024
MAX_RETENTION_US = 3_153_600_000_000_000

# Option values and defaults (open flags, synchronous levels, the page size).
DEFAULT_PAGE_SIZE = 100
OPEN_MUST_EXIST = 1
SYNCHRONOUS_DEFAULT = 0
SYNCHRONOUS_NORMAL = 1
SYNCHRONOUS_FULL = 2
SYNCHRONOUS_EXTRA = 3
WORKER_EXIT_WHEN_EMPTY = 1
RESULT_COMPLETE = 1
RESULT_FAIL_RETRY = 2
RESULT_FAIL = 3
RESULT_RELEASE = 4
RESULT_SETTLED = 5
STOP_DRAIN = 1
STOP_GIVE_BACK = 2
WORKER_RUNNING = 0
WORKER_STOPPED = 1
WORKER_GAVE_BACK = 2
WORKER_FAILED = 3
PRUNE_DRY_RUN = 1

# (code, status name, exception class) of every failure status, in code order.
STATUSES: Tuple[Tuple[int, str, str], ...] = (
    (1, "invalid_argument", "InvalidArgumentError"),
    (2, "invalid_duration", "InvalidDurationError"),
    (3, "not_found", "NotFoundError"),
    (4, "nothing_to_claim", "NothingToClaimError"),
    (5, "wrong_state", "WrongStateError"),
    (6, "lease_lost", "LeaseLostError"),
    (7, "expired", "ExpiredError"),
    (8, "cancelled", "CancelledError"),
    (9, "not_extended", "NotExtendedError"),
    (10, "clock_regressed", "ClockRegressedError"),
    (11, "closed", "ClosedError"),
    (12, "bad_token", "BadTokenError"),
    (13, "busy", "BusyError"),
    (14, "storage", "StorageError"),
    (15, "outcome_unknown", "OutcomeUnknownError"),
    (16, "schema_too_new", "SchemaTooNewError"),
    (17, "forked", "ForkedError"),
    (18, "internal", "InternalError"),
    (19, "interrupted", "InterruptedError"),
)


# One opaque C type per handle, as in the header.


class leases_authority(ctypes.Structure):
    pass


class leases_edit(ctypes.Structure):
    pass


class leases_lease(ctypes.Structure):
    pass


class leases_execution(ctypes.Structure):
    pass


class leases_canceller(ctypes.Structure):
    pass


class leases_worker(ctypes.Structure):
    pass


AuthorityPtr = ctypes.POINTER(leases_authority)
EditPtr = ctypes.POINTER(leases_edit)
LeasePtr = ctypes.POINTER(leases_lease)
ExecutionPtr = ctypes.POINTER(leases_execution)
CancellerPtr = ctypes.POINTER(leases_canceller)
WorkerPtr = ctypes.POINTER(leases_worker)


# The header's structs, field for field (set size to ctypes.sizeof).


class leases_request_options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("priority", ctypes.c_int32),
        ("run_at_unix_us", ctypes.c_int64),
        ("delay_us", ctypes.c_int64),
    ]


class leases_retry_policy(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("max_attempts", ctypes.c_int32),
        ("jitter_percent", ctypes.c_int32),
        ("backoff_base_us", ctypes.c_int64),
        ("backoff_cap_us", ctypes.c_int64),
    ]


class leases_open_options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_int32),
        ("synchronous", ctypes.c_int32),
        ("busy_timeout_us", ctypes.c_int64),
    ]


class leases_worker_options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_int32),
        ("concurrency", ctypes.c_int32),
        ("max_jobs", ctypes.c_int64),
        ("interval_us", ctypes.c_int64),
        ("drain_timeout_us", ctypes.c_int64),
    ]


class leases_retention_policy(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("keep_completed_us", ctypes.c_int64),
        ("keep_failed_us", ctypes.c_int64),
        ("keep_dead_us", ctypes.c_int64),
        ("keep_cancelled_us", ctypes.c_int64),
        ("keep_events_us", ctypes.c_int64),
    ]


class leases_prune_options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_int32),
        ("older_than_us", ctypes.c_int64),
    ]


c_status = ctypes.c_int

Signature = Tuple[Any, List[Any]]

# Every function of include/leases.h: name -> (restype, argtypes).
SIGNATURES: Dict[str, Signature] = {
    "leases_abi_version": (ctypes.c_uint32, []),
    "leases_abi_revision": (ctypes.c_uint32, []),
    "leases_version": (ctypes.c_char_p, []),
    "leases_status_name": (ctypes.c_char_p, [c_status]),
    "leases_last_error": (ctypes.c_char_p, []),
    "leases_last_error_job_id": (ctypes.c_char_p, []),
    "leases_free": (None, [ctypes.c_void_p]),
    "leases_authority_open": (c_status, [ctypes.c_char_p, ctypes.POINTER(AuthorityPtr)]),
    "leases_authority_close": (None, [AuthorityPtr]),
    "leases_production_create": (c_status, [AuthorityPtr, ctypes.c_char_p]),
    "leases_job_request": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_claim": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(LeasePtr)]),
    "leases_claim_job": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(LeasePtr)]),
    "leases_cancel": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p]),
    "leases_lease_renew": (c_status, [LeasePtr, ctypes.c_int64]),
    "leases_lease_release": (c_status, [LeasePtr]),
    "leases_lease_fail": (c_status, [LeasePtr, ctypes.c_char_p]),
    "leases_lease_complete": (c_status, [LeasePtr, ctypes.c_char_p]),
    "leases_lease_expiry": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_int64)]),
    "leases_lease_job_id": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_lease_payload": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
    "leases_lease_production": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_lease_worker": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_lease_export": (c_status, [LeasePtr, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_lease_import": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(LeasePtr)]),
    "leases_lease_free": (None, [LeasePtr]),
    "leases_canceller_new": (c_status, [ctypes.POINTER(CancellerPtr)]),
    "leases_canceller_cancel": (c_status, [CancellerPtr]),
    "leases_canceller_free": (None, [CancellerPtr]),
    "leases_claim_wait": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, CancellerPtr, ctypes.POINTER(LeasePtr)]),
    "leases_lease_keep_alive": (c_status, [LeasePtr, ctypes.c_int64, ctypes.c_int64]),
    "leases_lease_keep_alive_stop": (c_status, [LeasePtr]),
    "leases_lease_check": (c_status, [LeasePtr, ctypes.POINTER(c_status)]),
    "leases_lease_wait_lost": (c_status, [LeasePtr, ctypes.c_int64, CancellerPtr, ctypes.POINTER(c_status)]),
    "leases_edit_begin": (c_status, [AuthorityPtr, ctypes.POINTER(EditPtr)]),
    "leases_edit_claim": (c_status, [EditPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(LeasePtr)]),
    "leases_edit_complete": (c_status, [EditPtr, LeasePtr, ctypes.c_char_p]),
    "leases_edit_commit": (c_status, [EditPtr]),
    "leases_edit_abort": (None, [EditPtr]),
    "leases_jobs_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_events_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_job_request_v2": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.POINTER(leases_request_options), ctypes.POINTER(ctypes.c_void_p)]),
    "leases_production_create_v2": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(leases_retry_policy)]),
    "leases_production_set_policy": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(leases_retry_policy)]),
    "leases_lease_fail_retry": (c_status, [LeasePtr, ctypes.c_char_p, ctypes.c_int64]),
    "leases_job_retry": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p]),
    "leases_production_redrive": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]),
    "leases_execution_begin": (c_status, [LeasePtr, ctypes.c_char_p, ctypes.POINTER(ExecutionPtr)]),
    "leases_execution_temp_path": (ctypes.c_char_p, [ExecutionPtr]),
    "leases_execution_final_path": (ctypes.c_char_p, [ExecutionPtr]),
    "leases_execution_finish": (c_status, [ExecutionPtr, ctypes.c_char_p]),
    "leases_execution_abandon": (None, [ExecutionPtr]),
    "leases_jobs_page_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_jobs_page_facts_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_events_page_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_job_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_productions_page_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_job_counts_json": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_authority_open_v2": (c_status, [ctypes.c_char_p, ctypes.POINTER(leases_open_options), ctypes.POINTER(AuthorityPtr)]),
    "leases_lease_complete_and_claim_next": (c_status, [LeasePtr, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(LeasePtr)]),
    "leases_worker_new": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(leases_worker_options), ctypes.POINTER(WorkerPtr)]),
    "leases_worker_next": (c_status, [WorkerPtr, ctypes.c_int64, ctypes.POINTER(LeasePtr)]),
    "leases_worker_settle": (c_status, [WorkerPtr, LeasePtr, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t]),
    "leases_worker_stop": (c_status, [WorkerPtr, ctypes.c_int32]),
    "leases_worker_wait": (c_status, [WorkerPtr, ctypes.c_int64, CancellerPtr, ctypes.POINTER(ctypes.c_int32)]),
    "leases_worker_stats_json": (c_status, [WorkerPtr, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_worker_free": (None, [WorkerPtr]),
    "leases_production_set_retention": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(leases_retention_policy)]),
    "leases_production_retention": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(leases_retention_policy)]),
    "leases_prune": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(leases_prune_options), ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]),
}

# Every function of include/leases_testing.h: name -> (restype, argtypes).
TESTING_SIGNATURES: Dict[str, Signature] = {
    "leases_testing_set_clock": (c_status, [AuthorityPtr, ctypes.c_int64]),
    "leases_testing_set_clock_sequence": (c_status, [AuthorityPtr, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]),
    "leases_testing_set_safety_poll": (c_status, [AuthorityPtr, ctypes.c_int64]),
    "leases_testing_open": (c_status, [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(AuthorityPtr)]),
    "leases_testing_pragma": (c_status, [AuthorityPtr, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "leases_testing_lose_commit_acks": (c_status, [AuthorityPtr]),
    "leases_testing_panic": (c_status, []),
    "leases_testing_lost_track": (c_status, [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]),
}
