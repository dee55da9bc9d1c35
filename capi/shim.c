// The public C names of include/leases.h. This file owns what must not enter
// Go: the per-thread last error, the fork check, and the static strings. Every
// other call forwards to a Go export (leasesgo_*), passing handles as ids.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "../include/leases.h"
#include "_cgo_export.h"
#include "memcheck.h"
#include "shim.h"
#include "status_names.h" /* generated from the header */

#ifndef LEASES_RELEASE_VERSION
#define LEASES_RELEASE_VERSION unknown /* the Makefile passes VERSION */
#endif
#define LEASES_STR2(x) #x
#define LEASES_STR(x) LEASES_STR2(x)

// go_arg returns v, which Go passed in, as memcheck should see it: defined.
// Go's values are always defined (Go zeroes what it allocates), but cgo hands
// the arguments over in a frame on a goroutine stack, which memcheck may have
// marked undefined (see leasesshim_copy_out).
static uintptr_t go_arg(uintptr_t v) {
	volatile uintptr_t a = v;
	leasesshim_memcheck(LEASES_MC_MAKE_MEM_DEFINED, (const void *)&a, sizeof a);
	return a;
}

// One message per thread, in static storage: never NULL, never allocated,
// truncated (at a UTF-8 boundary) rather than failing.
static __thread char last_error[1024];
// The job id the last error names (leases_last_error_job_id); "" for none.
static __thread char last_error_job_id[LEASES_MAX_NAME_LEN + 1];

void leasesshim_set_error(const char *msg, size_t len) {
	msg = (const char *)go_arg((uintptr_t)msg); /* Go's bytes, as in leasesshim_copy_out */
	len = (size_t)go_arg((uintptr_t)len);
	leasesshim_memcheck(LEASES_MC_MAKE_MEM_DEFINED, msg, len);
	if (len >= sizeof last_error) {
		len = sizeof last_error - 1;
		while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80) len--;
	}
	memcpy(last_error, msg, len);
	last_error[len] = '\0';
	last_error_job_id[0] = '\0';
}

// leasesshim_set_error_job records the job id the last error names; called
// after leasesshim_set_error, which clears it. An id that does not fit (ids
// are 36 bytes) is not recorded: a truncated id would name another job.
void leasesshim_set_error_job(const char *id, size_t len) {
	id = (const char *)go_arg((uintptr_t)id);
	len = (size_t)go_arg((uintptr_t)len);
	leasesshim_memcheck(LEASES_MC_MAKE_MEM_DEFINED, id, len);
	if (len >= sizeof last_error_job_id) return;
	memcpy(last_error_job_id, id, len);
	last_error_job_id[len] = '\0';
}

// leasesshim_copy_out is every string and byte buffer the library hands the
// caller (freed with leases_free): a C copy of n bytes of Go memory and a
// NUL, or NULL when malloc fails. Memcheck (valgrind) cannot follow the Go
// runtime's switches between goroutine stacks: it takes some for a stack
// frame being pushed or popped and marks the Go heap memory between the two
// stacks undefined or unaddressable. A copy would carry "undefined" into the
// caller's memory, reported at the caller's first read of it. Every byte of
// a Go string or slice is defined, so the shim tells memcheck so, for exactly
// the n bytes it copies (a read past the copy is still reported). Outside
// valgrind this costs a few instructions that do nothing (memcheck.h).
char *leasesshim_copy_out(const char *p, size_t n) {
	p = (const char *)go_arg((uintptr_t)p);
	n = (size_t)go_arg((uintptr_t)n);
	leasesshim_memcheck(LEASES_MC_MAKE_MEM_DEFINED, p, n);
	char *s = malloc(n + 1);
	if (s == NULL) return NULL;
	if (n > 0) memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static pid_t load_pid;

__attribute__((constructor)) static void leasesshim_load(void) { load_pid = getpid(); }

// forked reports a call from a fork()ed child: the Go runtime's threads did not
// survive the fork, so entering Go could hang. Answer without entering it.
int leasesshim_forked(void) {
	if (getpid() == load_pid) return 0;
	static const char msg[] =
		"forked: libleases was loaded by another process; a fork()ed child cannot use it (exec first)";
	leasesshim_set_error(msg, sizeof msg - 1);
	return 1;
}

#define forked leasesshim_forked

uint32_t leases_abi_version(void) { return LEASES_ABI_VERSION; }

uint32_t leases_abi_revision(void) { return LEASES_ABI_REVISION; }

const char *leases_version(void) { return LEASES_STR(LEASES_RELEASE_VERSION); }

const char *leases_status_name(leases_status status) {
	if (status < 0 || (size_t)status >= sizeof leases_status_names / sizeof leases_status_names[0])
		return "unknown";
	return leases_status_names[status];
}

const char *leases_last_error(void) { return last_error; }

const char *leases_last_error_job_id(void) { return last_error_job_id; }

void leases_free(void *p) { free(p); }

leases_status leases_authority_open(const char *path, leases_authority **out) {
	CHECK_FORK();
	uintptr_t h = 0;
	leases_status st = leasesgo_authority_open((char *)path, out ? &h : NULL);
	if (out) *out = (leases_authority *)h;
	return st;
}

void leases_authority_close(leases_authority *authority) {
	if (authority == NULL || forked()) return;
	leasesgo_authority_close(H(authority));
}

leases_status leases_production_create(leases_authority *authority, const char *name) {
	CHECK_FORK();
	return leasesgo_production_create(H(authority), (char *)name);
}

leases_status leases_job_request(leases_authority *authority, const char *production,
                                 const char *key, const uint8_t *payload, size_t payload_len,
                                 char **out_job_id) {
	CHECK_FORK();
	return leasesgo_job_request(H(authority), (char *)production, (char *)key,
	                            (uint8_t *)payload, payload_len, out_job_id);
}

leases_status leases_claim(leases_authority *authority, const char *production,
                           const char *worker, int64_t duration_us, leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out,
	           leasesgo_claim(H(authority), (char *)production, (char *)worker, duration_us, hp_));
}

leases_status leases_claim_job(leases_authority *authority, const char *production,
                               const char *job_id, const char *worker, int64_t duration_us,
                               leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out,
	           leasesgo_claim_job(H(authority), (char *)production, (char *)job_id,
	                              (char *)worker, duration_us, hp_));
}

leases_status leases_cancel(leases_authority *authority, const char *production,
                            const char *job_id) {
	CHECK_FORK();
	return leasesgo_cancel(H(authority), (char *)production, (char *)job_id);
}

leases_status leases_lease_renew(leases_lease *lease, int64_t duration_us) {
	CHECK_FORK();
	return leasesgo_lease_renew(H(lease), duration_us);
}

leases_status leases_lease_release(leases_lease *lease) {
	CHECK_FORK();
	return leasesgo_lease_release(H(lease));
}

leases_status leases_lease_fail(leases_lease *lease, const char *reason) {
	CHECK_FORK();
	return leasesgo_lease_fail(H(lease), (char *)reason);
}

leases_status leases_lease_complete(leases_lease *lease, const char *facts_json) {
	CHECK_FORK();
	return leasesgo_lease_complete(H(lease), (char *)facts_json);
}

leases_status leases_lease_expiry(const leases_lease *lease, int64_t *out_expiry_unix_us) {
	CHECK_FORK();
	return leasesgo_lease_expiry(H(lease), out_expiry_unix_us);
}

leases_status leases_lease_job_id(const leases_lease *lease, char **out_job_id) {
	CHECK_FORK();
	return leasesgo_lease_job_id(H(lease), out_job_id);
}

leases_status leases_lease_payload(const leases_lease *lease, uint8_t **out_payload,
                                   size_t *out_payload_len) {
	CHECK_FORK();
	return leasesgo_lease_payload(H(lease), out_payload, out_payload_len);
}

leases_status leases_lease_production(const leases_lease *lease, char **out_production) {
	CHECK_FORK();
	return leasesgo_lease_production(H(lease), out_production);
}

leases_status leases_lease_worker(const leases_lease *lease, char **out_worker) {
	CHECK_FORK();
	return leasesgo_lease_worker(H(lease), out_worker);
}

leases_status leases_lease_export(const leases_lease *lease, char **out_token) {
	CHECK_FORK();
	return leasesgo_lease_export(H(lease), out_token);
}

leases_status leases_lease_import(leases_authority *authority, const char *token,
                                  leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out, leasesgo_lease_import(H(authority), (char *)token, hp_));
}

void leases_lease_free(leases_lease *lease) {
	if (lease == NULL || forked()) return;
	leasesgo_lease_free(H(lease));
}

leases_status leases_edit_begin(leases_authority *authority, leases_edit **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_edit, out, leasesgo_edit_begin(H(authority), hp_));
}

leases_status leases_edit_claim(leases_edit *edit, const char *production, const char *worker,
                                int64_t duration_us, leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out,
	           leasesgo_edit_claim(H(edit), (char *)production, (char *)worker, duration_us, hp_));
}

leases_status leases_edit_complete(leases_edit *edit, leases_lease *lease,
                                   const char *facts_json) {
	CHECK_FORK();
	return leasesgo_edit_complete(H(edit), H(lease), (char *)facts_json);
}

leases_status leases_edit_commit(leases_edit *edit) {
	CHECK_FORK();
	return leasesgo_edit_commit(H(edit));
}

void leases_edit_abort(leases_edit *edit) {
	if (edit == NULL || forked()) return;
	leasesgo_edit_abort(H(edit));
}

leases_status leases_jobs_json(leases_authority *authority, const char *production,
                               char **out_json) {
	CHECK_FORK();
	return leasesgo_jobs_json(H(authority), (char *)production, out_json);
}

leases_status leases_events_json(leases_authority *authority, const char *production,
                                 int64_t after_seq, char **out_json) {
	CHECK_FORK();
	return leasesgo_events_json(H(authority), (char *)production, after_seq, out_json);
}

// ---- observations, paged -------------------------------------------------------

leases_status leases_jobs_page_json(leases_authority *authority, const char *production,
                                    const char *states, const char *key, const char *job_id,
                                    const char *cursor, uint32_t limit, char **out_json) {
	CHECK_FORK();
	return leasesgo_jobs_page_json(H(authority), (char *)production, (char *)states, (char *)key,
	                               (char *)job_id, (char *)cursor, limit, out_json);
}

leases_status leases_jobs_page_facts_json(leases_authority *authority, const char *production,
                                          const char *states, const char *key, const char *job_id,
                                          const char *cursor, uint32_t limit, char **out_json) {
	CHECK_FORK();
	return leasesgo_jobs_page_facts_json(H(authority), (char *)production, (char *)states, (char *)key,
	                                     (char *)job_id, (char *)cursor, limit, out_json);
}

leases_status leases_events_page_json(leases_authority *authority, const char *production,
                                      const char *job_id, const char *kinds, int64_t after_seq,
                                      uint32_t limit, char **out_json) {
	CHECK_FORK();
	return leasesgo_events_page_json(H(authority), (char *)production, (char *)job_id, (char *)kinds,
	                                 after_seq, limit, out_json);
}

leases_status leases_job_json(leases_authority *authority, const char *production,
                              const char *job_id, char **out_json) {
	CHECK_FORK();
	return leasesgo_job_json(H(authority), (char *)production, (char *)job_id, out_json);
}

leases_status leases_productions_page_json(leases_authority *authority, const char *cursor,
                                           uint32_t limit, char **out_json) {
	CHECK_FORK();
	return leasesgo_productions_page_json(H(authority), (char *)cursor, limit, out_json);
}

leases_status leases_job_counts_json(leases_authority *authority, const char *production,
                                     char **out_json) {
	CHECK_FORK();
	return leasesgo_job_counts_json(H(authority), (char *)production, out_json);
}

// ---- options structs ----------------------------------------------------------

// leasesshim_opts_check applies the size rule of the options structs
// (include/leases.h): 0 when opts is usable, 1 when size is smaller than its
// size member, 2 when it is over 4096, 3 when bytes past the known fields
// are set. The caller promises size readable bytes.
static int leasesshim_opts_check(const void *opts, size_t known) {
	if (opts == NULL) return 0;
	size_t size = *(const size_t *)opts;
	if (size < sizeof(size_t)) return 1;
	if (size > 4096) return 2;
	const unsigned char *b = opts;
	for (size_t i = known; i < size; i++)
		if (b[i] != 0) return 3;
	return 0;
}

// FIELD_IN: the field lies wholly within the caller's size, so it is read;
// otherwise it keeps its default.
#define FIELD_IN(T, f, size) (offsetof(T, f) + sizeof(((T *)0)->f) <= (size))

// ---- retries, run-at and priorities ------------------------------------------

static leases_retry_policy leasesshim_policy(const leases_retry_policy *p) {
	leases_retry_policy out = LEASES_RETRY_POLICY_INIT;
	if (p == NULL) return out;
	size_t size = p->size;
	if (FIELD_IN(leases_retry_policy, max_attempts, size)) out.max_attempts = p->max_attempts;
	if (FIELD_IN(leases_retry_policy, jitter_percent, size)) out.jitter_percent = p->jitter_percent;
	if (FIELD_IN(leases_retry_policy, backoff_base_us, size)) out.backoff_base_us = p->backoff_base_us;
	if (FIELD_IN(leases_retry_policy, backoff_cap_us, size)) out.backoff_cap_us = p->backoff_cap_us;
	return out;
}

leases_status leases_job_request_v2(leases_authority *authority, const char *production,
                                    const char *key, const uint8_t *payload, size_t payload_len,
                                    const leases_request_options *options, char **out_job_id) {
	CHECK_FORK();
	leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
	int bad = leasesshim_opts_check(options, sizeof o);
	if (options != NULL && bad == 0) {
		size_t size = options->size;
		if (FIELD_IN(leases_request_options, priority, size)) o.priority = options->priority;
		if (FIELD_IN(leases_request_options, run_at_unix_us, size)) o.run_at_unix_us = options->run_at_unix_us;
		if (FIELD_IN(leases_request_options, delay_us, size)) o.delay_us = options->delay_us;
	}
	return leasesgo_job_request_v2(H(authority), (char *)production, (char *)key, (uint8_t *)payload,
	                               payload_len, bad, o.priority, o.run_at_unix_us, o.delay_us, out_job_id);
}

leases_status leases_production_create_v2(leases_authority *authority, const char *name,
                                          const leases_retry_policy *policy) {
	CHECK_FORK();
	int bad = leasesshim_opts_check(policy, sizeof *policy);
	leases_retry_policy p = leasesshim_policy(bad ? NULL : policy);
	return leasesgo_production_create_v2(H(authority), (char *)name, policy != NULL, bad, p.max_attempts,
	                                     p.jitter_percent, p.backoff_base_us, p.backoff_cap_us);
}

leases_status leases_production_set_policy(leases_authority *authority, const char *production,
                                           const leases_retry_policy *policy) {
	CHECK_FORK();
	int bad = leasesshim_opts_check(policy, sizeof *policy);
	leases_retry_policy p = leasesshim_policy(bad ? NULL : policy);
	return leasesgo_production_set_policy(H(authority), (char *)production, bad, p.max_attempts,
	                                      p.jitter_percent, p.backoff_base_us, p.backoff_cap_us);
}

leases_status leases_lease_fail_retry(leases_lease *lease, const char *reason, int64_t delay_us) {
	CHECK_FORK();
	return leasesgo_lease_fail_retry(H(lease), (char *)reason, delay_us);
}

leases_status leases_job_retry(leases_authority *authority, const char *production,
                               const char *job_id) {
	CHECK_FORK();
	return leasesgo_job_retry(H(authority), (char *)production, (char *)job_id);
}

leases_status leases_production_redrive(leases_authority *authority, const char *production,
                                        const char *state, int64_t *out_count) {
	CHECK_FORK();
	return leasesgo_production_redrive(H(authority), (char *)production, (char *)state, out_count);
}

// ---- retention and pruning (since revision 1) -------------------------------------

static leases_retention_policy leasesshim_retention(const leases_retention_policy *p) {
	leases_retention_policy out = LEASES_RETENTION_POLICY_INIT;
	if (p == NULL) return out;
	size_t size = p->size;
	if (FIELD_IN(leases_retention_policy, keep_completed_us, size)) out.keep_completed_us = p->keep_completed_us;
	if (FIELD_IN(leases_retention_policy, keep_failed_us, size)) out.keep_failed_us = p->keep_failed_us;
	if (FIELD_IN(leases_retention_policy, keep_dead_us, size)) out.keep_dead_us = p->keep_dead_us;
	if (FIELD_IN(leases_retention_policy, keep_cancelled_us, size)) out.keep_cancelled_us = p->keep_cancelled_us;
	if (FIELD_IN(leases_retention_policy, keep_events_us, size)) out.keep_events_us = p->keep_events_us;
	return out;
}

leases_status leases_production_set_retention(leases_authority *authority, const char *production,
                                              const leases_retention_policy *policy) {
	CHECK_FORK();
	int bad = leasesshim_opts_check(policy, sizeof *policy);
	leases_retention_policy p = leasesshim_retention(bad ? NULL : policy);
	return leasesgo_production_set_retention(H(authority), (char *)production, bad, p.keep_completed_us,
	                                         p.keep_failed_us, p.keep_dead_us, p.keep_cancelled_us,
	                                         p.keep_events_us);
}

leases_status leases_production_retention(leases_authority *authority, const char *production,
                                          leases_retention_policy *out) {
	CHECK_FORK();
	int64_t v[5] = {0};
	// out: NULL (4), or the size rule of the options structs, whose bytes
	// past the known fields are the caller's to keep (not read).
	int bad = out == NULL ? 4 : out->size < sizeof(size_t) ? 1 : out->size > 4096 ? 2 : 0;
	leases_status st = leasesgo_production_retention(H(authority), (char *)production, bad, v);
	if (st != LEASES_OK) return st;
	size_t size = out->size;
	if (FIELD_IN(leases_retention_policy, keep_completed_us, size)) out->keep_completed_us = v[0];
	if (FIELD_IN(leases_retention_policy, keep_failed_us, size)) out->keep_failed_us = v[1];
	if (FIELD_IN(leases_retention_policy, keep_dead_us, size)) out->keep_dead_us = v[2];
	if (FIELD_IN(leases_retention_policy, keep_cancelled_us, size)) out->keep_cancelled_us = v[3];
	if (FIELD_IN(leases_retention_policy, keep_events_us, size)) out->keep_events_us = v[4];
	return LEASES_OK;
}

leases_status leases_prune(leases_authority *authority, const char *production, const char *archive_path,
                           const leases_prune_options *options, int64_t *out_jobs, int64_t *out_events) {
	CHECK_FORK();
	leases_prune_options o = LEASES_PRUNE_OPTIONS_INIT;
	int bad = leasesshim_opts_check(options, sizeof o);
	if (options != NULL && bad == 0) {
		size_t size = options->size;
		if (FIELD_IN(leases_prune_options, flags, size)) o.flags = options->flags;
		if (FIELD_IN(leases_prune_options, older_than_us, size)) o.older_than_us = options->older_than_us;
	}
	int64_t jobs = 0, events = 0;
	leases_status st = leasesgo_prune(H(authority), bad, o.flags, o.older_than_us, (char *)production,
	                                  (char *)archive_path, &jobs, &events);
	if (out_jobs != NULL) *out_jobs = jobs;
	if (out_events != NULL) *out_events = events;
	return st;
}

// ---- opening with options ----------------------------------------------------------

leases_status leases_authority_open_v2(const char *location, const leases_open_options *options,
                                       leases_authority **out) {
	CHECK_FORK();
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	int bad = leasesshim_opts_check(options, sizeof o);
	if (options != NULL && bad == 0) {
		size_t size = options->size;
		if (FIELD_IN(leases_open_options, flags, size)) o.flags = options->flags;
		if (FIELD_IN(leases_open_options, synchronous, size)) o.synchronous = options->synchronous;
		if (FIELD_IN(leases_open_options, busy_timeout_us, size)) o.busy_timeout_us = options->busy_timeout_us;
	}
	OUT_HANDLE(leases_authority, out,
	           leasesgo_authority_open_v2((char *)location, bad, o.flags, o.synchronous,
	                                      o.busy_timeout_us, hp_));
}

leases_status leases_lease_complete_and_claim_next(leases_lease *lease, const char *facts_json,
                                                   int64_t duration_us, leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out,
	           leasesgo_lease_complete_and_claim_next(H(lease), (char *)facts_json, duration_us, hp_));
}

leases_status leases_worker_new(leases_authority *authority, const char *production,
                                const char *worker, int64_t duration_us,
                                const leases_worker_options *options, leases_worker **out) {
	CHECK_FORK();
	leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
	int bad = leasesshim_opts_check(options, sizeof o);
	if (options != NULL && bad == 0) {
		size_t size = options->size;
		if (FIELD_IN(leases_worker_options, flags, size)) o.flags = options->flags;
		if (FIELD_IN(leases_worker_options, concurrency, size)) o.concurrency = options->concurrency;
		if (FIELD_IN(leases_worker_options, max_jobs, size)) o.max_jobs = options->max_jobs;
		if (FIELD_IN(leases_worker_options, interval_us, size)) o.interval_us = options->interval_us;
		if (FIELD_IN(leases_worker_options, drain_timeout_us, size)) o.drain_timeout_us = options->drain_timeout_us;
	}
	OUT_HANDLE(leases_worker, out,
	           leasesgo_worker_new(H(authority), (char *)production, (char *)worker, duration_us, bad, o.flags,
	                               o.concurrency, o.max_jobs, o.interval_us, o.drain_timeout_us, hp_));
}

leases_status leases_worker_next(leases_worker *worker, int64_t wait_us, leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out, leasesgo_worker_next(H(worker), wait_us, hp_));
}

leases_status leases_worker_settle(leases_worker *worker, leases_lease *lease, int32_t outcome,
                                   const char *text, size_t text_len) {
	CHECK_FORK();
	return leasesgo_worker_settle(H(worker), H(lease), outcome, (char *)text, text_len);
}

leases_status leases_worker_stop(leases_worker *worker, int32_t mode) {
	CHECK_FORK();
	return leasesgo_worker_stop(H(worker), mode);
}

leases_status leases_worker_wait(leases_worker *worker, int64_t timeout_us,
                                 leases_canceller *canceller, int32_t *out_end) {
	CHECK_FORK();
	return leasesgo_worker_wait(H(worker), timeout_us, H(canceller), out_end);
}

leases_status leases_worker_stats_json(leases_worker *worker, char **out_json) {
	CHECK_FORK();
	return leasesgo_worker_stats_json(H(worker), out_json);
}

void leases_worker_free(leases_worker *worker) {
	if (worker == NULL || forked()) return;
	leasesgo_worker_free(H(worker));
}
