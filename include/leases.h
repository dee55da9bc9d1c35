/*
 * leases.h: the C contract of libleases, a job-lease authority.
 *
 * This hand-written header is the ABI and the single source of every
 * projection's tables (abi/leases_abi.py generates them). The ABI only grows:
 * a program built against an older leases.h keeps working against a newer
 * library. A declaration, once released, never changes; a new capability is
 * a new function (name_v2 when it replaces one), added at a new revision
 * (LEASES_ABI_REVISION, abi/REVISION). docs/ABI.md has the checklist;
 * `make test-abi` enforces it.
 *
 * CONVENTIONS
 *   - Every fallible function returns a leases_status; LEASES_OK (0) is
 *     success. Only the return value says whether a call failed; then
 *     leases_last_error() describes the failure for the calling thread.
 *   - Outputs come last and are called out / out_*. Every out pointer must be
 *     non-NULL (else LEASES_INVALID_ARGUMENT). On failure, handle and string
 *     outputs are set to NULL and integer outputs to 0.
 *   - Units are in the names: durations are int64_t ..._us (microseconds),
 *     instants are int64_t ..._unix_us (microseconds since the Unix epoch,
 *     UTC). A duration must be 1 .. LEASES_MAX_DURATION_US inclusive;
 *     anything else returns LEASES_INVALID_DURATION. No call accepts a
 *     caller-chosen "now": the authority reads its own clock.
 *   - Input strings are borrowed, NUL-terminated UTF-8, and copied before
 *     the call returns. Oversize or invalid UTF-8 input returns
 *     LEASES_INVALID_ARGUMENT. A rejected call changes nothing in the store.
 *
 * OWNERSHIP
 *   - char * outputs (ids, tokens, JSON) are allocated by the library and
 *     owned by the caller, who releases them with leases_free() (never with
 *     another allocator's free).
 *   - Handle outputs are owned by the caller and released with their own
 *     function: leases_authority_close, leases_lease_free, leases_edit_commit
 *     or leases_edit_abort, leases_execution_finish or
 *     leases_execution_abandon, leases_canceller_free, leases_worker_free.
 *     The leases leases_worker_next hands out are the worker's: never free
 *     them; leases_worker_settle releases them. Releasing functions
 *     accept NULL and a handle that was already released (nothing happens).
 *   - leases_version(), leases_status_name() and leases_last_error() return
 *     strings the library owns; never free them.
 *     leases_execution_temp_path/final_path return strings owned by the
 *     execution, valid until it is finished or abandoned.
 *   - A handle is an opaque id, not memory: a released, unknown or
 *     wrong-type handle is rejected with LEASES_INVALID_ARGUMENT, never
 *     dereferenced.
 *
 * THREADS
 *   - leases_authority: safe to share between threads.
 *   - leases_lease: safe to share; operations on one lease are serialized.
 *   - leases_edit: safe to call from several threads, but it is one write
 *     transaction holding its locks (SQLite's writer lock; on PostgreSQL
 *     the rows it takes); use it from one thread at a time and keep it short.
 *   - leases_execution: use from one thread at a time.
 *   - leases_canceller: safe to share; cancel it from any thread.
 *   - leases_worker: safe to share; N threads call leases_worker_next and
 *     leases_worker_settle on one worker at once (N: its concurrency), and
 *     any thread may call leases_worker_stop, leases_worker_wait and
 *     leases_worker_stats_json meanwhile.
 *   - A waiting call (leases_claim_wait, leases_lease_wait_lost) blocks only
 *     its own thread, holding nothing another thread needs.
 *   - leases_last_error() is per thread.
 *
 * GO RUNTIME LIMITS (the library is written in Go)
 *   - One Go runtime per process: do not load libleases.so into a Go program
 *     or next to another Go-built shared library.
 *   - Never dlclose() the library (Python loads it with RTLD_NODELETE).
 *   - No use after fork() without exec: in a forked child every call returns
 *     LEASES_FORKED at once, leaving outputs untouched (functions without a
 *     status do nothing and return NULL where they return a pointer). leases_abi_version,
 *     leases_abi_revision, leases_version, leases_status_name, leases_last_error and leases_free
 *     keep working.
 *   - Signal handlers installed by the host must use SA_ONSTACK.
 *
 * A lease is internal workflow coordination: it is not authentication, maps
 * to no standard, and makes no claim about the authenticity of provenance.
 * The clock policy is a conservative local-clock policy, not a trusted-time
 * guarantee.
 */
#ifndef LEASES_H
#define LEASES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The incompatible-ABI number (abi/VERSION, the SONAME libleases.so.1). It
 * changes only with a breaking change, which the project never makes. */
#define LEASES_ABI_VERSION 1
/* How many additions this header has made to ABI 1 (abi/REVISION): the
 * functions of revision N carry the symbol version LEASES_1.N. */
#define LEASES_ABI_REVISION 1
#define LEASES_MAX_DURATION_US INT64_C(86400000000) /* 24 h, inclusive */

/* Input limits, in bytes (NUL not counted). */
#define LEASES_MAX_NAME_LEN 200        /* production, worker, job key */
#define LEASES_MAX_REASON_LEN 4096     /* failure reason */
#define LEASES_MAX_PAYLOAD_LEN 1048576 /* job payload */
#define LEASES_MAX_FACTS_LEN 1048576   /* facts_json */
#define LEASES_MAX_PATH_LEN 4096       /* database path, output directory */
#define LEASES_MAX_TOKEN_LEN 128       /* exported token */
/* The longest wait of leases_claim_wait and leases_lease_wait_lost: 24 h,
 * inclusive. Since revision 1. */
#define LEASES_MAX_WAIT_US INT64_C(86400000000)

typedef struct leases_authority leases_authority; /* one handle type per object */
typedef struct leases_edit leases_edit;
typedef struct leases_lease leases_lease;
typedef struct leases_execution leases_execution;
typedef struct leases_canceller leases_canceller; /* since revision 1 */
typedef struct leases_worker leases_worker;       /* since revision 1 */

/*
 * Status codes. When several rejections apply, the first of this order is
 * reported: FORKED; INVALID_ARGUMENT or INVALID_DURATION; CLOSED (lease
 * closed or pending locally); CLOCK_REGRESSED; NOT_FOUND; CANCELLED;
 * LEASE_LOST; WRONG_STATE; EXPIRED; NOT_EXTENDED (docs/c-api.md).
 */
typedef int leases_status;
#define LEASES_OK 0 /* success */
/* bad input: NULL, empty, invalid UTF-8, NUL byte, oversize, non-canonical
 * id, bad facts JSON, unknown handle; an output path twice in one
 * completion, or a fact or output the job already has; a new name (production,
 * key, worker, fact key) that is not NFC, holds an invisible character or
 * has white space at either end; in listings, a
 * malformed or foreign cursor, an unknown state or event kind, a page limit
 * outside 0..1000, a window over 24 h; a priority, run-at, delay or retry
 * policy out of its bounds, an options struct of a bad size, a redrive of a
 * state other than failed, dead or cancelled */
#define LEASES_INVALID_ARGUMENT 1
/* not a whole number of microseconds in 1 .. LEASES_MAX_DURATION_US; or a
 * complete-and-claim-next whose new claim would be born expired (a duration
 * shorter than the commit took): nothing was written, and the lease being
 * completed still holds its claim */
#define LEASES_INVALID_DURATION 2
/* the production or job does not exist, or the lease or token belongs to
 * another production; or the database does not exist and was opened not to
 * be created */
#define LEASES_NOT_FOUND 3
/* the production has no claimable job (a delayed or backing-off job is not
 * claimable before its time) */
#define LEASES_NOTHING_TO_CLAIM 4
/* the job is in a state that forbids the operation, or this claim already
 * finished through another handle; a claim by id before the job's run-at or
 * backoff has passed, or of a dead job; a retry of a job that is not failed,
 * dead or cancelled; creating a production that exists with another retry
 * policy */
#define LEASES_WRONG_STATE 5
/* the job's current claim is another one (also when another claim has since
 * finished the job, or a claim noticed that this one had lapsed) */
#define LEASES_LEASE_LOST 6
/* the claim's expiry has passed on the authority's clock (at the start, or
 * before the operation committed) */
#define LEASES_EXPIRED 7
#define LEASES_CANCELLED 8 /* the coordinator cancelled the job */
#define LEASES_NOT_EXTENDED 9 /* a renewal would not move the expiry later */
#define LEASES_CLOCK_REGRESSED 10 /* the authority's clock is behind its durable high-water mark */
/* the lease, edit, execution or authority handle is closed or consumed, or
 * (a lease) pending until its edit commits */
#define LEASES_CLOSED 11
/* the token is malformed, too long, non-canonical, of another version, or
 * fails its checksum */
#define LEASES_BAD_TOKEN 12
/* a lock (SQLite's writer lock or a PostgreSQL row lock) was not obtained
 * within the busy timeout, or the server kept aborting the operation over
 * conflicts; nothing was written */
#define LEASES_BUSY 13
/* the database could not be opened, read or written (on PostgreSQL also an
 * unreachable server or a lost connection); nothing changed */
#define LEASES_STORAGE 14
/* the commit itself failed: it may or may not have persisted; the lease stays
 * active locally and its next use asks the store (an edit's leases too); a
 * claim then returns no lease and names the job (leases_last_error_job_id) */
#define LEASES_OUTCOME_UNKNOWN 15
#define LEASES_SCHEMA_TOO_NEW 16 /* the database was written by a newer library */
/* called in a fork()ed child of the process that loaded the library */
#define LEASES_FORKED 17
#define LEASES_INTERNAL 18 /* a bug, reported instead of crashing the host; the process goes on */
/* a wait was ended by its canceller (returned only by the waiting functions
 * of revision 1) */
#define LEASES_INTERRUPTED 19

/* ---- library ------------------------------------------------------------ */

/* The ABI number of the loaded library; refuse to run if it differs from
 * LEASES_ABI_VERSION. */
uint32_t leases_abi_version(void);
/* The revision of the loaded library: a program may use every function of
 * revisions up to it. Refuse to run if it is below the LEASES_ABI_REVISION
 * the program was built with (the loader already refuses a library lacking a
 * versioned function the program uses). Since revision 1; a library without
 * it is revision 0. */
uint32_t leases_abi_revision(void);
/* The release version, e.g. "0.1.0". Static; do not free. */
const char *leases_version(void);
/* "ok", "invalid_argument", ... (tests/vectors/statuses.json); "unknown"
 * for any other value. Static; do not free. */
const char *leases_status_name(leases_status status);
/* This thread's message for its last failed call; "" before any failure.
 * It starts with the status name ("not_found: job ... does not exist"), so
 * print it as it is. Never NULL, never holds a secret. Owned by the library, valid until this
 * thread's next call into the library. */
const char *leases_last_error(void);
/* The id of the job this thread's last failed call names, for a program to
 * act on without parsing leases_last_error(); "" when it names none (and
 * before any failure). After LEASES_OUTCOME_UNKNOWN from a claim
 * (leases_claim, leases_claim_job, leases_claim_wait,
 * leases_lease_complete_and_claim_next) it is the job the claim chose: the
 * lease it did not return (for leases_lease_complete_and_claim_next the
 * next job, not the completed one); observe it, and cancel it or let it
 * expire. After other failures it is the job the call acted on, when there
 * was one (a lease's job, a cancelled job). A job id is never a secret.
 * Never NULL; owned by the library, valid until this thread's next call
 * into the library, set and cleared with leases_last_error(). Since
 * revision 1. */
const char *leases_last_error_job_id(void);
/* Releases a string or buffer the library handed out. Accepts NULL. */
void leases_free(void *p);

/* ---- authority ---------------------------------------------------------- */

/* Opens (creating or migrating) the authority database at path; *out must be
 * released with leases_authority_close. path is a location: a URL starting
 * with postgres:// or postgresql:// selects a PostgreSQL server (its tables
 * live in the connection's current schema: add search_path=SCHEMA to the URL
 * to choose one; the server's clock is the authority's clock); anything else
 * is the path of a SQLite file, created if missing. Either way at most
 * LEASES_MAX_PATH_LEN bytes. A password in the URL never appears in
 * leases_last_error(). */
leases_status leases_authority_open(const char *path, leases_authority **out);
/* Closes the database. Leases of a closed authority report LEASES_CLOSED;
 * finish edits first. Accepts NULL and a closed handle. */
void leases_authority_close(leases_authority *authority);

/* Creates a production; creating an existing name succeeds. */
leases_status leases_production_create(leases_authority *authority, const char *name);
/* Requests a job. key may be NULL or "" (no key); with a key the request is
 * idempotent (same key and payload return the same job). payload may be NULL
 * only when payload_len is 0. *out_job_id: free with leases_free. */
leases_status leases_job_request(leases_authority *authority, const char *production,
                                 const char *key, const uint8_t *payload, size_t payload_len,
                                 char **out_job_id);
/* Claims the next claimable job of production (FIFO by request; an expired
 * claim is claimable again) for duration_us. None: LEASES_NOTHING_TO_CLAIM
 * and *out = NULL. *out: release with leases_lease_free. */
leases_status leases_claim(leases_authority *authority, const char *production,
                           const char *worker, int64_t duration_us, leases_lease **out);
/* Claims one given job. *out: release with leases_lease_free. */
leases_status leases_claim_job(leases_authority *authority, const char *production,
                               const char *job_id, const char *worker, int64_t duration_us,
                               leases_lease **out);
/* Coordinator cancel by job id (no secret); not blocked by clock regression. */
leases_status leases_cancel(leases_authority *authority, const char *production,
                            const char *job_id);

/* ---- leases ------------------------------------------------------------- */

/* Sets the expiry to now + duration_us. It must extend the current expiry
 * (else LEASES_NOT_EXTENDED) and commit before it (else LEASES_EXPIRED). */
leases_status leases_lease_renew(leases_lease *lease, int64_t duration_us);
/* Gives the job back (requested again). Success closes the lease. */
leases_status leases_lease_release(leases_lease *lease);
/* Marks the job failed; reason is required ("" allowed, at most
 * LEASES_MAX_REASON_LEN bytes). Success closes the lease. */
leases_status leases_lease_fail(leases_lease *lease, const char *reason);
/* Completes the job publishing facts_json, {"metadata": {...},
 * "provenance": {...}} (either may be absent; NULL or "" means no facts).
 * Success closes the lease. */
leases_status leases_lease_complete(leases_lease *lease, const char *facts_json);
/* The expiry last confirmed by the authority, unix microseconds. Local. */
leases_status leases_lease_expiry(const leases_lease *lease, int64_t *out_expiry_unix_us);
/* The job id. *out_job_id: free with leases_free. Local. */
leases_status leases_lease_job_id(const leases_lease *lease, char **out_job_id);
/* The claimed job's payload, the worker's input: *out_payload_len bytes at
 * *out_payload (always a fresh allocation, NUL-terminated for convenience,
 * even when the length is 0); free with leases_free. Works on an active lease
 * and on a pending one (claim, read, work and complete in one edit); reads
 * the store, never changes the claim. */
leases_status leases_lease_payload(const leases_lease *lease, uint8_t **out_payload,
                                   size_t *out_payload_len);
/* The production name. *out_production: free with leases_free. Local. */
leases_status leases_lease_production(const leases_lease *lease, char **out_production);
/* The worker attribution given at claim. *out_worker: free with leases_free. */
leases_status leases_lease_worker(const leases_lease *lease, char **out_worker);
/* Exports an active lease as a token for another process. The token is a
 * credential: keep it out of logs and argument lists. *out_token: free
 * with leases_free. */
leases_status leases_lease_export(const leases_lease *lease, char **out_token);
/* Turns a token into an active lease after checking production, job and
 * secret against the current state. *out: release with leases_lease_free. */
leases_status leases_lease_import(leases_authority *authority, const char *token,
                                  leases_lease **out);
/* Frees local memory only: never writes, renews or releases. An unreleased
 * claim lasts until its expiry or a coordinator cancel. Accepts NULL. Since
 * revision 1 it first stops the lease's keep-alive, if one runs: it returns
 * once no renewal can be written any more (one whose commit had started has
 * finished). Do not free a lease another thread is using. */
void leases_lease_free(leases_lease *lease);

/* ---- waiting, keep-alive and interruption (since revision 1) ------------ */

/* Creates a canceller: a flag that ends the waits it is given
 * (leases_claim_wait, leases_lease_wait_lost) with LEASES_INTERRUPTED. One
 * canceller may serve many waits, in many threads. *out: release with
 * leases_canceller_free. Since revision 1. */
leases_status leases_canceller_new(leases_canceller **out);
/* Cancels: every wait given the canceller returns LEASES_INTERRUPTED at
 * once, and so does every later one (it stays cancelled). Callable from any
 * thread, repeatedly; not from a signal handler (it is not
 * async-signal-safe: have the handler set a flag, and wait in slices).
 * Since revision 1. */
leases_status leases_canceller_cancel(leases_canceller *canceller);
/* Releases the canceller. Free it only after the waits it was given have
 * returned (a wait that still runs keeps working, but can no longer be
 * cancelled). Accepts NULL and a released handle. Since revision 1. */
void leases_canceller_free(leases_canceller *canceller);

/* Claims the next claimable job of production for duration_us, like
 * leases_claim, waiting up to wait_us (0 .. LEASES_MAX_WAIT_US; 0: no wait,
 * which is leases_claim) for one to become claimable. While it waits it
 * writes nothing and holds no lock: it wakes when a request, a release, a
 * retryable failure or a redrive commits (in this process, another process
 * on the same SQLite file, or any host on PostgreSQL) and when a job of the
 * production becomes claimable on the authority's clock (a claim's expiry
 * plus its backoff, a run-at, a retry's backoff), and claims then. wait_us is measured on this host's monotonic clock and decides
 * nothing about the lease. Returns LEASES_OK with *out (release with
 * leases_lease_free); LEASES_NOTHING_TO_CLAIM (*out NULL) when wait_us
 * passed; LEASES_INTERRUPTED when canceller (NULL: none) was or is
 * cancelled, with nothing claimed; LEASES_CLOSED when the authority is, or
 * gets, closed; otherwise as leases_claim. An unknown production is
 * LEASES_NOT_FOUND at once. Blocks the calling thread only: other threads
 * and their waits go on. Short waits are cheap (a wait after one that found
 * nothing reads nothing until something happens), so a caller that must
 * check a flag of its own may wait in slices. Since revision 1. */
leases_status leases_claim_wait(leases_authority *authority, const char *production,
                                const char *worker, int64_t duration_us, int64_t wait_us,
                                leases_canceller *canceller, leases_lease **out);
/* Keeps the lease alive in the background: renews it, by the rules of
 * leases_lease_renew(lease, duration_us), every interval_us (0: a third of
 * duration_us; else at least 1000 and below duration_us, or
 * LEASES_INVALID_DURATION). A renewal that fails with LEASES_BUSY,
 * LEASES_OUTCOME_UNKNOWN, LEASES_STORAGE or LEASES_CLOCK_REGRESSED is tried
 * again, with back-off, while the claim may still hold. The renewer stops
 * when the lease closes (complete, release, fail), at
 * leases_lease_keep_alive_stop, at leases_lease_free, when the authority
 * closes, and when a renewal is rejected or it gives up: then
 * leases_lease_check and leases_lease_wait_lost report why (never
 * silently). Calling it again replaces the running renewer. The lease must
 * be active (else LEASES_CLOSED). docs/workers.md says how long a duration
 * must be. Since revision 1. */
leases_status leases_lease_keep_alive(leases_lease *lease, int64_t duration_us,
                                      int64_t interval_us);
/* Stops the lease's keep-alive, if one runs, and returns once no renewal can
 * be written any more (one whose commit had started has finished). The
 * lease stays as it is. Since revision 1. */
leases_status leases_lease_keep_alive_stop(leases_lease *lease);
/* Asks the store, without writing, whether the lease still holds its claim
 * now on the authority's clock. LEASES_OK with *out_reason = LEASES_OK: it
 * does. LEASES_OK with another *out_reason: the status the lease's next
 * operation would get (LEASES_CLOSED, LEASES_CLOCK_REGRESSED,
 * LEASES_NOT_FOUND, LEASES_CANCELLED, LEASES_LEASE_LOST, LEASES_WRONG_STATE,
 * LEASES_EXPIRED), described by leases_last_error(). Any other return
 * (LEASES_BUSY, LEASES_STORAGE, ...) is a failure to ask, which says nothing
 * about the claim (*out_reason 0). Since revision 1. */
leases_status leases_lease_check(const leases_lease *lease, leases_status *out_reason);
/* Waits until this process knows the lease is over, at most timeout_us
 * (0 .. LEASES_MAX_WAIT_US; 0: do not wait), or until canceller (NULL: none)
 * is cancelled. The lease is known to be over once it closed here, its
 * keep-alive was rejected or gave up, an operation or leases_lease_check
 * found its claim over, or its authority closed while it was kept alive.
 * LEASES_OK with *out_reason the status saying why (as for
 * leases_lease_check, described by leases_last_error()), or LEASES_OK if the
 * timeout passed first; LEASES_INTERRUPTED if the canceller ended the wait
 * (*out_reason 0). A kept-alive lease learns of a coordinator's cancel
 * within one renewal interval. Since revision 1. */
leases_status leases_lease_wait_lost(const leases_lease *lease, int64_t timeout_us,
                                     leases_canceller *canceller, leases_status *out_reason);

/* ---- edits (one write transaction) -------------------------------------- */

/* Begins an edit, taking its locks (SQLite's writer lock; on PostgreSQL the
 * rows it takes, as it takes them; may return LEASES_BUSY). *out must
 * be consumed by leases_edit_commit or leases_edit_abort. */
leases_status leases_edit_begin(leases_authority *authority, leases_edit **out);
/* Claims the next job inside the edit. *out is pending (LEASES_CLOSED for
 * other operations) until the edit commits; a failed or aborted edit closes
 * it. *out: release with leases_lease_free. */
leases_status leases_edit_claim(leases_edit *edit, const char *production, const char *worker,
                                int64_t duration_us, leases_lease **out);
/* Completes a lease (one this edit claimed, or an active one) inside the
 * edit; facts_json as in leases_lease_complete. Published only on commit. */
leases_status leases_edit_complete(leases_edit *edit, leases_lease *lease,
                                   const char *facts_json);
/* Commits and consumes the edit (also when the commit fails). */
leases_status leases_edit_commit(leases_edit *edit);
/* Rolls back and consumes the edit. Accepts NULL and a consumed edit. */
void leases_edit_abort(leases_edit *edit);

/* ---- observations (no secrets) ------------------------------------------ */

/* A JSON array of the production's jobs in request order: objects with id,
 * production, key, state, worker, claimed_at_unix_us, expiry_unix_us,
 * attempts, reason, priority, claimable_at_unix_us (since revision 1).
 * Listing objects may gain fields in later revisions: ignore unknown ones.
 * *out_json: free with leases_free. */
leases_status leases_jobs_json(leases_authority *authority, const char *production,
                               char **out_json);
/* A JSON array of events with seq > after_seq (>= 0), oldest first: seq,
 * at_unix_us, production, job_id, kind, worker, expiry_unix_us, detail.
 * production NULL or "" means every production. *out_json: free with
 * leases_free. */
leases_status leases_events_json(leases_authority *authority, const char *production,
                                 int64_t after_seq, char **out_json);

/* ---- retries, run-at and priorities (since revision 1) ----------------- */

/* A job is requested with a priority (0 .. LEASES_MAX_PRIORITY, higher is
 * claimed first) and becomes claimable at once, at a run-at time or after a
 * delay, on the authority's clock. Claim-next serves the highest priority,
 * then the earliest claimable time, then request order. A claim that ends
 * without completion (release, leases_lease_fail_retry, a lapsed expiry)
 * ends an attempt; once a production's max_attempts claims have ended so,
 * the job is "dead" (terminal). leases_lease_fail stays terminal ("failed").
 * docs/CONCEPTS.md has the state machine, docs/c-api.md every case. */
#define LEASES_MAX_PRIORITY 1000                    /* priorities are 0 .. this */
#define LEASES_MAX_ATTEMPTS 1000                    /* max_attempts is 1 .. this */
#define LEASES_MAX_DELAY_US INT64_C(31622400000000) /* 366 days: run-at, delays, backoff cap */
#define LEASES_ATTEMPT_HISTORY_LEN 20               /* ended attempts a job keeps */

/* Options of leases_job_request_v2. Set size to sizeof(leases_request_options)
 * (LEASES_REQUEST_OPTIONS_INIT does), then the fields to change. The library
 * reads only the fields that lie within size and that it knows: a field
 * beyond size takes its default, so a program built against this header
 * keeps working with later libraries. size must be at least sizeof(size_t)
 * and at most 4096; bytes past the fields this library knows must be zero
 * (else LEASES_INVALID_ARGUMENT: a newer program asks for something this
 * library cannot do). At most one of run_at_unix_us and delay_us is nonzero;
 * both zero: claimable at once. */
typedef struct leases_request_options {
    size_t size;            /* sizeof(leases_request_options) */
    int32_t priority;       /* 0 .. LEASES_MAX_PRIORITY; default 0 */
    int64_t run_at_unix_us; /* 0: none; else not after the authority's now + LEASES_MAX_DELAY_US;
                               a time in the past means now */
    int64_t delay_us;       /* 0: none; else 1 .. LEASES_MAX_DELAY_US from the authority's now */
} leases_request_options;
#define LEASES_REQUEST_OPTIONS_INIT {sizeof(leases_request_options), 0, 0, 0}

/* A production's retry policy. The backoff after attempt n is
 * backoff_base_us * 2^(n-1), scaled by a uniform factor in
 * [1 - jitter_percent/100, 1 + jitter_percent/100], then capped at
 * backoff_cap_us. Same size rule as leases_request_options; a field beyond
 * size takes the default of LEASES_RETRY_POLICY_INIT. */
typedef struct leases_retry_policy {
    size_t size;             /* sizeof(leases_retry_policy) */
    int32_t max_attempts;    /* 1 .. LEASES_MAX_ATTEMPTS; default 25 */
    int32_t jitter_percent;  /* 0 .. 100; default 20 */
    int64_t backoff_base_us; /* 0 .. backoff_cap_us (0: retry at once); default 1 s */
    int64_t backoff_cap_us;  /* backoff_base_us .. LEASES_MAX_DELAY_US; default 1 h */
} leases_retry_policy;
#define LEASES_RETRY_POLICY_INIT {sizeof(leases_retry_policy), 25, 20, INT64_C(1000000), INT64_C(3600000000)}

/* leases_job_request with options; options NULL means priority 0, claimable
 * at once (exactly leases_job_request). A repeated keyed request returns the
 * existing job as it is: the first request's options stand. Bad options:
 * LEASES_INVALID_ARGUMENT, nothing written. *out_job_id: free with
 * leases_free. Since revision 1. */
leases_status leases_job_request_v2(leases_authority *authority, const char *production,
                                    const char *key, const uint8_t *payload, size_t payload_len,
                                    const leases_request_options *options, char **out_job_id);
/* leases_production_create with a retry policy; policy NULL means the
 * default (exactly leases_production_create). Creating an existing name
 * succeeds if its policy is the same, and is LEASES_WRONG_STATE if it
 * differs (change it with leases_production_set_policy). Since revision 1. */
leases_status leases_production_create_v2(leases_authority *authority, const char *name,
                                          const leases_retry_policy *policy);
/* The coordinator's change of a production's policy (policy NULL: back to
 * the default). It applies to every attempt that ends after it; a
 * policy_changed event records it. Since revision 1. */
leases_status leases_production_set_policy(leases_authority *authority, const char *production,
                                           const leases_retry_policy *policy);
/* Fails the job as retryable: the attempt ends and the job returns to the
 * queue after delay_us (0: the policy's backoff for this attempt; else
 * 1 .. LEASES_MAX_DELAY_US, else LEASES_INVALID_ARGUMENT), or becomes dead
 * if this was its last attempt. reason may be NULL or "" (at most
 * LEASES_MAX_REASON_LEN bytes). The claim must be unexpired. Success
 * closes the lease. Since revision 1. */
leases_status leases_lease_fail_retry(leases_lease *lease, const char *reason, int64_t delay_us);
/* The coordinator's redrive of one failed, dead or cancelled job (no
 * secret): it becomes requested and claimable at once with its attempts
 * reset to 0 (the attempt history keeps the old ones); a redriven event
 * records it. Any other state: LEASES_WRONG_STATE. Since revision 1. */
leases_status leases_job_retry(leases_authority *authority, const char *production,
                               const char *job_id);
/* Redrives every job of the production in state ("failed", "dead" or
 * "cancelled"; anything else is LEASES_INVALID_ARGUMENT) as leases_job_retry
 * does each, in transactions of a few hundred jobs (each job's redrive is
 * atomic, the whole is not). *out_count: how many. A failure (then
 * *out_count is 0, as for every failure) may come after some batches
 * committed: list the jobs to see. Since revision 1. */
leases_status leases_production_redrive(leases_authority *authority, const char *production,
                                        const char *state, int64_t *out_count);

/* ---- reference executor ------------------------------------------------- */

/* Begins an execution of an active lease: reserves a temporary output file
 * in output_dir and names the final one; both contain the job id and a
 * fresh execution nonce. *out must be consumed by leases_execution_finish
 * or leases_execution_abandon. */
leases_status leases_execution_begin(leases_lease *lease, const char *output_dir,
                                     leases_execution **out);
/* The temporary file to write. Owned by the execution: valid until finish or
 * abandon; do not free. NULL for an invalid handle. */
const char *leases_execution_temp_path(const leases_execution *execution);
/* The final file name. Same ownership as leases_execution_temp_path. */
const char *leases_execution_final_path(const leases_execution *execution);
/* Fsyncs and renames the temporary file to the final name, then completes the
 * lease registering the output with facts_json (as in leases_lease_complete).
 * Consumes the execution, except when it returns LEASES_INVALID_ARGUMENT
 * (bad handle or facts_json): then nothing happened and it stays usable.
 * A rejected completion removes only this execution's files. */
leases_status leases_execution_finish(leases_execution *execution, const char *facts_json);
/* Removes this execution's files and consumes it. Accepts NULL. */
void leases_execution_abandon(leases_execution *execution);

/* ---- observations, paged (since revision 1) ----------------------------- */

/* Bounded observations. Each call reads one page in one short read (no
 * transaction is held between calls, so a caller may take its time between
 * pages) and returns a JSON document in *out_json, allocated by the library:
 * free it with leases_free. docs/c-api.md shows every shape with an example.
 * Nothing returned is ever a secret: claims appear by worker and expiry, a
 * payload by its size.
 *   - Parse leniently: objects may gain fields in later revisions (ignore
 *     unknown ones), and a state or event kind may be one a later revision
 *     adds. Times are ..._unix_us integers; an absent one is null.
 *   - limit: how many items a page holds at most; 0 means
 *     LEASES_DEFAULT_PAGE_SIZE, more than LEASES_MAX_PAGE_SIZE is
 *     LEASES_INVALID_ARGUMENT (the caller learns the bound; nothing is cut
 *     silently). A page is full except the last.
 *   - cursor: NULL or "" for the first page, else the "next" of the previous
 *     page of the same listing, passed back unchanged (at most
 *     LEASES_MAX_CURSOR_LEN bytes). A malformed cursor, or one of another
 *     listing (another production's jobs, the productions), is
 *     LEASES_INVALID_ARGUMENT. Cursors are opaque, do not expire and are not
 *     credentials; they do not remember the filters.
 *   - states, kinds: NULL or "" for no filter, else a comma-separated list
 *     of names without spaces ("requested,claimed"), at most
 *     LEASES_MAX_NAME_LEN bytes; an unknown or empty name is
 *     LEASES_INVALID_ARGUMENT. Repeats are ignored.
 *   - Bad input is reported before the store is read (INVALID_ARGUMENT),
 *     then a closed authority (CLOSED), then an unknown production or job
 *     (NOT_FOUND). Storage failures: LEASES_STORAGE or LEASES_BUSY.
 *   - Thread safety: as every authority call; pages of one listing may be
 *     read from different threads. */
#define LEASES_DEFAULT_PAGE_SIZE 100 /* items of a page when limit is 0 */
#define LEASES_MAX_PAGE_SIZE 1000    /* the largest limit of a page */
#define LEASES_MAX_CURSOR_LEN 1024   /* bytes of a cursor, NUL not counted */

/* One page of a production's jobs, in request order, filtered by states
 * (any of), key (exactly; NULL or "": any) and job_id (exactly; NULL or "":
 * any). *out_json: {"jobs": [job, ...], "next": "CURSOR" or null}, each job
 * the object of leases_jobs_json. Paging is by request order, which never
 * changes: following "next" until it is null lists every job that existed
 * when the first page was read exactly once, each in the state its page
 * saw, however the jobs change meanwhile. Since revision 1. */
leases_status leases_jobs_page_json(leases_authority *authority, const char *production,
                                    const char *states, const char *key, const char *job_id,
                                    const char *cursor, uint32_t limit, char **out_json);
/* The same page as leases_jobs_page_json, with the facts of its jobs in the
 * same call: *out_json: {"jobs": [...], "next": ..., "facts": {JOB_ID:
 * facts, ...}}, an entry for each completed job of the page, facts being
 * the "facts" object of leases_job_json ({} when its completion published
 * none); other jobs have none. The facts are read with the page, one query
 * for all of them, so a page is bounded by limit times LEASES_MAX_FACTS_LEN.
 * Arguments and statuses as leases_jobs_page_json. Since revision 1. */
leases_status leases_jobs_page_facts_json(leases_authority *authority, const char *production,
                                          const char *states, const char *key, const char *job_id,
                                          const char *cursor, uint32_t limit, char **out_json);
/* One page of events with seq > after_seq (>= 0), oldest first, of
 * production (NULL or "": every production), of one job (job_id; NULL or
 * "": every job) and of kinds (any of; needs a production or a job_id).
 * *out_json: {"events": [event, ...], "next": SEQ, "more": true|false}, each
 * event the object of leases_events_json. "next" is the after_seq of the
 * following call: the last listed seq, or after_seq when none was listed;
 * "more" says whether more events can be listed now (call again at once) or
 * not yet (call again later with "next"). On PostgreSQL a page stops at the
 * follower-safe horizon, so following "next" never skips an event that
 * commits late. Since revision 1. */
leases_status leases_events_page_json(leases_authority *authority, const char *production,
                                      const char *job_id, const char *kinds, int64_t after_seq,
                                      uint32_t limit, char **out_json);
/* One job's record as a JSON object: the fields of a leases_jobs_json job
 * plus payload_size (bytes; the payload itself: leases_lease_payload),
 * requested_at_unix_us, updated_at_unix_us and facts: {"metadata": {...},
 * "provenance": {...}, "outputs": [{path, size, sha256, nonce}, ...]}, what
 * its completion published (each member absent when empty; {} before a
 * completion), and attempt_history: the newest LEASES_ATTEMPT_HISTORY_LEN
 * ended claims, oldest first, each {number, worker, claimed_at_unix_us,
 * ended_at_unix_us, ending ("completed", "failed", "retry", "released",
 * "expired", "cancelled"), reason}. Never a secret. A job of another
 * production is LEASES_NOT_FOUND. Since revision 1. */
leases_status leases_job_json(leases_authority *authority, const char *production,
                              const char *job_id, char **out_json);
/* One page of productions in byte order of their names. *out_json:
 * {"productions": [{id, name, created_at_unix_us}, ...], "next": "CURSOR"
 * or null}. Since revision 1. */
leases_status leases_productions_page_json(leases_authority *authority, const char *cursor,
                                           uint32_t limit, char **out_json);
/* A production's jobs counted by state at one moment of the authority's
 * clock, from indexes (no job is read). *out_json: {"requested": N,
 * "claimed": N, "completed": N, "failed": N, "cancelled": N, "dead": N, "expired": N,
 * "oldest_requested_unix_us": T or null, "at_unix_us": T}: expired counts
 * the claimed jobs whose claim had expired at at_unix_us (claimable again;
 * they are in "claimed" too); oldest_requested_unix_us is when the first
 * requested job in request order was requested. Since revision 1. */
leases_status leases_job_counts_json(leases_authority *authority, const char *production,
                                     char **out_json);

/* ---- opening with options (since revision 1) ---------------------------- */

/* flags of leases_open_options (bits, combined with |). */
#define LEASES_OPEN_MUST_EXIST 1 /* do not create: a missing authority is LEASES_NOT_FOUND */
/* synchronous of leases_open_options: SQLite's PRAGMA synchronous, with its
 * numbers and meaning. NORMAL can lose the last acknowledged operations on
 * power loss or an operating system crash (not on a crash of the process);
 * FULL, the default, and EXTRA do not. */
#define LEASES_SYNCHRONOUS_DEFAULT 0 /* FULL */
#define LEASES_SYNCHRONOUS_NORMAL 1
#define LEASES_SYNCHRONOUS_FULL 2
#define LEASES_SYNCHRONOUS_EXTRA 3

/* Options of leases_authority_open_v2. Set size to
 * sizeof(leases_open_options) (LEASES_OPEN_OPTIONS_INIT does), then the
 * fields to change; zero is every field's default. The library reads only
 * the fields that lie wholly within size: a field beyond it takes its
 * default, so a program built against this header keeps working with later
 * libraries, and one built against an older header with this one. size
 * must be at least sizeof(size_t) and at most 4096; bytes past the fields
 * this library knows must be zero (else LEASES_INVALID_ARGUMENT: a newer
 * program asks for something this library cannot do). */
typedef struct leases_open_options {
    size_t size;             /* sizeof(leases_open_options) */
    int32_t flags;           /* LEASES_OPEN_* bits; default 0; an unknown bit is INVALID_ARGUMENT */
    int32_t synchronous;     /* LEASES_SYNCHRONOUS_*; SQLite only: nonzero with a PostgreSQL
                                location is INVALID_ARGUMENT (the server commits durably) */
    int64_t busy_timeout_us; /* 0: 10 s; else 1 .. LEASES_MAX_DURATION_US, waited at millisecond
                                resolution (rounded up): how long an operation waits for a lock
                                (SQLite's writer lock; on PostgreSQL row locks and connections)
                                before LEASES_BUSY */
} leases_open_options;
#define LEASES_OPEN_OPTIONS_INIT {sizeof(leases_open_options), 0, 0, 0}

/* leases_authority_open with options; options NULL means the defaults
 * (exactly leases_authority_open: create if missing, FULL, 10 s). With
 * LEASES_OPEN_MUST_EXIST a location that holds no authority (a missing or
 * empty SQLite file, a PostgreSQL schema without the tables) is
 * LEASES_NOT_FOUND and nothing is created; an authority of an older schema
 * is still migrated. Bad options: LEASES_INVALID_ARGUMENT before anything
 * is opened. *out: release with leases_authority_close. Since revision 1. */
leases_status leases_authority_open_v2(const char *location, const leases_open_options *options,
                                       leases_authority **out);

/* ---- one commit per worker loop (since revision 1) ---------------------- */

/* Completes the lease, as leases_lease_complete(lease, facts_json), and
 * claims the next claimable job of its production for the lease's worker
 * for duration_us, as leases_claim, in one commit (one write transaction:
 * on SQLite one fsync instead of two). Every rule of both holds, the
 * completion's first: a refused completion claims nothing and returns its
 * status, with *out NULL and nothing written. LEASES_OK: the completion
 * committed and the lease is closed; *out is the next job's lease (release
 * with leases_lease_free), or NULL when the production had nothing to
 * claim. LEASES_OUTCOME_UNKNOWN: no new lease; the lease stays active (its
 * next use asks the store) and leases_last_error_job_id() is the job the
 * claim chose (leases_last_error() names both). LEASES_INVALID_DURATION also when the new claim would be born
 * expired (duration_us shorter than the commit took): nothing was written,
 * the completion neither, and the lease still holds its claim (its keep-alive
 * runs on, leases_lease_wait_lost reports nothing); complete it, or try again
 * with a longer duration. Bad input (out NULL, a bad handle, facts_json, duration_us) is
 * reported before anything is written. Since revision 1. */
leases_status leases_lease_complete_and_claim_next(leases_lease *lease, const char *facts_json,
                                                   int64_t duration_us, leases_lease **out);

/* ---- the worker loop (since revision 1) ---------------------------------- */

/* The worker loop's policy, the one every face of libleases runs on
 * (docs/workers.md): a leases_worker hands out leases already kept alive,
 * takes each job's result, completes and claims the next job in one commit
 * when it would claim again anyway, and owns the back-off after a failed
 * claim, the concurrency bound, max jobs, exit-when-empty, drain and the
 * drain timeout. The caller runs the handler on its own threads: each
 * thread calls leases_worker_next, runs the job, and calls
 * leases_worker_settle, until leases_worker_next hands out nothing more.
 *
 * Back-off: after a claim fails with LEASES_BUSY, LEASES_STORAGE,
 * LEASES_OUTCOME_UNKNOWN or LEASES_CLOCK_REGRESSED the worker claims again
 * after 50 ms, doubling after each further consecutive failure up to 5 s
 * (tests/vectors/worker_loop.json); a claim that succeeds or finds nothing
 * starts the sequence again. Such failures are never returned. */

/* flags of leases_worker_options (bits, combined with |). */
#define LEASES_WORKER_EXIT_WHEN_EMPTY 1 /* end claiming once a claim finds nothing (within 100 ms) */

/* Options of leases_worker_new; the size rule of leases_open_options.
 * Zero is every field's default. */
typedef struct leases_worker_options {
    size_t size;              /* sizeof(leases_worker_options) */
    int32_t flags;            /* LEASES_WORKER_* bits; an unknown bit is INVALID_ARGUMENT */
    int32_t concurrency;      /* leases out at once; 0: 1; at most 1024 */
    int64_t max_jobs;         /* claims in all, then claiming ends; 0: no limit */
    int64_t interval_us;      /* keep-alive interval; 0: a third of duration_us; else as
                                 leases_lease_keep_alive's */
    int64_t drain_timeout_us; /* how long a drain lets the jobs out go on before giving them
                                 back; 0: as long as they take; else 1 .. LEASES_MAX_WAIT_US */
} leases_worker_options;
#define LEASES_WORKER_OPTIONS_INIT {sizeof(leases_worker_options), 0, 0, 0, 0, 0}

/* Creates a worker loop for production, claiming as worker (the
 * attribution of every claim) for duration_us, each claim kept alive while
 * its job is out. options NULL: the defaults. Nothing is claimed before
 * leases_worker_next. An unknown production is reported by
 * leases_worker_next (LEASES_NOT_FOUND). *out: release with
 * leases_worker_free. Since revision 1. */
leases_status leases_worker_new(leases_authority *authority, const char *production,
                                const char *worker, int64_t duration_us,
                                const leases_worker_options *options, leases_worker **out);
/* Hands out the next job, waiting up to wait_us (0 .. LEASES_MAX_WAIT_US;
 * 0: only a job claimable now) while fewer than concurrency leases are out
 * (else it waits for a settle). Wait in slices (say 100 ms to 1 s) when
 * signals must reach the calling program between calls (Python).
 *   LEASES_OK, *out a lease: run the job, then call leases_worker_settle
 *     exactly once. The lease is kept alive and belongs to the worker: use
 *     every leases_lease_* function on it (payload, job id, complete or fail
 *     it yourself), but never free it. Its end while the job runs (a
 *     coordinator's cancel, an expiry, the drain timeout or
 *     LEASES_STOP_GIVE_BACK giving it back) is what leases_lease_wait_lost
 *     and leases_lease_check report (LEASES_CANCELLED, ..., LEASES_CLOSED
 *     when the worker gave it back): the handler's "done" signal.
 *   LEASES_OK, *out NULL: no more jobs for this caller (the worker was
 *     stopped, max_jobs are claimed, or exit-when-empty found nothing):
 *     return from the thread's loop. leases_worker_wait says how it ended.
 *   LEASES_NOTHING_TO_CLAIM (*out NULL): wait_us passed; call again.
 *   Another status: the loop cannot go on (LEASES_NOT_FOUND: an unknown
 *     production; LEASES_CLOSED: the authority was closed); every later
 *     call returns it too; claiming has stopped.
 * A call waiting here returns (LEASES_OK, NULL) at leases_worker_stop.
 * Since revision 1. */
leases_status leases_worker_next(leases_worker *worker, int64_t wait_us, leases_lease **out);

/* outcome of leases_worker_settle: what became of a job. */
#define LEASES_RESULT_COMPLETE 1   /* complete it with text: facts JSON as leases_lease_complete's */
#define LEASES_RESULT_FAIL_RETRY 2 /* fail the attempt (text: the reason): it comes back after the
                                       production's backoff, or is dead after its last attempt */
#define LEASES_RESULT_FAIL 3       /* fail the job for good (text: the reason) */
#define LEASES_RESULT_RELEASE 4    /* give it back: claimable again at once (text ignored) */
#define LEASES_RESULT_SETTLED 5    /* the handler closed the lease itself (text ignored) */

/* Records the result of a job leases_worker_next handed out, and frees its
 * slot. text is text_len bytes (NULL when text_len is 0). A reason is any
 * bytes: the one rule turns it into the attempt's reason (invalid UTF-8
 * becomes U+FFFD, NUL bytes are dropped, the text is cut at a character
 * boundary to LEASES_MAX_REASON_LEN). A completion claims the next job in
 * the same commit when the worker would claim again anyway (not stopped,
 * max_jobs not reached); that lease goes to the next leases_worker_next.
 * LEASES_OK: settled; the lease handle is released. LEASES_INVALID_ARGUMENT
 * (nothing changed; the job is still the caller's to settle): a lease this
 * worker did not hand out or that was settled already, an outcome out of
 * range, bad facts JSON, SETTLED for a lease that is still active.
 * LEASES_CLOSED: the worker had given the job back already (drain timeout,
 * LEASES_STOP_GIVE_BACK); the result was not recorded. Any other status:
 * the operation failed (the job's claim was lost, the store failed); the
 * lease handle is released either way. Since revision 1. */
leases_status leases_worker_settle(leases_worker *worker, leases_lease *lease, int32_t outcome,
                                   const char *text, size_t text_len);

/* mode of leases_worker_stop. */
#define LEASES_STOP_DRAIN 1     /* claim nothing more; the jobs out finish, up to the drain timeout */
#define LEASES_STOP_GIVE_BACK 2 /* claim nothing more; give every job out back at once (released) */

/* Stops the loop: every waiting leases_worker_next returns (LEASES_OK,
 * NULL), and so does every later one. A lease claimed for the next caller
 * is given back. With LEASES_STOP_DRAIN the jobs out finish and are
 * settled; when the drain timeout passes first they are given back. With
 * LEASES_STOP_GIVE_BACK (after a drain too: the second Ctrl-C) they are
 * given back before it returns. Returns at once; callable repeatedly and
 * from any thread, not from a signal handler. Since revision 1. */
leases_status leases_worker_stop(leases_worker *worker, int32_t mode);

/* *out_end of leases_worker_wait: how the loop ended. */
#define LEASES_WORKER_RUNNING 0   /* it has not ended (the timeout passed) */
#define LEASES_WORKER_STOPPED 1   /* stopped as asked, max_jobs claimed, or empty; every job settled */
#define LEASES_WORKER_GAVE_BACK 2 /* it gave the jobs still out back (drain timeout, STOP_GIVE_BACK) */
#define LEASES_WORKER_FAILED 3    /* it could not go on: leases_worker_next returns why */

/* Waits until the loop has ended (claiming has stopped and every job it
 * handed out is settled or given back), at most timeout_us (0 ..
 * LEASES_MAX_WAIT_US; 0: do not wait), or until canceller (NULL: none) is
 * cancelled (LEASES_INTERRUPTED, *out_end 0). LEASES_OK with *out_end one
 * of LEASES_WORKER_*. Since revision 1. */
leases_status leases_worker_wait(leases_worker *worker, int64_t timeout_us,
                                 leases_canceller *canceller, int32_t *out_end);
/* The loop's counters now, as JSON: {"state": "running" | "stopped" |
 * "gave_back" | "failed", "out": N (leases out or being claimed), "claimed",
 * "completed", "failed", "released", "settled" (by the handler itself),
 * "failed_claims": N consecutive failed claims, "backoff_us": the pause
 * they set (0 after a claim that succeeded or found nothing)}. No secret.
 * *out_json: free with leases_free. Since revision 1. */
leases_status leases_worker_stats_json(leases_worker *worker, char **out_json);
/* Stops the loop giving every job still out back (LEASES_STOP_GIVE_BACK)
 * and releases the worker and the lease handles it handed out. Call it
 * once the threads using the worker have returned from its calls. Accepts
 * NULL and a released handle. Since revision 1. */
void leases_worker_free(leases_worker *worker);
/* ---- retention and pruning (since revision 1) ---------------------------- */

/* The longest duration of a retention policy: 36500 days, in µs. */
#define LEASES_MAX_RETENTION_US INT64_C(3153600000000000)

/* A production's retention policy: how long a finished job of each state
 * is kept after it finished, and an event after it was recorded, in µs; 0
 * keeps them for good, else 1 .. LEASES_MAX_RETENTION_US. Same size rule as
 * leases_request_options; a field beyond size takes the default of
 * LEASES_RETENTION_POLICY_INIT (completed and cancelled jobs 7 days, failed
 * and dead jobs 30 days, events 7 days). Since revision 1. */
typedef struct leases_retention_policy {
    size_t size;               /* sizeof(leases_retention_policy) */
    int64_t keep_completed_us; /* default 7 days */
    int64_t keep_failed_us;    /* default 30 days */
    int64_t keep_dead_us;      /* default 30 days */
    int64_t keep_cancelled_us; /* default 7 days */
    int64_t keep_events_us;    /* default 7 days */
} leases_retention_policy;
#define LEASES_RETENTION_POLICY_INIT {sizeof(leases_retention_policy), INT64_C(604800000000), INT64_C(2592000000000), INT64_C(2592000000000), INT64_C(604800000000), INT64_C(604800000000)}

/* The coordinator's change of a production's retention policy (policy
 * NULL: back to the default). Pruning applies it from its next batch; a
 * retention_changed event records it. Since revision 1. */
leases_status leases_production_set_retention(leases_authority *authority, const char *production,
                                              const leases_retention_policy *policy);
/* Reads a production's retention policy into *out, whose size the caller
 * sets (fields beyond it are not written). Since revision 1. */
leases_status leases_production_retention(leases_authority *authority, const char *production,
                                          leases_retention_policy *out);

/* Flags of leases_prune_options. */
#define LEASES_PRUNE_DRY_RUN 1 /* delete nothing; count what would be deleted */

/* How leases_prune deletes. Same size rule as leases_request_options. */
typedef struct leases_prune_options {
    size_t size;           /* sizeof(leases_prune_options) */
    int32_t flags;         /* LEASES_PRUNE_DRY_RUN */
    int64_t older_than_us; /* 0: each production's policy; else 1 .. LEASES_MAX_RETENTION_US,
                              for every finished state and the events */
} leases_prune_options;
#define LEASES_PRUNE_OPTIONS_INIT {sizeof(leases_prune_options), 0, 0}

/* Deletes the finished jobs and events of production (NULL: of every
 * production) past their retention (or options->older_than_us), in batches
 * of at most 64 jobs and 1000 events, each one short transaction; never a
 * requested or claimed job. archive_path (NULL: none) is a JSON Lines file
 * that what is deleted is written and synced to first (docs/cli.md,
 * "Retention, pruning and archives"). options NULL: by each policy.
 * *out_jobs and *out_events (either may be NULL) count what was deleted
 * (with LEASES_PRUNE_DRY_RUN, what would be), also when a later batch
 * failed. Every open authority also prunes in the background. Since
 * revision 1. */
leases_status leases_prune(leases_authority *authority, const char *production, const char *archive_path,
                           const leases_prune_options *options, int64_t *out_jobs, int64_t *out_events);

#ifdef __cplusplus
}
#endif

#endif /* LEASES_H */
