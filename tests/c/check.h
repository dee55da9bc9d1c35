/* check.h: the tiny assert helper of the C tests. A failed check prints the
 * test, the line and (for status checks) the library's message, and the run
 * goes on; main() returns non-zero if any check failed. Never print a token:
 * tests compare them, they do not show them. */
#ifndef LEASES_CHECK_H
#define LEASES_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "leases.h"

static const char *check_test = "";
static int check_failures;
static int status_reached[64]; /* statuses returned where a test expected them */

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond)) {                                                                \
			fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__,      \
			        check_test, #cond);                                               \
			check_failures++;                                                         \
		}                                                                             \
	} while (0)

#define CHECK_ST(call, want)                                                          \
	do {                                                                              \
		leases_status st_ = (call);                                                   \
		leases_status want_ = (want);                                                 \
		if (st_ == want_ && st_ >= 0 && st_ < 64) status_reached[st_] = 1;            \
		if (st_ != want_) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n    returned %s (%d), want %s (%d); last error: %s\n", \
			        __FILE__, __LINE__, check_test, #call, leases_status_name(st_), st_, \
			        leases_status_name(want_), want_, leases_last_error());            \
			check_failures++;                                                         \
		}                                                                             \
	} while (0)

#define CHECK_OK(call) CHECK_ST(call, LEASES_OK)

#define RUN(fn)                                                                       \
	do {                                                                              \
		int before_ = check_failures;                                                 \
		check_test = #fn;                                                             \
		fn();                                                                         \
		printf("%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #fn);          \
		fflush(stdout);                                                               \
	} while (0)

/* Time: a start on the monotonic clock, the seconds since one, a pause. */
static inline struct timespec mono_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t;
}

static inline double seconds_since(struct timespec t0) {
	struct timespec t1 = mono_now();
	return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static inline void sleep_ms(int ms) {
	struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&d, NULL);
}

/* Whether the tests run under valgrind (make test-capi-valgrind sets
 * LEASES_UNDER_VALGRIND), where the Go runtime runs many times slower. */
static inline int under_valgrind(void) {
	const char *v = getenv("LEASES_UNDER_VALGRIND");
	return v != NULL && *v != '\0';
}

/* Helpers of the tests on production "p". */

/* Requests a job with payload "payload"; returns its id (leases_free it). */
static inline char *request(leases_authority *a, const char *key) {
	char *id = NULL;
	CHECK_OK(leases_job_request(a, "p", key, (const uint8_t *)"payload", 7, &id));
	CHECK(id != NULL && strlen(id) == 36);
	return id;
}

#ifdef LEASES_MAX_WAIT_US /* revision 1's calls: not for a program built on revision 0's header */
/* Claims the next job of "p" for duration_us, kept alive every interval_us
 * (0: the default); leases_lease_free it. */
static inline leases_lease *claim_kept_alive(leases_authority *a, int64_t duration_us, int64_t interval_us) {
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w", duration_us, &l));
	CHECK_OK(leases_lease_keep_alive(l, duration_us, interval_us));
	return l;
}
#endif

/* The "state" of job id in the listing, or "" (static buffer). */
static inline const char *job_state(leases_authority *a, const char *id) {
	static char state[32];
	char *json = NULL;
	state[0] = '\0';
	CHECK_OK(leases_jobs_json(a, "p", &json));
	if (json == NULL) return state;
	char needle[64];
	snprintf(needle, sizeof needle, "\"id\":\"%s\"", id);
	const char *at = strstr(json, needle);
	const char *st = at ? strstr(at, "\"state\":\"") : NULL;
	if (st) {
		st += strlen("\"state\":\"");
		size_t n = strcspn(st, "\"");
		if (n < sizeof state) {
			memcpy(state, st, n);
			state[n] = '\0';
		}
	}
	leases_free(json);
	return state;
}

#endif
