/*
 * clock_faults.c: the clock policy under clock faults, through the C test
 * library (build/test/libleases.so, include/leases_testing.h): forward and
 * backward jumps, a jump between the two samples of one operation, and a
 * backward jump across a reopen, a small step back that stays after the
 * mark, and writes under a clock behind the mark. Every rejection must change
 * nothing that a listing shows; the high-water mark must keep every observed
 * sample; a claim of the next job never fails because of a job it may not
 * take; no time a write records is earlier than the mark.
 *
 * Usage: clock_faults DIR        SQLite: one database file per test in DIR
 *        clock_faults postgres   PostgreSQL: one fresh schema per test on
 *                                $LEASES_TEST_PG_URL (tests/c/pg.h); the
 *                                server is asked for its clock and the seam
 *                                replaces its answer, so the same faults
 *                                reach the same path.
 * Prints one summary line; with $LEASES_REL_FIGURES set, appends the
 * scenarios it ran and those that failed to that file as a JSON line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "leases.h"
#include "leases_testing.h"
#include "pg.h"

static int failures;
static const char *current;
/* The scenarios run and those that failed, counted as they run: the
 * figures this program reports (with $LEASES_REL_FIGURES set, appended to
 * that file as one JSON line). */
static int ran, failed;

#define RUN(test)                                                                              \
	do {                                                                                       \
		int before_ = failures;                                                                \
		ran++;                                                                                 \
		test();                                                                                \
		if (failures != before_) failed++;                                                     \
	} while (0)

#define EXPECT_STATUS(want, call)                                                              \
	do {                                                                                       \
		leases_status got_ = (call);                                                           \
		if (got_ != (want)) {                                                                  \
			fprintf(stderr, "%s:%d: %s: %s returned %s, want %s (%s)\n", __FILE__, __LINE__,   \
			        current, #call, leases_status_name(got_), leases_status_name(want),        \
			        leases_last_error());                                                      \
			failures++;                                                                        \
			return;                                                                            \
		}                                                                                      \
	} while (0)
#define EXPECT(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                         \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, current);                       \
			fprintf(stderr, __VA_ARGS__);                                                      \
			fprintf(stderr, "\n");                                                             \
			failures++;                                                                        \
			return;                                                                            \
		}                                                                                      \
	} while (0)

#define T0 INT64_C(1900000000000000) /* 2030-03-17, ahead of any real clock */
#define SEC INT64_C(1000000)
#define HOUR (3600 * SEC)
#define MS INT64_C(1000)

static char dir[256];
static const char *pg_base; /* non-NULL: the PostgreSQL run */
static int seq;

/* A fresh database (a file, or a schema) with production "p" and n
 * requested jobs. */
/* The samples of one guarded operation: its first and its pre-commit
 * sample. On PostgreSQL an operation also samples once it holds the job's
 * row (docs/CLOCK.md); that sample repeats the first. */
static leases_status operation_samples(leases_authority *a, int64_t first, int64_t pre_commit) {
	int64_t two[] = {first, pre_commit};
	int64_t three[] = {first, first, pre_commit};
	return pg_base ? leases_testing_set_clock_sequence(a, three, 3) : leases_testing_set_clock_sequence(a, two, 2);
}

static leases_authority *fresh(const char *name, int n, char *path, size_t cap) {
	if (pg_base != NULL) {
		char tag[32];
		snprintf(tag, sizeof tag, "clock%d", seq++);
		(void)name;
		if (pg_fresh_location(pg_base, tag, path, cap) != 0) exit(2);
	} else {
		snprintf(path, cap, "%s/%s-%d.db", dir, name, seq++);
	}
	leases_authority *a = NULL;
	if (leases_testing_open(path, 2 * SEC, &a) != LEASES_OK) {
		fprintf(stderr, "open %s: %s\n", path, leases_last_error());
		exit(2);
	}
	/* No backoff: a lapsed claim is claimable at its expiry, so these tests
	 * are about the clock alone (docs/CONCEPTS.md has the backoff). */
	leases_retry_policy policy = LEASES_RETRY_POLICY_INIT;
	policy.backoff_base_us = 0;
	leases_production_create_v2(a, "p", &policy);
	for (int i = 0; i < n; i++) {
		char *id = NULL;
		if (leases_job_request(a, "p", NULL, NULL, 0, &id) != LEASES_OK) exit(2);
		leases_free(id);
	}
	return a;
}

/* The listings a rejection must leave as they were. */
static char *snapshot(leases_authority *a) {
	char *jobs = NULL, *events = NULL;
	if (leases_jobs_json(a, "p", &jobs) != LEASES_OK || leases_events_json(a, "p", 0, &events) != LEASES_OK)
		exit(2);
	char *s = malloc(strlen(jobs) + strlen(events) + 2);
	sprintf(s, "%s\n%s", jobs, events);
	leases_free(jobs);
	leases_free(events);
	return s;
}

static int job_state_is(leases_authority *a, const char *state) {
	char *jobs = NULL;
	leases_jobs_json(a, "p", &jobs);
	char want[64];
	snprintf(want, sizeof want, "\"state\":\"%s\"", state);
	int ok = jobs && strstr(jobs, want) != NULL;
	leases_free(jobs);
	return ok;
}

static void test_forward_jump_expires_a_claim_at_once(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("fwd", 1, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", HOUR, &l));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 2 * HOUR));
	EXPECT_STATUS(LEASES_EXPIRED, leases_lease_renew(l, HOUR));
	EXPECT_STATUS(LEASES_EXPIRED, leases_lease_complete(l, NULL));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", HOUR, &l2));
	EXPECT_STATUS(LEASES_LEASE_LOST, leases_lease_complete(l, NULL));
	EXPECT_STATUS(LEASES_OK, leases_lease_complete(l2, NULL));
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_authority_close(a);
}

static void test_backward_jump_rejects_guarded_operations_and_changes_nothing(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("back", 2, path, sizeof path);
	leases_lease *l = NULL, *other = NULL;
	char *tok = NULL, *job = NULL;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", HOUR, &l));
	EXPECT_STATUS(LEASES_OK, leases_lease_export(l, &tok));
	EXPECT_STATUS(LEASES_OK, leases_lease_job_id(l, &job));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 - 10 * SEC));
	char *before = snapshot(a);
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_claim(a, "p", "w2", HOUR, &other));
	EXPECT(other == NULL, "a rejected claim sets *out to NULL");
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_renew(l, 2 * HOUR));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_release(l));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_fail(l, "x"));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_complete(l, "{\"metadata\":{\"k\":1}}"));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_import(a, tok, &other));
	char *after = snapshot(a);
	EXPECT(strcmp(before, after) == 0, "a clock regression changed the listings:\n%s\n---\n%s", before, after);
	EXPECT(strstr(leases_last_error(), "clock_regressed") == leases_last_error(), "message: %s", leases_last_error());
	/* The coordinator's recovery tool is not blocked by the regression. */
	EXPECT_STATUS(LEASES_OK, leases_cancel(a, "p", job));
	/* Guarded operations resume once the clock catches up with the mark. */
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_CANCELLED, leases_lease_renew(l, 2 * HOUR));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", HOUR, &other));
	free(before);
	free(after);
	leases_free(tok);
	leases_free(job);
	leases_lease_free(l);
	leases_lease_free(other);
	leases_authority_close(a);
}

static void test_a_backward_jump_between_the_two_samples_commits_nothing(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("between-back", 1, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", HOUR, &l));
	char *before = snapshot(a);
	EXPECT_STATUS(LEASES_OK, operation_samples(a, T0 + 1000, T0 + 500));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_complete(l, "{\"metadata\":{\"k\":1}}"));
	char *after = snapshot(a);
	EXPECT(strcmp(before, after) == 0, "the rejected completion changed the listings");
	EXPECT(job_state_is(a, "claimed"), "the job is still claimed");
	/* The larger observed sample became the mark: T0+999 is behind it. */
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 999));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_renew(l, HOUR));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 1000));
	EXPECT_STATUS(LEASES_OK, leases_lease_complete(l, NULL));
	EXPECT_STATUS(LEASES_NOTHING_TO_CLAIM, leases_claim(a, "p", "w2", HOUR, &l2));
	free(before);
	free(after);
	leases_lease_free(l);
	leases_authority_close(a);
}

static void test_a_forward_jump_between_the_two_samples_past_the_expiry_publishes_nothing(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("between-fwd", 1, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL;
	int64_t exp = 0;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", SEC, &l));
	EXPECT_STATUS(LEASES_OK, leases_lease_expiry(l, &exp));
	EXPECT(exp == T0 + SEC, "expiry %lld", (long long)exp);
	/* The first sample is in time, the pre-commit sample 5 us past the expiry. */
	EXPECT_STATUS(LEASES_OK, operation_samples(a, exp - 100, exp + 5));
	EXPECT_STATUS(LEASES_EXPIRED, leases_lease_complete(l, "{\"metadata\":{\"frames\":3}}"));
	EXPECT(job_state_is(a, "claimed"), "nothing was committed");
	char *events = NULL;
	EXPECT_STATUS(LEASES_OK, leases_events_json(a, "p", 0, &events));
	EXPECT(strstr(events, "completed") == NULL, "no completion event: %s", events);
	leases_free(events);
	/* The observed sample was kept as the mark after the rollback. */
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, exp + 4));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_claim(a, "p", "w2", HOUR, &l2));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, exp + 5));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", HOUR, &l2));
	/* A claim that would be born expired does not commit either. */
	leases_lease *l3 = NULL;
	char *id = NULL;
	EXPECT_STATUS(LEASES_OK, leases_job_request(a, "p", NULL, NULL, 0, &id));
	EXPECT_STATUS(LEASES_OK, operation_samples(a, exp + 10, exp + 10 + 2 * SEC));
	EXPECT_STATUS(LEASES_EXPIRED, leases_claim(a, "p", "w3", SEC, &l3));
	EXPECT(l3 == NULL, "no lease");
	EXPECT(job_state_is(a, "requested"), "the new job is still requested");
	leases_free(id);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_authority_close(a);
}

static void test_a_backward_jump_across_a_reopen_is_still_rejected(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("reopen", 2, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL;
	char *tok = NULL;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + HOUR));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", HOUR, &l));
	EXPECT_STATUS(LEASES_OK, leases_lease_export(l, &tok));
	leases_lease_free(l);
	leases_authority_close(a);

	EXPECT_STATUS(LEASES_OK, leases_testing_open(path, 2 * SEC, &a));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	char *before = snapshot(a);
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_claim(a, "p", "w2", HOUR, &l2));
	EXPECT_STATUS(LEASES_CLOCK_REGRESSED, leases_lease_import(a, tok, &l));
	char *after = snapshot(a);
	EXPECT(strcmp(before, after) == 0, "the rejections changed the listings");
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + HOUR + 1));
	EXPECT_STATUS(LEASES_OK, leases_lease_import(a, tok, &l));
	EXPECT_STATUS(LEASES_OK, leases_lease_complete(l, NULL));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", HOUR, &l2));
	free(before);
	free(after);
	leases_free(tok);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_authority_close(a);
}

static int lease_is_job(leases_lease *l, const char *job) {
	char *id = NULL;
	int same = leases_lease_job_id(l, &id) == LEASES_OK && strcmp(id, job) == 0;
	leases_free(id);
	return same;
}

/* A job requested while the clock read T0+10ms (requests do not move the
 * mark, T0), then a step back of 5 ms, still after the mark: the job is not
 * claimable before its time, and no claim of the next job fails because of
 * it, nor because of a higher-priority job requested a day ahead. */
static void test_a_small_step_back_after_the_mark_never_fails_a_claim_of_the_next_job(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("step", 1, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL;
	char *ahead = NULL, *high = NULL, *low = NULL;
	leases_request_options urgent = LEASES_REQUEST_OPTIONS_INIT;
	urgent.priority = 5;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", HOUR, &l)); /* the mark: T0 */
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 10 * MS));
	EXPECT_STATUS(LEASES_OK, leases_job_request(a, "p", NULL, NULL, 0, &ahead));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 24 * HOUR));
	EXPECT_STATUS(LEASES_OK, leases_job_request_v2(a, "p", NULL, NULL, 0, &urgent, &high));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 5 * MS));
	EXPECT_STATUS(LEASES_NOTHING_TO_CLAIM, leases_claim(a, "p", "w2", HOUR, &l2));
	EXPECT_STATUS(LEASES_NOTHING_TO_CLAIM, leases_claim_wait(a, "p", "w2", HOUR, 20 * MS, NULL, &l2));
	EXPECT_STATUS(LEASES_WRONG_STATE, leases_claim_job(a, "p", ahead, "w2", HOUR, &l2));
	EXPECT_STATUS(LEASES_OK, leases_job_request(a, "p", NULL, NULL, 0, &low));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", HOUR, &l2));
	EXPECT(lease_is_job(l2, low), "the claimable job is taken");
	leases_lease_free(l2);
	l2 = NULL;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + 10 * MS));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w3", HOUR, &l2));
	EXPECT(lease_is_job(l2, ahead), "a job is claimable at its own time");
	leases_free(ahead);
	leases_free(high);
	leases_free(low);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_authority_close(a);
}

/* Under a clock an hour behind the mark, unguarded writes work and record
 * the mark: a 30-minute delay counts from it. */
static void test_writes_under_a_clock_behind_the_mark_record_the_mark(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("behind", 2, path, sizeof path);
	leases_lease *l = NULL, *l2 = NULL, *l3 = NULL;
	char *delayed = NULL, *job = NULL;
	leases_request_options later = LEASES_REQUEST_OPTIONS_INIT;
	later.delay_us = 30 * 60 * SEC;
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w1", 2 * HOUR, &l));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + HOUR));
	EXPECT_STATUS(LEASES_OK, leases_claim(a, "p", "w2", 2 * HOUR, &l2)); /* the mark: T0+1h */
	EXPECT_STATUS(LEASES_OK, leases_lease_job_id(l2, &job));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0));
	EXPECT_STATUS(LEASES_OK, leases_job_request_v2(a, "p", NULL, NULL, 0, &later, &delayed));
	EXPECT_STATUS(LEASES_OK, leases_cancel(a, "p", job));
	char *events = NULL;
	EXPECT_STATUS(LEASES_OK, leases_events_json(a, "p", 0, &events));
	char early[64];
	snprintf(early, sizeof early, "\"at_unix_us\":%lld,", (long long)T0);
	char *first = strstr(events, early), *second = first ? strstr(first + 1, early) : NULL;
	int behind = second != NULL; /* the creation, request and first claim were at T0 */
	leases_free(events);
	EXPECT(!behind, "an event recorded the clock behind the mark");
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + HOUR + 30 * 60 * SEC - 1));
	EXPECT_STATUS(LEASES_WRONG_STATE, leases_claim_job(a, "p", delayed, "w3", HOUR, &l3));
	EXPECT_STATUS(LEASES_OK, leases_testing_set_clock(a, T0 + HOUR + 30 * 60 * SEC));
	EXPECT_STATUS(LEASES_OK, leases_claim_job(a, "p", delayed, "w3", HOUR, &l3));
	leases_free(delayed);
	leases_free(job);
	leases_lease_free(l);
	leases_lease_free(l2);
	leases_lease_free(l3);
	leases_authority_close(a);
}

static void test_the_clock_sequence_rejects_bad_arguments(void) {
	current = __func__;
	char path[1024];
	leases_authority *a = fresh("args", 0, path, sizeof path);
	int64_t bad[] = {T0, 0};
	EXPECT_STATUS(LEASES_INVALID_ARGUMENT, leases_testing_set_clock_sequence(a, NULL, 1));
	EXPECT_STATUS(LEASES_INVALID_ARGUMENT, leases_testing_set_clock_sequence(a, bad, 0));
	EXPECT_STATUS(LEASES_INVALID_ARGUMENT, leases_testing_set_clock_sequence(a, bad, 2));
	EXPECT_STATUS(LEASES_INVALID_ARGUMENT, leases_testing_set_clock_sequence(NULL, bad, 1));
	leases_authority_close(a);
	EXPECT_STATUS(LEASES_INVALID_ARGUMENT, leases_testing_set_clock_sequence(a, bad, 1));
}

int main(int argc, char **argv) {
	const char *where = argc > 1 ? argv[1] : "/tmp";
	if (strcmp(where, "postgres") == 0) {
		pg_base = pg_base_url("clock_faults");
		if (pg_base == NULL) {
			printf("clock faults: skip: no PostgreSQL server (set LEASES_TEST_PG_URL)\n");
			return 0;
		}
	}
	snprintf(dir, sizeof dir, "%s", where);
	RUN(test_forward_jump_expires_a_claim_at_once);
	RUN(test_backward_jump_rejects_guarded_operations_and_changes_nothing);
	RUN(test_a_backward_jump_between_the_two_samples_commits_nothing);
	RUN(test_a_forward_jump_between_the_two_samples_past_the_expiry_publishes_nothing);
	RUN(test_a_backward_jump_across_a_reopen_is_still_rejected);
	RUN(test_a_small_step_back_after_the_mark_never_fails_a_claim_of_the_next_job);
	RUN(test_writes_under_a_clock_behind_the_mark_record_the_mark);
	RUN(test_the_clock_sequence_rejects_bad_arguments);
	if (pg_base != NULL) pg_drop_schemas(pg_base);
	printf("clock faults (%s): %d passed, %d failed\n", pg_base ? "PostgreSQL" : "SQLite", ran - failed, failed);
	const char *fig = getenv("LEASES_REL_FIGURES");
	if (fig && *fig) {
		FILE *f = fopen(fig, "a");
		if (f) {
			fprintf(f, "{\"test\":\"%s\",\"figures\":{\"scenarios\":%d,\"failed\":%d}}\n",
			        pg_base ? "clock_faults_postgres" : "clock_faults", ran, failed);
			fclose(f);
		}
	}
	return failures ? 1 : 0;
}
