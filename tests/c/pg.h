/* pg.h: PostgreSQL locations for the C tests. The server comes from
 * LEASES_TEST_PG_URL (tests/pg/cluster.sh run sets it; make starts one when
 * it is missing). Each caller gets a fresh schema, selected by adding
 * search_path=SCHEMA to the URL; pg_drop_schemas() drops them all again.
 * Schemas are created with psql, which reads the URL from the environment, so
 * it never appears on a command line. */
#ifndef LEASES_TEST_PG_H
#define LEASES_TEST_PG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PG_MAX_SCHEMAS 64

static char pg_schemas[PG_MAX_SCHEMAS][64];
static int pg_nschemas;

/* The test server's URL, or NULL. Without one the caller skips, unless
 * LEASES_REQUIRE_PG is set (make sets it), when pg_base_url exits 1: a
 * PostgreSQL test must fail, not skip, where a server was promised. */
static const char *pg_base_url(const char *prog) {
	const char *u = getenv("LEASES_TEST_PG_URL");
	if (u && *u) return u;
	const char *req = getenv("LEASES_REQUIRE_PG");
	if (req && *req) {
		fprintf(stderr, "%s: FAIL: LEASES_REQUIRE_PG is set but LEASES_TEST_PG_URL is not: "
		        "run under tests/pg/cluster.sh run (make does)\n", prog);
		exit(1);
	}
	return NULL;
}

/* Runs one SQL statement (no quotes in it) against base with psql. */
static int pg_exec(const char *base, const char *sql) {
	if (setenv("LEASES_PG_HELPER_URL", base, 1) != 0) return -1;
	char cmd[512];
	snprintf(cmd, sizeof cmd, "PGOPTIONS='-c client_min_messages=warning' psql \"$LEASES_PG_HELPER_URL\" -qX -v ON_ERROR_STOP=1 -c '%s' >/dev/null", sql);
	return system(cmd);
}

/* Creates a fresh schema on base and writes base + search_path=SCHEMA into
 * out. Returns 0, or -1 after printing why. */
static int pg_fresh_location(const char *base, const char *tag, char *out, size_t cap) {
	static unsigned n;
	if (pg_nschemas >= PG_MAX_SCHEMAS) {
		fprintf(stderr, "pg.h: more than %d schemas in one run\n", PG_MAX_SCHEMAS);
		return -1;
	}
	char *schema = pg_schemas[pg_nschemas];
	snprintf(schema, sizeof pg_schemas[0], "c_%s_%ld_%ld_%u", tag, (long)getpid(), (long)time(NULL), n++);
	char sql[128];
	snprintf(sql, sizeof sql, "CREATE SCHEMA %s", schema);
	if (pg_exec(base, sql) != 0) {
		fprintf(stderr, "pg.h: could not create schema %s with psql\n", schema);
		return -1;
	}
	pg_nschemas++;
	int w = snprintf(out, cap, "%s%csearch_path=%s", base, strchr(base, '?') ? '&' : '?', schema);
	if (w < 0 || (size_t)w >= cap) {
		fprintf(stderr, "pg.h: location longer than %zu bytes\n", cap);
		return -1;
	}
	return 0;
}

static void pg_drop_schemas(const char *base) {
	for (int i = 0; i < pg_nschemas; i++) {
		char sql[128];
		snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", pg_schemas[i]);
		if (pg_exec(base, sql) != 0) fprintf(stderr, "pg.h: could not drop schema %s\n", pg_schemas[i]);
	}
	pg_nschemas = 0;
}

#endif
