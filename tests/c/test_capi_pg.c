/* C tests of include/leases.h against a PostgreSQL authority: the same
 * leases_authority_open, given a postgres:// URL (LEASES_TEST_PG_URL plus a
 * fresh schema per test, tests/c/pg.h). Built by mk/20-capi.mk against the
 * release library, as an application links it, and run by make test-capi
 * under $(PG_RUN). Each test is named after the rule it protects. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "leases.h"
#include "pg.h"

#define SEC INT64_C(1000000)
#define PW "SECRETPW4c2e"

static const char *base;
static char tmpdir[256]; /* for execution output files, which are local */

static const char *scratch_dir(void) { return tmpdir; }

#include "observe_tests.h"
#include "next_tests.h"
#include "worker_tests.h"

/* A fresh schema's location and an authority on it with production "p".
 * Under valgrind (make test-capi-valgrind sets LEASES_UNDER_VALGRIND) a loaded
 * host can stall the slowed Go runtime for seconds, and a statement counts as
 * unanswered after the busy timeout plus 3 s (docs/postgres.md): there the
 * authority waits a minute rather than 10 s. No test of an authority opened
 * here waits for a lock. */
static leases_authority *fresh(const char *tag, char *loc_out, size_t cap) {
	char loc[1024];
	if (pg_fresh_location(base, tag, loc, sizeof loc) != 0) exit(1);
	if (loc_out) snprintf(loc_out, cap, "%s", loc);
	leases_authority *a = NULL;
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	if (under_valgrind()) o.busy_timeout_us = 60 * SEC;
	CHECK_OK(leases_authority_open_v2(loc, &o, &a));
	CHECK(a != NULL);
	if (a == NULL) exit(1);
	CHECK_OK(leases_production_create(a, "p"));
	return a;
}

/* worker_tests.h's hold on claims: a psql session holds the jobs table of
 * loc's schema in EXCLUSIVE mode (a look reads the job; the claim's row lock
 * waits past a 1 ms lock_timeout and fails) until release_claims rolls it
 * back. psql runs the statements as they come down the pipe and touches a
 * file once the lock is held. */
static void *hold_claims(leases_authority *holder, const char *loc) {
	(void)holder;
	const char *sp = strstr(loc, "search_path=");
	CHECK(sp != NULL);
	if (sp == NULL) exit(1);
	sp += strlen("search_path=");
	char flag[512];
	snprintf(flag, sizeof flag, "%s/claims-held-%ld", tmpdir, (long)getpid());
	unlink(flag);
	if (setenv("LEASES_PG_HELPER_URL", base, 1) != 0) exit(1);
	FILE *p = popen("PGOPTIONS='-c client_min_messages=warning' psql \"$LEASES_PG_HELPER_URL\" -qX -v ON_ERROR_STOP=1 "
	                ">/dev/null",
	                "w");
	CHECK(p != NULL);
	if (p == NULL) exit(1);
	fprintf(p, "SET search_path TO %.*s;\nBEGIN;\nLOCK TABLE leases_jobs IN EXCLUSIVE MODE;\n\\! touch '%s'\n",
	        (int)strcspn(sp, "&"), sp, flag);
	fflush(p);
	struct timespec t0 = mono_now();
	while (access(flag, F_OK) != 0 && seconds_since(t0) < 30) usleep(10000);
	CHECK(access(flag, F_OK) == 0);
	unlink(flag);
	return p;
}

static void release_claims(void *held) {
	FILE *p = held;
	fputs("ROLLBACK;\n", p);
	CHECK(pclose(p) == 0);
}

static int64_t wall_us(void) {
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * SEC + tv.tv_usec;
}

static void test_a_postgres_url_runs_request_claim_renew_complete_and_events(void) {
	char loc[1024];
	leases_authority *a = fresh("life", loc, sizeof loc);
	char *j1 = request(a, "frame-1");
	char *again = request(a, "frame-1");
	CHECK(strcmp(j1, again) == 0); /* a keyed request is idempotent */
	char *j2 = request(a, NULL);

	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w1", 30 * SEC, &l)); /* FIFO: the first request */
	char *id = NULL;
	CHECK_OK(leases_lease_job_id(l, &id));
	CHECK(id && strcmp(id, j1) == 0);
	CHECK(strcmp(job_state(a, j1), "claimed") == 0);
	uint8_t *payload = NULL;
	size_t payload_len = 0;
	CHECK_OK(leases_lease_payload(l, &payload, &payload_len));
	CHECK(payload != NULL && payload_len == 7 && memcmp(payload, "payload", 7) == 0);
	leases_free(payload);

	/* The server's clock is the authority's; this host's is close to it. */
	int64_t e1 = 0, e2 = 0, now = wall_us();
	CHECK_OK(leases_lease_expiry(l, &e1));
	CHECK(e1 > now + 20 * SEC && e1 < now + 40 * SEC);
	CHECK_OK(leases_lease_renew(l, 60 * SEC));
	CHECK_OK(leases_lease_expiry(l, &e2));
	CHECK(e2 > e1);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_NOT_EXTENDED);
	CHECK_OK(leases_lease_complete(l, "{\"metadata\":{\"frames\":1},\"provenance\":{\"tool\":\"render\"}}"));
	CHECK(strcmp(job_state(a, j1), "completed") == 0);
	CHECK_ST(leases_lease_renew(l, SEC), LEASES_CLOSED);
	leases_lease_free(l);

	CHECK_OK(leases_claim(a, "p", "w2", 30 * SEC, &l));
	CHECK_OK(leases_lease_release(l));
	CHECK(strcmp(job_state(a, j2), "requested") == 0);
	leases_lease_free(l);
	CHECK_OK(leases_claim_job(a, "p", j2, "w3", 30 * SEC, &l));
	CHECK_OK(leases_lease_fail(l, "renderer crashed"));
	CHECK(strcmp(job_state(a, j2), "failed") == 0);
	leases_lease_free(l);
	l = (leases_lease *)(uintptr_t)0x1234;
	CHECK_ST(leases_claim(a, "p", "w4", 30 * SEC, &l), LEASES_NOTHING_TO_CLAIM);
	CHECK(l == NULL);

	char *events = NULL;
	CHECK_OK(leases_events_json(a, "p", 0, &events));
	CHECK(events && strstr(events, "\"kind\":\"claimed\"") && strstr(events, "\"kind\":\"completed\"") &&
	      strstr(events, "\"kind\":\"released\"") && strstr(events, "\"kind\":\"failed\""));
	leases_free(events);

	/* A second handle sees what the first committed. */
	leases_authority *b = NULL;
	CHECK_OK(leases_authority_open(loc, &b));
	CHECK(strcmp(job_state(b, j1), "completed") == 0);
	leases_authority_close(b);

	leases_free(id);
	leases_free(j1);
	leases_free(again);
	leases_free(j2);
	leases_authority_close(a);
}

static void test_claim_and_complete_in_one_edit_on_postgres(void) {
	char loc[1024];
	leases_authority *a = fresh("edit", loc, sizeof loc);
	char *j = request(a, NULL);
	leases_edit *e = NULL;
	leases_lease *l = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 5 * SEC, &l));
	CHECK_ST(leases_lease_renew(l, 10 * SEC), LEASES_CLOSED); /* pending until the commit */
	CHECK_OK(leases_edit_complete(e, l, "{\"metadata\":{\"inline\":true}}"));
	CHECK_OK(leases_edit_commit(e));
	CHECK(strcmp(job_state(a, j), "completed") == 0);
	leases_lease_free(l);

	/* An aborted edit publishes nothing. */
	char *j2 = request(a, NULL);
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 5 * SEC, &l));
	leases_edit_abort(e);
	CHECK(strcmp(job_state(a, j2), "requested") == 0);
	CHECK_ST(leases_lease_renew(l, 10 * SEC), LEASES_CLOSED);
	leases_lease_free(l);
	leases_free(j);
	leases_free(j2);
	leases_authority_close(a);
}

static void test_a_token_exported_on_one_handle_imports_on_another(void) {
	char loc[1024];
	leases_authority *a = fresh("tokens", loc, sizeof loc);
	leases_authority *b = NULL;
	CHECK_OK(leases_authority_open(loc, &b));
	char *j = request(a, NULL);
	leases_lease *l = NULL, *back = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l));
	char *token = NULL, *id = NULL, *worker = NULL;
	CHECK_OK(leases_lease_export(l, &token));
	CHECK(token && strncmp(token, "lt1.", 4) == 0 && strlen(token) <= LEASES_MAX_TOKEN_LEN);
	CHECK_OK(leases_lease_import(b, token, &back));
	CHECK_OK(leases_lease_job_id(back, &id));
	CHECK_OK(leases_lease_worker(back, &worker));
	CHECK(id && strcmp(id, j) == 0);
	CHECK(worker && strcmp(worker, "w") == 0);
	int64_t e1 = 0, e2 = 0, e3 = 0;
	CHECK_OK(leases_lease_expiry(l, &e1));
	CHECK_OK(leases_lease_expiry(back, &e2));
	CHECK(e1 == e2);
	/* Renewing through the other handle is the same claim. */
	CHECK_OK(leases_lease_renew(back, 60 * SEC));
	CHECK_OK(leases_lease_expiry(back, &e3));
	CHECK(e3 > e1);
	CHECK_OK(leases_lease_complete(back, NULL));
	CHECK(strcmp(job_state(a, j), "completed") == 0);
	CHECK_ST(leases_lease_renew(l, 90 * SEC), LEASES_WRONG_STATE);
	CHECK_ST(leases_lease_import(a, token, &(leases_lease *){NULL}), LEASES_WRONG_STATE);
	/* Listings and messages never show the token. */
	char *jobs = NULL, *events = NULL;
	CHECK_OK(leases_jobs_json(b, "p", &jobs));
	CHECK_OK(leases_events_json(b, NULL, 0, &events));
	CHECK(jobs && strstr(jobs, token + 4) == NULL);
	CHECK(events && strstr(events, token + 4) == NULL);
	CHECK(strstr(leases_last_error(), token + 4) == NULL);
	leases_free(jobs);
	leases_free(events);
	leases_free(token);
	leases_free(id);
	leases_free(worker);
	leases_lease_free(l);
	leases_lease_free(back);
	leases_free(j);
	leases_authority_close(b);
	leases_authority_close(a);
}

/* ---- opening with options ----------------------------------------------- */

static void test_open_must_exist_on_a_schema_without_an_authority_creates_no_tables(void) {
	char loc[1024];
	if (pg_fresh_location(base, "mustexist", loc, sizeof loc) != 0) exit(1);
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	o.flags = LEASES_OPEN_MUST_EXIST;
	leases_authority *a = (leases_authority *)(uintptr_t)0x1234;
	CHECK_ST(leases_authority_open_v2(loc, &o, &a), LEASES_NOT_FOUND);
	CHECK(a == NULL);
	CHECK_ST(leases_authority_open_v2(loc, &o, &a), LEASES_NOT_FOUND); /* the first created nothing */
	CHECK_OK(leases_authority_open_v2(loc, NULL, &a));                  /* without the flag: created */
	CHECK_OK(leases_production_create(a, "p"));
	leases_authority_close(a);
	CHECK_OK(leases_authority_open_v2(loc, &o, &a));
	char *j = request(a, NULL);
	CHECK(strcmp(job_state(a, j), "requested") == 0);
	leases_free(j);
	leases_authority_close(a);
}

static void test_synchronous_is_refused_on_postgres_without_showing_the_password(void) {
	char url[1024];
	snprintf(url, sizeof url, "postgres://u:" PW "@127.0.0.1:1/x?sslmode=disable");
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	int32_t levels[] = {LEASES_SYNCHRONOUS_NORMAL, LEASES_SYNCHRONOUS_FULL, LEASES_SYNCHRONOUS_EXTRA};
	for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		o.synchronous = levels[i];
		leases_authority *a = (leases_authority *)(uintptr_t)0x1234;
		CHECK_ST(leases_authority_open_v2(url, &o, &a), LEASES_INVALID_ARGUMENT); /* before connecting */
		CHECK(a == NULL && strstr(leases_last_error(), "synchronous") != NULL);
		CHECK(strstr(leases_last_error(), PW) == NULL);
	}
}

/* A short busy timeout ends the wait for a row another handle's edit holds
 * long before the default 10 s would. */
static void test_open_busy_timeout_bounds_a_row_lock_wait_on_postgres(void) {
	char loc[1024];
	leases_authority *a = fresh("busy", loc, sizeof loc);
	char *j = request(a, NULL);
	leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
	o.busy_timeout_us = 300000;
	leases_authority *b = NULL;
	CHECK_OK(leases_authority_open_v2(loc, &o, &b));
	leases_edit *e = NULL;
	leases_lease *held = NULL, *l = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "holder", 30 * SEC, &held)); /* holds the job's row */
	int64_t t0 = wall_us();
	CHECK_ST(leases_claim_job(b, "p", j, "waiter", 30 * SEC, &l), LEASES_BUSY);
	int64_t waited = wall_us() - t0;
	/* After this handle's 300 ms, well before the default 10 s; the upper
	 * bound leaves seconds for a stalled CI host. */
	CHECK(waited >= 150000 && waited < 9 * SEC);
	CHECK(l == NULL);
	leases_edit_abort(e);
	leases_lease_free(held);
	CHECK_OK(leases_claim_job(b, "p", j, "waiter", 30 * SEC, &l)); /* the row is free again */
	leases_lease_free(l);
	leases_free(j);
	leases_authority_close(b);
	leases_authority_close(a);
}

/* An open that fails must name the store without its password. */
static void expect_open_fails_without_password(const char *url, leases_status want) {
	leases_authority *a = (leases_authority *)(uintptr_t)0x1234;
	CHECK_ST(leases_authority_open(url, &a), want);
	CHECK(a == NULL);
	const char *msg = leases_last_error();
	CHECK(msg[0] != '\0');
	if (strstr(msg, PW) != NULL) fprintf(stderr, "    the message shows the password: %s\n", msg);
	CHECK(strstr(msg, PW) == NULL);
	CHECK(strstr(msg, "SECRETPW") == NULL);
}

static void test_retries_priorities_and_redrive_on_postgres(void) {
	char loc[1024];
	leases_authority *a = fresh("retry", loc, sizeof loc);
	leases_retry_policy p = {sizeof p, 2, 0, 0, 3600 * SEC}; /* no backoff: retried at once */
	CHECK_OK(leases_production_set_policy(a, "p", &p));
	char *low = request(a, NULL);
	leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
	o.priority = 9;
	char *high = NULL, *later = NULL;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &high));
	o.delay_us = 3600 * SEC;
	CHECK_OK(leases_job_request_v2(a, "p", NULL, NULL, 0, &o, &later)); /* not due for an hour */
	leases_lease *l = NULL;
	char *id = NULL;
	for (int attempt = 1; attempt <= 2; attempt++) {
		CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l)); /* the high priority, each time */
		CHECK_OK(leases_lease_job_id(l, &id));
		CHECK(id && strcmp(id, high) == 0);
		leases_free(id);
		CHECK_OK(leases_lease_fail_retry(l, "flaky", 0));
		leases_lease_free(l);
	}
	CHECK(strcmp(job_state(a, high), "dead") == 0);
	CHECK_OK(leases_claim(a, "p", "w", 30 * SEC, &l)); /* the delayed one is passed over */
	CHECK_OK(leases_lease_job_id(l, &id));
	CHECK(id && strcmp(id, low) == 0);
	leases_free(id);
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	CHECK_ST(leases_claim(a, "p", "w", 30 * SEC, &l), LEASES_NOTHING_TO_CLAIM);
	int64_t n = 0;
	CHECK_OK(leases_production_redrive(a, "p", "dead", &n));
	CHECK(n == 1);
	char *json = NULL;
	CHECK_OK(leases_job_json(a, "p", high, &json));
	CHECK(json && strstr(json, "\"state\":\"requested\"") && strstr(json, "\"attempts\":0"));
	CHECK(json && strstr(json, "\"ending\":\"retry\""));
	leases_free(json);
	leases_free(low);
	leases_free(high);
	leases_free(later);
	leases_authority_close(a);
}

static void test_an_open_failure_never_shows_the_url_password(void) {
	/* Nothing listens on port 1: the connection is refused. */
	expect_open_fails_without_password("postgres://u:" PW "@127.0.0.1:1/x?sslmode=disable&connect_timeout=5",
	                                   LEASES_STORAGE);
	expect_open_fails_without_password("postgresql://u:" PW "@127.0.0.1:1/x?sslmode=disable&connect_timeout=5",
	                                   LEASES_STORAGE);
	/* The password as a query parameter. */
	expect_open_fails_without_password("postgres://u@127.0.0.1:1/x?sslmode=disable&password=" PW, LEASES_STORAGE);
	/* A URL that does not parse (the port is not a number). */
	expect_open_fails_without_password("postgres://u:" PW "@127.0.0.1:notaport/x", LEASES_INVALID_ARGUMENT);
	expect_open_fails_without_password("postgresql://u:" PW "@[::1/x", LEASES_INVALID_ARGUMENT);
	/* The real server refuses: the database does not exist. */
	char url[1024];
	const char *at = strstr(base, "://");
	const char *host = at ? strchr(at + 3, '@') : NULL;
	CHECK(host != NULL);
	if (host == NULL) return;
	const char *path = strchr(host, '/');
	CHECK(path != NULL);
	if (path == NULL) return;
	snprintf(url, sizeof url, "postgres://leases:" PW "%.*s/no_such_db_4c2e?sslmode=disable",
	         (int)(path - host), host);
	expect_open_fails_without_password(url, LEASES_STORAGE);
}

/* The location is a URL: nothing is created beside the program, no file
 * named after it, no parent directory. */
static void test_a_postgres_location_creates_no_file(void) {
	char dir[] = "/tmp/leases-ctest-pg-XXXXXX", cwd[4096];
	if (mkdtemp(dir) == NULL || getcwd(cwd, sizeof cwd) == NULL || chdir(dir) != 0) {
		CHECK(!"could not make and enter a scratch directory");
		return;
	}
	char loc[1024];
	leases_authority *a = fresh("nofile", loc, sizeof loc);
	char *j = request(a, NULL);
	leases_free(j);
	leases_authority_close(a);
	int entries = 0;
	DIR *d = opendir(".");
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			fprintf(stderr, "    created: %s\n", de->d_name);
			entries++;
		}
	if (d) closedir(d);
	CHECK(entries == 0);
	CHECK(chdir(cwd) == 0);
	CHECK(rmdir(dir) == 0);
}

struct request_later {
	leases_authority *authority;
	char *job;
};

static void *request_after_100ms(void *arg) {
	struct request_later *r = arg;
	sleep_ms(100);
	r->job = request(r->authority, NULL);
	return NULL;
}

static void test_a_waiting_claim_takes_a_job_another_handle_requests_on_postgres(void) {
	char loc[1024];
	leases_authority *a = fresh("wait", loc, sizeof loc);
	leases_authority *b = NULL;
	CHECK_OK(leases_authority_open(loc, &b));
	struct request_later r = {b, NULL};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, request_after_100ms, &r) == 0);
	struct timespec t0 = mono_now();
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_wait(a, "p", "w", 30 * SEC, 60 * SEC, NULL, &l));
	/* Within the wait, with seconds to spare for a stalled CI host. The
	 * release library keeps PostgreSQL's 1 s safety poll, so this cannot
	 * tell the notice from the poll: core's
	 * TestACommitThroughAnotherHandleWakesAWaiter does, with an hour's poll. */
	CHECK(seconds_since(t0) < 30.0);
	CHECK(pthread_join(t, NULL) == 0);
	char *id = NULL;
	CHECK_OK(leases_lease_job_id(l, &id));
	CHECK(id && r.job && strcmp(id, r.job) == 0);
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_free(id);
	leases_free(r.job);
	leases_lease_free(l);
	leases_authority_close(b);
	leases_authority_close(a);
}

static void test_a_coordinators_cancel_reaches_a_kept_alive_lease_on_postgres(void) {
	char loc[1024];
	leases_authority *a = fresh("keepalive", loc, sizeof loc);
	char *j = request(a, NULL);
	leases_lease *l = claim_kept_alive(a, 3600 * SEC, 50000);
	leases_status why = -1;
	CHECK_OK(leases_lease_check(l, &why));
	CHECK(why == LEASES_OK);
	CHECK_OK(leases_cancel(a, "p", j));
	CHECK_OK(leases_lease_wait_lost(l, 60 * SEC, NULL, &why));
	CHECK(why == LEASES_CANCELLED);
	leases_lease_free(l); /* the renewer stopped already; free writes nothing */
	leases_free(j);
	leases_authority_close(a);
}

int main(void) {
	base = pg_base_url("test_capi_pg");
	if (base == NULL) {
		printf("skip: no PostgreSQL server (set LEASES_TEST_PG_URL, or run make test-capi)\n");
		return 0;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(tmpdir, sizeof tmpdir, "%s/leases-ctest-pg-out-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	RUN(test_a_postgres_url_runs_request_claim_renew_complete_and_events);
	RUN(test_claim_and_complete_in_one_edit_on_postgres);
	RUN(test_a_token_exported_on_one_handle_imports_on_another);
	RUN(test_retries_priorities_and_redrive_on_postgres);
	RUN(test_an_open_failure_never_shows_the_url_password);
	RUN(test_a_postgres_location_creates_no_file);
	RUN(test_a_waiting_claim_takes_a_job_another_handle_requests_on_postgres);
	RUN(test_a_coordinators_cancel_reaches_a_kept_alive_lease_on_postgres);
	RUN_OBSERVE_TESTS();
	RUN_NEXT_TESTS();
	RUN_WORKER_TESTS();
	RUN(test_open_must_exist_on_a_schema_without_an_authority_creates_no_tables);
	RUN(test_synchronous_is_refused_on_postgres_without_showing_the_password);
	RUN(test_open_busy_timeout_bounds_a_row_lock_wait_on_postgres);
	pg_drop_schemas(base);
	rmdir(tmpdir);
	if (check_failures) {
		fprintf(stderr, "%d check(s) failed\n", check_failures);
		return 1;
	}
	printf("all C API tests on PostgreSQL passed\n");
	return 0;
}
