/*
 * abi_fuzz.c: a seeded random-sequence fuzzer of the C ABI. It calls every
 * export of leases.h (and leases_testing.h) in random order with NULLs,
 * huge strings, invalid UTF-8, random bytes, stale, freed, unknown and
 * wrong-type handles, random durations, waits and intervals (kept-alive
 * leases renew in the background meanwhile) and random out-pointer choices,
 * against the test library. The promise it checks: the process never
 * crashes (run under ASan and valgrind), every status is a known code, a
 * failure always has a message starting with its status name, and failed
 * calls leave their outputs NULL/0, and an observation that succeeds returns
 * one JSON object.
 *
 * Usage: abi_fuzz DIR SEED CALLS. Prints one summary line; with
 * $LEASES_REL_FIGURES set, appends a JSON figure line to that file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "leases.h"
#include "leases_testing.h"

#define NSTATUS 20
#define POOL 12

static uint64_t rng;
static unsigned long long calls, failures, by_status[NSTATUS];
static char dir[512];

static uint64_t next(void) {
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}
static unsigned below(unsigned n) { return (unsigned)(next() % n); }
static int one_in(unsigned n) { return below(n) == 0; }

#define FAIL(...)                                                                              \
	do {                                                                                       \
		fprintf(stderr, "abi_fuzz: call %llu: ", calls);                                       \
		fprintf(stderr, __VA_ARGS__);                                                          \
		fprintf(stderr, "\n");                                                                 \
		failures++;                                                                            \
	} while (0)

/* Checks one returned status: known, counted, and a failure has a message
 * that starts with its name. */
static leases_status seen(leases_status st, const char *what) {
	calls++;
	const char *msg = leases_last_error();
	if (msg == NULL) FAIL("%s: leases_last_error() is NULL", what);
	if (st < 0 || st >= NSTATUS) {
		FAIL("%s: unknown status %d", what, st);
		return st;
	}
	by_status[st]++;
	if (st == LEASES_INTERNAL && strstr(msg, "boom") == NULL && strstr(msg, "nil map") == NULL)
		FAIL("%s: internal error outside the panic test: %s", what, msg);
	if (st != LEASES_OK && msg) {
		const char *name = leases_status_name(st);
		if (strncmp(msg, name, strlen(name)) != 0) FAIL("%s: %s with message %.200s", what, name, msg);
	}
	return st;
}

/* ---- handles ------------------------------------------------------------ */

static leases_authority *auths[POOL];
static leases_lease *leases[POOL];
static leases_edit *edits[POOL];
static leases_execution *execs[POOL];
static leases_canceller *cancellers[POOL];
static uintptr_t stale[64]; /* released handles of any type */
static unsigned nstale;

static void remember_stale(void *h) {
	if (h) stale[nstale++ % 64] = (uintptr_t)h;
}

/* A handle argument: usually a live one of the right type, else NULL, a
 * released one, another type's, a small integer or random bits. */
static void *any_handle(void **pool) {
	switch (below(16)) {
	case 0: return NULL;
	case 1: return nstale ? (void *)stale[below(nstale < 64 ? nstale : 64)] : NULL;
	case 2: {
		void **other[] = {(void **)auths, (void **)leases, (void **)edits, (void **)execs, (void **)cancellers};
		return other[below(5)][below(POOL)];
	}
	case 3: return (void *)(uintptr_t)(1 + below(5000));
	case 4: return (void *)(uintptr_t)next();
	default: return pool[below(POOL)];
	}
}
#define AUTH() ((leases_authority *)any_handle((void **)auths))
#define LEASE() ((leases_lease *)any_handle((void **)leases))
#define EDIT() ((leases_edit *)any_handle((void **)edits))
#define EXEC() ((leases_execution *)any_handle((void **)execs))
/* A canceller argument: NULL (none) is valid, so it is as likely as a live one. */
#define CANCELLER() (one_in(3) ? NULL : (leases_canceller *)any_handle((void **)cancellers))

static void put(void **pool, void *h, void (*release)(void *)) {
	unsigned i = below(POOL);
	if (pool[i]) {
		release(pool[i]);
		remember_stale(pool[i]);
	}
	pool[i] = h;
}
static void rel_auth(void *h) { leases_authority_close(h); }
static void rel_lease(void *h) { leases_lease_free(h); }
static void rel_edit(void *h) { leases_edit_abort(h); }
static void rel_exec(void *h) { leases_execution_abandon(h); }
static void rel_canceller(void *h) { leases_canceller_free(h); }

/* ---- strings -------------------------------------------------------------- */

static char *job_ids[POOL];
static char *tokens[POOL];
static char big[LEASES_MAX_PAYLOAD_LEN + 64];
static char scratch[8][512];
static unsigned scratch_i;

static void keep(char **pool, char *s) {
	unsigned i = below(POOL);
	leases_free(pool[i]);
	pool[i] = s;
}

/* A string argument: valid names and ids, NULL, empty, oversize, invalid
 * UTF-8, random bytes, a mutated token or id. */
static const char *any_string(const char *valid) {
	char *s = scratch[scratch_i++ % 8];
	switch (below(22)) {
	case 0: return NULL;
	case 1: return "";
	case 2: { /* just over a limit, or huge */
		static const size_t lens[] = {LEASES_MAX_NAME_LEN + 1, LEASES_MAX_REASON_LEN + 1, LEASES_MAX_TOKEN_LEN + 1,
		                              LEASES_MAX_PATH_LEN + 1, LEASES_MAX_FACTS_LEN + 1, 64 * 1024};
		size_t n = lens[below(6)];
		memset(big, 'a' + (int)below(26), n);
		big[n] = 0;
		return big;
	}
	case 3: {
		static const char *bad[] = {"\xff\xfe", "ab\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "p\x80",
		                            "lt1.\xff", "\xe2\x82", "{\"metadata\":{\"\xff\":1}}"};
		return bad[below(8)];
	}
	case 4: {
		size_t n = 1 + below(sizeof scratch[0] - 1);
		for (size_t i = 0; i < n; i++) s[i] = (char)(1 + below(255));
		s[n] = 0;
		return s;
	}
	case 5: {
		const char *t = tokens[below(POOL)];
		if (!t) return "lt1.AAAA";
		snprintf(s, 512, "%s", t);
		size_t n = strlen(s);
		if (n && one_in(2)) s[below((unsigned)n)] ^= (char)(1 + below(127));
		else if (n) s[below((unsigned)n)] = 0;
		return s;
	}
	case 6: return tokens[below(POOL)];
	case 7: return job_ids[below(POOL)];
	case 8: return "00000000-0000-0000-0000-000000000000";
	case 9: return "p2";
	default: return valid;
	}
}

static const char *any_facts(void) {
	static const char *facts[] = {
	    "{\"metadata\":{\"k\":1},\"provenance\":{\"tool\":\"fuzz\"}}",
	    "{\"metadata\":{\"k\":[1,2,{\"x\":null}]}}",
	    "{}",
	    "{\"metadata\":",
	    "[1,2]",
	    "{\"other\":{}}",
	    "{\"metadata\":{\"k\":1}} trailing",
	    "{\"metadata\":{\"\":1}}",
	    "null",
	};
	if (one_in(3)) return any_string(NULL);
	return facts[below(sizeof facts / sizeof *facts)];
}

static int64_t any_duration(void) {
	switch (below(9)) {
	case 0: return 0;
	case 1: return -1;
	case 2: return INT64_MIN;
	case 3: return INT64_MAX;
	case 4: return LEASES_MAX_DURATION_US;
	case 5: return LEASES_MAX_DURATION_US + 1;
	case 6: return (int64_t)next();
	case 7: return 1;
	default: return 1000 + (int64_t)below(2000000);
	}
}

/* A wait bound: short when valid (a valid wait blocks the fuzzer), or out of
 * range. */
static int64_t any_wait(void) {
	switch (below(8)) {
	case 0: return -1;
	case 1: return INT64_MIN;
	case 2: return LEASES_MAX_WAIT_US + 1;
	case 3: return 0;
	default: return (int64_t)below(20000);
	}
}

/* A keep-alive interval: 0 (the default), valid, or not. */
static int64_t any_interval(void) {
	switch (below(6)) {
	case 0: return 0;
	case 1: return -1;
	case 2: return 999;
	case 3: return any_duration();
	default: return 1000 + (int64_t)below(50000);
	}
}

/* ---- one random call -------------------------------------------------------- */

static void must_be_null(void *p, leases_status st, const char *what) {
	if (st != LEASES_OK && p != NULL) FAIL("%s failed (%s) but left its output set", what, leases_status_name(st));
}

/* An options struct at the start of a 4096-byte buffer (the largest size the
 * library reads): a random size, random fields, and now and then random
 * bytes past the fields this header knows. */
static unsigned char optbuf[4096];

static const void *any_options(size_t known, void (*fill)(void *)) {
	if (one_in(6)) return NULL;
	memset(optbuf, 0, sizeof optbuf);
	fill(optbuf);
	size_t size;
	switch (below(7)) {
	case 0: size = below(sizeof(size_t)); break;
	case 1: size = known - below(9); break;
	case 2: size = known + 8 * below(4); break;
	case 3: size = 4096 + below(3); break;
	case 4: size = (size_t)next(); break;
	default: size = known;
	}
	if (one_in(8))
		for (size_t i = known; i < sizeof optbuf; i++) optbuf[i] = (unsigned char)next();
	memcpy(optbuf, &size, sizeof size);
	return optbuf;
}

static int64_t any_us(void) {
	switch (below(7)) {
	case 0: return 0;
	case 1: return -1;
	case 2: return INT64_MIN;
	case 3: return INT64_MAX;
	case 4: return LEASES_MAX_DELAY_US + (int64_t)below(2);
	case 5: return (int64_t)below(5000000);
	default: return (int64_t)next();
	}
}

static void fill_request(void *p) {
	leases_request_options *o = p;
	o->priority = one_in(3) ? (int32_t)next() : (int32_t)below(LEASES_MAX_PRIORITY + 2);
	o->run_at_unix_us = one_in(2) ? 0 : (int64_t)time(NULL) * 1000000 + any_us() % 100000000;
	o->delay_us = one_in(2) ? 0 : any_us();
}

static void fill_policy(void *p) {
	leases_retry_policy *o = p;
	o->max_attempts = one_in(3) ? (int32_t)next() : (int32_t)below(6);
	o->jitter_percent = (int32_t)below(120) - 10;
	o->backoff_base_us = one_in(2) ? (int64_t)below(3) * 1000000 : any_us();
	o->backoff_cap_us = one_in(2) ? 3600000000 : any_us();
}

static void fill_open(void *p) {
	leases_open_options *o = p;
	o->flags = one_in(4) ? (int32_t)next() : (int32_t)below(3);
	o->synchronous = one_in(4) ? (int32_t)next() : (int32_t)below(5);
	o->busy_timeout_us = one_in(3) ? (int64_t)next() : (int64_t)below(30000) - 10;
}

/* The "next" cursors of pages seen, mutated now and then by any_string. */
static char *cursors[POOL];

static void keep_cursor(const char *json) {
	const char *at = json ? strstr(json, "\"next\":\"") : NULL;
	if (at == NULL) return;
	at += strlen("\"next\":\"");
	size_t n = strcspn(at, "\"");
	char *c = malloc(n + 1);
	if (c == NULL) return;
	memcpy(c, at, n);
	c[n] = 0;
	unsigned i = below(POOL);
	free(cursors[i]);
	cursors[i] = c;
}

static const char *any_list(const char *valid) {
	static const char *lists[] = {"requested,claimed", "claimed,completed,failed", "completed,", ",",
	                              "requested,requested", "claimed,renewed,expired", "cancelled",
	                              "dead,failed", "retry,redriven,dead,policy_changed"};
	return one_in(3) ? any_string(valid) : lists[below(sizeof lists / sizeof *lists)];
}

/* One paged observation with random arguments: on success exactly one JSON
 * object, on failure no output. */
static void observe_step(leases_authority *a, char **o) {
	char *out = NULL;
	leases_status st;
	const char *what;
	uint32_t limit = one_in(4) ? (uint32_t)next() : below(6) ? below(12) : LEASES_MAX_PAGE_SIZE + below(2);
	const char *cursor = one_in(3) ? NULL : any_string(cursors[below(POOL)]);
	switch (below(5)) {
	case 0:
		what = "jobs_page_json";
		st = seen(leases_jobs_page_json(a, any_string("p"), one_in(2) ? NULL : any_list("claimed"),
		                                one_in(2) ? NULL : any_string("key"),
		                                one_in(2) ? NULL : any_string(job_ids[below(POOL)]), cursor, limit, o),
		          what);
		break;
	case 1:
		what = "events_page_json";
		st = seen(leases_events_page_json(a, one_in(3) ? NULL : any_string("p"),
		                                  one_in(2) ? NULL : any_string(job_ids[below(POOL)]),
		                                  one_in(2) ? NULL : any_list("claimed"),
		                                  one_in(4) ? -(int64_t)below(3) : (int64_t)below(50), limit, o),
		          what);
		break;
	case 2:
		what = "job_json";
		st = seen(leases_job_json(a, any_string("p"), any_string(job_ids[below(POOL)]), o), what);
		break;
	case 3:
		what = "productions_page_json";
		st = seen(leases_productions_page_json(a, cursor, limit, o), what);
		break;
	default:
		what = "job_counts_json";
		st = seen(leases_job_counts_json(a, any_string("p"), o), what);
		break;
	}
	if (o == NULL) return;
	out = *o;
	must_be_null(out, st, what);
	if (out) {
		json_value *v = json_parse(out);
		if (v == NULL || v->type != JSON_OBJECT) FAIL("%s returned no JSON object: %.200s", what, out);
		json_free(v);
		keep_cursor(out);
	}
	leases_free(out);
	*o = NULL;
}

static void step(void) {
	leases_status st;
	switch (below(43)) {
	case 0: {
		leases_authority *a = NULL;
		char path[700];
		snprintf(path, sizeof path, "%s/fuzz%u.db", dir, below(3));
		const char *p = one_in(4) ? any_string(path) : path;
		if (one_in(3)) {
			/* The default 10 s busy timeout would stall on the fuzzer's open
			 * edits: a handle from the public open is closed at once. */
			if (one_in(2)) {
				st = seen(leases_authority_open(p, one_in(10) ? NULL : &a), "authority_open");
			} else {
				const void *o = any_options(sizeof(leases_open_options), fill_open);
				st = seen(leases_authority_open_v2(p, o, one_in(10) ? NULL : &a), "authority_open_v2");
			}
			must_be_null(a, st, "authority_open");
			leases_authority_close(a);
			remember_stale(a);
			break;
		}
		st = seen(leases_testing_open(p, (int64_t)below(30000) - 10, one_in(10) ? NULL : &a), "testing_open");
		must_be_null(a, st, "testing_open");
		if (a) put((void **)auths, a, rel_auth);
		break;
	}
	case 1:
		if (one_in(4)) {
			unsigned i = below(POOL);
			leases_authority_close(auths[i]);
			remember_stale(auths[i]);
			auths[i] = NULL;
		} else {
			leases_authority_close(one_in(2) ? (leases_authority *)(uintptr_t)stale[below(64)] : NULL);
		}
		break;
	case 2: seen(leases_production_create(AUTH(), any_string("p")), "production_create"); break;
	case 3: {
		char *id = NULL;
		const char *payload = one_in(5) ? NULL : "payload";
		size_t len = payload ? (one_in(20) ? LEASES_MAX_PAYLOAD_LEN + 1 : 7) : (one_in(2) ? 0 : 5);
		if (payload && len > 7) {
			memset(big, 'x', len);
			payload = big;
		}
		st = seen(leases_job_request(AUTH(), any_string("p"), one_in(2) ? NULL : any_string("key"),
		                             (const uint8_t *)payload, len, one_in(10) ? NULL : &id),
		          "job_request");
		must_be_null(id, st, "job_request");
		if (id) keep(job_ids, id);
		break;
	}
	case 4:
	case 5: {
		leases_lease *l = NULL;
		st = seen(leases_claim(AUTH(), any_string("p"), any_string("w"), any_duration(), one_in(10) ? NULL : &l),
		          "claim");
		must_be_null(l, st, "claim");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 6: {
		leases_lease *l = NULL;
		st = seen(leases_claim_job(AUTH(), any_string("p"), any_string(job_ids[below(POOL)]), any_string("w"),
		                           any_duration(), one_in(10) ? NULL : &l),
		          "claim_job");
		must_be_null(l, st, "claim_job");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 7: seen(leases_cancel(AUTH(), any_string("p"), any_string(job_ids[below(POOL)])), "cancel"); break;
	case 8: seen(leases_lease_renew(LEASE(), any_duration()), "renew"); break;
	case 9: seen(leases_lease_release(LEASE()), "release"); break;
	case 10: seen(leases_lease_fail(LEASE(), any_string("reason")), "fail"); break;
	case 11: {
		if (one_in(2)) {
			seen(leases_lease_complete(LEASE(), any_facts()), "complete");
			break;
		}
		leases_lease *l = NULL;
		st = seen(leases_lease_complete_and_claim_next(LEASE(), any_facts(), any_duration(), one_in(10) ? NULL : &l),
		          "complete_and_claim_next");
		must_be_null(l, st, "complete_and_claim_next");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 12: {
		int64_t v = 42;
		st = seen(leases_lease_expiry(LEASE(), one_in(10) ? NULL : &v), "expiry");
		if (st != LEASES_OK && v != 0 && v != 42) FAIL("expiry failed but set %lld", (long long)v);
		break;
	}
	case 13:
	case 14: {
		char *out = NULL;
		const leases_lease *l = LEASE();
		char **o = one_in(10) ? NULL : &out;
		switch (below(4)) {
		case 0: st = seen(leases_lease_job_id(l, o), "job_id"); break;
		case 1: st = seen(leases_lease_production(l, o), "production"); break;
		case 2: st = seen(leases_lease_worker(l, o), "worker"); break;
		default: st = seen(leases_lease_export(l, o), "export"); break;
		}
		must_be_null(out, st, "lease string");
		if (out && strncmp(out, "lt1.", 4) == 0) keep(tokens, out);
		else if (out && strlen(out) == 36) keep(job_ids, out);
		else leases_free(out);
		break;
	}
	case 15: {
		uint8_t *p = NULL;
		size_t n = 7;
		st = seen(leases_lease_payload(LEASE(), one_in(10) ? NULL : &p, one_in(10) ? NULL : &n), "payload");
		must_be_null(p, st, "payload");
		if (p && p[n] != 0) FAIL("payload is not NUL-terminated");
		leases_free(p);
		break;
	}
	case 16: {
		leases_lease *l = NULL;
		st = seen(leases_lease_import(AUTH(), any_string(tokens[below(POOL)]), one_in(10) ? NULL : &l), "import");
		must_be_null(l, st, "import");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 17:
		if (one_in(2)) {
			unsigned i = below(POOL);
			leases_lease_free(leases[i]);
			remember_stale(leases[i]);
			leases[i] = NULL;
		} else {
			leases_lease_free(one_in(2) ? (leases_lease *)(uintptr_t)stale[below(64)] : NULL);
		}
		break;
	case 18: {
		leases_edit *e = NULL;
		st = seen(leases_edit_begin(AUTH(), one_in(10) ? NULL : &e), "edit_begin");
		must_be_null(e, st, "edit_begin");
		if (e) put((void **)edits, e, rel_edit);
		break;
	}
	case 19: {
		leases_lease *l = NULL;
		st = seen(leases_edit_claim(EDIT(), any_string("p"), any_string("w"), any_duration(), one_in(10) ? NULL : &l),
		          "edit_claim");
		must_be_null(l, st, "edit_claim");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 20: seen(leases_edit_complete(EDIT(), LEASE(), any_facts()), "edit_complete"); break;
	case 21: {
		unsigned i = below(POOL);
		leases_edit *e = one_in(5) ? EDIT() : edits[i];
		if (e == edits[i]) edits[i] = NULL;
		if (one_in(2)) seen(leases_edit_commit(e), "edit_commit");
		else leases_edit_abort(e);
		remember_stale(e);
		break;
	}
	case 22: {
		char *out = NULL;
		char **o = one_in(10) ? NULL : &out;
		if (one_in(2)) {
			observe_step(AUTH(), o); /* the paged observations */
			break;
		}
		if (one_in(2)) st = seen(leases_jobs_json(AUTH(), any_string("p"), o), "jobs_json");
		else st = seen(leases_events_json(AUTH(), one_in(3) ? NULL : any_string("p"),
		                                  one_in(4) ? -(int64_t)below(3) : (int64_t)below(50), o),
		               "events_json");
		must_be_null(out, st, "listing");
		leases_free(out);
		break;
	}
	case 23: {
		leases_execution *x = NULL;
		const char *d = one_in(4) ? any_string(dir) : dir;
		st = seen(leases_execution_begin(LEASE(), d, one_in(10) ? NULL : &x), "execution_begin");
		must_be_null(x, st, "execution_begin");
		if (x) put((void **)execs, x, rel_exec);
		break;
	}
	case 24: {
		const leases_execution *x = EXEC();
		const char *t = leases_execution_temp_path(x), *f = leases_execution_final_path(x);
		calls++;
		if ((t == NULL) != (f == NULL)) FAIL("execution paths: one NULL, one not");
		if (t && strlen(t) == 0) FAIL("empty temp path");
		break;
	}
	case 25: {
		unsigned i = below(POOL);
		leases_execution *x = one_in(4) ? EXEC() : execs[i];
		if (one_in(2)) {
			st = seen(leases_execution_finish(x, any_facts()), "execution_finish");
			if (st != LEASES_INVALID_ARGUMENT && x == execs[i]) {
				execs[i] = NULL;
				remember_stale(x);
			}
		} else {
			leases_execution_abandon(x);
			if (x == execs[i]) execs[i] = NULL;
			remember_stale(x);
		}
		break;
	}
	case 26: {
		const char *n = leases_status_name((leases_status)(one_in(2) ? (int)below(NSTATUS + 3) : (int)next()));
		calls++;
		if (n == NULL || leases_version() == NULL || leases_abi_version() != LEASES_ABI_VERSION)
			FAIL("library strings");
		leases_free(NULL);
		break;
	}
	case 27: {
		/* Clock faults in the mix: freeze, restore, or script a jump. */
		int64_t now = (int64_t)time(NULL) * 1000000;
		if (one_in(2)) {
			seen(leases_testing_set_clock(AUTH(), one_in(3) ? 0 : now + (int64_t)(next() % 7200000000u) - 3600000000), "set_clock");
		} else {
			int64_t s[3] = {now + (int64_t)below(60000000), now - (int64_t)below(60000000), now};
			seen(leases_testing_set_clock_sequence(AUTH(), one_in(8) ? NULL : s, below(4)), "set_clock_sequence");
		}
		break;
	}
	case 28:
		if (one_in(20)) {
			st = seen(leases_testing_panic(), "panic");
			if (st != LEASES_INTERNAL) FAIL("panic returned %s", leases_status_name(st));
		}
		break;
	case 29: {
		leases_canceller *c = NULL;
		st = seen(leases_canceller_new(one_in(10) ? NULL : &c), "canceller_new");
		must_be_null(c, st, "canceller_new");
		if (c) put((void **)cancellers, c, rel_canceller);
		break;
	}
	case 30:
		if (one_in(3)) {
			unsigned i = below(POOL);
			leases_canceller_free(cancellers[i]);
			remember_stale(cancellers[i]);
			cancellers[i] = NULL;
		} else {
			seen(leases_canceller_cancel((leases_canceller *)any_handle((void **)cancellers)), "canceller_cancel");
		}
		break;
	case 31: {
		leases_lease *l = NULL;
		st = seen(leases_claim_wait(AUTH(), any_string("p"), any_string("w"), any_duration(), any_wait(), CANCELLER(),
		                            one_in(10) ? NULL : &l),
		          "claim_wait");
		must_be_null(l, st, "claim_wait");
		if (l) put((void **)leases, l, rel_lease);
		break;
	}
	case 32:
		if (one_in(3)) seen(leases_lease_keep_alive_stop(LEASE()), "keep_alive_stop");
		else seen(leases_lease_keep_alive(LEASE(), any_duration(), any_interval()), "keep_alive");
		break;
	case 33:
	case 34: {
		leases_status why = 42;
		if (one_in(2))
			st = seen(leases_lease_check(LEASE(), one_in(10) ? NULL : &why), "lease_check");
		else
			st = seen(leases_lease_wait_lost(LEASE(), any_wait(), CANCELLER(), one_in(10) ? NULL : &why),
			          "lease_wait_lost");
		if (st != LEASES_OK && why != 0 && why != 42) FAIL("a failed check set its reason to %d", why);
		if (st == LEASES_OK && (why < 0 || why >= NSTATUS)) FAIL("an unknown reason %d", why);
		break;
	}
	case 35: {
		char *id = NULL;
		st = seen(leases_job_request_v2(AUTH(), any_string("p"), one_in(2) ? NULL : any_string("key"),
		                                (const uint8_t *)"payload", one_in(5) ? 0 : 7,
		                                any_options(sizeof(leases_request_options), fill_request),
		                                one_in(10) ? NULL : &id),
		          "job_request_v2");
		must_be_null(id, st, "job_request_v2");
		if (id) keep(job_ids, id);
		break;
	}
	case 36:
		seen(leases_production_create_v2(AUTH(), any_string("p"),
		                                 any_options(sizeof(leases_retry_policy), fill_policy)),
		     "production_create_v2");
		break;
	case 37:
		seen(leases_production_set_policy(AUTH(), any_string("p"),
		                                  any_options(sizeof(leases_retry_policy), fill_policy)),
		     "production_set_policy");
		break;
	case 38: seen(leases_lease_fail_retry(LEASE(), one_in(3) ? NULL : any_string("reason"), any_us()), "fail_retry"); break;
	case 39: seen(leases_job_retry(AUTH(), any_string("p"), any_string(job_ids[below(POOL)])), "job_retry"); break;
	case 40: {
		static const char *states[] = {"dead", "failed", "cancelled", "completed", NULL};
		int64_t n = 0;
		int64_t *o = one_in(10) ? NULL : &n;
		st = seen(leases_production_redrive(AUTH(), any_string("p"), one_in(3) ? any_string("dead") : states[below(5)], o),
		          "production_redrive");
		if (st != LEASES_OK && n != 0) FAIL("production_redrive failed (%s) but set its count", leases_status_name(st));
		break;
	}
	default: {
		/* Keep work available: a valid request on a live authority. */
		leases_authority *a = auths[below(POOL)];
		char *id = NULL;
		seen(leases_production_create(a, "p"), "production_create");
		if (seen(leases_job_request(a, "p", NULL, (const uint8_t *)"x", 1, &id), "job_request") == LEASES_OK)
			keep(job_ids, id);
		break;
	}
	}
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: abi_fuzz DIR SEED CALLS\n");
		return 2;
	}
	snprintf(dir, sizeof dir, "%s", argv[1]);
	/* Relative paths the fuzzer makes up land in DIR, nowhere else. */
	if (chdir(dir) != 0) {
		perror(dir);
		return 2;
	}
	unsigned long long seed = strtoull(argv[2], NULL, 10);
	unsigned long long want = strtoull(argv[3], NULL, 10);
	rng = seed * 0x9E3779B97F4A7C15ULL + 1;
	for (int i = 0; i < 3; i++) {
		char path[700];
		snprintf(path, sizeof path, "%s/fuzz%d.db", dir, i);
		if (leases_testing_open(path, 20000, &auths[i]) != LEASES_OK) {
			fprintf(stderr, "open: %s\n", leases_last_error());
			return 2;
		}
	}
	while (calls < want) step();
	for (int i = 0; i < POOL; i++) {
		leases_execution_abandon(execs[i]);
		leases_edit_abort(edits[i]);
		leases_lease_free(leases[i]);
		leases_canceller_free(cancellers[i]);
		leases_free(job_ids[i]);
		leases_free(tokens[i]);
		free(cursors[i]);
	}
	for (int i = 0; i < POOL; i++) leases_authority_close(auths[i]);
	printf("abi fuzz: seed %llu, %llu calls, %llu failed;", seed, calls, failures);
	for (int i = 0; i < NSTATUS; i++)
		if (by_status[i]) printf(" %s=%llu", leases_status_name(i), by_status[i]);
	printf("\n");
	const char *fig = getenv("LEASES_REL_FIGURES");
	if (fig && *fig) {
		FILE *f = fopen(fig, "a");
		if (f) {
			fprintf(f, "{\"test\":\"abi_fuzz\",\"figures\":{\"seed\":%llu,\"calls\":%llu,\"crashes\":0,\"failures\":%llu}}\n",
			        seed, calls, failures);
			fclose(f);
		}
	}
	return failures ? 1 : 0;
}
