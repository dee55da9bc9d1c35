/* C tests of include/leases.h. Built twice by mk/20-capi.mk: against the test
 * library (LEASES_TEST_BUILD: every test, clock seam included) and against
 * the release library (every test that needs no test seam). Each test is
 * named after the rule it protects. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "leases.h"
#include "vectors.h"
#ifdef LEASES_TEST_BUILD
#include "leases_testing.h"
#endif
#include "observe_tests.h"
#include "next_tests.h"
#include "worker_tests.h"

#define NVEC(a) (sizeof(a) / sizeof((a)[0]))
#define SEC INT64_C(1000000)

static char tmpdir[256];

/* A fresh database per test, with production "p". */
static leases_authority *fresh(const char *name, char *path_out, size_t path_cap) {
	char path[512];
	snprintf(path, sizeof path, "%s/%s.db", tmpdir, name);
	if (path_out) snprintf(path_out, path_cap, "%s", path);
	leases_authority *a = NULL;
	CHECK_OK(leases_authority_open(path, &a));
	CHECK(a != NULL);
	CHECK_OK(leases_production_create(a, "p"));
	return a;
}

static const char *scratch_dir(void) { return tmpdir; }

/* How soon a waiter must be woken by the change under test. The test build
 * makes the safety poll an hour (wait_fresh), so the bound is generous for a
 * loaded or stalled CI host; the release build keeps SQLite's 10 s (+-20 %)
 * poll, and its bound stays below that. */
#ifdef LEASES_TEST_BUILD
#define WAKE_BOUND 30.0
#else
#define WAKE_BOUND 7.0
#endif
/* How soon a cancel or a close must end a 60 s wait (or a kept-alive lease's
 * hour): the rule is "promptly", and seconds, not the milliseconds it takes,
 * leave room for a stalled CI host. */
#define PROMPT_BOUND 30.0

/* fresh, for waiting tests: in the test build, a safety poll of an hour. */
static leases_authority *wait_fresh(const char *name) {
	leases_authority *a = fresh(name, NULL, 0);
#ifdef LEASES_TEST_BUILD
	CHECK_OK(leases_testing_set_safety_poll(a, 3600 * SEC));
#endif
	return a;
}

static char *listing(leases_authority *a) {
	char *json = NULL;
	CHECK_OK(leases_jobs_json(a, "p", &json));
	return json;
}

/* ---- versions and statuses ------------------------------------------------ */

static void test_versions_match_abi_file_and_release_file(void) {
	CHECK(LEASES_ABI_VERSION == EXPECTED_ABI_VERSION);
	CHECK(leases_abi_version() == (uint32_t)EXPECTED_ABI_VERSION);
	CHECK(LEASES_ABI_REVISION == EXPECTED_ABI_REVISION);
	CHECK(leases_abi_revision() == (uint32_t)EXPECTED_ABI_REVISION);
	CHECK(strcmp(leases_version(), EXPECTED_RELEASE_VERSION) == 0);
}

static void test_status_names_and_codes_match_shared_vectors(void) {
	static const struct { int code; const char *name; } macros[] = {
		{LEASES_OK, "ok"}, {LEASES_INVALID_ARGUMENT, "invalid_argument"},
		{LEASES_INVALID_DURATION, "invalid_duration"}, {LEASES_NOT_FOUND, "not_found"},
		{LEASES_NOTHING_TO_CLAIM, "nothing_to_claim"}, {LEASES_WRONG_STATE, "wrong_state"},
		{LEASES_LEASE_LOST, "lease_lost"}, {LEASES_EXPIRED, "expired"},
		{LEASES_CANCELLED, "cancelled"}, {LEASES_NOT_EXTENDED, "not_extended"},
		{LEASES_CLOCK_REGRESSED, "clock_regressed"}, {LEASES_CLOSED, "closed"},
		{LEASES_BAD_TOKEN, "bad_token"}, {LEASES_BUSY, "busy"}, {LEASES_STORAGE, "storage"},
		{LEASES_OUTCOME_UNKNOWN, "outcome_unknown"}, {LEASES_SCHEMA_TOO_NEW, "schema_too_new"},
		{LEASES_FORKED, "forked"}, {LEASES_INTERNAL, "internal"}, {LEASES_INTERRUPTED, "interrupted"},
	};
	CHECK(NVEC(macros) == NVEC(status_vectors));
	for (size_t i = 0; i < NVEC(status_vectors); i++) {
		const struct status_vector *v = &status_vectors[i];
		CHECK(strcmp(leases_status_name(v->code), v->name) == 0);
		int found = 0;
		for (size_t j = 0; j < NVEC(macros); j++)
			if (strcmp(macros[j].name, v->name) == 0) found = macros[j].code == v->code;
		if (!found) fprintf(stderr, "    status %s: header macro differs from vector code %d\n", v->name, v->code);
		CHECK(found);
	}
	CHECK(strcmp(leases_status_name(-1), "unknown") == 0);
	CHECK(strcmp(leases_status_name((int)NVEC(status_vectors)), "unknown") == 0);
	CHECK(strcmp(leases_status_name(1000), "unknown") == 0);
}

/* ---- lifecycle ------------------------------------------------------------ */

static void test_full_lifecycle_request_claim_renew_complete_release_fail(void) {
	leases_authority *a = fresh("lifecycle", NULL, 0);
	char *j1 = request(a, "frame-1");
	char *again = request(a, "frame-1");
	CHECK(strcmp(j1, again) == 0); /* a keyed request is idempotent */
	char *j2 = request(a, NULL);
	char *j3 = NULL;
	CHECK_OK(leases_job_request(a, "p", "", NULL, 0, &j3)); /* empty payload, no key */

	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w1", 30 * SEC, &l)); /* FIFO: the first request */
	char *id = NULL, *prod = NULL, *worker = NULL;
	CHECK_OK(leases_lease_job_id(l, &id));
	CHECK_OK(leases_lease_production(l, &prod));
	CHECK_OK(leases_lease_worker(l, &worker));
	CHECK(id && strcmp(id, j1) == 0);
	CHECK(prod && strcmp(prod, "p") == 0);
	CHECK(worker && strcmp(worker, "w1") == 0);
	CHECK(strcmp(job_state(a, j1), "claimed") == 0);
	uint8_t *payload = NULL;
	size_t payload_len = 99;
	CHECK_OK(leases_lease_payload(l, &payload, &payload_len)); /* the worker's input */
	CHECK(payload != NULL && payload_len == 7 && memcmp(payload, "payload", 7) == 0);
	leases_free(payload);

	int64_t e1 = 0, e2 = 0;
	CHECK_OK(leases_lease_expiry(l, &e1));
	struct timeval tv;
	gettimeofday(&tv, NULL);
	int64_t now = (int64_t)tv.tv_sec * SEC + tv.tv_usec;
	CHECK(e1 > now && e1 <= now + 31 * SEC);
	CHECK_OK(leases_lease_renew(l, 60 * SEC));
	CHECK_OK(leases_lease_expiry(l, &e2));
	CHECK(e2 > e1);
	CHECK_OK(leases_lease_complete(l, "{\"metadata\":{\"frames\":1},\"provenance\":{\"tool\":\"render\"}}"));
	CHECK(strcmp(job_state(a, j1), "completed") == 0);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED); /* completion closed it */
	leases_lease_free(l);

	CHECK_OK(leases_claim(a, "p", "w2", 30 * SEC, &l));
	CHECK_OK(leases_lease_release(l));
	CHECK(strcmp(job_state(a, j2), "requested") == 0);
	leases_lease_free(l);
	CHECK_OK(leases_claim_job(a, "p", j2, "w3", 30 * SEC, &l));
	CHECK_OK(leases_lease_fail(l, "renderer crashed"));
	CHECK(strcmp(job_state(a, j2), "failed") == 0);
	leases_lease_free(l);
	CHECK_OK(leases_cancel(a, "p", j3));
	CHECK(strcmp(job_state(a, j3), "cancelled") == 0);

	char *events = NULL;
	CHECK_OK(leases_events_json(a, "p", 0, &events));
	CHECK(events && strstr(events, "\"kind\":\"completed\"") && strstr(events, "\"kind\":\"failed\""));
	leases_free(events);
	CHECK_OK(leases_events_json(a, NULL, 0, &events)); /* every production */
	CHECK(events && events[0] == '[');
	leases_free(events);
	CHECK_OK(leases_events_json(a, "", 1000000, &events));
	CHECK(events && strcmp(events, "[]") == 0);
	leases_free(events);

	leases_free(id);
	leases_free(prod);
	leases_free(worker);
	leases_free(j1);
	leases_free(again);
	leases_free(j2);
	leases_free(j3);
	leases_authority_close(a);
}

static void test_claim_with_nothing_to_claim_sets_out_to_null(void) {
	leases_authority *a = fresh("nothing", NULL, 0);
	leases_lease *l = (leases_lease *)(uintptr_t)0x1234; /* must be overwritten */
	CHECK_ST(leases_claim(a, "p", "w", SEC, &l), LEASES_NOTHING_TO_CLAIM);
	CHECK(l == NULL);
	CHECK(strstr(leases_last_error(), "nothing_to_claim") != NULL);
	leases_authority_close(a);
}

/* ---- durations ------------------------------------------------------------ */

static void test_every_invalid_duration_is_rejected_and_changes_nothing(void) {
	static const int64_t bad[] = {
		0, -1, -SEC, INT64_MIN, INT64_MIN + 1, INT64_MAX,
		LEASES_MAX_DURATION_US + 1, 2 * LEASES_MAX_DURATION_US, -LEASES_MAX_DURATION_US,
	};
	leases_authority *a = fresh("durations", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", LEASES_MAX_DURATION_US, &l)); /* 24 h is inclusive */
	char *other = request(a, NULL);
	leases_edit *e = NULL;
	char *before = listing(a);
	for (size_t i = 0; i < NVEC(bad); i++) {
		leases_lease *out = NULL;
		CHECK_ST(leases_claim(a, "p", "w", bad[i], &out), LEASES_INVALID_DURATION);
		CHECK(out == NULL);
		CHECK_ST(leases_claim_job(a, "p", other, "w", bad[i], &out), LEASES_INVALID_DURATION);
		CHECK_ST(leases_lease_renew(l, bad[i]), LEASES_INVALID_DURATION);
		CHECK_OK(leases_edit_begin(a, &e));
		CHECK_ST(leases_edit_claim(e, "p", "w", bad[i], &out), LEASES_INVALID_DURATION);
		leases_edit_abort(e);
	}
	char *after = listing(a);
	CHECK(before && after && strcmp(before, after) == 0);
	CHECK_OK(leases_lease_renew(l, LEASES_MAX_DURATION_US));
	/* The shared duration vectors (tests/vectors/durations.json): a rejected one
	 * is invalid_duration; an accepted one never is (a shorter renewal is
	 * not_extended, a 1 µs one may expire before it commits). */
	size_t accepted = 0, rejected = 0;
	for (size_t i = 0; i < NVEC(duration_vectors); i++) {
		leases_status got = leases_lease_renew(l, duration_vectors[i].us);
		if (duration_vectors[i].accepted) {
			accepted++;
			CHECK(got == LEASES_OK || got == LEASES_NOT_EXTENDED || got == LEASES_EXPIRED);
		} else {
			rejected++;
			CHECK_ST(got, LEASES_INVALID_DURATION);
		}
	}
	CHECK(accepted >= 4 && rejected >= 4);
	/* 1 µs is the shortest duration accepted; on a real clock such a claim
	 * expires before it can commit, which is the expiry rule, not a duration
	 * rejection. */
	leases_lease *one = NULL;
	leases_status st = leases_claim(a, "p", "w", 1, &one);
	CHECK(st == LEASES_OK || st == LEASES_EXPIRED);
	leases_lease_free(one);
	leases_lease_free(l);
	leases_free(before);
	leases_free(after);
	leases_free(j);
	leases_free(other);
	leases_authority_close(a);
}

/* ---- bad input ------------------------------------------------------------ */

static void test_null_for_every_pointer_parameter_is_an_argument_error(void) {
	leases_authority *a = fresh("nulls", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", j, "w", 30 * SEC, &l));
	char *s = NULL;
	leases_lease *lo = NULL;
	leases_authority *ao = NULL;
	leases_edit *eo = NULL;
	int64_t i64 = 0;
	const int IA = LEASES_INVALID_ARGUMENT;

	CHECK_ST(leases_authority_open(NULL, &ao), IA);
	CHECK_ST(leases_authority_open("x.db", NULL), IA);
	CHECK_ST(leases_production_create(NULL, "q"), IA);
	CHECK_ST(leases_production_create(a, NULL), IA);
	CHECK_ST(leases_job_request(NULL, "p", NULL, NULL, 0, &s), IA);
	CHECK_ST(leases_job_request(a, NULL, NULL, NULL, 0, &s), IA);
	CHECK_ST(leases_job_request(a, "p", NULL, NULL, 1, &s), IA); /* NULL payload, len 1 */
	CHECK_ST(leases_job_request(a, "p", NULL, NULL, 0, NULL), IA);
	CHECK_ST(leases_claim(NULL, "p", "w", SEC, &lo), IA);
	CHECK_ST(leases_claim(a, NULL, "w", SEC, &lo), IA);
	CHECK_ST(leases_claim(a, "p", NULL, SEC, &lo), IA);
	CHECK_ST(leases_claim(a, "p", "w", SEC, NULL), IA);
	CHECK_ST(leases_claim_job(NULL, "p", j, "w", SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, NULL, j, "w", SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, "p", NULL, "w", SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, "p", j, NULL, SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, "p", j, "w", SEC, NULL), IA);
	CHECK_ST(leases_cancel(NULL, "p", j), IA);
	CHECK_ST(leases_cancel(a, NULL, j), IA);
	CHECK_ST(leases_cancel(a, "p", NULL), IA);
	CHECK_ST(leases_lease_renew(NULL, SEC), IA);
	CHECK_ST(leases_lease_release(NULL), IA);
	CHECK_ST(leases_lease_fail(NULL, "r"), IA);
	CHECK_ST(leases_lease_fail(l, NULL), IA);
	CHECK_ST(leases_lease_complete(NULL, "{}"), IA);
	CHECK_ST(leases_lease_expiry(NULL, &i64), IA);
	CHECK_ST(leases_lease_expiry(l, NULL), IA);
	CHECK_ST(leases_lease_job_id(NULL, &s), IA);
	CHECK_ST(leases_lease_job_id(l, NULL), IA);
	CHECK_ST(leases_lease_production(NULL, &s), IA);
	CHECK_ST(leases_lease_production(l, NULL), IA);
	CHECK_ST(leases_lease_worker(NULL, &s), IA);
	CHECK_ST(leases_lease_worker(l, NULL), IA);
	{
		uint8_t *pb = (uint8_t *)1;
		size_t pn = 5;
		CHECK_ST(leases_lease_payload(NULL, &pb, &pn), IA);
		CHECK(pb == NULL && pn == 0);
		CHECK_ST(leases_lease_payload(l, NULL, &pn), IA);
		CHECK_ST(leases_lease_payload(l, &pb, NULL), IA);
	}
	CHECK_ST(leases_lease_export(NULL, &s), IA);
	CHECK_ST(leases_lease_export(l, NULL), IA);
	CHECK_ST(leases_lease_import(NULL, "lt1.x", &lo), IA);
	CHECK_ST(leases_lease_import(a, NULL, &lo), IA);
	CHECK_ST(leases_lease_import(a, "lt1.x", NULL), IA);
	CHECK_ST(leases_edit_begin(NULL, &eo), IA);
	CHECK_ST(leases_edit_begin(a, NULL), IA);
	CHECK_OK(leases_edit_begin(a, &eo));
	CHECK_ST(leases_edit_claim(NULL, "p", "w", SEC, &lo), IA);
	CHECK_ST(leases_edit_claim(eo, NULL, "w", SEC, &lo), IA);
	CHECK_ST(leases_edit_claim(eo, "p", NULL, SEC, &lo), IA);
	CHECK_ST(leases_edit_claim(eo, "p", "w", SEC, NULL), IA);
	CHECK_ST(leases_edit_complete(NULL, l, "{}"), IA);
	CHECK_ST(leases_edit_complete(eo, NULL, "{}"), IA);
	leases_edit_abort(eo);
	CHECK_ST(leases_edit_commit(NULL), IA);
	CHECK_ST(leases_jobs_json(NULL, "p", &s), IA);
	CHECK_ST(leases_jobs_json(a, NULL, &s), IA);
	CHECK_ST(leases_jobs_json(a, "p", NULL), IA);
	CHECK_ST(leases_events_json(NULL, "p", 0, &s), IA);
	CHECK_ST(leases_events_json(a, "p", 0, NULL), IA);
	CHECK_ST(leases_events_json(a, "p", -1, &s), IA);
	CHECK_ST(leases_jobs_page_json(NULL, "p", NULL, NULL, NULL, NULL, 0, &s), IA);
	CHECK_ST(leases_jobs_page_json(a, NULL, NULL, NULL, NULL, NULL, 0, &s), IA);
	CHECK_ST(leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, 0, NULL), IA);
	CHECK_ST(leases_events_page_json(NULL, NULL, NULL, NULL, 0, 0, &s), IA);
	CHECK_ST(leases_events_page_json(a, NULL, NULL, NULL, 0, 0, NULL), IA);
	CHECK_ST(leases_job_json(NULL, "p", j, &s), IA);
	CHECK_ST(leases_job_json(a, NULL, j, &s), IA);
	CHECK_ST(leases_job_json(a, "p", NULL, &s), IA);
	CHECK_ST(leases_job_json(a, "p", j, NULL), IA);
	CHECK_ST(leases_productions_page_json(NULL, NULL, 0, &s), IA);
	CHECK_ST(leases_productions_page_json(a, NULL, 0, NULL), IA);
	CHECK_ST(leases_job_counts_json(NULL, "p", &s), IA);
	CHECK_ST(leases_job_counts_json(a, NULL, &s), IA);
	CHECK_ST(leases_job_counts_json(a, "p", NULL), IA);
	CHECK_ST(leases_authority_open_v2(NULL, NULL, &ao), IA);
	CHECK_ST(leases_authority_open_v2("x.db", NULL, NULL), IA);
	leases_execution *xo = NULL;
	CHECK_ST(leases_execution_begin(NULL, tmpdir, &xo), IA);
	CHECK_ST(leases_execution_begin(l, NULL, &xo), IA);
	CHECK_ST(leases_execution_begin(l, tmpdir, NULL), IA);
	CHECK(leases_execution_temp_path(NULL) == NULL);
	CHECK(leases_execution_final_path(NULL) == NULL);
	CHECK_ST(leases_execution_finish(NULL, "{}"), IA);
	leases_execution_abandon(NULL);
	leases_free(NULL);
	CHECK(s == NULL && lo == NULL && ao == NULL);

	/* Optional pointers: NULL key, NULL facts (no facts). */
	CHECK_OK(leases_lease_complete(l, NULL));
	CHECK(strcmp(job_state(a, j), "completed") == 0);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_bad_input_gets_a_clear_status_and_changes_nothing(void) {
	leases_authority *a = fresh("badinput", NULL, 0);
	char *j = request(a, "k");
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", j, "w", 30 * SEC, &l));
	char *before = listing(a);
	char *s = NULL;
	leases_lease *lo = NULL;
	const int IA = LEASES_INVALID_ARGUMENT;
	const char bad_utf8[] = {'p', (char)0xC3, (char)0x28, 0};
	char longname[LEASES_MAX_NAME_LEN + 2];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	size_t big = LEASES_MAX_PAYLOAD_LEN + 1;
	uint8_t *payload = calloc(1, big);

	CHECK_ST(leases_production_create(a, bad_utf8), IA);
	CHECK(strstr(leases_last_error(), "UTF-8") != NULL);
	CHECK_ST(leases_production_create(a, longname), IA);
	CHECK(strstr(leases_last_error(), "limit") != NULL);
	CHECK_ST(leases_production_create(a, ""), IA);
	CHECK_ST(leases_job_request(a, "p", bad_utf8, NULL, 0, &s), IA);
	CHECK_ST(leases_job_request(a, "p", longname, NULL, 0, &s), IA);
	CHECK_ST(leases_job_request(a, "p", NULL, payload, big, &s), IA);
	CHECK_ST(leases_job_request(a, "p", "k", (const uint8_t *)"other", 5, &s), LEASES_WRONG_STATE);
	CHECK_ST(leases_claim(a, "p", bad_utf8, SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, "p", "not-a-uuid", "w", SEC, &lo), IA);
	CHECK_ST(leases_claim_job(a, "p", "6F1C2F5E-8A3B-4C1D-9E2F-0A1B2C3D4E5F", "w", SEC, &lo), IA);
	CHECK_ST(leases_cancel(a, "p", "nope"), IA);
	CHECK_ST(leases_lease_complete(l, "{\"metadata\": [1]}"), IA);
	CHECK_ST(leases_lease_complete(l, "{\"metadata\": {}} trailing"), IA);
	CHECK_ST(leases_lease_complete(l, "{\"unknown\": {}}"), IA);
	CHECK_ST(leases_lease_complete(l, "not json"), IA);
	CHECK_ST(leases_lease_fail(l, bad_utf8), IA);
	CHECK(s == NULL && lo == NULL);

	char *after = listing(a);
	CHECK(before && after && strcmp(before, after) == 0);
	CHECK(strcmp(job_state(a, j), "claimed") == 0); /* every rejection left the lease alone */
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	free(payload);
	leases_free(before);
	leases_free(after);
	leases_free(j);
	leases_authority_close(a);
}

/* ---- handles -------------------------------------------------------------- */

static void test_unknown_freed_and_wrong_type_handles_are_rejected(void) {
	leases_authority *a = fresh("handles", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	char *s = NULL;
	leases_lease *lo = NULL;
	const int IA = LEASES_INVALID_ARGUMENT;

	/* Another object's handle where a lease is expected, and vice versa. */
	CHECK_ST(leases_lease_renew((leases_lease *)a, SEC), IA);
	CHECK_ST(leases_production_create((leases_authority *)l, "q"), IA);
	CHECK_ST(leases_edit_commit((leases_edit *)l), IA);
	CHECK_ST(leases_execution_finish((leases_execution *)l, NULL), IA);
	leases_authority_close((leases_authority *)l); /* ignored: not an authority */
	leases_edit_abort((leases_edit *)a);           /* ignored: not an edit */
	CHECK(strcmp(job_state(a, j), "claimed") == 0);
	/* Stray small and garbage values. */
	CHECK_ST(leases_lease_release((leases_lease *)(uintptr_t)1), IA);
	CHECK_ST(leases_lease_release((leases_lease *)(uintptr_t)UINTPTR_MAX), IA);
	CHECK_ST(leases_claim((leases_authority *)(uintptr_t)0xdeadbeef, "p", "w", SEC, &lo), IA);
	CHECK(leases_execution_temp_path((leases_execution *)a) == NULL);
	/* Freed handles stay invalid; ids are never reused. */
	leases_lease *stale = l;
	leases_lease_free(l);
	CHECK_ST(leases_lease_release(stale), IA);
	CHECK_ST(leases_lease_export(stale, &s), IA);
	CHECK(strstr(leases_last_error(), "leases_lease") != NULL);
	CHECK(s == NULL);
	leases_authority *b = NULL;
	char path[512];
	snprintf(path, sizeof path, "%s/handles.db", tmpdir);
	CHECK_OK(leases_authority_open(path, &b));
	CHECK(b != a);
	leases_authority_close(a);
	CHECK_ST(leases_production_create(a, "q"), IA); /* closed authority handle */
	CHECK_OK(leases_production_create(b, "q"));
	leases_free(j);
	leases_authority_close(b);
}

static void test_free_functions_accept_null_and_double_free(void) {
	leases_authority *a = fresh("doublefree", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	leases_edit *e = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	leases_edit_abort(e);
	leases_edit_abort(e);
	CHECK_ST(leases_edit_commit(e), LEASES_INVALID_ARGUMENT); /* consumed */
	leases_lease_free(l);
	leases_lease_free(l);
	leases_lease_free(NULL);
	leases_edit_abort(NULL);
	leases_execution_abandon(NULL);
	leases_authority_close(NULL);
	leases_free(NULL);
	leases_free(j);
	leases_authority_close(a);
	leases_authority_close(a);
}

static void test_lease_free_never_writes(void) {
	leases_authority *a = fresh("freenowrite", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	char *events_before = NULL, *events_after = NULL;
	CHECK_OK(leases_events_json(a, "p", 0, &events_before));
	leases_lease_free(l);
	CHECK_OK(leases_events_json(a, "p", 0, &events_after));
	CHECK(strcmp(job_state(a, j), "claimed") == 0); /* the claim lasts until expiry */
	CHECK(events_before && events_after && strcmp(events_before, events_after) == 0);
	leases_free(events_before);
	leases_free(events_after);
	leases_free(j);
	leases_authority_close(a);
}

static void test_closed_lease_reports_closed(void) {
	leases_authority *a = fresh("closedlease", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	char *s = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	CHECK_OK(leases_lease_release(l));
	CHECK_ST(leases_lease_release(l), LEASES_CLOSED);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED);
	CHECK_ST(leases_lease_fail(l, ""), LEASES_CLOSED);
	CHECK_ST(leases_lease_complete(l, NULL), LEASES_CLOSED);
	CHECK_ST(leases_lease_export(l, &s), LEASES_CLOSED);
	CHECK(s == NULL);
	CHECK_ST(leases_execution_begin(l, tmpdir, &(leases_execution *){NULL}), LEASES_CLOSED);
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	/* Local reads still answer. */
	CHECK_OK(leases_lease_job_id(l, &s));
	CHECK(s && strcmp(s, j) == 0);
	leases_free(s);
	/* An authority closed under a live lease closes the lease too. */
	leases_lease *m = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &m));
	leases_authority_close(a);
	CHECK_ST(leases_lease_renew(m, SEC), LEASES_CLOSED);
	leases_lease_free(m);
	leases_lease_free(l);
	leases_free(j);
}

/* ---- edits ---------------------------------------------------------------- */

static void test_claim_and_complete_in_one_edit(void) {
	leases_authority *a = fresh("editcomplete", NULL, 0);
	char *j = request(a, NULL);
	leases_edit *e = NULL;
	leases_lease *l = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 30 * SEC, &l));
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED); /* pending until commit */
	CHECK_OK(leases_edit_complete(e, l, "{\"metadata\":{\"inline\":true}}"));
	CHECK_OK(leases_edit_commit(e));
	CHECK(strcmp(job_state(a, j), "completed") == 0);
	CHECK_ST(leases_lease_release(l), LEASES_CLOSED);
	CHECK_ST(leases_edit_commit(e), LEASES_INVALID_ARGUMENT); /* consumed */
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_failed_or_aborted_edit_closes_its_pending_leases(void) {
	leases_authority *a = fresh("editabort", NULL, 0);
	char *j = request(a, NULL);
	leases_edit *e = NULL;
	leases_lease *l = NULL, *none = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 30 * SEC, &l));
	CHECK_ST(leases_edit_claim(e, "p", "w", 30 * SEC, &none), LEASES_NOTHING_TO_CLAIM);
	CHECK_ST(leases_edit_complete(e, l, "[]"), LEASES_INVALID_ARGUMENT);
	leases_edit_abort(e);
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	CHECK_ST(leases_lease_release(l), LEASES_CLOSED);
	leases_lease_free(l);
	/* An active lease completed in an aborted edit stays active. */
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_complete(e, l, NULL));
	leases_edit_abort(e);
	CHECK(strcmp(job_state(a, j), "claimed") == 0);
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

/* ---- tokens --------------------------------------------------------------- */

static void test_token_export_import_round_trip(void) {
	leases_authority *a = fresh("tokens", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL, *back = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	char *token = NULL, *id = NULL, *worker = NULL;
	CHECK_OK(leases_lease_export(l, &token));
	CHECK(token && strncmp(token, "lt1.", 4) == 0 && strlen(token) <= LEASES_MAX_TOKEN_LEN);
	CHECK_OK(leases_lease_import(a, token, &back));
	CHECK_OK(leases_lease_job_id(back, &id));
	CHECK_OK(leases_lease_worker(back, &worker));
	CHECK(id && strcmp(id, j) == 0);
	CHECK(worker && strcmp(worker, "w") == 0);
	int64_t e1 = 0, e2 = 0;
	CHECK_OK(leases_lease_expiry(l, &e1));
	CHECK_OK(leases_lease_expiry(back, &e2));
	CHECK(e1 == e2);
	/* The imported lease is the same claim: completing through it finishes
	 * the claim for the original handle. */
	CHECK_OK(leases_lease_complete(back, NULL));
	CHECK_ST(leases_lease_renew(l, 60 * SEC), LEASES_WRONG_STATE);
	CHECK_ST(leases_lease_import(a, token, &(leases_lease *){NULL}), LEASES_WRONG_STATE);
	/* Listings and messages never show the token. */
	char *json = listing(a), *events = NULL;
	CHECK_OK(leases_events_json(a, NULL, 0, &events));
	CHECK(json && strstr(json, token + 4) == NULL);
	CHECK(events && strstr(events, token + 4) == NULL);
	CHECK(strstr(leases_last_error(), token + 4) == NULL);
	token[10] = token[10] == 'A' ? 'B' : 'A'; /* a damaged token */
	CHECK_ST(leases_lease_import(a, token, &(leases_lease *){NULL}), LEASES_BAD_TOKEN);
	CHECK(strstr(leases_last_error(), token + 4) == NULL);
	leases_free(json);
	leases_free(events);
	leases_free(token);
	leases_free(id);
	leases_free(worker);
	leases_lease_free(l);
	leases_lease_free(back);
	leases_free(j);
	leases_authority_close(a);
}

static void test_token_vectors_decode_or_reject_as_shared(void) {
	leases_authority *a = fresh("tokenvectors", NULL, 0);
	CHECK(VECTOR_MAX_TOKEN_LEN == LEASES_MAX_TOKEN_LEN);
	for (size_t i = 0; i < NVEC(valid_token_vectors); i++) {
		/* Well formed, so it reaches the store, which knows no such claim. */
		leases_lease *l = (leases_lease *)(uintptr_t)1;
		CHECK_ST(leases_lease_import(a, valid_token_vectors[i].token, &l), LEASES_NOT_FOUND);
		CHECK(l == NULL);
		CHECK(strstr(leases_last_error(), valid_token_vectors[i].token + 4) == NULL);
	}
	for (size_t i = 0; i < NVEC(invalid_token_vectors); i++) {
		leases_lease *l = NULL;
		leases_status st = leases_lease_import(a, invalid_token_vectors[i].token, &l);
		if (st != LEASES_BAD_TOKEN)
			fprintf(stderr, "    invalid token vector %zu (%s): got %s\n", i, invalid_token_vectors[i].why,
			        leases_status_name(st));
		CHECK(st == LEASES_BAD_TOKEN);
		if (st == LEASES_BAD_TOKEN) status_reached[st] = 1;
		CHECK(l == NULL);
	}
	char huge[4096];
	memset(huge, 'A', sizeof huge - 1);
	huge[sizeof huge - 1] = '\0';
	memcpy(huge, "lt1.", 4);
	CHECK_ST(leases_lease_import(a, huge, &(leases_lease *){NULL}), LEASES_BAD_TOKEN);
	leases_authority_close(a);
}

/* ---- threads -------------------------------------------------------------- */

static void *thread_fresh_error(void *arg) {
	(void)arg;
	const char *e = leases_last_error();
	int ok = e != NULL && e[0] == '\0';
	ok = ok && leases_lease_release(NULL) == LEASES_INVALID_ARGUMENT;
	ok = ok && strstr(leases_last_error(), "leases_lease handle is NULL") != NULL;
	return ok ? (void *)1 : NULL;
}

static void test_last_error_is_per_thread_and_never_null(void) {
	CHECK_ST(leases_claim(NULL, "p", "w", 0, &(leases_lease *){NULL}), LEASES_INVALID_ARGUMENT);
	char mine[1024];
	snprintf(mine, sizeof mine, "%s", leases_last_error());
	CHECK(strstr(mine, "leases_authority") != NULL);
	pthread_t t;
	void *ok = NULL;
	CHECK(pthread_create(&t, NULL, thread_fresh_error, NULL) == 0);
	CHECK(pthread_join(t, &ok) == 0);
	CHECK(ok == (void *)1);
	CHECK(strcmp(leases_last_error(), mine) == 0); /* the other thread's failure is not ours */
}

#define THREADS 4
struct claimer { leases_authority *a; char job[40]; int status; };

static void *thread_claim(void *arg) {
	struct claimer *c = arg;
	leases_lease *l = NULL;
	c->status = leases_claim(c->a, "p", "t", 30 * SEC, &l);
	char *id = NULL;
	if (c->status == LEASES_OK && leases_lease_job_id(l, &id) == LEASES_OK) {
		snprintf(c->job, sizeof c->job, "%s", id);
		leases_free(id);
	}
	leases_lease_free(l);
	return NULL;
}

static void test_threads_share_one_authority_and_never_share_a_job(void) {
	leases_authority *a = fresh("threads", NULL, 0);
	char *ids[THREADS];
	for (int i = 0; i < THREADS; i++) ids[i] = request(a, NULL);
	struct claimer c[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		memset(&c[i], 0, sizeof c[i]);
		c[i].a = a;
		CHECK(pthread_create(&t[i], NULL, thread_claim, &c[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
	for (int i = 0; i < THREADS; i++) {
		CHECK(c[i].status == LEASES_OK);
		for (int k = 0; k < i; k++) CHECK(strcmp(c[i].job, c[k].job) != 0);
	}
	for (int i = 0; i < THREADS; i++) leases_free(ids[i]);
	leases_authority_close(a);
}

struct renewer { leases_lease *l; int bad; };

static void *thread_renew(void *arg) {
	struct renewer *r = arg;
	for (int i = 0; i < 5; i++) {
		leases_status st = leases_lease_renew(r->l, 60 * SEC);
		/* Serialized renewals each extend the expiry; two in the same
		 * microsecond would not, which is the only other acceptable answer. */
		if (st != LEASES_OK && st != LEASES_NOT_EXTENDED) r->bad++;
	}
	return NULL;
}

static void test_one_lease_shared_by_threads_is_serialized(void) {
	leases_authority *a = fresh("sharedlease", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	struct renewer r[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		r[i].l = l;
		r[i].bad = 0;
		CHECK(pthread_create(&t[i], NULL, thread_renew, &r[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		CHECK(pthread_join(t[i], NULL) == 0);
		CHECK(r[i].bad == 0);
	}
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_closing_an_authority_under_an_open_edit_neither_hangs_nor_publishes(void) {
	char path[512];
	leases_authority *a = fresh("closeedit", path, sizeof path);
	char *j = request(a, NULL);
	leases_edit *e = NULL;
	leases_lease *l = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 30 * SEC, &l));
	leases_authority_close(a);
	CHECK_ST(leases_edit_commit(e), LEASES_CLOSED);
	leases_edit_abort(e);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED);
	leases_lease_free(l);
	CHECK_OK(leases_authority_open(path, &a));
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	CHECK_OK(leases_production_create(a, "q")); /* the writer lock was given back */
	leases_free(j);
	leases_authority_close(a);
}

/* ---- executor ------------------------------------------------------------- */

static int file_exists(const char *path) {
	struct stat st;
	return stat(path, &st) == 0;
}

static void test_execution_finish_registers_output_and_abandon_removes_files(void) {
	leases_authority *a = fresh("execution", NULL, 0);
	char *j1 = request(a, NULL);
	char *j2 = request(a, NULL);
	char dir[512];
	snprintf(dir, sizeof dir, "%s/out", tmpdir);
	mkdir(dir, 0700);
	leases_lease *l = NULL;
	leases_execution *x = NULL;
	CHECK_OK(leases_claim_job(a, "p", j1, "w", 30 * SEC, &l));
	CHECK_OK(leases_execution_begin(l, dir, &x));
	const char *temp = leases_execution_temp_path(x);
	const char *final = leases_execution_final_path(x);
	CHECK(temp && final && strcmp(temp, final) != 0);
	CHECK(temp && strstr(temp, j1) && strncmp(temp, dir, strlen(dir)) == 0);
	CHECK(final && strstr(final, j1));
	char final_copy[1024] = "";
	if (final) snprintf(final_copy, sizeof final_copy, "%s", final);
	FILE *f = temp ? fopen(temp, "w") : NULL;
	CHECK(f != NULL);
	if (f) {
		fputs("frame data\n", f);
		fclose(f);
	}
	CHECK_ST(leases_execution_finish(x, "{\"metadata\": 1}"), LEASES_INVALID_ARGUMENT);
	CHECK(leases_execution_temp_path(x) == temp); /* still usable after a bad argument */
	CHECK_OK(leases_execution_finish(x, "{\"metadata\":{\"frames\":1}}"));
	CHECK(leases_execution_temp_path(x) == NULL); /* consumed */
	CHECK_ST(leases_execution_finish(x, NULL), LEASES_INVALID_ARGUMENT);
	CHECK(file_exists(final_copy));
	CHECK(strcmp(job_state(a, j1), "completed") == 0);
	leases_lease_free(l);

	CHECK_OK(leases_claim_job(a, "p", j2, "w", 30 * SEC, &l));
	CHECK_OK(leases_execution_begin(l, dir, &x));
	char temp_copy[1024] = "";
	if (leases_execution_temp_path(x)) snprintf(temp_copy, sizeof temp_copy, "%s", leases_execution_temp_path(x));
	CHECK(file_exists(temp_copy));
	leases_execution_abandon(x);
	leases_execution_abandon(x);
	CHECK(!file_exists(temp_copy));
	CHECK(strcmp(job_state(a, j2), "claimed") == 0); /* abandoning writes nothing */
	CHECK_OK(leases_lease_release(l));
	CHECK_ST(leases_execution_begin(l, dir, &x), LEASES_CLOSED);
	CHECK(x == NULL);
	leases_lease_free(l);
	leases_free(j1);
	leases_free(j2);
	leases_authority_close(a);
}

/* ---- opening with options ----------------------------------------------- */

static void scratch_path(const char *name, char *path, size_t cap) { snprintf(path, cap, "%s/%s.db", tmpdir, name); }

/* Nothing of a SQLite database exists at path: no file, no -wal, no -shm. */
static int no_database_at(const char *path) {
	char side[600];
	snprintf(side, sizeof side, "%s-wal", path);
	int wal = file_exists(side);
	snprintf(side, sizeof side, "%s-shm", path);
	return !file_exists(path) && !wal && !file_exists(side);
}

static void test_open_v2_without_options_opens_as_leases_authority_open(void) {
	char path[512];
	scratch_path("openv2", path, sizeof path);
	leases_authority *a = NULL;
	CHECK_OK(leases_authority_open_v2(path, NULL, &a)); /* creates, as leases_authority_open does */
	CHECK(a != NULL && file_exists(path));
	CHECK_OK(leases_production_create(a, "p"));
	char *j = request(a, NULL);
	leases_authority_close(a);
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	CHECK(o.size == sizeof o && o.flags == 0 && o.synchronous == LEASES_SYNCHRONOUS_DEFAULT && o.busy_timeout_us == 0);
	a = NULL;
	CHECK_OK(leases_authority_open_v2(path, &o, &a));
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	leases_authority_close(a);
	leases_free(j);
}

static void test_open_must_exist_refuses_a_missing_authority_and_creates_nothing(void) {
	char path[512];
	scratch_path("mustexist", path, sizeof path);
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	o.flags = LEASES_OPEN_MUST_EXIST;
	leases_authority *a = (leases_authority *)(uintptr_t)0x1234;
	CHECK_ST(leases_authority_open_v2(path, &o, &a), LEASES_NOT_FOUND);
	CHECK(a == NULL);
	CHECK(strstr(leases_last_error(), "mustexist.db") != NULL);
	CHECK(no_database_at(path));
	/* An empty file is no authority either, and stays empty. */
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) fclose(f);
	CHECK_ST(leases_authority_open_v2(path, &o, &a), LEASES_NOT_FOUND);
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size == 0);
	/* Created once, it opens. */
	CHECK_OK(leases_authority_open(path, &a));
	CHECK_OK(leases_production_create(a, "p"));
	leases_authority_close(a);
	CHECK_OK(leases_authority_open_v2(path, &o, &a));
	char *json = listing(a);
	CHECK(json && strcmp(json, "[]") == 0);
	leases_free(json);
	leases_authority_close(a);
}

static void test_open_options_size_rule_reads_known_fields_and_refuses_unknown_ones(void) {
	char path[512];
	leases_authority *a = NULL;
	const leases_status IA = LEASES_INVALID_ARGUMENT;
	/* A program built against a newer header: the fields this library does
	 * not know follow, and must be zero. */
	struct newer {
		leases_open_options known;
		int64_t future;
		char tail[4096];
	} n;
	memset(&n, 0, sizeof n);
	n.known.size = offsetof(struct newer, tail);
	scratch_path("size-newer-zero", path, sizeof path);
	CHECK_OK(leases_authority_open_v2(path, &n.known, &a));
	leases_authority_close(a);
	n.future = 1;
	scratch_path("size-newer-set", path, sizeof path);
	CHECK_ST(leases_authority_open_v2(path, &n.known, &a), IA);
	CHECK(a == NULL && strstr(leases_last_error(), "newer header") != NULL && no_database_at(path));
	n.future = 0;
	size_t last = 4095 - offsetof(struct newer, tail); /* the last byte of a 4096-byte struct */
	n.tail[last] = 1;
	n.known.size = 4096;
	CHECK_ST(leases_authority_open_v2(path, &n.known, &a), IA);
	n.tail[last] = 0;
	CHECK_OK(leases_authority_open_v2(path, &n.known, &a)); /* 4096 bytes, all known or zero */
	leases_authority_close(a);
	n.known.size = 4097;
	scratch_path("size-over", path, sizeof path);
	CHECK_ST(leases_authority_open_v2(path, &n.known, &a), IA);
	CHECK(strstr(leases_last_error(), "4096") != NULL && no_database_at(path));
	for (size_t size = 0; size < sizeof(size_t); size++) {
		n.known.size = size;
		CHECK_ST(leases_authority_open_v2(path, &n.known, &a), IA);
	}
	CHECK(no_database_at(path));

	/* A program built against an older header: the fields beyond its size
	 * take their defaults, whatever the bytes there hold. */
	leases_open_options o;
	memset(&o, 0xff, sizeof o); /* every field invalid if read */
	o.size = sizeof(size_t);    /* only size itself */
	scratch_path("size-older", path, sizeof path);
	CHECK_OK(leases_authority_open_v2(path, &o, &a)); /* flags 0: created */
	CHECK(a != NULL && file_exists(path));
	leases_authority_close(a);
	o.size = offsetof(leases_open_options, flags) + sizeof o.flags / 2; /* a field cut by size is not read */
	CHECK_OK(leases_authority_open_v2(path, &o, &a));
	leases_authority_close(a);
	o.flags = LEASES_OPEN_MUST_EXIST;
	o.size = offsetof(leases_open_options, synchronous); /* size and flags */
	scratch_path("size-older-flags", path, sizeof path);
	CHECK_ST(leases_authority_open_v2(path, &o, &a), LEASES_NOT_FOUND); /* flags read */
	o.synchronous = 0;
	o.size = offsetof(leases_open_options, busy_timeout_us); /* busy_timeout_us (-1) not read */
	CHECK_ST(leases_authority_open_v2(path, &o, &a), LEASES_NOT_FOUND);
	o.size = sizeof o; /* now it is */
	CHECK_ST(leases_authority_open_v2(path, &o, &a), IA);
	CHECK(strstr(leases_last_error(), "busy_timeout_us") != NULL);
	CHECK(no_database_at(path));
}

static void test_open_options_outside_the_header_are_refused_before_anything_is_opened(void) {
	char path[512];
	scratch_path("badopts", path, sizeof path);
	leases_authority *a = (leases_authority *)(uintptr_t)0x1234;
	const leases_status IA = LEASES_INVALID_ARGUMENT;
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	int32_t bad_flags[] = {2, 4, INT32_MIN, -1, LEASES_OPEN_MUST_EXIST | 8};
	for (size_t i = 0; i < NVEC(bad_flags); i++) {
		o.flags = bad_flags[i];
		CHECK_ST(leases_authority_open_v2(path, &o, &a), IA);
		CHECK(a == NULL);
	}
	o.flags = 0;
	int32_t bad_sync[] = {-1, 4, INT32_MAX};
	for (size_t i = 0; i < NVEC(bad_sync); i++) {
		o.synchronous = bad_sync[i];
		CHECK_ST(leases_authority_open_v2(path, &o, &a), IA);
	}
	o.synchronous = 0;
	int64_t bad_busy[] = {-1, INT64_MIN, LEASES_MAX_DURATION_US + 1, INT64_MAX};
	for (size_t i = 0; i < NVEC(bad_busy); i++) {
		o.busy_timeout_us = bad_busy[i];
		CHECK_ST(leases_authority_open_v2(path, &o, &a), IA);
	}
	CHECK(no_database_at(path));
	/* The bounds themselves are accepted. */
	int32_t good_sync[] = {LEASES_SYNCHRONOUS_NORMAL, LEASES_SYNCHRONOUS_FULL, LEASES_SYNCHRONOUS_EXTRA};
	for (size_t i = 0; i < NVEC(good_sync); i++) {
		o.synchronous = good_sync[i];
		o.busy_timeout_us = i == 0 ? 1 : LEASES_MAX_DURATION_US;
		CHECK_OK(leases_authority_open_v2(path, &o, &a));
		leases_authority_close(a);
	}
}

/* A short busy timeout ends the wait for another handle's writer lock long
 * before the default 10 s would (an upper bound orders of magnitude above
 * the option), and after waiting at least part of it. */
static void test_open_busy_timeout_bounds_the_wait_for_the_writer_lock(void) {
	char path[512];
	leases_authority *a = fresh("openbusy", path, sizeof path);
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	o.busy_timeout_us = 200000;
	leases_authority *b = NULL;
	CHECK_OK(leases_authority_open_v2(path, &o, &b));
	leases_edit *e = NULL;
	CHECK_OK(leases_edit_begin(a, &e)); /* holds the writer lock */
	struct timeval t0, t1;
	gettimeofday(&t0, NULL);
	char *id = NULL;
	CHECK_ST(leases_job_request(b, "p", NULL, NULL, 0, &id), LEASES_BUSY);
	gettimeofday(&t1, NULL);
	int64_t waited = (int64_t)(t1.tv_sec - t0.tv_sec) * SEC + (t1.tv_usec - t0.tv_usec);
	/* After this handle's 200 ms, well before the default 10 s; the upper
	 * bound leaves seconds for a stalled CI host. */
	CHECK(waited >= 100000 && waited < 9 * SEC);
	leases_edit_abort(e);
	CHECK_OK(leases_job_request(b, "p", NULL, NULL, 0, &id)); /* the lock is free again */
	leases_free(id);
	leases_authority_close(b);
	leases_authority_close(a);
}

#ifdef LEASES_TEST_BUILD
static void expect_pragma(leases_authority *a, const char *name, const char *want) {
	char *v = NULL;
	CHECK_OK(leases_testing_pragma(a, name, &v));
	if (v == NULL || strcmp(v, want) != 0) fprintf(stderr, "    pragma %s is %s, want %s\n", name, v ? v : "(null)", want);
	CHECK(v && strcmp(v, want) == 0);
	leases_free(v);
}

static void test_open_options_reach_sqlite_as_synchronous_and_busy_timeout(void) {
	char path[512];
	scratch_path("pragmas", path, sizeof path);
	struct {
		int32_t synchronous;
		int64_t busy_us;
		const char *want_sync, *want_busy;
	} cases[] = {
		{LEASES_SYNCHRONOUS_DEFAULT, 0, "2", "10000"}, /* FULL, 10 s */
		{LEASES_SYNCHRONOUS_NORMAL, 250000, "1", "250"},
		{LEASES_SYNCHRONOUS_FULL, 1, "2", "1"},     /* rounded up to a whole millisecond */
		{LEASES_SYNCHRONOUS_EXTRA, 1500, "3", "2"}, /* likewise */
	};
	for (size_t i = 0; i < NVEC(cases); i++) {
		leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
		o.synchronous = cases[i].synchronous;
		o.busy_timeout_us = cases[i].busy_us;
		leases_authority *a = NULL;
		CHECK_OK(leases_authority_open_v2(path, &o, &a));
		expect_pragma(a, "synchronous", cases[i].want_sync);
		expect_pragma(a, "busy_timeout", cases[i].want_busy);
		expect_pragma(a, "journal_mode", "wal");
		leases_authority_close(a);
	}
	leases_authority *a = NULL;
	CHECK_OK(leases_authority_open(path, &a)); /* leases_authority_open: the defaults */
	expect_pragma(a, "synchronous", "2");
	CHECK_ST(leases_testing_pragma(a, "cache_size", &(char *){NULL}), LEASES_INVALID_ARGUMENT);
	leases_authority_close(a);
}
#endif

/* ---- process and storage statuses ---------------------------------------- */

static void test_forked_child_gets_forked_status_instead_of_hanging(void) {
	leases_authority *a = fresh("fork", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	int fds[2];
	CHECK(pipe(fds) == 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30); /* watchdog: a hang in the Go runtime kills the child (30 s: a stalled CI host is no hang) */
		char ok = 1;
		ok &= leases_claim(a, "p", "w", SEC, &(leases_lease *){NULL}) == LEASES_FORKED;
		/* Forked outranks every other rejection, bad arguments included. */
		ok &= leases_claim(NULL, NULL, NULL, 0, NULL) == LEASES_FORKED;
		ok &= leases_lease_renew(l, SEC) == LEASES_FORKED;
		ok &= leases_authority_open("x", &(leases_authority *){NULL}) == LEASES_FORKED;
		ok &= leases_claim_wait(a, "p", "w", SEC, SEC, NULL, &(leases_lease *){NULL}) == LEASES_FORKED;
		ok &= leases_canceller_new(&(leases_canceller *){NULL}) == LEASES_FORKED;
		ok &= leases_lease_keep_alive(l, SEC, 0) == LEASES_FORKED;
		ok &= leases_lease_wait_lost(l, SEC, NULL, &(leases_status){0}) == LEASES_FORKED;
		ok &= strstr(leases_last_error(), "fork") != NULL;
		ok &= strcmp(leases_status_name(LEASES_FORKED), "forked") == 0;
		leases_lease_free(l); /* do nothing, do not hang */
		leases_authority_close(a);
		alarm(0);
		ssize_t w = write(fds[1], &ok, 1);
		(void)w;
		_exit(0);
	}
	CHECK(pid > 0);
	close(fds[1]);
	char ok = 0;
	ssize_t n = read(fds[0], &ok, 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fds[0]);
	int wst = 0;
	CHECK(waitpid(pid, &wst, 0) == pid);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(n == 1 && ok == 1);
	/* No hang: the child's calls return at once; seconds leave room for a
	 * stalled host. */
	CHECK(secs < 30.0 || under_valgrind());
	if (n == 1 && ok == 1) status_reached[LEASES_FORKED] = 1;
	/* The parent is unaffected. */
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_storage_failure_on_unusable_path(void) {
	leases_authority *a = (leases_authority *)(uintptr_t)1;
	CHECK_ST(leases_authority_open(tmpdir, &a), LEASES_STORAGE); /* a directory */
	CHECK(a == NULL);
	char path[512];
	snprintf(path, sizeof path, "%s/no/such/dir/x.db", tmpdir);
	CHECK_ST(leases_authority_open(path, &a), LEASES_STORAGE);
	/* A file that is not a database at all. */
	snprintf(path, sizeof path, "%s/garbage.db", tmpdir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		for (int i = 0; i < 512; i++) fputs("not a database ", f);
		fclose(f);
	}
	CHECK_ST(leases_authority_open(path, &a), LEASES_STORAGE);
	CHECK(a == NULL);
}

static void test_schema_too_new_is_refused(void) {
	char path[512];
	leases_authority *a = fresh("schema", path, sizeof path);
	leases_authority_close(a); /* the last connection checkpoints the WAL into the file */
	char wal[600];
	snprintf(wal, sizeof wal, "%s-wal", path);
	struct stat st;
	CHECK(stat(wal, &st) != 0 || st.st_size == 0);
	/* PRAGMA user_version is the big-endian 32-bit word at offset 60. */
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	unsigned char v[4] = {0, 0, 0, 99};
	CHECK(pwrite(fd, v, 4, 60) == 4);
	close(fd);
	a = (leases_authority *)(uintptr_t)1;
	CHECK_ST(leases_authority_open(path, &a), LEASES_SCHEMA_TOO_NEW);
	CHECK(a == NULL);
	CHECK(strstr(leases_last_error(), "99") != NULL);
}

/* A commit that cannot be written (the file-size limit stops the WAL from
 * growing) is reported as outcome unknown, not as a rejection, and the
 * authority stays usable. Nothing is printed while the limit is low. */
static void test_outcome_unknown_when_commit_cannot_write(void) {
	leases_authority *a = fresh("outcome", NULL, 0);
	char *j = request(a, NULL);
	size_t big = LEASES_MAX_PAYLOAD_LEN;
	uint8_t *payload = malloc(big);
	for (size_t i = 0; i < big; i++) payload[i] = (uint8_t)(i * 2654435761u >> 24);
	struct rlimit old, low;
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	low = old;
	low.rlim_cur = 256 * 1024;
	void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
	char *id = NULL;
	leases_status st = LEASES_OK;
	if (setrlimit(RLIMIT_FSIZE, &low) == 0) {
		st = leases_job_request(a, "p", "big", payload, big, &id);
		setrlimit(RLIMIT_FSIZE, &old);
	}
	signal(SIGXFSZ, prev);
	CHECK_ST(st, LEASES_OUTCOME_UNKNOWN);
	CHECK(id == NULL);
	CHECK(strstr(leases_last_error(), "may or may not") != NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", j, "w", 30 * SEC, &l)); /* still usable */
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	free(payload);
	leases_free(j);
	leases_authority_close(a);
}

static void test_not_extended_and_cancelled_reach_the_holder(void) {
	leases_authority *a = fresh("notextended", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_NOT_EXTENDED);
	CHECK_ST(leases_claim_job(a, "p", j, "w2", SEC, &(leases_lease *){NULL}), LEASES_WRONG_STATE);
	CHECK_ST(leases_claim(a, "nope", "w", SEC, &(leases_lease *){NULL}), LEASES_NOT_FOUND);
	CHECK_ST(leases_cancel(a, "p", "6f1c2f5e-8a3b-4c1d-9e2f-0a1b2c3d4e5f"), LEASES_NOT_FOUND);
	CHECK_OK(leases_cancel(a, "p", j));
	CHECK_ST(leases_lease_renew(l, 120 * SEC), LEASES_CANCELLED);
	CHECK_ST(leases_lease_complete(l, NULL), LEASES_CANCELLED);
	CHECK(strcmp(job_state(a, j), "cancelled") == 0);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

/* ---- retries, run-at and priorities (revision 1) -------------------------- */

static int count_jobs(leases_authority *a) {
	char *json = listing(a);
	int n = 0;
	for (const char *at = json; at && (at = strstr(at, "\"id\":")); at++) n++;
	leases_free(json);
	return n;
}

/* The options struct of a newer header: ours plus a field we do not know. */
struct newer_request_options {
	leases_request_options known;
	int64_t future_field;
};

static void test_request_options_size_rule_reads_only_known_fields_within_size(void) {
	leases_authority *a = fresh("optsize", NULL, 0);
	char *id = NULL;
	int before = count_jobs(a);
	leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
	o.size = sizeof(size_t) - 1;
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT);
	CHECK(id == NULL);
	CHECK(strstr(leases_last_error(), "size") != NULL);
	o.size = 4097;
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT);
	struct newer_request_options newer = {LEASES_REQUEST_OPTIONS_INIT, 7};
	newer.known.size = sizeof newer;
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &newer.known, &id), LEASES_INVALID_ARGUMENT);
	CHECK(strstr(leases_last_error(), "does not know") != NULL);
	CHECK(count_jobs(a) == before); /* every refusal wrote nothing */
	newer.future_field = 0; /* a newer program that uses nothing new */
	newer.known.priority = 3;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &newer.known, &id));
	leases_free(id);
	/* An older program's smaller struct: fields past its size keep their
	 * defaults, whatever the bytes there hold. */
	leases_request_options older = LEASES_REQUEST_OPTIONS_INIT;
	older.size = offsetof(leases_request_options, run_at_unix_us);
	older.priority = 2;
	older.run_at_unix_us = -5;
	older.delay_us = -5;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &older, &id));
	leases_free(id);
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, NULL, &id)); /* NULL: defaults */
	leases_free(id);
	char *json = listing(a);
	CHECK(strstr(json, "\"priority\":3") != NULL);
	CHECK(strstr(json, "\"priority\":2") != NULL);
	CHECK(strstr(json, "\"claimable_at_unix_us\":") != NULL);
	leases_free(json);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l)); /* priority 3 first, claimable now */
	char *got = NULL;
	CHECK_OK(leases_lease_job_id(l, &got));
	json = NULL;
	CHECK_OK(leases_job_json(a, "p", got, &json));
	CHECK(json && strstr(json, "\"priority\":3") != NULL);
	leases_free(json);
	leases_free(got);
	leases_lease_free(l);
	leases_authority_close(a);
}

static void test_bad_retry_input_is_invalid_argument_and_writes_nothing(void) {
	leases_authority *a = fresh("badretry", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	char *before = listing(a);
	char *id = NULL;
	leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
	int32_t priorities[] = {-1, LEASES_MAX_PRIORITY + 1, INT32_MIN, INT32_MAX};
	for (size_t i = 0; i < NVEC(priorities); i++) {
		o.priority = priorities[i];
		CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT);
		CHECK(id == NULL);
	}
	o = (leases_request_options)LEASES_REQUEST_OPTIONS_INIT;
	int64_t delays[] = {-1, LEASES_MAX_DELAY_US + 1, INT64_MIN, INT64_MAX};
	for (size_t i = 0; i < NVEC(delays); i++) {
		o.delay_us = delays[i];
		CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT);
	}
	o.delay_us = SEC;
	o.run_at_unix_us = INT64_C(2000000000000000);
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT); /* both */
	o.delay_us = 0;
	o.run_at_unix_us = INT64_MAX; /* beyond now + 366 days */
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id), LEASES_INVALID_ARGUMENT);
	struct { int32_t max_attempts, jitter; int64_t base, cap; } policies[] = {
		{0, 20, SEC, 3600 * SEC}, {LEASES_MAX_ATTEMPTS + 1, 20, SEC, 3600 * SEC}, {-1, 20, SEC, 3600 * SEC},
		{25, 101, SEC, 3600 * SEC}, {25, -1, SEC, 3600 * SEC}, {25, 20, 7200 * SEC, 3600 * SEC},
		{25, 20, -1, 3600 * SEC}, {25, 20, SEC, LEASES_MAX_DELAY_US + 1}, {25, 20, SEC, INT64_MAX},
	};
	for (size_t i = 0; i < NVEC(policies); i++) {
		leases_retry_policy p = LEASES_RETRY_POLICY_INIT;
		p.max_attempts = policies[i].max_attempts;
		p.jitter_percent = policies[i].jitter;
		p.backoff_base_us = policies[i].base;
		p.backoff_cap_us = policies[i].cap;
		CHECK_ST(leases_production_set_policy(a, "p", &p), LEASES_INVALID_ARGUMENT);
		CHECK_ST(leases_production_create_v2(a, "q", &p), LEASES_INVALID_ARGUMENT);
	}
	CHECK_ST(leases_lease_fail_retry(l, "x", -1), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_lease_fail_retry(l, "x", LEASES_MAX_DELAY_US + 1), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_lease_fail_retry(l, "\xff", 0), LEASES_INVALID_ARGUMENT);
	int64_t n = 99;
	const char *states[] = {"completed", "requested", "claimed", "", "dead "};
	for (size_t i = 0; i < NVEC(states); i++) {
		n = 99;
		CHECK_ST(leases_production_redrive(a, "p", states[i], &n), LEASES_INVALID_ARGUMENT);
		CHECK(n == 0);
	}
	CHECK_ST(leases_job_retry(a, "p", j), LEASES_WRONG_STATE); /* claimed */
	CHECK_ST(leases_job_retry(a, "p", "not-an-id"), LEASES_INVALID_ARGUMENT);
	char *after = listing(a);
	CHECK(strcmp(before, after) == 0);
	leases_free(after);
	leases_free(before);
	/* The edges are accepted. */
	o = (leases_request_options)LEASES_REQUEST_OPTIONS_INIT;
	o.priority = LEASES_MAX_PRIORITY;
	o.delay_us = LEASES_MAX_DELAY_US;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &id));
	leases_free(id);
	leases_retry_policy edge = {sizeof edge, LEASES_MAX_ATTEMPTS, 100, LEASES_MAX_DELAY_US, LEASES_MAX_DELAY_US};
	CHECK_OK(leases_production_set_policy(a, "p", &edge));
	CHECK_OK(leases_lease_fail_retry(l, NULL, LEASES_MAX_DELAY_US));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_retention_is_set_and_shown_and_a_prune_deletes_only_finished_jobs(void) {
	char path[512], archive[600];
	leases_authority *a = fresh("retention", path, sizeof path);
	leases_retention_policy r = LEASES_RETENTION_POLICY_INIT, got = {sizeof got, 0, 0, 0, 0, 0};
	CHECK_OK(leases_production_retention(a, "p", &got));
	CHECK(got.keep_completed_us == r.keep_completed_us && got.keep_events_us == r.keep_events_us);
	r.keep_completed_us = 0; /* for good */
	r.keep_failed_us = 1;
	CHECK_OK(leases_production_set_retention(a, "p", &r));
	CHECK_OK(leases_production_retention(a, "p", &got));
	CHECK(got.keep_completed_us == 0 && got.keep_failed_us == 1 && got.keep_dead_us == r.keep_dead_us);
	/* A smaller struct gets only its own fields. */
	struct { size_t size; int64_t keep_completed_us; } small = {sizeof small, 99};
	CHECK_OK(leases_production_retention(a, "p", (leases_retention_policy *)(void *)&small));
	CHECK(small.keep_completed_us == 0);
	leases_retention_policy bad = r;
	bad.keep_events_us = -1;
	CHECK_ST(leases_production_set_retention(a, "p", &bad), LEASES_INVALID_ARGUMENT);
	bad.keep_events_us = LEASES_MAX_RETENTION_US + 1;
	CHECK_ST(leases_production_set_retention(a, "p", &bad), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_retention(a, "p", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_retention(a, "nope", &got), LEASES_NOT_FOUND);

	char *done = NULL, *kept = NULL, *j = NULL;
	CHECK_OK(leases_job_request(a, "p", NULL, NULL, 0, &done));
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30000000, &l));
	CHECK_OK(leases_lease_fail(l, "broken"));
	leases_lease_free(l);
	CHECK_OK(leases_job_request(a, "p", NULL, NULL, 0, &kept));
	CHECK_OK(leases_claim(a, "p", "w", 30000000, &l));
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	CHECK_OK(leases_job_request(a, "p", NULL, NULL, 0, &j));
	leases_prune_options o = LEASES_PRUNE_OPTIONS_INIT;
	o.flags = LEASES_PRUNE_DRY_RUN;
	int64_t jobs = -1, events = -1;
	CHECK_OK(leases_prune(a, "p", NULL, &o, &jobs, &events));
	CHECK(jobs == 1);
	snprintf(archive, sizeof archive, "%s.jsonl", path);
	CHECK_OK(leases_prune(a, NULL, archive, NULL, &jobs, &events));
	CHECK(jobs == 1); /* the failed job; the completed one is kept for good */
	char *rec = NULL;
	CHECK_ST(leases_job_json(a, "p", done, &rec), LEASES_NOT_FOUND);
	CHECK_OK(leases_job_json(a, "p", kept, &rec));
	leases_free(rec);
	o.flags = 2;
	CHECK_ST(leases_prune(a, NULL, NULL, &o, NULL, NULL), LEASES_INVALID_ARGUMENT);
	o.flags = 0;
	o.older_than_us = -1;
	CHECK_ST(leases_prune(a, NULL, NULL, &o, NULL, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_prune(NULL, NULL, NULL, NULL, NULL, NULL), LEASES_INVALID_ARGUMENT);
	leases_free(done);
	leases_free(kept);
	leases_free(j);
	leases_authority_close(a);
}

static void test_retry_functions_reject_null_and_bad_handles(void) {
	leases_authority *a = fresh("retrynull", NULL, 0);
	leases_authority *bad_a = (leases_authority *)(uintptr_t)0xdead;
	leases_lease *bad_l = (leases_lease *)(uintptr_t)0xdead;
	char *id = (char *)"sentinel";
	int64_t n = 5;
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 0, NULL, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_request_v2(NULL, "p", NULL, NULL, 0, NULL, &id), LEASES_INVALID_ARGUMENT);
	CHECK(id == NULL);
	CHECK_ST(leases_job_request_v2(bad_a, "p", NULL, NULL, 0, NULL, &id), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_request_v2(a, NULL, NULL, NULL, 0, NULL, &id), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_request_v2(a, "p", NULL, NULL, 3, NULL, &id), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_request_v2(a, "nope", NULL, NULL, 0, NULL, &id), LEASES_NOT_FOUND);
	CHECK_ST(leases_production_create_v2(NULL, "q", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_create_v2(bad_a, "q", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_create_v2(a, NULL, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_set_policy(NULL, "p", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_set_policy(a, NULL, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_set_policy(a, "nope", NULL), LEASES_NOT_FOUND);
	CHECK_ST(leases_lease_fail_retry(NULL, "x", 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_lease_fail_retry(bad_l, "x", 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_retry(NULL, "p", "00000000-0000-4000-8000-000000000000"), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_retry(a, NULL, "00000000-0000-4000-8000-000000000000"), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_retry(a, "p", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_retry(a, "p", "00000000-0000-4000-8000-000000000000"), LEASES_NOT_FOUND);
	CHECK_ST(leases_production_redrive(a, "p", "dead", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_redrive(NULL, "p", "dead", &n), LEASES_INVALID_ARGUMENT);
	CHECK(n == 0);
	CHECK_ST(leases_production_redrive(a, NULL, "dead", &n), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_production_redrive(a, "p", NULL, &n), LEASES_INVALID_ARGUMENT);
	char *json = (char *)"sentinel";
	CHECK_ST(leases_job_json(a, "p", "00000000-0000-4000-8000-000000000000", NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_json(bad_a, "p", "00000000-0000-4000-8000-000000000000", &json), LEASES_INVALID_ARGUMENT);
	CHECK(json == NULL);
	CHECK_ST(leases_job_json(a, "p", NULL, &json), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_job_json(a, "p", "00000000-0000-4000-8000-000000000000", &json), LEASES_NOT_FOUND);
	CHECK(count_jobs(a) == 0);
	leases_authority_close(a);
}

static void test_production_create_v2_is_idempotent_only_for_the_same_policy(void) {
	leases_authority *a = fresh("createv2", NULL, 0);
	leases_retry_policy p = LEASES_RETRY_POLICY_INIT;
	p.max_attempts = 3;
	CHECK_OK(leases_production_create_v2(a, "q", &p));
	CHECK_OK(leases_production_create_v2(a, "q", &p));
	CHECK_OK(leases_production_create_v2(a, "q", NULL)); /* as leases_production_create */
	CHECK_OK(leases_production_create(a, "q"));
	p.max_attempts = 4;
	CHECK_ST(leases_production_create_v2(a, "q", &p), LEASES_WRONG_STATE);
	CHECK_OK(leases_production_set_policy(a, "q", &p));
	CHECK_OK(leases_production_create_v2(a, "q", &p));
	/* A policy struct of an older header: unread fields take the defaults. */
	leases_retry_policy older = {offsetof(leases_retry_policy, jitter_percent), 5, -7, -7, -7};
	CHECK_OK(leases_production_set_policy(a, "q", &older));
	leases_retry_policy back = LEASES_RETRY_POLICY_INIT;
	back.max_attempts = 5;
	CHECK_OK(leases_production_create_v2(a, "q", &back)); /* the same policy now */
	leases_authority_close(a);
}

#ifdef LEASES_TEST_BUILD
/* ---- statuses that need the test clock or test seams ---------------------- */

#define T0 INT64_C(2000000000000000) /* a frozen authority time, unix µs */

static leases_authority *fresh_clocked(const char *name) {
	leases_authority *a = fresh(name, NULL, 0);
	CHECK_OK(leases_testing_set_clock(a, T0));
	return a;
}

static void test_expired_claim_cannot_renew_release_or_complete(void) {
	leases_authority *a = fresh_clocked("expired");
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 10 * SEC, &l));
	CHECK_OK(leases_testing_set_clock(a, T0 + 10 * SEC)); /* expiry is exclusive */
	CHECK_ST(leases_lease_renew(l, 60 * SEC), LEASES_EXPIRED);
	CHECK_ST(leases_lease_release(l), LEASES_EXPIRED);
	CHECK_ST(leases_lease_complete(l, NULL), LEASES_EXPIRED);
	char *token = NULL;
	CHECK_OK(leases_lease_export(l, &token)); /* a rejection leaves it active locally */
	leases_free(token);
	CHECK(strcmp(job_state(a, j), "claimed") == 0);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_clock_regression_rejects_guarded_operations_but_not_cancel(void) {
	leases_authority *a = fresh_clocked("regressed");
	char *j = request(a, NULL);
	char *k = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", j, "w", 60 * SEC, &l));
	CHECK_OK(leases_testing_set_clock(a, T0 - SEC));
	CHECK_ST(leases_claim(a, "p", "w", SEC, &(leases_lease *){NULL}), LEASES_CLOCK_REGRESSED);
	CHECK_ST(leases_lease_renew(l, 120 * SEC), LEASES_CLOCK_REGRESSED);
	CHECK_ST(leases_lease_release(l), LEASES_CLOCK_REGRESSED);
	CHECK(strcmp(job_state(a, j), "claimed") == 0);
	CHECK_OK(leases_cancel(a, "p", k)); /* the recovery tool is not blocked */
	CHECK_OK(leases_testing_set_clock(a, T0 + SEC)); /* caught up */
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	leases_free(j);
	leases_free(k);
	leases_authority_close(a);
}

static void test_lease_lost_when_an_expired_claim_is_taken(void) {
	leases_authority *a = fresh_clocked("leaselost");
	char *j = request(a, NULL);
	leases_lease *old = NULL, *cur = NULL;
	CHECK_OK(leases_claim(a, "p", "w1", 10 * SEC, &old));
	CHECK_OK(leases_testing_set_clock(a, T0 + 20 * SEC));
	CHECK_OK(leases_claim(a, "p", "w2", 10 * SEC, &cur));
	CHECK_ST(leases_lease_renew(old, 60 * SEC), LEASES_LEASE_LOST);
	CHECK_ST(leases_lease_complete(old, NULL), LEASES_LEASE_LOST);
	CHECK_OK(leases_lease_complete(cur, NULL));
	CHECK_ST(leases_lease_release(old), LEASES_LEASE_LOST); /* another claim finished it */
	leases_lease_free(old);
	leases_lease_free(cur);
	leases_free(j);
	leases_authority_close(a);
}

static void test_rejected_execution_finish_removes_only_its_own_files(void) {
	leases_authority *a = fresh_clocked("execexpired");
	char *j = request(a, NULL);
	char dir[512], other[600];
	snprintf(dir, sizeof dir, "%s/out-expired", tmpdir);
	mkdir(dir, 0700);
	snprintf(other, sizeof other, "%s/another-workers-file", dir);
	FILE *f = fopen(other, "w");
	CHECK(f != NULL);
	if (f) fclose(f);
	leases_lease *l = NULL;
	leases_execution *x = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 10 * SEC, &l));
	CHECK_OK(leases_execution_begin(l, dir, &x));
	char temp[1024] = "", final[1024] = "";
	if (x) {
		snprintf(temp, sizeof temp, "%s", leases_execution_temp_path(x));
		snprintf(final, sizeof final, "%s", leases_execution_final_path(x));
	}
	f = fopen(temp, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("late output\n", f);
		fclose(f);
	}
	CHECK_OK(leases_testing_set_clock(a, T0 + 11 * SEC));
	CHECK_ST(leases_execution_finish(x, NULL), LEASES_EXPIRED);
	CHECK(!file_exists(temp) && !file_exists(final));
	CHECK(file_exists(other));
	CHECK(leases_execution_temp_path(x) == NULL); /* consumed */
	char *facts = NULL;
	CHECK_OK(leases_jobs_json(a, "p", &facts));
	CHECK(facts && strstr(facts, "\"state\":\"claimed\"")); /* nothing was published */
	leases_free(facts);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

/* One check per row of the rejection-order table (docs/c-api.md); the
 * forked row is test_forked_child_gets_forked_status_instead_of_hanging. */
/* ---- retries on the authority clock -------------------------------------- */

static char *claimed_id(leases_lease *l) {
	char *id = NULL;
	CHECK_OK(leases_lease_job_id(l, &id));
	return id;
}

static void test_fail_retry_backs_off_on_the_authority_clock_then_the_last_attempt_is_dead(void) {
	leases_authority *a = fresh_clocked("failretry");
	leases_retry_policy p = {sizeof p, 2, 0, 10 * SEC, 3600 * SEC};
	CHECK_OK(leases_production_set_policy(a, "p", &p));
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w1", 60 * SEC, &l));
	CHECK_OK(leases_lease_fail_retry(l, "flaky", 0));
	CHECK_ST(leases_lease_release(l), LEASES_CLOSED); /* success closed it */
	leases_lease_free(l);
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	CHECK_OK(leases_testing_set_clock(a, T0 + 10 * SEC - 1));
	CHECK_ST(leases_claim(a, "p", "w2", 60 * SEC, &l), LEASES_NOTHING_TO_CLAIM);
	CHECK_ST(leases_claim_job(a, "p", j, "w2", 60 * SEC, &l), LEASES_WRONG_STATE);
	CHECK_OK(leases_testing_set_clock(a, T0 + 10 * SEC));
	CHECK_OK(leases_claim(a, "p", "w2", 60 * SEC, &l));
	CHECK_OK(leases_lease_fail_retry(l, "flaky again", 5 * SEC));
	leases_lease_free(l);
	CHECK(strcmp(job_state(a, j), "dead") == 0); /* the last attempt */
	char *json = NULL;
	CHECK_OK(leases_job_json(a, "p", j, &json));
	CHECK(json && strstr(json, "\"attempt_history\":[{\"number\":1,\"worker\":\"w1\"") != NULL);
	CHECK(json && strstr(json, "\"ending\":\"retry\",\"reason\":\"flaky again\"") != NULL);
	leases_free(json);
	CHECK_OK(leases_events_json(a, "p", 0, &json));
	CHECK(json && strstr(json, "attempts used up (2 of 2)") != NULL);
	leases_free(json);
	CHECK_OK(leases_job_retry(a, "p", j));
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	CHECK_OK(leases_claim(a, "p", "w3", 60 * SEC, &l));
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_redrive_returns_every_dead_job_and_priority_orders_claims(void) {
	leases_authority *a = fresh_clocked("redrive");
	leases_retry_policy p = {sizeof p, 1, 0, 0, 0};
	CHECK_OK(leases_production_set_policy(a, "p", &p));
	for (int i = 0; i < 3; i++) leases_free(request(a, NULL));
	for (int i = 0; i < 3; i++) {
		leases_lease *l = NULL;
		CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
		CHECK_OK(i == 2 ? leases_lease_fail(l, "bad") : leases_lease_release(l)); /* a release ends the one attempt */
		leases_lease_free(l);
	}
	int64_t n = -1;
	CHECK_OK(leases_production_redrive(a, "p", "dead", &n));
	CHECK(n == 2);
	CHECK_OK(leases_production_redrive(a, "p", "failed", &n));
	CHECK(n == 1);
	CHECK_OK(leases_production_redrive(a, "p", "cancelled", &n));
	CHECK(n == 0);
	/* Priority first, then claimable time, then request order. */
	leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
	o.priority = 7;
	o.run_at_unix_us = T0 + 5 * SEC;
	char *later = NULL, *high = NULL;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &later));
	o.run_at_unix_us = 0;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &high));
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	char *got = claimed_id(l);
	CHECK(strcmp(got, high) == 0);
	leases_free(got);
	leases_lease_free(l);
	CHECK_OK(leases_testing_set_clock(a, T0 + 5 * SEC));
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	got = claimed_id(l);
	CHECK(strcmp(got, later) == 0); /* due now, and of a higher priority than the redriven */
	leases_free(got);
	leases_lease_free(l);
	leases_free(later);
	leases_free(high);
	leases_authority_close(a);
}

static void test_rejection_order_matches_the_documented_table(void) {
	leases_authority *a = fresh_clocked("order");
	char *j = request(a, NULL);
	leases_lease *l = NULL, *l2 = NULL, *twin = NULL;
	char *token = NULL;

	/* invalid argument/duration before closed, and before any store access */
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	CHECK_OK(leases_lease_release(l));
	CHECK_ST(leases_lease_renew(l, 0), LEASES_INVALID_DURATION);
	CHECK_ST(leases_lease_fail(l, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_claim(a, "no-such-production", "w", -5, &(leases_lease *){NULL}), LEASES_INVALID_DURATION);
	/* closed before clock regressed */
	CHECK_OK(leases_testing_set_clock(a, T0 - SEC));
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED);
	/* clock regressed before not found */
	CHECK_ST(leases_claim(a, "no-such-production", "w", SEC, &(leases_lease *){NULL}), LEASES_CLOCK_REGRESSED);
	CHECK_OK(leases_testing_set_clock(a, T0));
	/* not found (job in no production) */
	CHECK_ST(leases_claim_job(a, "p", "6f1c2f5e-8a3b-4c1d-9e2f-0a1b2c3d4e5f", "w", SEC, &(leases_lease *){NULL}),
	         LEASES_NOT_FOUND);
	leases_lease_free(l);

	/* cancelled before lease lost: l expired, l2 took the job, then cancel */
	CHECK_OK(leases_claim(a, "p", "w1", 10 * SEC, &l));
	CHECK_OK(leases_testing_set_clock(a, T0 + 20 * SEC));
	CHECK_OK(leases_claim(a, "p", "w2", 10 * SEC, &l2));
	CHECK_OK(leases_cancel(a, "p", j));
	CHECK_ST(leases_lease_renew(l, 60 * SEC), LEASES_CANCELLED);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_free(j);

	/* lease lost before wrong state: another claim finished the job */
	j = request(a, NULL);
	CHECK_OK(leases_claim(a, "p", "w1", 10 * SEC, &l));
	CHECK_OK(leases_testing_set_clock(a, T0 + 40 * SEC));
	CHECK_OK(leases_claim(a, "p", "w2", 10 * SEC, &l2));
	CHECK_OK(leases_lease_complete(l2, NULL));
	CHECK_ST(leases_lease_renew(l, 60 * SEC), LEASES_LEASE_LOST);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_free(j);

	/* wrong state before expired: this claim finished through another handle */
	j = request(a, NULL);
	CHECK_OK(leases_claim(a, "p", "w", 10 * SEC, &l));
	CHECK_OK(leases_lease_export(l, &token));
	CHECK_OK(leases_lease_import(a, token, &twin));
	CHECK_OK(leases_lease_complete(twin, NULL));
	CHECK_OK(leases_testing_set_clock(a, T0 + 60 * SEC));
	CHECK_ST(leases_lease_renew(l, 60 * SEC), LEASES_WRONG_STATE);
	leases_lease_free(l);
	leases_lease_free(twin);
	leases_free(token);
	leases_free(j);

	/* expired before not extended */
	j = request(a, NULL);
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	CHECK_OK(leases_testing_set_clock(a, T0 + 200 * SEC));
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_EXPIRED);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_busy_when_another_handle_holds_the_writer_lock(void) {
	char path[512];
	leases_authority *a = fresh("busy", path, sizeof path);
	char *j = request(a, NULL);
	leases_authority *b = NULL;
	CHECK_OK(leases_testing_open(path, 100000, &b)); /* 100 ms busy timeout */
	leases_edit *e = NULL;
	CHECK_OK(leases_edit_begin(a, &e)); /* holds the writer lock */
	CHECK_ST(leases_production_create(b, "q"), LEASES_BUSY);
	CHECK_ST(leases_claim(b, "p", "w", SEC, &(leases_lease *){NULL}), LEASES_BUSY);
	CHECK_ST(leases_edit_begin(b, &(leases_edit *){NULL}), LEASES_BUSY);
	leases_edit_abort(e);
	/* The lock is free again. b's busy timeout bounds its whole way to
	 * BEGIN, and under valgrind (20-50x slower) that way alone can take
	 * 100 ms: b tries again while refused, which it never is for long once
	 * a's edit is gone (a lock still held would be refused 50 times). */
	leases_lease *l = NULL;
	int st = LEASES_BUSY;
	for (int tries = 0; tries < 50 && st == LEASES_BUSY; tries++) st = leases_claim(b, "p", "w", SEC, &l);
	CHECK_ST(st, LEASES_OK);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(b);
	leases_authority_close(a);
}

static void test_panic_becomes_internal_status(void) {
	CHECK_ST(leases_testing_panic(), LEASES_INTERNAL);
	CHECK(strstr(leases_last_error(), "panic") != NULL);
	CHECK_ST(leases_lease_release(NULL), LEASES_INVALID_ARGUMENT); /* the library goes on */
}

/* Memcheck sometimes marks Go memory undefined (capi/shim.c says when); the
 * seam does so on purpose before handing the text out. Under valgrind
 * (make test-capi-valgrind) the strcmp below reads every byte of the copy and
 * of the last error, so a copy carrying "undefined" fails the run; without
 * valgrind it checks the copy's contents only. */
static void test_strings_handed_out_are_defined_even_where_memcheck_lost_track_of_go_memory(void) {
	const char *text = "{\"state\":\"dead\",\"reason\":\"attempts used up (2 of 2)\"}";
	char *copy = NULL;
	CHECK_OK(leases_testing_lost_track(text, 0, &copy));
	CHECK(copy && strcmp(copy, text) == 0);
	leases_free(copy);
	copy = NULL;
	CHECK_ST(leases_testing_lost_track(text, 1, &copy), LEASES_INVALID_ARGUMENT);
	CHECK(copy == NULL && strcmp(leases_last_error(), text) == 0);
	CHECK_OK(leases_testing_lost_track("", 0, &copy)); /* an empty one is "" */
	CHECK(copy && copy[0] == '\0');
	leases_free(copy);
}
/* A claim whose outcome is unknown returns no lease; leases_last_error_job_id
 * names the job it chose, so a program can find it without parsing the
 * message: for leases_lease_complete_and_claim_next the next job, not the
 * completed one. Every later failure sets it anew (or clears it). */
static void test_an_outcome_unknown_claim_names_its_job_in_last_error_job_id(void) {
	leases_authority *a = fresh("unknownjob", NULL, 0);
	CHECK(leases_last_error_job_id() != NULL);
	char *j1 = request(a, NULL), *j2 = request(a, NULL), *j3 = request(a, NULL);
	leases_lease *l = NULL, *out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	CHECK_ST(leases_claim_job(a, "p", j1, "w", 30 * SEC, &out), LEASES_WRONG_STATE); /* taken */
	CHECK(strcmp(leases_last_error_job_id(), j1) == 0); /* the job it acted on */
	CHECK_ST(leases_lease_release(NULL), LEASES_INVALID_ARGUMENT);
	CHECK(strcmp(leases_last_error_job_id(), "") == 0); /* names no job: cleared */
	CHECK_OK(leases_testing_lose_commit_acks(a));
	out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_lease_complete_and_claim_next(l, NULL, 30 * SEC, &out), LEASES_OUTCOME_UNKNOWN);
	CHECK(out == NULL);
	CHECK(strcmp(leases_last_error_job_id(), j2) == 0);
	/* It committed (only the acknowledgement was lost): j2 is claimed. */
	out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_claim(a, "p", "w", 30 * SEC, &out), LEASES_OUTCOME_UNKNOWN);
	CHECK(out == NULL);
	CHECK(strcmp(leases_last_error_job_id(), j3) == 0);
	CHECK(strstr(leases_last_error(), j3) != NULL);
	CHECK_ST(leases_lease_release(NULL), LEASES_INVALID_ARGUMENT);
	CHECK(strcmp(leases_last_error_job_id(), "") == 0);
	leases_lease_free(l);
	leases_free(j1);
	leases_free(j2);
	leases_free(j3);
	leases_authority_close(a);
}
#endif /* LEASES_TEST_BUILD */


/* ---- waiting claims, keep-alive, cancellers (revision 1) ------------------ */

/* How many events of kind the production's log holds. */
static int count_events(leases_authority *a, const char *kind) {
	char *json = NULL;
	CHECK_OK(leases_events_json(a, "p", 0, &json));
	char needle[64];
	snprintf(needle, sizeof needle, "\"kind\":\"%s\"", kind);
	int n = 0;
	for (const char *p = json; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
	leases_free(json);
	return n;
}

struct later {
	int after_ms;
	leases_authority *authority; /* request a job, or close it (close set) */
	leases_canceller *canceller; /* cancel it */
	int close;
};

static void *do_later(void *arg) {
	struct later *w = arg;
	sleep_ms(w->after_ms);
	if (w->canceller) CHECK_OK(leases_canceller_cancel(w->canceller));
	if (w->authority && w->close) leases_authority_close(w->authority);
	if (w->authority && !w->close) leases_free(request(w->authority, NULL));
	return NULL;
}

static void test_claim_wait_wakes_for_a_job_requested_while_it_waits(void) {
	leases_authority *a = wait_fresh("wait_wakes");
#ifdef LEASES_TEST_BUILD
	CHECK_ST(leases_testing_set_safety_poll(a, 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_testing_set_safety_poll(NULL, SEC), LEASES_INVALID_ARGUMENT);
#endif
	struct later w = {.after_ms = 100, .authority = a};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, do_later, &w) == 0);
	struct timespec t0 = mono_now();
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, NULL, &l));
	CHECK(l != NULL);
	/* Woken by the commit, not by the safety poll. */
	CHECK(seconds_since(t0) < WAKE_BOUND);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	leases_authority_close(a);
}

static void test_claim_wait_with_nothing_to_claim_returns_after_its_wait_and_writes_nothing(void) {
	leases_authority *a = fresh("wait_nothing", NULL, 0);
	char *before = NULL, *after = NULL;
	CHECK_OK(leases_events_json(a, NULL, 0, &before));
	struct timespec t0 = mono_now();
	leases_lease *l = (leases_lease *)&l;
	CHECK_ST(leases_claim_wait(a, "p", "w", 30 * SEC, 100000, NULL, &l), LEASES_NOTHING_TO_CLAIM);
	CHECK(l == NULL);
	CHECK(seconds_since(t0) >= 0.09);
	CHECK_ST(leases_claim_wait(a, "p", "w", 30 * SEC, 0, NULL, &l), LEASES_NOTHING_TO_CLAIM); /* no wait: a claim */
	CHECK_ST(leases_claim_wait(a, "nope", "w", 30 * SEC, 60 * SEC, NULL, &l), LEASES_NOT_FOUND); /* at once */
	CHECK_OK(leases_events_json(a, NULL, 0, &after));
	CHECK(before && after && strcmp(before, after) == 0);
	leases_free(before);
	leases_free(after);
	leases_authority_close(a);
}

static void test_a_canceller_cancelled_from_another_thread_interrupts_a_wait(void) {
	leases_authority *a = fresh("wait_cancel", NULL, 0);
	leases_canceller *c = NULL;
	CHECK_OK(leases_canceller_new(&c));
	CHECK(c != NULL);
	struct later w = {.after_ms = 100, .canceller = c};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, do_later, &w) == 0);
	struct timespec t0 = mono_now();
	leases_lease *l = (leases_lease *)&l;
	CHECK_ST(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, c, &l), LEASES_INTERRUPTED);
	CHECK(l == NULL);
	CHECK(seconds_since(t0) < PROMPT_BOUND);
	CHECK(strstr(leases_last_error(), "interrupted") != NULL);
	CHECK(pthread_join(t, NULL) == 0);
	/* Sticky: every later wait given it ends at once, nothing claimed. */
	char *j = request(a, NULL);
	CHECK_ST(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, c, &l), LEASES_INTERRUPTED);
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	CHECK_OK(leases_canceller_cancel(c)); /* again: fine */
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	leases_status why = -1;
	CHECK_ST(leases_lease_wait_lost(l, 60 * SEC, c, &why), LEASES_INTERRUPTED);
	CHECK(why == 0);
	leases_lease_free(l);
	leases_canceller_free(c);
	leases_canceller_free(c); /* twice: nothing */
	leases_canceller_free(NULL);
	leases_free(j);
	leases_authority_close(a);
}

static void test_closing_the_authority_ends_a_wait_with_closed(void) {
	leases_authority *a = fresh("wait_close", NULL, 0);
	struct later w = {.after_ms = 100, .authority = a, .close = 1};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, do_later, &w) == 0);
	struct timespec t0 = mono_now();
	leases_lease *l = NULL;
	CHECK_ST(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, NULL, &l), LEASES_CLOSED);
	CHECK(seconds_since(t0) < PROMPT_BOUND);
	CHECK(pthread_join(t, NULL) == 0);
}

/* Waits, at most 60 s (a stalled CI host), until the log holds n renewals. */
static void await_renewals(leases_authority *a, int n) {
	struct timespec t0 = mono_now();
	while (count_events(a, "renewed") < n && seconds_since(t0) < 60.0) sleep_ms(10);
	CHECK(count_events(a, "renewed") >= n);
}

/* Checks that the event log gets no renewal any more. */
static void check_no_more_renewals(leases_authority *a) {
	int n = count_events(a, "renewed");
	sleep_ms(100);
	CHECK(count_events(a, "renewed") == n);
}

static void test_a_kept_alive_lease_renews_and_a_freed_one_writes_nothing_after(void) {
	leases_authority *a = fresh("keepalive_free", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = claim_kept_alive(a, 2 * SEC, 10000);
	await_renewals(a, 3);
	leases_status why = -1;
	CHECK_OK(leases_lease_check(l, &why));
	CHECK(why == LEASES_OK);
	leases_lease_free(l); /* stops the renewer first */
	check_no_more_renewals(a); /* the event log: nothing after free */
	CHECK(strcmp(job_state(a, j), "claimed") == 0);
	leases_free(j);
	leases_authority_close(a);
}

static void test_keep_alive_stop_writes_nothing_after_it_returns(void) {
	leases_authority *a = fresh("keepalive_stop", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = claim_kept_alive(a, 2 * SEC, 10000);
	CHECK_OK(leases_lease_keep_alive(l, 2 * SEC, 0)); /* again: replaces it */
	CHECK_OK(leases_lease_keep_alive(l, 2 * SEC, 10000));
	await_renewals(a, 2);
	CHECK_OK(leases_lease_keep_alive_stop(l));
	check_no_more_renewals(a);
	CHECK_OK(leases_lease_keep_alive_stop(l)); /* none runs: fine */
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_a_coordinators_cancel_reaches_a_kept_alive_lease(void) {
	leases_authority *a = fresh("keepalive_cancel", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = claim_kept_alive(a, 3600 * SEC, 50000);
	leases_status why = -1;
	CHECK_OK(leases_lease_wait_lost(l, 0, NULL, &why)); /* no wait: not lost */
	CHECK(why == LEASES_OK);
	CHECK_OK(leases_lease_wait_lost(l, 50000, NULL, &why)); /* the timeout passes */
	CHECK(why == LEASES_OK);
	CHECK_OK(leases_cancel(a, "p", j));
	struct timespec t0 = mono_now();
	CHECK_OK(leases_lease_wait_lost(l, 60 * SEC, NULL, &why));
	CHECK(why == LEASES_CANCELLED);
	CHECK(seconds_since(t0) < PROMPT_BOUND); /* one renewal interval, not the hour */
	CHECK(strstr(leases_last_error(), "cancelled") != NULL);
	CHECK_OK(leases_lease_check(l, &why));
	CHECK(why == LEASES_CANCELLED);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CANCELLED);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

/* A wait of 0 asks what is known now: a loss already known is reported
 * every time, never raced against the zero timeout (bindings read their
 * "is it lost?" property this way). */
static void test_a_wait_lost_of_zero_reports_a_known_loss_every_time(void) {
	leases_authority *a = fresh("wait_lost_zero", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = claim_kept_alive(a, 3600 * SEC, 50000);
	leases_status why = -1;
	CHECK_OK(leases_cancel(a, "p", j));
	CHECK_OK(leases_lease_wait_lost(l, 60 * SEC, NULL, &why));
	CHECK(why == LEASES_CANCELLED);
	int reported = 0;
	for (int i = 0; i < 200; i++) {
		why = -1;
		CHECK_OK(leases_lease_wait_lost(l, 0, NULL, &why));
		reported += why == LEASES_CANCELLED;
	}
	CHECK(reported == 200);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_waiting_and_keep_alive_reject_bad_input_and_change_nothing(void) {
	leases_authority *a = fresh("wait_bad", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL, *lo = NULL;
	leases_canceller *c = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	CHECK_OK(leases_canceller_new(&c));
	char *before = listing(a);
	const int IA = LEASES_INVALID_ARGUMENT, ID = LEASES_INVALID_DURATION;
	leases_status why = -1;
	/* NULLs. */
	CHECK_ST(leases_canceller_new(NULL), IA);
	CHECK_ST(leases_canceller_cancel(NULL), IA);
	CHECK_ST(leases_claim_wait(a, "p", "w", SEC, SEC, NULL, NULL), IA);
	CHECK_ST(leases_claim_wait(NULL, "p", "w", SEC, SEC, NULL, &lo), IA);
	CHECK_ST(leases_claim_wait(a, NULL, "w", SEC, SEC, NULL, &lo), IA);
	CHECK_ST(leases_claim_wait(a, "p", NULL, SEC, SEC, NULL, &lo), IA);
	CHECK_ST(leases_lease_keep_alive(NULL, SEC, 0), IA);
	CHECK_ST(leases_lease_keep_alive_stop(NULL), IA);
	CHECK_ST(leases_lease_check(l, NULL), IA);
	CHECK_ST(leases_lease_check(NULL, &why), IA);
	CHECK_ST(leases_lease_wait_lost(l, SEC, NULL, NULL), IA);
	CHECK_ST(leases_lease_wait_lost(NULL, SEC, NULL, &why), IA);
	/* Bad durations, waits and intervals. */
	CHECK_ST(leases_claim_wait(a, "p", "w", 0, SEC, NULL, &lo), ID);
	CHECK_ST(leases_claim_wait(a, "p", "w", LEASES_MAX_DURATION_US + 1, SEC, NULL, &lo), ID);
	CHECK_ST(leases_claim_wait(a, "p", "w", SEC, -1, NULL, &lo), IA);
	CHECK_ST(leases_claim_wait(a, "p", "w", SEC, LEASES_MAX_WAIT_US + 1, NULL, &lo), IA);
	CHECK(lo == NULL);
	CHECK_ST(leases_lease_keep_alive(l, 0, 0), ID);
	CHECK_ST(leases_lease_keep_alive(l, SEC, -1), ID);
	CHECK_ST(leases_lease_keep_alive(l, SEC, 999), ID);     /* below 1 ms */
	CHECK_ST(leases_lease_keep_alive(l, SEC, SEC), ID);     /* not below the duration */
	CHECK_ST(leases_lease_keep_alive(l, 2000, 0), ID);      /* a third of it is below 1 ms */
	CHECK_ST(leases_lease_wait_lost(l, -1, NULL, &why), IA);
	CHECK_ST(leases_lease_wait_lost(l, LEASES_MAX_WAIT_US + 1, NULL, &why), IA);
	/* Wrong-type, unknown and freed handles. */
	CHECK_ST(leases_claim_wait((leases_authority *)l, "p", "w", SEC, SEC, NULL, &lo), IA);
	CHECK_ST(leases_claim_wait(a, "p", "w", SEC, SEC, (leases_canceller *)a, &lo), IA);
	CHECK_ST(leases_canceller_cancel((leases_canceller *)l), IA);
	CHECK_ST(leases_lease_keep_alive((leases_lease *)c, SEC, 0), IA);
	CHECK_ST(leases_lease_wait_lost(l, SEC, (leases_canceller *)(uintptr_t)1, &why), IA);
	leases_canceller_free((leases_canceller *)a); /* ignored: not a canceller */
	CHECK_OK(leases_production_create(a, "still-open"));
	leases_canceller *stale = c;
	leases_canceller_free(c);
	CHECK_ST(leases_canceller_cancel(stale), IA);
	CHECK_ST(leases_claim_wait(a, "p", "w", SEC, SEC, stale, &lo), IA);
	CHECK(strstr(leases_last_error(), "leases_canceller") != NULL);
	leases_lease *freed = l;
	leases_lease_free(l);
	CHECK_ST(leases_lease_keep_alive(freed, SEC, 0), IA);
	CHECK_ST(leases_lease_check(freed, &why), IA);
	CHECK(why == 0);
	char *after = listing(a);
	CHECK(before && after && strcmp(before, after) == 0);
	leases_free(before);
	leases_free(after);
	leases_free(j);
	leases_authority_close(a);
}

static void test_a_closed_lease_is_not_kept_alive_and_reports_closed(void) {
	leases_authority *a = fresh("keepalive_closed", NULL, 0);
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	CHECK_OK(leases_lease_release(l));
	CHECK_ST(leases_lease_keep_alive(l, 30 * SEC, 0), LEASES_CLOSED);
	leases_status why = -1;
	CHECK_OK(leases_lease_check(l, &why));
	CHECK(why == LEASES_CLOSED);
	CHECK_OK(leases_lease_wait_lost(l, 60 * SEC, NULL, &why)); /* over already: at once */
	CHECK(why == LEASES_CLOSED);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

#ifdef LEASES_TEST_BUILD
struct clock_jump {
	leases_authority *authority;
	int64_t to_unix_us;
};

static void *do_clock_jump(void *arg) {
	struct clock_jump *j = arg;
	sleep_ms(100);
	CHECK_OK(leases_testing_set_clock(j->authority, j->to_unix_us));
	return NULL;
}

static void test_a_claim_expiring_on_the_authoritys_clock_wakes_a_waiter(void) {
	leases_authority *a = wait_fresh("wait_expiry");
	const int64_t t = INT64_C(1767225600000000);
	CHECK_OK(leases_testing_set_clock(a, t));
	char *j = request(a, NULL);
	leases_lease *crashed = NULL, *l = NULL;
	CHECK_OK(leases_claim(a, "p", "crashed", 3600 * SEC, &crashed));
	leases_lease_free(crashed);
	/* Nothing is written when a claim expires; setting the clock seam wakes
	 * every waiter, and the jump expires the claim. */
	struct clock_jump jump = {a, t + 7200 * SEC};
	pthread_t tid;
	CHECK(pthread_create(&tid, NULL, do_clock_jump, &jump) == 0);
	struct timespec t0 = mono_now();
	CHECK_OK(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, NULL, &l));
	CHECK(seconds_since(t0) < WAKE_BOUND);
	CHECK(pthread_join(tid, NULL) == 0);
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}

static void test_a_kept_alive_lease_reports_an_expiry_when_the_clock_jumps(void) {
	leases_authority *a = fresh("keepalive_expiry", NULL, 0);
	const int64_t t = INT64_C(1767225600000000);
	CHECK_OK(leases_testing_set_clock(a, t));
	char *j = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 60 * SEC, &l));
	CHECK_OK(leases_lease_keep_alive(l, 60 * SEC, 20000));
	CHECK_OK(leases_testing_set_clock(a, t + 120 * SEC));
	leases_status why = -1;
	CHECK_OK(leases_lease_wait_lost(l, 10 * SEC, NULL, &why));
	CHECK(why == LEASES_EXPIRED);
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(a);
}
#endif

static void test_every_status_c_can_reach_was_reached(void) {
	for (size_t i = 0; i < NVEC(status_vectors); i++) {
		int code = status_vectors[i].code;
#ifndef LEASES_TEST_BUILD
		/* These need the test clock or a test seam: the test build covers them. */
		if (code == LEASES_EXPIRED || code == LEASES_LEASE_LOST || code == LEASES_CLOCK_REGRESSED ||
		    code == LEASES_BUSY || code == LEASES_INTERNAL)
			continue;
#endif
		if (!status_reached[code]) fprintf(stderr, "    status %s was never reached\n", status_vectors[i].name);
		CHECK(status_reached[code]);
	}
}

static void remove_tree(const char *dir) {
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* worker_tests.h's hold on claims: an edit of holder holds SQLite's writer
 * lock, so a claim through another handle with a 1 ms busy timeout fails. */
struct claims_hold {
	leases_edit *edit;
	leases_lease *lease;
};

static void *hold_claims(leases_authority *holder, const char *loc) {
	(void)loc;
	struct claims_hold *h = calloc(1, sizeof *h);
	CHECK(h != NULL);
	if (h == NULL) exit(1);
	CHECK_OK(leases_edit_begin(holder, &h->edit));
	CHECK_OK(leases_edit_claim(h->edit, "p", "holder", 60 * SEC, &h->lease)); /* the writer lock is held */
	return h;
}

static void release_claims(void *held) {
	struct claims_hold *h = held;
	leases_edit_abort(h->edit);
	leases_lease_free(h->lease);
	free(h);
}

int main(void) {
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof tmpdir, "%s/leases-ctest-XXXXXX", base && *base ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	status_reached[LEASES_OK] = 1;
	RUN(test_versions_match_abi_file_and_release_file);
	RUN(test_status_names_and_codes_match_shared_vectors);
	RUN(test_full_lifecycle_request_claim_renew_complete_release_fail);
	RUN(test_claim_with_nothing_to_claim_sets_out_to_null);
	RUN(test_every_invalid_duration_is_rejected_and_changes_nothing);
	RUN(test_null_for_every_pointer_parameter_is_an_argument_error);
	RUN(test_bad_input_gets_a_clear_status_and_changes_nothing);
	RUN(test_unknown_freed_and_wrong_type_handles_are_rejected);
	RUN(test_free_functions_accept_null_and_double_free);
	RUN(test_lease_free_never_writes);
	RUN(test_closed_lease_reports_closed);
	RUN(test_claim_and_complete_in_one_edit);
	RUN(test_failed_or_aborted_edit_closes_its_pending_leases);
	RUN(test_token_export_import_round_trip);
	RUN(test_token_vectors_decode_or_reject_as_shared);
	RUN(test_last_error_is_per_thread_and_never_null);
	RUN(test_threads_share_one_authority_and_never_share_a_job);
	RUN(test_one_lease_shared_by_threads_is_serialized);
	RUN(test_closing_an_authority_under_an_open_edit_neither_hangs_nor_publishes);
	RUN(test_execution_finish_registers_output_and_abandon_removes_files);
	RUN(test_forked_child_gets_forked_status_instead_of_hanging);
	RUN(test_storage_failure_on_unusable_path);
	RUN(test_schema_too_new_is_refused);
	RUN(test_outcome_unknown_when_commit_cannot_write);
	RUN(test_not_extended_and_cancelled_reach_the_holder);
	RUN(test_request_options_size_rule_reads_only_known_fields_within_size);
	RUN(test_bad_retry_input_is_invalid_argument_and_writes_nothing);
	RUN(test_retry_functions_reject_null_and_bad_handles);
	RUN(test_retention_is_set_and_shown_and_a_prune_deletes_only_finished_jobs);
	RUN(test_production_create_v2_is_idempotent_only_for_the_same_policy);
	RUN(test_claim_wait_wakes_for_a_job_requested_while_it_waits);
	RUN(test_claim_wait_with_nothing_to_claim_returns_after_its_wait_and_writes_nothing);
	RUN(test_a_canceller_cancelled_from_another_thread_interrupts_a_wait);
	RUN(test_closing_the_authority_ends_a_wait_with_closed);
	RUN(test_a_kept_alive_lease_renews_and_a_freed_one_writes_nothing_after);
	RUN(test_keep_alive_stop_writes_nothing_after_it_returns);
	RUN(test_a_coordinators_cancel_reaches_a_kept_alive_lease);
	RUN(test_a_wait_lost_of_zero_reports_a_known_loss_every_time);
	RUN(test_waiting_and_keep_alive_reject_bad_input_and_change_nothing);
	RUN(test_a_closed_lease_is_not_kept_alive_and_reports_closed);
	RUN_OBSERVE_TESTS();
	RUN_NEXT_TESTS();
	RUN_WORKER_TESTS();
	RUN(test_open_v2_without_options_opens_as_leases_authority_open);
	RUN(test_open_must_exist_refuses_a_missing_authority_and_creates_nothing);
	RUN(test_open_options_size_rule_reads_known_fields_and_refuses_unknown_ones);
	RUN(test_open_options_outside_the_header_are_refused_before_anything_is_opened);
	RUN(test_open_busy_timeout_bounds_the_wait_for_the_writer_lock);
#ifdef LEASES_TEST_BUILD
	RUN(test_fail_retry_backs_off_on_the_authority_clock_then_the_last_attempt_is_dead);
	RUN(test_redrive_returns_every_dead_job_and_priority_orders_claims);
	RUN(test_a_claim_expiring_on_the_authoritys_clock_wakes_a_waiter);
	RUN(test_a_kept_alive_lease_reports_an_expiry_when_the_clock_jumps);
	RUN(test_open_options_reach_sqlite_as_synchronous_and_busy_timeout);
	RUN(test_expired_claim_cannot_renew_release_or_complete);
	RUN(test_clock_regression_rejects_guarded_operations_but_not_cancel);
	RUN(test_lease_lost_when_an_expired_claim_is_taken);
	RUN(test_rejected_execution_finish_removes_only_its_own_files);
	RUN(test_rejection_order_matches_the_documented_table);
	RUN(test_busy_when_another_handle_holds_the_writer_lock);
	RUN(test_panic_becomes_internal_status);
	RUN(test_an_outcome_unknown_claim_names_its_job_in_last_error_job_id);
	RUN(test_strings_handed_out_are_defined_even_where_memcheck_lost_track_of_go_memory);
#else
	printf("note: release build: the clock, busy and panic tests run against the test build\n");
#endif
	RUN(test_every_status_c_can_reach_was_reached);
	remove_tree(tmpdir);
	if (check_failures) {
		fprintf(stderr, "%d check(s) failed\n", check_failures);
		return 1;
	}
	printf("all C API tests passed\n");
	return 0;
}
