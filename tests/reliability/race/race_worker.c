/*
 * race_worker.c: the C worker of the multi-language race
 * (tests/reliability/race_test.go), straight on include/leases.h. Same loop
 * and history schema as every other worker (race_worker_test.go); like the
 * Go worker it also fails retryably (leases_lease_fail_retry, half of them
 * with a delay) and, one time in five before a claim, acts as a coordinator
 * (coordinate: request with a priority and a delay or run-at, cancel,
 * retry one job, redrive).
 *
 * Built with LEASES_RACE_CLOCK against the test library (make builds
 * race_worker_c so), it also makes clock faults through the clock seam:
 * one iteration in eight its clock moves a little back (1-5 ms), jumps
 * forward (5-30 ms) or goes right again, and one request in four is sampled
 * a day ahead with priority 5. Under a fault the seam freezes the clock at
 * the wall clock plus the skew, set just after each call line (so every
 * sample of the call lies in its window on that clock), and the call line
 * carries the skew (skew_us); a lease is not kept alive under a fault (its
 * renewals would read the frozen clock).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "leases.h"
#ifdef LEASES_RACE_CLOCK
#include "leases_testing.h"
#endif

#define PRODUCTION "race"

static int log_fd, tok_fd;
static const char *name;
static int n;
static unsigned long long rng_state;
static leases_authority *auth;
static long long skew; /* the clock fault in force, µs */
#ifdef LEASES_RACE_CLOCK
static int faults; /* clock faults on (not turned off) */
#endif

static unsigned rnd(unsigned lo, unsigned hi) {
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return lo + (unsigned)((rng_state >> 33) % (hi - lo + 1));
}

static long long now_us(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void sleep_ms(unsigned ms) {
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Appends s to b as a JSON string. */
static void json_str(char *b, size_t cap, const char *s) {
	size_t k = strlen(b);
	if (k + 2 >= cap) return;
	b[k++] = '"';
	for (; *s && k + 8 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			b[k++] = '\\';
			b[k++] = (char)c;
		} else if (c < 0x20) {
			k += (size_t)snprintf(b + k, cap - k, "\\u%04x", c);
		} else {
			b[k++] = (char)c;
		}
	}
	b[k++] = '"';
	b[k] = 0;
}

static void write_line(const char *line) {
	if (write(log_fd, line, strlen(line)) < 0) _exit(3);
}

/* Sets the authority's clock for the call whose line was just written. */
static void set_clock(void) {
#ifdef LEASES_RACE_CLOCK
	if (leases_testing_set_clock(auth, skew ? now_us() + skew : 0) != LEASES_OK) _exit(4);
#endif
}

static int call(const char *op, const char *lease, const char *job, long long dur_us) {
	char b[1024];
	n++;
	snprintf(b, sizeof b, "{\"w\":\"%s\",\"n\":%d,\"ev\":\"call\",\"op\":\"%s\",\"lease\":\"%s\",\"job\":\"%s\",\"dur_us\":%lld,\"skew_us\":%lld,\"t\":%lld}\n",
	         name, n, op, lease, job, dur_us, skew, now_us());
	write_line(b);
	set_clock();
	return n;
}

static void ret(int id, leases_status st, const char *job, long long expiry) {
	long long t = now_us();
	char b[8192];
	snprintf(b, sizeof b, "{\"w\":\"%s\",\"n\":%d,\"ev\":\"ret\",\"kind\":\"%s\",\"job\":\"%s\",\"expiry_unix_us\":%lld,\"t\":%lld,\"msg\":",
	         name, id, leases_status_name(st), job, expiry, t);
	json_str(b, sizeof b - 4, st == LEASES_OK ? "" : leases_last_error());
	strcat(b, "}\n");
	write_line(b);
}

/* The jobs this worker requested and failed, for its coordinator calls. */
#define MAX_MINE 4096
static char *mine[MAX_MINE], *failed_jobs[MAX_MINE];
static int n_mine, n_failed;

static void remember(char **list, int *count, const char *job) {
	if (*count < MAX_MINE) list[(*count)++] = strdup(job);
}

static void coordinate(leases_authority *a) {
	unsigned r = rnd(0, 9);
	char b[1024];
	if (r < 5) {
		leases_request_options o = LEASES_REQUEST_OPTIONS_INIT;
		char key[300];
		n++;
		snprintf(key, sizeof key, "%s-%d", name, n);
		o.priority = (int32_t)rnd(0, 2);
		long long was = skew;
#ifdef LEASES_RACE_CLOCK
		if (faults && rnd(0, 3) == 0) { /* sampled a day ahead */
			skew = 24LL * 3600 * 1000000;
			o.priority = 5;
		}
#endif
		unsigned how = rnd(0, 11);
		if (how < 4) o.delay_us = rnd(1, 200) * 1000LL;
		else if (how < 7) o.run_at_unix_us = now_us() + rnd(0, 200) * 1000LL;
		snprintf(b, sizeof b, "{\"w\":\"%s\",\"n\":%d,\"ev\":\"call\",\"op\":\"request\",\"key\":\"%s\",\"prio\":%d,"
		         "\"dur_us\":%lld,\"run_at_us\":%lld,\"skew_us\":%lld,\"t\":%lld}\n",
		         name, n, key, (int)o.priority, (long long)o.delay_us, (long long)o.run_at_unix_us, skew, now_us());
		write_line(b);
		set_clock();
		int id = n;
		char *job = NULL;
		leases_status st = leases_job_request_v2(a, PRODUCTION, key, (const uint8_t *)key, strlen(key), &o, &job);
		ret(id, st, st == LEASES_OK ? job : "", 0);
		skew = was;
		if (st == LEASES_OK) remember(mine, &n_mine, job);
		leases_free(job);
	} else if (r < 7) {
		if (n_mine == 0) return;
		const char *job = mine[rnd(0, (unsigned)n_mine - 1)];
		int id = call("cancel", "", job, 0);
		ret(id, leases_cancel(a, PRODUCTION, job), job, 0);
	} else if (r < 9) {
		const char *job = n_failed > 0 ? failed_jobs[rnd(0, (unsigned)n_failed - 1)]
		                  : n_mine > 0 ? mine[rnd(0, (unsigned)n_mine - 1)] : NULL;
		if (!job) return;
		int id = call("retry_job", "", job, 0);
		ret(id, leases_job_retry(a, PRODUCTION, job), job, 0);
	} else {
		static const char *states[] = {"failed", "dead", "cancelled"};
		const char *state = states[rnd(0, 2)];
		n++;
		snprintf(b, sizeof b, "{\"w\":\"%s\",\"n\":%d,\"ev\":\"call\",\"op\":\"redrive\",\"state\":\"%s\",\"skew_us\":%lld,\"t\":%lld}\n",
		         name, n, state, skew, now_us());
		write_line(b);
		set_clock();
		int id = n;
		int64_t count = 0;
		ret(id, leases_production_redrive(a, PRODUCTION, state, &count), "", 0);
	}
}

int main(void) {
	name = getenv("LEASES_RACE_WORKER");
	log_fd = open(getenv("LEASES_RACE_LOG"), O_WRONLY | O_CREAT | O_APPEND, 0600);
	tok_fd = open(getenv("LEASES_RACE_TOKENS"), O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (!name || log_fd < 0 || tok_fd < 0) return 2;
	long long run_ms = atoll(getenv("LEASES_RACE_RUN_MS"));
	rng_state = (unsigned long long)atoll(getenv("LEASES_RACE_SEED")) * 2654435761ULL + 1;
	leases_authority *a = NULL;
	if (leases_authority_open(getenv("LEASES_RACE_DB"), &a) != LEASES_OK) {
		fprintf(stderr, "open: %s\n", leases_last_error());
		return 2;
	}
	auth = a;
#ifdef LEASES_RACE_CLOCK
	const char *off = getenv("LEASES_RACE_CLOCK_FAULTS");
	faults = !off || strcmp(off, "0") != 0;
#endif
	long long deadline = now_us() + run_ms * 1000;
	for (int it = 1; now_us() < deadline; it++) {
		if (it % 25 == 0) {
			char *jobs = NULL, *events = NULL;
			if (leases_jobs_json(a, PRODUCTION, &jobs) == LEASES_OK &&
			    leases_events_json(a, PRODUCTION, 0, &events) == LEASES_OK)
				printf("{\"jobs\":%s,\"events\":%s}\n", jobs, events);
			fflush(stdout);
			leases_free(jobs);
			leases_free(events);
		}
#ifdef LEASES_RACE_CLOCK
		if (faults && rnd(0, 7) == 0) {
			unsigned f = rnd(0, 2);
			skew = f == 0 ? -(long long)rnd(1, 5) * 1000 : f == 1 ? (long long)rnd(5, 30) * 1000 : 0;
		}
#endif
		if (rnd(0, 4) == 0) coordinate(a);
		long long d = rnd(30, 150) * 1000LL;
		int waiting = rnd(0, 1) == 0; /* one claim in two waits, 0-300 ms */
		int id = call(waiting ? "claim_wait" : "claim", "", "", d);
		char label[256];
		snprintf(label, sizeof label, "%s:%d", name, id);
		leases_lease *l = NULL;
		leases_status st = waiting ? leases_claim_wait(a, PRODUCTION, name, d, rnd(0, 300) * 1000LL, NULL, &l)
		                           : leases_claim(a, PRODUCTION, name, d, &l);
		if (st != LEASES_OK) {
			ret(id, st, "", 0);
			if (!waiting) sleep_ms(5);
			continue;
		}
		char *job = NULL, *tok = NULL;
		int64_t exp = 0;
		leases_lease_job_id(l, &job);
		leases_lease_expiry(l, &exp);
		ret(id, LEASES_OK, job, exp);
		if (leases_lease_export(l, &tok) == LEASES_OK) {
			if (write(tok_fd, tok, strlen(tok)) < 0 || write(tok_fd, "\n", 1) < 0) return 3;
			leases_free(tok);
		}
		sleep_ms(rnd(0, 60));
		if (rnd(0, 2) == 0 && skew == 0) {
			/* Kept alive while it works; its renewals are not in the history,
			 * and stopping it reports the last confirmed expiry. */
			id = call("keep_alive", label, job, d);
			ret(id, leases_lease_keep_alive(l, d, 0), job, 0);
			sleep_ms(rnd(50, 300));
			id = call("stop_keep_alive", label, job, 0);
			leases_lease_keep_alive_stop(l);
			exp = 0;
			leases_lease_expiry(l, &exp);
			ret(id, LEASES_OK, job, exp);
		}
		if (rnd(0, 2) == 0) {
			d = rnd(30, 200) * 1000LL;
			id = call("renew", label, job, d);
			st = leases_lease_renew(l, d);
			exp = 0;
			if (st == LEASES_OK) leases_lease_expiry(l, &exp);
			ret(id, st, job, exp);
		}
		sleep_ms(rnd(0, 40));
		unsigned r = rnd(0, 9);
		if (r < 2) {
			id = call("release", label, job, 0);
			ret(id, leases_lease_release(l), job, 0);
		} else if (r < 3 && rnd(0, 1) == 0) { /* a retryable failure: after a delay, or the backoff */
			char reason[300];
			snprintf(reason, sizeof reason, "race retry by %s", name);
			long long delay = rnd(0, 1) == 0 ? rnd(1, 50) * 1000LL : 0;
			id = call("fail_retry", label, job, delay);
			ret(id, leases_lease_fail_retry(l, reason, delay), job, 0);
		} else if (r < 3) {
			char reason[300];
			snprintf(reason, sizeof reason, "race failure by %s", name);
			id = call("fail", label, job, 0);
			st = leases_lease_fail(l, reason);
			ret(id, st, job, 0);
			if (st == LEASES_OK) remember(failed_jobs, &n_failed, job);
		} else {
			char facts[600];
			snprintf(facts, sizeof facts, "{\"metadata\":{\"by\":\"%s\",\"lease\":\"%s\"}}", name, label);
			id = call("complete", label, job, 0);
			ret(id, leases_lease_complete(l, facts), job, 0);
		}
		leases_lease_free(l);
		leases_free(job);
	}
	leases_authority_close(a);
	return 0;
}
