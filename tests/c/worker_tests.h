/* worker_tests.h: the C face of the worker loop's conformance suite
 * (tests/vectors/worker_loop.json, through vectors.h) and the rules of the
 * leases_worker handle, shared by the SQLite suite (test_capi.c) and the
 * PostgreSQL suite (test_capi_pg.c). The including file defines fresh(tag,
 * loc, cap) (a new authority with production "p") and hold_claims /
 * release_claims (below). Under valgrind only the
 * first scenarios run (the Go runtime is many times slower there). */
#ifndef LEASES_WORKER_TESTS_H
#define LEASES_WORKER_TESTS_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "leases.h"
#include "vectors.h"

static leases_authority *fresh(const char *tag, char *loc, size_t cap);
/* Defined by the including file too: makes every claim through another
 * handle with a 1 ms busy timeout fail until release_claims (the store's
 * writer lock held elsewhere). */
static void *hold_claims(leases_authority *holder, const char *loc);
static void release_claims(void *held);

#define WSEC INT64_C(1000000)
#define WFACTS "{\"metadata\":{\"done\":true}}"

/* The newest attempt of job id: its ending and reason, as job_json writes
 * them, copied into the buffers (empty when absent). */
static void worker_last_attempt(leases_authority *a, const char *id, char *ending, size_t ecap, char *reason,
                                size_t rcap) {
	ending[0] = reason[0] = '\0';
	char *rec = NULL;
	CHECK_OK(leases_job_json(a, "p", id, &rec));
	if (rec == NULL) return;
	const char *at = NULL, *p = rec;
	while ((p = strstr(p, "\"ending\":\"")) != NULL) at = p++;
	if (at) {
		at += strlen("\"ending\":\"");
		snprintf(ending, ecap, "%.*s", (int)strcspn(at, "\""), at);
		const char *r = strstr(at, "\"reason\":\"");
		if (r) {
			r += strlen("\"reason\":\"");
			snprintf(reason, rcap, "%.*s", (int)strcspn(r, "\""), r);
		}
	}
	leases_free(rec);
}

/* ---- the shared scenarios ------------------------------------------------ */

struct scenario_run {
	leases_worker *w;
	volatile int started; /* jobs handed out */
	volatile int stopped; /* the test has stopped the loop */
	pthread_mutex_t mu;
	/* The cancelled action: its handler names its job in to_cancel and
	 * waits until the coordinator thread has cancelled it (cancels_done
	 * counts them; one handler at a time asks, holding cancel_turn), then
	 * counts in heard a cancel its lease reported. */
	leases_authority *a;
	char *to_cancel;
	int cancel_turn, cancels_done, heard;
};

/* The coordinator of the cancelled action: cancels each job a handler names,
 * through the authority, as a coordinator does, until want were cancelled. */
struct scenario_coordinator {
	struct scenario_run *r;
	int want;
};

static void *scenario_coordinator_thread(void *arg) {
	struct scenario_coordinator *c = arg;
	struct scenario_run *r = c->r;
	struct timespec t0 = mono_now();
	for (int done = 0; done < c->want;) {
		pthread_mutex_lock(&r->mu);
		char *id = r->to_cancel;
		r->to_cancel = NULL;
		pthread_mutex_unlock(&r->mu);
		if (id == NULL) {
			if (seconds_since(t0) > 60) {
				fprintf(stderr, "    the handler of a cancelled job never ran\n");
				CHECK(0);
				return NULL;
			}
			sleep_ms(5);
			continue;
		}
		CHECK_OK(leases_cancel(r->a, "p", id));
		leases_free(id);
		pthread_mutex_lock(&r->mu);
		r->cancels_done++;
		pthread_mutex_unlock(&r->mu);
		done++;
	}
	return NULL;
}

/* One caller thread: next, act on the payload, settle, until no more. */
static void *scenario_thread(void *arg) {
	struct scenario_run *r = arg;
	for (;;) {
		leases_lease *l = NULL;
		leases_status st = leases_worker_next(r->w, WSEC, &l);
		if (st == LEASES_NOTHING_TO_CLAIM) continue;
		CHECK_OK(st);
		if (st != LEASES_OK || l == NULL) return NULL;
		pthread_mutex_lock(&r->mu);
		r->started++;
		pthread_mutex_unlock(&r->mu);
		uint8_t *payload = NULL;
		size_t n = 0;
		CHECK_OK(leases_lease_payload(l, &payload, &n));
		char action[128] = "";
		if (payload) snprintf(action, sizeof action, "%.*s", (int)n, (const char *)payload);
		leases_free(payload);
		const char *arg2 = strchr(action, ':') ? strchr(action, ':') + 1 : "";
		if (strcmp(action, "complete") == 0) {
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_COMPLETE, WFACTS, strlen(WFACTS)));
		} else if (strncmp(action, "error:", 6) == 0) {
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_FAIL_RETRY, arg2, strlen(arg2)));
		} else if (strncmp(action, "fail:", 5) == 0) {
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_FAIL, arg2, strlen(arg2)));
		} else if (strcmp(action, "release") == 0) {
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_RELEASE, NULL, 0));
		} else if (strcmp(action, "settle") == 0) {
			CHECK_OK(leases_lease_complete(l, WFACTS));
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_SETTLED, NULL, 0));
		} else if (strcmp(action, "wait") == 0) {
			while (!r->stopped) sleep_ms(5);
			CHECK_OK(leases_worker_settle(r->w, l, LEASES_RESULT_COMPLETE, WFACTS, strlen(WFACTS)));
		} else if (strcmp(action, "cancelled") == 0) {
			/* Name the job to the coordinator and wait until it cancelled
			 * it; then until the cancel reaches the lease (its keep-alive's
			 * next renewal is refused). A handler of a lost lease settles it
			 * all the same, and is told why it was not recorded. */
			char *id = NULL;
			CHECK_OK(leases_lease_job_id(l, &id));
			int before = 0;
			for (;;) {
				pthread_mutex_lock(&r->mu);
				int mine = !r->cancel_turn;
				if (mine) {
					r->cancel_turn = 1;
					r->to_cancel = id;
					before = r->cancels_done;
				}
				pthread_mutex_unlock(&r->mu);
				if (mine) break;
				sleep_ms(5);
			}
			struct timespec t0 = mono_now();
			for (int cancelled = 0; !cancelled && seconds_since(t0) < 60;) {
				pthread_mutex_lock(&r->mu);
				cancelled = r->cancels_done > before;
				if (cancelled) r->cancel_turn = 0;
				pthread_mutex_unlock(&r->mu);
				if (!cancelled) sleep_ms(5);
			}
			leases_status why = LEASES_OK;
			CHECK_OK(leases_lease_wait_lost(l, 60 * WSEC, NULL, &why));
			if (why == LEASES_CANCELLED) {
				pthread_mutex_lock(&r->mu);
				r->heard++;
				pthread_mutex_unlock(&r->mu);
			}
			CHECK_ST(leases_worker_settle(r->w, l, LEASES_RESULT_FAIL_RETRY, "cancelled", 9), LEASES_CANCELLED);
		} else if (strcmp(action, "hang") == 0) {
			/* The handler's "done" signal: the lease's end (here, the worker
			 * giving it back) ends the wait with LEASES_CLOSED. */
			leases_status why = LEASES_OK;
			CHECK_OK(leases_lease_wait_lost(l, 60 * WSEC, NULL, &why));
			CHECK(why == LEASES_CLOSED);
			CHECK_ST(leases_worker_settle(r->w, l, LEASES_RESULT_COMPLETE, WFACTS, strlen(WFACTS)), LEASES_CLOSED);
		} else {
			fprintf(stderr, "unknown action %s\n", action);
			CHECK(0);
		}
	}
}

static void test_every_scenario_of_the_shared_loop_suite_holds_for_the_c_handle(void) {
	size_t count = sizeof worker_scenarios / sizeof worker_scenarios[0];
	if (under_valgrind()) count = 2;
	for (size_t i = 0; i < count; i++) {
		const struct worker_scenario *sc = &worker_scenarios[i];
		if (sc->njobs > 0 && strncmp(sc->jobs[0], "panic:", 6) == 0) {
			/* C has no panic or exception: a binding maps its own (a C++ throw,
			 * a Rust panic, a Python raise) to LEASES_RESULT_FAIL_RETRY. */
			printf("     skipped for C: %s\n", sc->name);
			continue;
		}
		char tag[32];
		snprintf(tag, sizeof tag, "wscenario%zu", i);
		leases_authority *a = fresh(tag, NULL, 0);
		char *ids[SCENARIO_MAX_JOBS] = {0};
		for (int j = 0; j < sc->njobs; j++)
			CHECK_OK(leases_job_request(a, "p", NULL, (const uint8_t *)sc->jobs[j], strlen(sc->jobs[j]), &ids[j]));
		leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
		o.concurrency = sc->concurrency;
		o.max_jobs = sc->max_jobs;
		o.drain_timeout_us = sc->drain_timeout_ms * 1000;
		o.interval_us = sc->interval_ms * 1000;
		if (sc->stop[0] == '\0') o.flags = LEASES_WORKER_EXIT_WHEN_EMPTY;
		struct scenario_run r = {0};
		r.a = a;
		pthread_mutex_init(&r.mu, NULL);
		struct scenario_coordinator coord = {&r, 0};
		for (int j = 0; j < sc->njobs; j++) coord.want += strcmp(sc->jobs[j], "cancelled") == 0;
		pthread_t coordinator;
		if (coord.want > 0) pthread_create(&coordinator, NULL, scenario_coordinator_thread, &coord);
		CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &r.w));
		int threads = sc->concurrency > 0 ? sc->concurrency : 1;
		int out = threads < sc->njobs ? threads : sc->njobs;
		pthread_t t[8];
		for (int k = 0; k < threads; k++) pthread_create(&t[k], NULL, scenario_thread, &r);
		if (sc->stop[0] != '\0') {
			struct timespec t0 = mono_now();
			for (;;) {
				pthread_mutex_lock(&r.mu);
				int s = r.started;
				pthread_mutex_unlock(&r.mu);
				if (s >= out || seconds_since(t0) > 30) break;
				sleep_ms(5);
			}
			CHECK_OK(leases_worker_stop(r.w, strcmp(sc->stop, "drain") == 0 ? LEASES_STOP_DRAIN : LEASES_STOP_GIVE_BACK));
			sleep_ms(20);
			r.stopped = 1;
		}
		for (int k = 0; k < threads; k++) pthread_join(t[k], NULL);
		if (coord.want > 0) {
			pthread_join(coordinator, NULL);
			if (r.heard != coord.want)
				fprintf(stderr, "    scenario \"%s\": %d of %d cancels reached their handler\n", sc->name, r.heard,
				        coord.want);
			CHECK(r.heard == coord.want);
		}
		int32_t end = -1;
		CHECK_OK(leases_worker_wait(r.w, 30 * WSEC, NULL, &end));
		int32_t want = strcmp(sc->end, "stopped") == 0 ? LEASES_WORKER_STOPPED : LEASES_WORKER_GAVE_BACK;
		if (end != want) fprintf(stderr, "    scenario \"%s\": end %d, want %s\n", sc->name, end, sc->end);
		CHECK(end == want);
		for (int j = 0; j < sc->njobs; j++) {
			const char *got = job_state(a, ids[j]);
			if (strcmp(got, sc->states[j]) != 0)
				fprintf(stderr, "    scenario \"%s\": job %d is %s, want %s\n", sc->name, j, got, sc->states[j]);
			CHECK(strcmp(got, sc->states[j]) == 0);
		}
		if (sc->attempt_ending[0] != '\0') {
			char ending[32], reason[256];
			worker_last_attempt(a, ids[0], ending, sizeof ending, reason, sizeof reason);
			CHECK(strcmp(ending, sc->attempt_ending) == 0);
			CHECK(strcmp(reason, sc->attempt_reason) == 0);
		}
		leases_worker_free(r.w);
		pthread_mutex_destroy(&r.mu);
		for (int j = 0; j < sc->njobs; j++) leases_free(ids[j]);
		leases_authority_close(a);
	}
}

/* ---- the rules of the handle ---------------------------------------------- */

static void test_a_failure_reason_follows_the_one_rule_of_the_shared_vectors(void) {
	leases_authority *a = fresh("wreason", NULL, 0);
	leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w));
	static char want[8192];
	for (size_t i = 0; i < sizeof reason_vectors / sizeof reason_vectors[0]; i++) {
		const struct reason_vector *v = &reason_vectors[i];
		char *id = request(a, NULL);
		leases_lease *l = NULL;
		CHECK_OK(leases_worker_next(w, 10 * WSEC, &l));
		CHECK(l != NULL);
		CHECK_OK(leases_worker_settle(w, l, LEASES_RESULT_FAIL, v->error, v->error_len));
		char *rec = NULL;
		CHECK_OK(leases_job_json(a, "p", id, &rec));
		snprintf(want, sizeof want, "\"reason\":\"%.*s\"", (int)v->reason_len, v->reason);
		if (!rec || !strstr(rec, want)) fprintf(stderr, "    reason vector \"%s\" not met\n", v->name);
		CHECK(rec && strstr(rec, want) != NULL);
		leases_free(rec);
		leases_free(id);
	}
	leases_worker_free(w);
	leases_authority_close(a);
}

static void test_a_worker_hands_out_at_most_its_concurrency_at_once(void) {
	leases_authority *a = fresh("wconc", NULL, 0);
	char *ids[3];
	for (int i = 0; i < 3; i++) ids[i] = request(a, NULL);
	leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
	o.concurrency = 2;
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w));
	leases_lease *l1 = NULL, *l2 = NULL, *l3 = (leases_lease *)(uintptr_t)0x1234;
	CHECK_OK(leases_worker_next(w, 10 * WSEC, &l1));
	CHECK_OK(leases_worker_next(w, 10 * WSEC, &l2));
	CHECK(l1 != NULL && l2 != NULL);
	/* Two out: a third waits for a settle, and its wait passes. */
	CHECK_ST(leases_worker_next(w, 50000, &l3), LEASES_NOTHING_TO_CLAIM);
	CHECK(l3 == NULL);
	CHECK(strcmp(job_state(a, ids[2]), "requested") == 0);
	/* A completion claims the next job in its own commit: it is claimed
	 * before anyone asks for it, and the next call hands it out. */
	CHECK_OK(leases_worker_settle(w, l1, LEASES_RESULT_COMPLETE, NULL, 0));
	CHECK(strcmp(job_state(a, ids[2]), "claimed") == 0);
	CHECK_OK(leases_worker_next(w, 0, &l3));
	CHECK(l3 != NULL);
	/* A lease settled already, or not the worker's, is refused and changes nothing. */
	CHECK_ST(leases_worker_settle(w, l1, LEASES_RESULT_COMPLETE, NULL, 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_settle(w, l2, 0, NULL, 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_settle(w, l2, LEASES_RESULT_COMPLETE, "{bad", 4), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_settle(w, l2, LEASES_RESULT_SETTLED, NULL, 0), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_settle(w, l2, LEASES_RESULT_FAIL, NULL, 3), LEASES_INVALID_ARGUMENT);
	CHECK(strcmp(job_state(a, ids[1]), "claimed") == 0);
	CHECK_OK(leases_worker_settle(w, l2, LEASES_RESULT_COMPLETE, NULL, 0));
	CHECK_OK(leases_worker_settle(w, l3, LEASES_RESULT_COMPLETE, NULL, 0));
	char *stats = NULL;
	CHECK_OK(leases_worker_stats_json(w, &stats));
	CHECK(stats && strstr(stats, "\"completed\":3") != NULL && strstr(stats, "\"out\":0") != NULL);
	leases_free(stats);
	for (int i = 0; i < 3; i++) {
		CHECK(strcmp(job_state(a, ids[i]), "completed") == 0);
		leases_free(ids[i]);
	}
	leases_worker_free(w);
	leases_authority_close(a);
}

struct waiting_next {
	leases_worker *w;
	leases_status st;
	leases_lease *l;
	double took;
};

static void *wait_next_thread(void *arg) {
	struct waiting_next *n = arg;
	struct timespec t0 = mono_now();
	n->st = leases_worker_next(n->w, 60 * WSEC, &n->l);
	n->took = seconds_since(t0);
	return NULL;
}

static void test_a_stop_from_another_thread_ends_a_waiting_next(void) {
	leases_authority *a = fresh("wstop", NULL, 0);
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, NULL, &w));
	struct waiting_next n = {w, -1, (leases_lease *)(uintptr_t)0x1234, 0};
	pthread_t t;
	pthread_create(&t, NULL, wait_next_thread, &n);
	sleep_ms(100);
	CHECK_OK(leases_worker_stop(w, LEASES_STOP_DRAIN));
	pthread_join(t, NULL);
	CHECK_ST(n.st, LEASES_OK);
	CHECK(n.l == NULL);
	CHECK(n.took < 30.0);
	int32_t end = -1;
	CHECK_OK(leases_worker_wait(w, 0, NULL, &end));
	CHECK(end == LEASES_WORKER_STOPPED);
	leases_lease *l = (leases_lease *)(uintptr_t)0x1234;
	CHECK_OK(leases_worker_next(w, 0, &l)); /* and every later call */
	CHECK(l == NULL);
	leases_worker_free(w);
	leases_authority_close(a);
}

static void test_an_unknown_production_ends_the_worker_for_every_caller(void) {
	leases_authority *a = fresh("wnotfound", NULL, 0);
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "nope", "w", 60 * WSEC, NULL, &w));
	leases_lease *l = NULL;
	CHECK_ST(leases_worker_next(w, WSEC, &l), LEASES_NOT_FOUND);
	CHECK_ST(leases_worker_next(w, WSEC, &l), LEASES_NOT_FOUND);
	CHECK(l == NULL);
	int32_t end = -1;
	CHECK_OK(leases_worker_wait(w, WSEC, NULL, &end));
	CHECK(end == LEASES_WORKER_FAILED);
	leases_worker_free(w);
	leases_authority_close(a);
}

static void test_a_coordinators_cancel_reaches_the_running_job_of_a_worker(void) {
	leases_authority *a = fresh("wcancel", NULL, 0);
	char *id = request(a, NULL);
	leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
	o.interval_us = 50000; /* learns of the cancel within 50 ms */
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w));
	leases_lease *l = NULL;
	CHECK_OK(leases_worker_next(w, 10 * WSEC, &l));
	CHECK_OK(leases_cancel(a, "p", id));
	leases_status why = LEASES_OK;
	CHECK_OK(leases_lease_wait_lost(l, 30 * WSEC, NULL, &why));
	CHECK(why == LEASES_CANCELLED);
	CHECK_ST(leases_worker_settle(w, l, LEASES_RESULT_COMPLETE, NULL, 0), LEASES_CANCELLED);
	CHECK(strcmp(job_state(a, id), "cancelled") == 0);
	leases_free(id);
	leases_worker_free(w);
	leases_authority_close(a);
}

static void test_worker_new_refuses_bad_options_and_claims_nothing(void) {
	leases_authority *a = fresh("wbad", NULL, 0);
	char *id = request(a, NULL);
	leases_worker *w = (leases_worker *)(uintptr_t)0x1234;
	leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
	o.flags = 0x100;
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w), LEASES_INVALID_ARGUMENT);
	CHECK(w == NULL);
	o = (leases_worker_options)LEASES_WORKER_OPTIONS_INIT;
	o.max_jobs = -1;
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w), LEASES_INVALID_ARGUMENT);
	o = (leases_worker_options)LEASES_WORKER_OPTIONS_INIT;
	o.concurrency = 1025;
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w), LEASES_INVALID_ARGUMENT);
	o = (leases_worker_options)LEASES_WORKER_OPTIONS_INIT;
	o.drain_timeout_us = -1;
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w), LEASES_INVALID_ARGUMENT);
	o = (leases_worker_options)LEASES_WORKER_OPTIONS_INIT;
	o.size = 1;
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, &o, &w), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_new(a, "p", "w", 0, NULL, &w), LEASES_INVALID_DURATION);
	CHECK_ST(leases_worker_new(a, "p", NULL, 60 * WSEC, NULL, &w), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_new(a, "p", "w", 60 * WSEC, NULL, NULL), LEASES_INVALID_ARGUMENT);
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, NULL, &w));
	CHECK_ST(leases_worker_stop(w, 3), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_next(w, -1, NULL), LEASES_INVALID_ARGUMENT);
	leases_lease *l = NULL;
	CHECK_ST(leases_worker_next(w, -1, &l), LEASES_INVALID_ARGUMENT);
	CHECK_ST(leases_worker_next((leases_worker *)a, 0, &l), LEASES_INVALID_ARGUMENT);
	CHECK(strcmp(job_state(a, id), "requested") == 0);
	leases_worker_free(w);
	leases_worker_free(w); /* twice, and NULL: nothing happens */
	leases_worker_free(NULL);
	leases_free(id);
	leases_authority_close(a);
}

/* The back-off after failed claims is the shared sequence: claims kept
 * failing (the store's writer lock held elsewhere, a 1 ms busy timeout)
 * pause by tests/vectors/worker_loop.json's backoff_us. */
static void test_a_workers_failed_claims_back_off_by_the_shared_sequence(void) {
	char loc[1024];
	leases_authority *a0 = fresh("wbackoff", loc, sizeof loc);
	char *id = request(a0, NULL);
	leases_open_options oo = LEASES_OPEN_OPTIONS_INIT;
	oo.busy_timeout_us = 1000;
	leases_authority *a = NULL;
	CHECK_OK(leases_authority_open_v2(loc, &oo, &a));
	void *held = hold_claims(a0, loc);
	leases_worker *w = NULL;
	CHECK_OK(leases_worker_new(a, "p", "w", 60 * WSEC, NULL, &w));
	int64_t seen[8] = {0};
	int most = 0;
	struct timespec t0 = mono_now();
	while (most < 4 && seconds_since(t0) < 60) {
		leases_lease *l = NULL;
		CHECK_ST(leases_worker_next(w, 20000, &l), LEASES_NOTHING_TO_CLAIM);
		char *stats = NULL;
		CHECK_OK(leases_worker_stats_json(w, &stats));
		const char *f = stats ? strstr(stats, "\"failed_claims\":") : NULL;
		const char *b = stats ? strstr(stats, "\"backoff_us\":") : NULL;
		if (f && b) {
			int n = atoi(f + strlen("\"failed_claims\":"));
			long long us = atoll(b + strlen("\"backoff_us\":"));
			if (n > 0 && n < 8) {
				seen[n] = us;
				if (n > most) most = n;
			}
		}
		leases_free(stats);
	}
	CHECK(most >= 4);
	for (int n = 1; n <= most && n < 8; n++) {
		if (seen[n] == 0) continue; /* a sample may miss one */
		if (seen[n] != backoff_vectors_us[n - 1])
			fprintf(stderr, "    after %d failed claims the pause is %lld us, want %lld\n", n, (long long)seen[n],
			        (long long)backoff_vectors_us[n - 1]);
		CHECK(seen[n] == backoff_vectors_us[n - 1]);
	}
	release_claims(held);
	leases_lease *l = NULL;
	CHECK_OK(leases_worker_next(w, 10 * WSEC, &l)); /* the lock is free: the loop claims */
	CHECK(l != NULL);
	CHECK_OK(leases_worker_settle(w, l, LEASES_RESULT_COMPLETE, NULL, 0));
	CHECK(strcmp(job_state(a, id), "completed") == 0);
	leases_worker_free(w);
	leases_free(id);
	leases_authority_close(a);
	leases_authority_close(a0);
}

#define RUN_WORKER_TESTS()                                                                \
	do {                                                                                  \
		RUN(test_every_scenario_of_the_shared_loop_suite_holds_for_the_c_handle);         \
		RUN(test_worker_new_refuses_bad_options_and_claims_nothing);                      \
		if (!under_valgrind()) {                                                          \
			RUN(test_a_failure_reason_follows_the_one_rule_of_the_shared_vectors);        \
			RUN(test_a_worker_hands_out_at_most_its_concurrency_at_once);                 \
			RUN(test_a_stop_from_another_thread_ends_a_waiting_next);                     \
			RUN(test_an_unknown_production_ends_the_worker_for_every_caller);             \
			RUN(test_a_coordinators_cancel_reaches_the_running_job_of_a_worker);          \
			RUN(test_a_workers_failed_claims_back_off_by_the_shared_sequence);            \
		}                                                                                 \
	} while (0)

#endif
