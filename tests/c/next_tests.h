/* next_tests.h: the tests of leases_lease_complete_and_claim_next, shared by
 * the SQLite suite (test_capi.c) and the PostgreSQL suite (test_capi_pg.c).
 * The including file defines fresh(tag, loc, cap) (a new authority with
 * production "p"). */
#ifndef LEASES_NEXT_TESTS_H
#define LEASES_NEXT_TESTS_H

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "leases.h"

static leases_authority *fresh(const char *tag, char *loc, size_t cap);

#define NEXT_SEC INT64_C(1000000)

/* The job id of lease l (static buffer). */
static const char *next_job_of(leases_lease *l) {
	static char id[40];
	char *s = NULL;
	id[0] = '\0';
	CHECK_OK(leases_lease_job_id(l, &s));
	if (s) {
		snprintf(id, sizeof id, "%s", s);
	}
	leases_free(s);
	return id;
}

static void test_complete_and_claim_next_completes_and_claims_the_next_job_in_one_call(void) {
	leases_authority *a = fresh("next", NULL, 0);
	char *j1 = request(a, NULL), *j2 = request(a, NULL);
	leases_lease *l = NULL, *next = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * NEXT_SEC, &l));
	CHECK(strcmp(next_job_of(l), j1) == 0);
	CHECK_OK(leases_lease_complete_and_claim_next(l, "{\"metadata\":{\"frames\":2}}", 60 * NEXT_SEC, &next));
	CHECK(next != NULL);
	CHECK(strcmp(job_state(a, j1), "completed") == 0);
	CHECK(strcmp(job_state(a, j2), "claimed") == 0);
	if (next) CHECK(strcmp(next_job_of(next), j2) == 0);
	CHECK_ST(leases_lease_renew(l, NEXT_SEC), LEASES_CLOSED); /* the completion closed it */
	char *rec = NULL;
	CHECK_OK(leases_job_json(a, "p", j1, &rec));
	CHECK(rec && strstr(rec, "\"frames\":2") != NULL); /* its facts were published */
	leases_free(rec);
	char *worker = NULL;
	CHECK_OK(leases_lease_worker(next, &worker));
	CHECK(worker && strcmp(worker, "w") == 0); /* the same worker claims */
	leases_free(worker);
	/* Nothing left: the completion commits, and *out is NULL with OK. */
	leases_lease *none = (leases_lease *)(uintptr_t)0x1234;
	CHECK_OK(leases_lease_complete_and_claim_next(next, NULL, 60 * NEXT_SEC, &none));
	CHECK(none == NULL);
	CHECK(strcmp(job_state(a, j2), "completed") == 0);
	leases_lease_free(l);
	leases_lease_free(next);
	leases_free(j1);
	leases_free(j2);
	leases_authority_close(a);
}

static void test_complete_and_claim_next_refused_or_bad_input_claims_nothing(void) {
	leases_authority *a = fresh("nextrefused", NULL, 0);
	char *j1 = request(a, NULL), *j2 = request(a, NULL);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * NEXT_SEC, &l));
	leases_lease *out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_lease_complete_and_claim_next(l, NULL, 30 * NEXT_SEC, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_lease_complete_and_claim_next(NULL, NULL, 30 * NEXT_SEC, &out), LEASES_INVALID_ARGUMENT);
	CHECK(out == NULL);
	out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_lease_complete_and_claim_next(l, "{\"metadata\":", 30 * NEXT_SEC, &out), LEASES_INVALID_ARGUMENT);
	CHECK(out == NULL);
	CHECK_ST(leases_lease_complete_and_claim_next(l, NULL, 0, &out), LEASES_INVALID_DURATION);
	CHECK_ST(leases_lease_complete_and_claim_next(l, NULL, -1, &out), LEASES_INVALID_DURATION);
	CHECK(strcmp(job_state(a, j1), "claimed") == 0);
	CHECK(strcmp(job_state(a, j2), "requested") == 0);
	/* A refused completion: the job was cancelled. Nothing is claimed. */
	CHECK_OK(leases_cancel(a, "p", j1));
	out = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_lease_complete_and_claim_next(l, NULL, 30 * NEXT_SEC, &out), LEASES_CANCELLED);
	CHECK(out == NULL);
	CHECK(strstr(leases_last_error(), j1) != NULL);
	CHECK(strcmp(job_state(a, j2), "requested") == 0);
	leases_lease_free(l);
	leases_free(j1);
	leases_free(j2);
	leases_authority_close(a);
}

#define RUN_NEXT_TESTS()                                                                     \
	do {                                                                                     \
		RUN(test_complete_and_claim_next_completes_and_claims_the_next_job_in_one_call);     \
		RUN(test_complete_and_claim_next_refused_or_bad_input_claims_nothing);               \
	} while (0)

#endif
