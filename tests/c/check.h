/* check.h: the tiny assert helper of the C tests. A failed check prints the
 * test, the line and (for status checks) the library's message, and the run
 * goes on; main() returns non-zero if any check failed. Never print a token:
 * tests compare them, they do not show them. */
#ifndef LEASES_CHECK_H
#define LEASES_CHECK_H

#include <stdio.h>
#include <string.h>

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

#endif
