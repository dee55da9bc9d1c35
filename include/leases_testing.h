/*
 * leases_testing.h: test-only entry points. They exist only in the test
 * build of the library (build/test/libleases.so, Go build tag leasestest);
 * the release libleases.so has none of them, so no production caller can
 * choose the authority's time. Not part of the ABI contract.
 */
#ifndef LEASES_TESTING_H
#define LEASES_TESTING_H

#include "leases.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Freezes the authority's clock at now_unix_us (> 0); 0 restores the system
 * clock. On PostgreSQL the server is still asked for its clock_timestamp()
 * and the seam then replaces the answer, so clock tests drive the same path. */
leases_status leases_testing_set_clock(leases_authority *authority, int64_t now_unix_us);
/* Scripts the authority's clock: its next count reads return samples_unix_us
 * in order (each > 0; the array is copied), then it stays at the last one.
 * A guarded operation reads the clock when it starts and again before it
 * commits, so two samples model a jump between them. */
leases_status leases_testing_set_clock_sequence(leases_authority *authority,
                                                const int64_t *samples_unix_us, size_t count);
/* Sets how often the authority's waiting claims look though nothing woke them
 * (poll_us > 0; the default is 1 s on PostgreSQL, 10 s on SQLite), for the
 * waits that start after it: tests make it an hour, so that a waiter woken
 * within seconds was woken by the change under test, never by the poll,
 * however slow the machine. Call it before anyone waits on the authority. */
leases_status leases_testing_set_safety_poll(leases_authority *authority, int64_t poll_us);
/* leases_authority_open with a writer-lock busy timeout (> 0, microseconds,
 * used at millisecond resolution) instead of the default 10 s. path is a
 * location as for leases_authority_open (a SQLite path or a postgres:// URL;
 * on PostgreSQL the timeout bounds lock waits and connection waits). */
leases_status leases_testing_open(const char *path, int64_t busy_timeout_us,
                                  leases_authority **out);
/* The value of a SQLite pragma on the authority's connections ("synchronous",
 * "busy_timeout" or "journal_mode"), as SQLite prints it ("1", "10000",
 * "wal"): how tests see what leases_authority_open_v2's options set. A
 * PostgreSQL authority or another name: LEASES_INVALID_ARGUMENT.
 * *out_value: free with leases_free. */
leases_status leases_testing_pragma(leases_authority *authority, const char *name,
                                    char **out_value);
/* Makes every later commit of the authority's writes persist and then fail,
 * as a commit whose acknowledgement was lost does: each write reports
 * LEASES_OUTCOME_UNKNOWN though it committed. For the tests of what the
 * bindings do with an outcome-unknown failure (leases_last_error_job_id).
 * It cannot be undone: open another authority. */
leases_status leases_testing_lose_commit_acks(leases_authority *authority);
/* Panics inside the library; returns LEASES_INTERNAL once recovered. */
leases_status leases_testing_panic(void);
/* Hands text back the way the library hands out every string, from Go memory
 * that memcheck (valgrind) has first been told is undefined, as it wrongly
 * believes of some Go memory: as_error 0 returns LEASES_OK and a copy in
 * *out_copy (free with leases_free); otherwise LEASES_INVALID_ARGUMENT with
 * text as the last error and *out_copy NULL. Outside valgrind the marking does
 * nothing. text: at most LEASES_MAX_NAME_LEN bytes of UTF-8. */
leases_status leases_testing_lost_track(const char *text, uint32_t as_error, char **out_copy);

#ifdef __cplusplus
}
#endif

#endif /* LEASES_TESTING_H */
