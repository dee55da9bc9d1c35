/* old_program.c: a program written and compiled against the frozen header of
 * ABI 1 revision 0 (abi/history/leases.1.0.h, which the Makefile puts first on
 * the include path as leases.h), linked against today's release library and
 * run. It calls every function of revision 0, so it keeps proving that the ABI
 * only grew: lifecycle, edit, token, listings, executor and the library calls.
 * Usage: old_program WORK_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

#ifdef LEASES_ABI_REVISION
#error "old_program.c must be compiled against abi/history/leases.1.0.h, which has no revision"
#endif

static char dir[3000];

static leases_authority *open_fresh(const char *name) {
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.db", dir, name);
	unlink(path);
	leases_authority *a = NULL;
	CHECK_OK(leases_authority_open(path, &a));
	CHECK(a != NULL);
	if (a) CHECK_OK(leases_production_create(a, "p"));
	return a;
}

static void test_old_program_sees_abi_1_and_the_library_calls(void) {
	CHECK(leases_abi_version() == LEASES_ABI_VERSION);
	CHECK(strlen(leases_version()) > 0);
	CHECK(strcmp(leases_status_name(LEASES_LEASE_LOST), "lease_lost") == 0);
	CHECK(strcmp(leases_status_name(LEASES_INTERNAL), "internal") == 0);
	leases_authority *a = NULL;
	CHECK_ST(leases_authority_open(NULL, &a), LEASES_INVALID_ARGUMENT);
	CHECK(strncmp(leases_last_error(), "invalid_argument", 16) == 0);
	leases_free(NULL);
}

static void test_old_program_lifecycle(void) {
	leases_authority *a = open_fresh("lifecycle");
	char *id = request(a, "k1");
	leases_lease *l = NULL;
	CHECK_OK(leases_claim(a, "p", "w1", 30000000, &l));
	int64_t before = 0, after = 0;
	CHECK_OK(leases_lease_expiry(l, &before));
	CHECK_OK(leases_lease_renew(l, 60000000));
	CHECK_OK(leases_lease_expiry(l, &after));
	CHECK(after > before);
	char *got = NULL;
	CHECK_OK(leases_lease_job_id(l, &got));
	CHECK(got && strcmp(got, id) == 0);
	leases_free(got);
	CHECK_OK(leases_lease_production(l, &got));
	CHECK(got && strcmp(got, "p") == 0);
	leases_free(got);
	CHECK_OK(leases_lease_worker(l, &got));
	CHECK(got && strcmp(got, "w1") == 0);
	leases_free(got);
	uint8_t *payload = NULL;
	size_t len = 0;
	CHECK_OK(leases_lease_payload(l, &payload, &len));
	CHECK(len == 7 && memcmp(payload, "payload", 7) == 0);
	leases_free(payload);
	CHECK_OK(leases_lease_release(l));
	CHECK(strcmp(job_state(a, id), "requested") == 0);
	leases_lease_free(l);

	CHECK_OK(leases_claim_job(a, "p", id, "w2", 30000000, &l));
	CHECK_OK(leases_lease_fail(l, "broken input"));
	CHECK(strcmp(job_state(a, id), "failed") == 0);
	leases_lease_free(l);

	char *id2 = request(a, "k2");
	CHECK_OK(leases_claim(a, "p", "w3", 30000000, &l));
	CHECK_OK(leases_lease_complete(l, "{\"metadata\": {\"frames\": 1}}"));
	CHECK(strcmp(job_state(a, id2), "completed") == 0);
	leases_lease_free(l);
	CHECK_ST(leases_claim(a, "p", "w3", 30000000, &l), LEASES_NOTHING_TO_CLAIM);
	CHECK(l == NULL);

	char *id3 = request(a, "k3");
	CHECK_OK(leases_cancel(a, "p", id3));
	CHECK(strcmp(job_state(a, id3), "cancelled") == 0);
	leases_free(id);
	leases_free(id2);
	leases_free(id3);
	leases_authority_close(a);
}

static void test_old_program_edit(void) {
	leases_authority *a = open_fresh("edit");
	char *id = request(a, NULL);
	leases_edit *e = NULL;
	leases_lease *l = NULL;
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 30000000, &l));
	leases_edit_abort(e);
	leases_lease_free(l);
	CHECK(strcmp(job_state(a, id), "requested") == 0);
	CHECK_OK(leases_edit_begin(a, &e));
	CHECK_OK(leases_edit_claim(e, "p", "w", 30000000, &l));
	CHECK_OK(leases_edit_complete(e, l, NULL));
	CHECK_OK(leases_edit_commit(e));
	CHECK(strcmp(job_state(a, id), "completed") == 0);
	leases_lease_free(l);
	leases_free(id);
	leases_authority_close(a);
}

static void test_old_program_token_and_listings(void) {
	leases_authority *a = open_fresh("token");
	char *id = request(a, NULL);
	leases_lease *l = NULL, *imported = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30000000, &l));
	char *token = NULL;
	CHECK_OK(leases_lease_export(l, &token));
	CHECK(token != NULL && strlen(token) <= LEASES_MAX_TOKEN_LEN);
	CHECK_OK(leases_lease_import(a, token, &imported));
	leases_free(token);
	CHECK_OK(leases_lease_complete(imported, NULL));
	CHECK_ST(leases_lease_renew(l, 30000000), LEASES_WRONG_STATE);
	leases_lease_free(imported);
	leases_lease_free(l);
	char *json = NULL;
	CHECK_OK(leases_jobs_json(a, "p", &json));
	CHECK(json && strstr(json, id) != NULL);
	leases_free(json);
	CHECK_OK(leases_events_json(a, NULL, 0, &json));
	CHECK(json && strstr(json, "\"kind\":\"completed\"") != NULL);
	leases_free(json);
	leases_free(id);
	leases_authority_close(a);
}

static void test_old_program_executor(void) {
	leases_authority *a = open_fresh("executor");
	char out[4096];
	snprintf(out, sizeof out, "%s/out", dir);
	mkdir(out, 0700);
	char *id = request(a, NULL);
	leases_lease *l = NULL;
	leases_execution *x = NULL;
	CHECK_OK(leases_claim(a, "p", "w", 30000000, &l));
	CHECK_OK(leases_execution_begin(l, out, &x));
	const char *temp = leases_execution_temp_path(x);
	const char *final = leases_execution_final_path(x);
	CHECK(temp && final && strstr(final, id) != NULL);
	char final_copy[4096];
	snprintf(final_copy, sizeof final_copy, "%s", final ? final : "");
	FILE *f = temp ? fopen(temp, "w") : NULL;
	CHECK(f != NULL);
	if (f) {
		fputs("result\n", f);
		fclose(f);
	}
	CHECK_OK(leases_execution_finish(x, NULL));
	CHECK(access(final_copy, F_OK) == 0);
	leases_lease_free(l);

	char *id2 = request(a, NULL);
	CHECK_OK(leases_claim(a, "p", "w", 30000000, &l));
	CHECK_OK(leases_execution_begin(l, out, &x));
	char temp_copy[4096];
	snprintf(temp_copy, sizeof temp_copy, "%s", leases_execution_temp_path(x));
	f = fopen(temp_copy, "w");
	if (f) fclose(f);
	leases_execution_abandon(x);
	CHECK(access(temp_copy, F_OK) != 0);
	CHECK_OK(leases_lease_release(l));
	leases_lease_free(l);
	leases_free(id);
	leases_free(id2);
	leases_authority_close(a);
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: %s WORK_DIR\n", argv[0]);
		return 2;
	}
	snprintf(dir, sizeof dir, "%s", argv[1]);
	RUN(test_old_program_sees_abi_1_and_the_library_calls);
	RUN(test_old_program_lifecycle);
	RUN(test_old_program_edit);
	RUN(test_old_program_token_and_listings);
	RUN(test_old_program_executor);
	if (check_failures) {
		printf("old_program: %d check(s) failed\n", check_failures);
		return 1;
	}
	printf("old_program: every revision-0 function works against the new library\n");
	return 0;
}
