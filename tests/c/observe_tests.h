/* observe_tests.h: the tests of the paged observations (include/leases.h,
 * "observations, paged"), shared by the SQLite suite (test_capi.c) and the
 * PostgreSQL suite (test_capi_pg.c): every behaviour on both stores. The
 * including file defines fresh(tag, loc, cap) (a new authority with
 * production "p") and scratch_dir() (a directory for output files). */
#ifndef LEASES_OBSERVE_TESTS_H
#define LEASES_OBSERVE_TESTS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "json.h"
#include "leases.h"
#include "vectors.h"

static leases_authority *fresh(const char *tag, char *loc, size_t cap);
static const char *scratch_dir(void);

#define OBS_SEC INT64_C(1000000)

/* Parses (and frees) the library's JSON; NULL, with a failed check, when
 * it is not one JSON document. */
static json_value *obs_parse(char *json) {
	json_value *v = json_parse(json);
	if (json && !v) fprintf(stderr, "    not JSON: %.300s\n", json);
	CHECK(v != NULL);
	leases_free(json);
	return v;
}

typedef struct {
	char ids[64][37];
	int n, pages, repeats;
} obs_ids;

static void obs_add_id(obs_ids *got, const char *id) {
	if (id == NULL || strlen(id) != 36 || got->n >= 64) {
		CHECK(!"a listed job has no id of 36 characters, or too many jobs");
		return;
	}
	for (int i = 0; i < got->n; i++)
		if (strcmp(got->ids[i], id) == 0) got->repeats++;
	snprintf(got->ids[got->n++], sizeof got->ids[0], "%s", id);
}

/* Lists a production's jobs page by page (limit per page), following
 * "next" until it is null, calling between(a, page) after each page. */
static void obs_list_jobs(leases_authority *a, const char *production, const char *states, uint32_t limit,
                          obs_ids *got, void (*between)(leases_authority *, int)) {
	memset(got, 0, sizeof *got);
	char cursor[LEASES_MAX_CURSOR_LEN + 1] = "";
	for (;;) {
		char *json = NULL;
		CHECK_OK(leases_jobs_page_json(a, production, states, NULL, NULL, cursor, limit, &json));
		json_value *page = obs_parse(json);
		json_value *jobs = json_get(page, "jobs"), *next = json_get(page, "next");
		CHECK(jobs && jobs->type == JSON_ARRAY && next != NULL);
		if (!jobs || jobs->type != JSON_ARRAY || !next || got->pages > 64) {
			json_free(page);
			return;
		}
		got->pages++;
		CHECK(jobs->n <= (limit ? limit : LEASES_DEFAULT_PAGE_SIZE));
		for (size_t i = 0; i < jobs->n; i++) obs_add_id(got, json_get_str(jobs->items[i], "id"));
		if (between) between(a, got->pages);
		if (next->type == JSON_NULL) {
			json_free(page);
			return;
		}
		CHECK(next->type == JSON_STRING && next->len > 0 && next->len <= LEASES_MAX_CURSOR_LEN);
		CHECK(jobs->n == (limit ? limit : LEASES_DEFAULT_PAGE_SIZE)); /* a page is full except the last */
		snprintf(cursor, sizeof cursor, "%s", next->type == JSON_STRING ? next->text : "");
		json_free(page);
	}
}

/* Requests n jobs keyed k0, k1, ... on production "p"; ids into ids. */
static void obs_request(leases_authority *a, int n, char ids[][37]) {
	for (int i = 0; i < n; i++) {
		char key[16];
		snprintf(key, sizeof key, "k%d", i);
		char *id = request(a, key);
		snprintf(ids[i], 37, "%s", id ? id : "");
		leases_free(id);
	}
}

/* Moves requested job id of "p" to state to: "claimed" (a minute's claim
 * by "w"), "completed", "failed" or "cancelled". */
static void obs_move(leases_authority *a, const char *id, const char *to) {
	if (strcmp(to, "cancelled") == 0) {
		CHECK_OK(leases_cancel(a, "p", id));
		return;
	}
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", id, "w", 60 * OBS_SEC, &l));
	if (strcmp(to, "completed") == 0) CHECK_OK(leases_lease_complete(l, NULL));
	if (strcmp(to, "failed") == 0) CHECK_OK(leases_lease_fail(l, "no"));
	leases_lease_free(l);
}

static void test_job_pages_list_every_job_once_in_request_order(void) {
	leases_authority *a = fresh("pages", NULL, 0);
	char ids[25][37];
	obs_request(a, 25, ids);
	obs_ids got;
	obs_list_jobs(a, "p", NULL, 7, &got, NULL);
	CHECK(got.pages == 4 && got.n == 25 && got.repeats == 0); /* 7 + 7 + 7 + 4 */
	for (int i = 0; i < 25 && i < got.n; i++) CHECK(strcmp(got.ids[i], ids[i]) == 0);
	/* limit 0 is LEASES_DEFAULT_PAGE_SIZE; a listing that ends on a page
	 * boundary has no empty page after it. */
	obs_list_jobs(a, "p", "", 0, &got, NULL);
	CHECK(got.pages == 1 && got.n == 25);
	obs_list_jobs(a, "p", NULL, 5, &got, NULL);
	CHECK(got.pages == 5 && got.n == 25);
	obs_list_jobs(a, "p", NULL, LEASES_MAX_PAGE_SIZE, &got, NULL);
	CHECK(got.pages == 1 && got.n == 25);
	/* The objects are those of leases_jobs_json. */
	char *old = NULL, *json = NULL;
	CHECK_OK(leases_jobs_json(a, "p", &old));
	CHECK_OK(leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, 0, &json));
	json_value *all = obs_parse(old), *page = obs_parse(json);
	char *c1 = json_canon(all), *c2 = json_canon(json_get(page, "jobs"));
	CHECK(c1 && c2 && strcmp(c1, c2) == 0);
	free(c1);
	free(c2);
	json_free(all);
	json_free(page);
	leases_authority_close(a);
}

static void test_job_pages_filter_by_states_key_and_id(void) {
	leases_authority *a = fresh("filters", NULL, 0);
	char ids[6][37];
	obs_request(a, 6, ids);
	obs_move(a, ids[1], "completed");
	obs_move(a, ids[3], "claimed");
	obs_move(a, ids[5], "cancelled");
	obs_ids got;
	obs_list_jobs(a, "p", "claimed", 1, &got, NULL);
	CHECK(got.n == 1 && strcmp(got.ids[0], ids[3]) == 0);
	obs_list_jobs(a, "p", "requested,claimed", 2, &got, NULL); /* any of, in request order */
	CHECK(got.n == 4 && got.repeats == 0);
	CHECK(got.n == 4 && strcmp(got.ids[0], ids[0]) == 0 && strcmp(got.ids[1], ids[2]) == 0 &&
	      strcmp(got.ids[2], ids[3]) == 0 && strcmp(got.ids[3], ids[4]) == 0);
	obs_list_jobs(a, "p", "completed,cancelled,completed", 10, &got, NULL); /* repeats are ignored */
	CHECK(got.n == 2 && strcmp(got.ids[0], ids[1]) == 0 && strcmp(got.ids[1], ids[5]) == 0);
	obs_list_jobs(a, "p", "failed", 10, &got, NULL);
	CHECK(got.n == 0 && got.pages == 1);
	obs_list_jobs(a, "p", "requested,claimed,completed,failed,cancelled", 10, &got, NULL);
	CHECK(got.n == 6);

	char *json = NULL;
	CHECK_OK(leases_jobs_page_json(a, "p", NULL, "k4", NULL, NULL, 0, &json));
	json_value *page = obs_parse(json);
	json_value *jobs = json_get(page, "jobs");
	CHECK(jobs && jobs->n == 1 && strcmp(json_get_str(jobs->items[0], "id"), ids[4]) == 0);
	CHECK(jobs && jobs->n == 1 && strcmp(json_get_str(jobs->items[0], "key"), "k4") == 0);
	json_free(page);
	CHECK_OK(leases_jobs_page_json(a, "p", "completed", NULL, ids[1], "", 0, &json));
	page = obs_parse(json);
	jobs = json_get(page, "jobs");
	CHECK(jobs && jobs->n == 1 && strcmp(json_get_str(jobs->items[0], "state"), "completed") == 0);
	json_free(page);
	CHECK_OK(leases_jobs_page_json(a, "p", "requested", NULL, ids[1], NULL, 0, &json)); /* both must hold */
	page = obs_parse(json);
	CHECK(json_get(page, "jobs") && json_get(page, "jobs")->n == 0);
	CHECK(json_get(page, "next") && json_get(page, "next")->type == JSON_NULL);
	json_free(page);
	CHECK_OK(leases_jobs_page_json(a, "p", NULL, "no such key", NULL, NULL, 0, &json));
	page = obs_parse(json);
	CHECK(json_get(page, "jobs") && json_get(page, "jobs")->n == 0);
	json_free(page);
	leases_authority_close(a);
}

/* Between pages: claim, complete, release and cancel jobs on both sides of
 * the cursor; the listing still shows every job exactly once. */
static char obs_changing_ids[12][37];

static void obs_change_jobs(leases_authority *a, int page) {
	leases_lease *l = NULL;
	if (page == 1) {
		obs_move(a, obs_changing_ids[1], "completed"); /* listed already */
		CHECK_OK(leases_claim_job(a, "p", obs_changing_ids[9], "w", 60 * OBS_SEC, &l)); /* not yet */
		CHECK_OK(leases_lease_release(l));
		leases_lease_free(l);
		obs_move(a, obs_changing_ids[10], "cancelled");
	} else if (page == 2) {
		CHECK_OK(leases_claim(a, "p", "w", 60 * OBS_SEC, &l)); /* the first requested: ids[0] */
		CHECK_OK(leases_lease_fail(l, "gone"));
		leases_lease_free(l);
	}
}

static void test_job_paging_lists_each_job_once_while_states_change(void) {
	leases_authority *a = fresh("changing", NULL, 0);
	obs_request(a, 12, obs_changing_ids);
	obs_ids got;
	obs_list_jobs(a, "p", NULL, 4, &got, obs_change_jobs);
	CHECK(got.n == 12 && got.repeats == 0 && got.pages == 3);
	for (int i = 0; i < 12 && i < got.n; i++) CHECK(strcmp(got.ids[i], obs_changing_ids[i]) == 0);
	leases_authority_close(a);
}

/* The whole observable store, to show that a rejected call changed nothing. */
static char *obs_snapshot(leases_authority *a) {
	char *jobs = NULL, *events = NULL;
	CHECK_OK(leases_jobs_json(a, "p", &jobs));
	CHECK_OK(leases_events_json(a, NULL, 0, &events));
	size_t n = (jobs ? strlen(jobs) : 0) + (events ? strlen(events) : 0) + 2;
	char *s = malloc(n);
	if (s) snprintf(s, n, "%s|%s", jobs ? jobs : "", events ? events : "");
	leases_free(jobs);
	leases_free(events);
	return s;
}

/* A call that must be refused with want, leaving *out NULL. */
#define OBS_REFUSED(want, call_with_out)   \
	do {                                   \
		char *out_ = (char *)"untouched";  \
		CHECK_ST(call_with_out, want);     \
		CHECK(out_ == NULL);               \
	} while (0)

static void test_bad_page_arguments_are_invalid_and_change_nothing(void) {
	leases_authority *a = fresh("badpages", NULL, 0);
	CHECK_OK(leases_production_create(a, "q"));
	char ids[3][37];
	obs_request(a, 3, ids);
	char *q1 = NULL, *q2 = NULL;
	CHECK_OK(leases_job_request(a, "q", NULL, NULL, 0, &q1));
	CHECK_OK(leases_job_request(a, "q", NULL, NULL, 0, &q2));
	char *json = NULL;
	/* Cursors of another production's jobs and of the productions. */
	CHECK_OK(leases_jobs_page_json(a, "q", NULL, NULL, NULL, NULL, 1, &json));
	json_value *page = obs_parse(json);
	char q_cursor[LEASES_MAX_CURSOR_LEN + 1] = "";
	snprintf(q_cursor, sizeof q_cursor, "%s", json_get_str(page, "next") ? json_get_str(page, "next") : "");
	json_free(page);
	CHECK(q_cursor[0] != '\0');
	CHECK_OK(leases_productions_page_json(a, NULL, 1, &json));
	page = obs_parse(json);
	char prod_cursor[LEASES_MAX_CURSOR_LEN + 1] = "";
	snprintf(prod_cursor, sizeof prod_cursor, "%s", json_get_str(page, "next") ? json_get_str(page, "next") : "");
	json_free(page);
	CHECK(prod_cursor[0] != '\0');
	char long_cursor[LEASES_MAX_CURSOR_LEN + 2];
	memset(long_cursor, 'A', sizeof long_cursor - 1);
	long_cursor[sizeof long_cursor - 1] = '\0';
	char long_list[LEASES_MAX_NAME_LEN + 2];
	memset(long_list, 'r', sizeof long_list - 1);
	long_list[sizeof long_list - 1] = '\0';

	char *before = obs_snapshot(a);
	const leases_status IA = LEASES_INVALID_ARGUMENT;
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, LEASES_MAX_PAGE_SIZE + 1, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, UINT32_MAX, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", "running", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", "CLAIMED", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", "requested,,claimed", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", "requested, claimed", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", "requested,", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", long_list, NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, "\xff", NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, "NOT-AN-ID", NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, "not a cursor!", 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, q_cursor, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, prod_cursor, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, long_cursor, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, NULL, NULL, NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(a, "", NULL, NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_jobs_page_json(NULL, "p", NULL, NULL, NULL, NULL, 0, &out_));
	CHECK_ST(leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, 0, NULL), IA);
	/* Bad input is reported before an unknown production. */
	OBS_REFUSED(IA, leases_jobs_page_json(a, "nope", "running", NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(LEASES_NOT_FOUND, leases_jobs_page_json(a, "nope", NULL, NULL, NULL, NULL, 0, &out_));

	OBS_REFUSED(IA, leases_events_page_json(a, "p", NULL, NULL, -1, 0, &out_));
	OBS_REFUSED(IA, leases_events_page_json(a, "p", NULL, NULL, 0, LEASES_MAX_PAGE_SIZE + 1, &out_));
	OBS_REFUSED(IA, leases_events_page_json(a, "p", NULL, "exploded", 0, 0, &out_));
	OBS_REFUSED(IA, leases_events_page_json(a, NULL, NULL, "claimed", 0, 0, &out_)); /* needs a production or job */
	OBS_REFUSED(IA, leases_events_page_json(a, "p", "not-an-id", NULL, 0, 0, &out_));
	OBS_REFUSED(IA, leases_events_page_json(NULL, "p", NULL, NULL, 0, 0, &out_));
	CHECK_ST(leases_events_page_json(a, "p", NULL, NULL, 0, 0, NULL), IA);
	OBS_REFUSED(LEASES_NOT_FOUND, leases_events_page_json(a, "nope", NULL, NULL, 0, 0, &out_));
	OBS_REFUSED(LEASES_NOT_FOUND, leases_events_page_json(a, "p", q1, NULL, 0, 0, &out_)); /* q's job */

	OBS_REFUSED(IA, leases_job_json(a, "p", NULL, &out_));
	OBS_REFUSED(IA, leases_job_json(a, "p", "0000", &out_));
	OBS_REFUSED(IA, leases_job_json(a, NULL, ids[0], &out_));
	OBS_REFUSED(IA, leases_job_json(NULL, "p", ids[0], &out_));
	CHECK_ST(leases_job_json(a, "p", ids[0], NULL), IA);
	OBS_REFUSED(LEASES_NOT_FOUND, leases_job_json(a, "p", q1, &out_)); /* another production's job */
	OBS_REFUSED(LEASES_NOT_FOUND, leases_job_json(a, "nope", ids[0], &out_));

	OBS_REFUSED(IA, leases_productions_page_json(a, q_cursor, 0, &out_));
	OBS_REFUSED(IA, leases_productions_page_json(a, long_cursor, 0, &out_));
	OBS_REFUSED(IA, leases_productions_page_json(a, NULL, LEASES_MAX_PAGE_SIZE + 1, &out_));
	OBS_REFUSED(IA, leases_productions_page_json(NULL, NULL, 0, &out_));
	CHECK_ST(leases_productions_page_json(a, NULL, 0, NULL), IA);

	OBS_REFUSED(IA, leases_job_counts_json(a, NULL, &out_));
	OBS_REFUSED(IA, leases_job_counts_json(NULL, "p", &out_));
	CHECK_ST(leases_job_counts_json(a, "p", NULL), IA);
	OBS_REFUSED(LEASES_NOT_FOUND, leases_job_counts_json(a, "nope", &out_));

	char *after = obs_snapshot(a);
	CHECK(before && after && strcmp(before, after) == 0);
	/* The other production's cursor still works on its own listing. */
	CHECK_OK(leases_jobs_page_json(a, "q", NULL, NULL, NULL, q_cursor, 0, &json));
	page = obs_parse(json);
	CHECK(json_get(page, "jobs") && json_get(page, "jobs")->n == 1);
	CHECK(strcmp(json_get_str(json_get(page, "jobs")->items[0], "id"), q2) == 0);
	json_free(page);
	free(before);
	free(after);
	leases_free(q1);
	leases_free(q2);
	leases_authority_close(a);
	/* A closed (released) handle is refused as every handle is. */
	OBS_REFUSED(IA, leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, 0, &out_));
	OBS_REFUSED(IA, leases_job_counts_json(a, "p", &out_));
}

/* Follows the events of a query from after_seq, page by page; returns how
 * many were listed and the last "next". */
static int obs_follow_events(leases_authority *a, const char *production, const char *job, const char *kinds,
                             int64_t *after, uint32_t limit, char kinds_seen[][24], int cap) {
	int n = 0;
	for (int pages = 0; pages < 100; pages++) {
		char *json = NULL;
		CHECK_OK(leases_events_page_json(a, production, job, kinds, *after, limit, &json));
		json_value *page = obs_parse(json);
		json_value *events = json_get(page, "events"), *more = json_get(page, "more");
		if (!events || events->type != JSON_ARRAY || !more || more->type != JSON_BOOL) {
			CHECK(!"an events page lacks events or more");
			json_free(page);
			return n;
		}
		CHECK(events->n <= (limit ? limit : LEASES_DEFAULT_PAGE_SIZE));
		int64_t last = *after;
		for (size_t i = 0; i < events->n; i++) {
			int64_t seq = json_get_int(events->items[i], "seq", -1);
			CHECK(seq > last); /* oldest first, strictly after the cursor */
			last = seq;
			if (n < cap) snprintf(kinds_seen[n], 24, "%s", json_get_str(events->items[i], "kind"));
			n++;
		}
		CHECK(json_get_int(page, "next", -1) == last); /* the last listed, or after_seq */
		*after = last;
		int again = more->boolean;
		json_free(page);
		if (!again) return n;
	}
	CHECK(!"more than 100 pages of events");
	return n;
}

static void test_event_pages_follow_next_and_more_by_production_job_and_kind(void) {
	leases_authority *a = fresh("eventpages", NULL, 0);
	char ids[4][37];
	obs_request(a, 4, ids);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", ids[2], "w", 60 * OBS_SEC, &l));
	CHECK_OK(leases_lease_renew(l, 120 * OBS_SEC));
	CHECK_OK(leases_lease_complete(l, NULL));
	leases_lease_free(l);
	CHECK_OK(leases_production_create(a, "other"));
	char *other = NULL;
	CHECK_OK(leases_job_request(a, "other", NULL, NULL, 0, &other));

	/* Every event of p, 3 at a time, is what the unpaged listing holds. */
	char *all = NULL;
	CHECK_OK(leases_events_json(a, "p", 0, &all));
	json_value *whole = obs_parse(all);
	size_t total = whole && whole->type == JSON_ARRAY ? whole->n : 0;
	json_free(whole);
	char kinds[64][24];
	int64_t after = 0;
	int n = obs_follow_events(a, "p", NULL, NULL, &after, 3, kinds, 64);
	CHECK(total >= 8 && (size_t)n == total); /* created, 4 requested, claimed, renewed, completed */
	/* Caught up: an empty page keeps the cursor and says "not yet". */
	int64_t later = after;
	CHECK(obs_follow_events(a, "p", NULL, NULL, &later, 3, kinds, 64) == 0 && later == after);
	/* A new event is listed from there. */
	CHECK_OK(leases_cancel(a, "p", ids[3]));
	CHECK(obs_follow_events(a, "p", NULL, NULL, &later, 3, kinds, 64) == 1 && later > after);
	CHECK(strcmp(kinds[0], "cancelled") == 0);

	/* One job's timeline. */
	after = 0;
	n = obs_follow_events(a, NULL, ids[2], NULL, &after, 2, kinds, 64);
	CHECK(n == 4 && strcmp(kinds[0], "requested") == 0 && strcmp(kinds[1], "claimed") == 0 &&
	      strcmp(kinds[2], "renewed") == 0 && strcmp(kinds[3], "completed") == 0);
	/* Kinds, with a production. */
	after = 0;
	n = obs_follow_events(a, "p", NULL, "claimed,completed", &after, 1, kinds, 64);
	CHECK(n == 2 && strcmp(kinds[0], "claimed") == 0 && strcmp(kinds[1], "completed") == 0);
	after = 0;
	n = obs_follow_events(a, "p", NULL, "requested", &after, 0, kinds, 64);
	CHECK(n == 4);
	/* Every production: other's events too. */
	after = 0;
	int everything = obs_follow_events(a, NULL, NULL, NULL, &after, 0, kinds, 64);
	CHECK((size_t)everything == total + 1 + 2); /* p's cancel, other's creation and request */
	leases_free(other);
	leases_authority_close(a);
}

static void test_productions_are_paged_in_byte_order_of_names(void) {
	leases_authority *a = fresh("prodpages", NULL, 0);
	const char *names[] = {"b", "a", "\xc3\xa9t\xc3\xa9", "B", "p2"}; /* and "p" */
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK_OK(leases_production_create(a, names[i]));
	const char *want[] = {"B", "a", "b", "p", "p2", "\xc3\xa9t\xc3\xa9"};
	char cursor[LEASES_MAX_CURSOR_LEN + 1] = "";
	int seen = 0, pages = 0;
	for (;;) {
		char *json = NULL;
		CHECK_OK(leases_productions_page_json(a, cursor, 4, &json));
		json_value *page = obs_parse(json);
		json_value *ps = json_get(page, "productions"), *next = json_get(page, "next");
		if (!ps || ps->type != JSON_ARRAY || !next || ++pages > 3) {
			CHECK(!"a productions page lacks productions or next");
			json_free(page);
			break;
		}
		for (size_t i = 0; i < ps->n; i++, seen++) {
			const char *name = json_get_str(ps->items[i], "name");
			CHECK(seen < 6 && name && strcmp(name, want[seen]) == 0);
			CHECK(json_get_str(ps->items[i], "id") && strlen(json_get_str(ps->items[i], "id")) == 36);
			CHECK(json_get_int(ps->items[i], "created_at_unix_us", 0) > 0);
		}
		int last = next->type == JSON_NULL;
		snprintf(cursor, sizeof cursor, "%s", next->type == JSON_STRING ? next->text : "");
		json_free(page);
		if (last) break;
	}
	CHECK(seen == 6 && pages == 2);
	leases_authority_close(a);
}

static void test_job_counts_count_each_state_from_one_moment(void) {
	leases_authority *a = fresh("counts", NULL, 0);
	char *json = NULL;
	CHECK_OK(leases_job_counts_json(a, "p", &json));
	json_value *c = obs_parse(json);
	CHECK(json_get_int(c, "requested", -1) == 0 && json_get_int(c, "claimed", -1) == 0);
	CHECK(json_get(c, "oldest_requested_unix_us") && json_get(c, "oldest_requested_unix_us")->type == JSON_NULL);
	CHECK(json_get_int(c, "at_unix_us", 0) > 0);
	json_free(c);
	char ids[7][37];
	obs_request(a, 7, ids);
	obs_move(a, ids[0], "completed");
	obs_move(a, ids[1], "failed");
	obs_move(a, ids[2], "claimed");
	obs_move(a, ids[3], "cancelled");
	CHECK_OK(leases_job_counts_json(a, "p", &json));
	c = obs_parse(json);
	CHECK(json_get_int(c, "requested", -1) == 3 && json_get_int(c, "claimed", -1) == 1 &&
	      json_get_int(c, "completed", -1) == 1 && json_get_int(c, "failed", -1) == 1 &&
	      json_get_int(c, "cancelled", -1) == 1 && json_get_int(c, "expired", -1) == 0);
	int64_t oldest = json_get_int(c, "oldest_requested_unix_us", 0), at = json_get_int(c, "at_unix_us", 0);
	CHECK(oldest > 0 && oldest <= at);
	json_free(c);
	/* The oldest waiting job is the first requested one still requested (ids[4]). */
	CHECK_OK(leases_job_json(a, "p", ids[4], &json));
	json_value *rec = obs_parse(json);
	CHECK(json_get_int(rec, "requested_at_unix_us", -1) == oldest);
	json_free(rec);
	leases_authority_close(a);
}

static void test_job_record_has_sizes_times_and_facts_never_a_secret(void) {
	leases_authority *a = fresh("record", NULL, 0);
	char *id = request(a, "rec"); /* payload "payload": 7 bytes */
	char *json = NULL;
	CHECK_OK(leases_job_json(a, "p", id, &json));
	json_value *rec = obs_parse(json);
	CHECK(rec && rec->type == JSON_OBJECT);
	CHECK(strcmp(json_get_str(rec, "id"), id) == 0 && strcmp(json_get_str(rec, "production"), "p") == 0);
	CHECK(strcmp(json_get_str(rec, "state"), "requested") == 0 && strcmp(json_get_str(rec, "key"), "rec") == 0);
	CHECK(json_get_int(rec, "payload_size", -1) == 7);
	int64_t requested = json_get_int(rec, "requested_at_unix_us", 0);
	CHECK(requested > 0 && json_get_int(rec, "updated_at_unix_us", 0) >= requested);
	char *facts = json_canon(json_get(rec, "facts"));
	CHECK(facts && strcmp(facts, "{}") == 0); /* nothing published before a completion */
	free(facts);
	json_free(rec);

	leases_lease *l = NULL;
	char *token = NULL;
	CHECK_OK(leases_claim(a, "p", "worker-1", 60 * OBS_SEC, &l));
	CHECK_OK(leases_lease_export(l, &token));
	CHECK_OK(leases_job_json(a, "p", id, &json));
	CHECK(json && token && strstr(json, token + 4) == NULL); /* a claim shows by worker and expiry */
	rec = obs_parse(json);
	CHECK(strcmp(json_get_str(rec, "worker"), "worker-1") == 0 && json_get_int(rec, "expiry_unix_us", 0) > 0);
	CHECK(json_get_int(rec, "attempts", 0) == 1);
	json_free(rec);
	CHECK_OK(leases_lease_complete(l, "{\"metadata\":{\"frames\":3},\"provenance\":{\"tool\":\"r\"}}"));
	CHECK_OK(leases_job_json(a, "p", id, &json));
	CHECK(json && strstr(json, token + 4) == NULL);
	rec = obs_parse(json);
	facts = json_canon(json_get(rec, "facts"));
	CHECK(facts && strcmp(facts, "{\"metadata\":{\"frames\":3},\"provenance\":{\"tool\":\"r\"}}") == 0);
	CHECK(json_get_int(rec, "updated_at_unix_us", 0) >= requested);
	free(facts);
	json_free(rec);
	leases_free(token);
	leases_lease_free(l);
	leases_free(id);
	leases_authority_close(a);
}

/* The shared facts vector (tests/vectors/facts.json): published through an
 * execution, read back identically by leases_job_json. */
static void test_facts_vector_publishes_and_reads_back_identically(void) {
	leases_authority *a = fresh("factsvector", NULL, 0);
	CHECK_OK(leases_production_create(a, FACTS_VECTOR_PRODUCTION));
	char *id = NULL;
	CHECK_OK(leases_job_request(a, FACTS_VECTOR_PRODUCTION, NULL, NULL, 0, &id));
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/%s", scratch_dir(), FACTS_VECTOR_OUTPUT_DIR);
	CHECK(mkdir(dir, 0700) == 0);
	leases_lease *l = NULL;
	leases_execution *x = NULL;
	CHECK_OK(leases_claim(a, FACTS_VECTOR_PRODUCTION, "w", 60 * OBS_SEC, &l));
	CHECK_OK(leases_execution_begin(l, dir, &x));
	char final_path[2048] = "";
	if (x) snprintf(final_path, sizeof final_path, "%s", leases_execution_final_path(x));
	FILE *f = x ? fopen(leases_execution_temp_path(x), "wb") : NULL;
	CHECK(f != NULL);
	if (f) {
		CHECK(fwrite(FACTS_VECTOR_OUTPUT_CONTENT, 1, FACTS_VECTOR_OUTPUT_CONTENT_LEN, f) ==
		      FACTS_VECTOR_OUTPUT_CONTENT_LEN);
		fclose(f);
	}
	CHECK_OK(leases_execution_finish(x, FACTS_VECTOR_JSON));

	char *json = NULL;
	CHECK_OK(leases_job_json(a, FACTS_VECTOR_PRODUCTION, id, &json));
	json_value *rec = obs_parse(json), *published = json_parse(FACTS_VECTOR_JSON);
	CHECK(published != NULL);
	json_value *facts = json_get(rec, "facts");
	for (int i = 0; i < 2; i++) {
		const char *member = i ? "provenance" : "metadata";
		char *want = json_canon(json_get(published, member)), *got = json_canon(json_get(facts, member));
		if (!want || !got || strcmp(want, got) != 0)
			fprintf(stderr, "    %s\n      want %s\n      got  %s\n", member, want ? want : "(none)", got ? got : "(none)");
		CHECK(want && got && strcmp(want, got) == 0);
		free(want);
		free(got);
	}
	json_value *outputs = json_get(facts, "outputs");
	CHECK(outputs && outputs->type == JSON_ARRAY && outputs->n == 1);
	if (outputs && outputs->type == JSON_ARRAY && outputs->n == 1) {
		json_value *o = outputs->items[0];
		const char *path = json_get_str(o, "path"), *nonce = json_get_str(o, "nonce");
		CHECK(json_get_int(o, "size", -1) == FACTS_VECTOR_OUTPUT_SIZE);
		CHECK(json_get_str(o, "sha256") && strcmp(json_get_str(o, "sha256"), FACTS_VECTOR_OUTPUT_SHA256) == 0);
		CHECK(path && strcmp(path, final_path) == 0);
		/* The directory's absolute path, '/', the job id, '.', the nonce, '.out'. */
		char want_path[2048];
		snprintf(want_path, sizeof want_path, "%s/%s.%s.out", dir, id, nonce ? nonce : "?");
		CHECK(nonce && strlen(nonce) == 36 && path && strcmp(path, want_path) == 0);
	}
	json_free(published);
	json_free(rec);
	remove(final_path);
	rmdir(dir);
	leases_lease_free(l);
	leases_free(id);
	leases_authority_close(a);
}

/* A page with facts (leases_jobs_page_facts_json) is the page of
 * leases_jobs_page_json plus, for each completed job on it, the "facts"
 * object of its leases_job_json; no entry for the other jobs. */
static void test_a_page_of_jobs_with_facts_carries_each_completed_jobs_facts_in_one_call(void) {
	leases_authority *a = fresh("pagefacts", NULL, 0);
	char ids[4][37];
	obs_request(a, 4, ids);
	leases_lease *l = NULL;
	CHECK_OK(leases_claim_job(a, "p", ids[0], "w", 60 * OBS_SEC, &l));
	CHECK_OK(leases_lease_complete(l, "{\"metadata\":{\"frames\":24,\"tags\":[\"hd\",true,null]},"
	                                  "\"provenance\":{\"tool\":{\"name\":\"render\",\"v\":2.5}}}"));
	leases_lease_free(l);
	obs_move(a, ids[1], "completed"); /* publishing nothing */
	obs_move(a, ids[2], "claimed");

	char *plain = NULL, *with = NULL;
	CHECK_OK(leases_jobs_page_json(a, "p", NULL, NULL, NULL, NULL, 0, &plain));
	CHECK_OK(leases_jobs_page_facts_json(a, "p", NULL, NULL, NULL, NULL, 0, &with));
	json_value *pp = obs_parse(plain), *pw = obs_parse(with);
	char *c1 = json_canon(json_get(pp, "jobs")), *c2 = json_canon(json_get(pw, "jobs"));
	CHECK(c1 && c2 && strcmp(c1, c2) == 0);
	free(c1);
	free(c2);
	CHECK(json_get(pp, "facts") == NULL);
	const json_value *facts = json_get(pw, "facts");
	CHECK(facts != NULL);
	for (int i = 0; i < 2 && facts; i++) {
		char *rec = NULL;
		CHECK_OK(leases_job_json(a, "p", ids[i], &rec));
		json_value *r = obs_parse(rec);
		char *want = json_canon(json_get(r, "facts")), *got = json_canon(json_get(facts, ids[i]));
		CHECK(want && got && strcmp(want, got) == 0);
		free(want);
		free(got);
		json_free(r); /* obs_parse freed rec */
	}
	CHECK(facts && json_get(facts, ids[2]) == NULL && json_get(facts, ids[3]) == NULL);
	/* Paged as leases_jobs_page_json, with the facts of the page's own jobs. */
	char *second = NULL;
	CHECK_OK(leases_jobs_page_facts_json(a, "p", NULL, NULL, NULL, NULL, 1, &second));
	json_value *ps = obs_parse(second);
	CHECK(json_get(json_get(ps, "facts"), ids[0]) != NULL && json_get(json_get(ps, "facts"), ids[1]) == NULL);
	CHECK_ST(leases_jobs_page_facts_json(a, NULL, NULL, NULL, NULL, NULL, 0, &second), LEASES_INVALID_ARGUMENT);
	json_free(ps);
	json_free(pp);
	json_free(pw);
	leases_authority_close(a);
}

#define RUN_OBSERVE_TESTS()                                                    \
	do {                                                                       \
		RUN(test_job_pages_list_every_job_once_in_request_order);              \
		RUN(test_job_pages_filter_by_states_key_and_id);                       \
		RUN(test_job_paging_lists_each_job_once_while_states_change);          \
		RUN(test_bad_page_arguments_are_invalid_and_change_nothing);           \
		RUN(test_event_pages_follow_next_and_more_by_production_job_and_kind); \
		RUN(test_productions_are_paged_in_byte_order_of_names);                \
		RUN(test_job_counts_count_each_state_from_one_moment);                 \
		RUN(test_job_record_has_sizes_times_and_facts_never_a_secret);         \
		RUN(test_facts_vector_publishes_and_reads_back_identically);           \
		RUN(test_a_page_of_jobs_with_facts_carries_each_completed_jobs_facts_in_one_call); \
	} while (0)

#endif
