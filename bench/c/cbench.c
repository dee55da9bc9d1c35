/* cbench: the C ABI rows of `make bench`. Prints one JSON line like every row.
 *   cbench cycle DB N [SYNC]  claim -> complete of N jobs, two commits each;
 *                             SYNC NORMAL opens with leases_authority_open_v2
 *                             (default FULL, leases_authority_open)
 *   cbench boundary DB N      ns per call of leases_abi_version and
 *                             leases_lease_expiry (a local getter)
 *   cbench page DB JOBS M     M pages of 100 from the middle of a filled
 *                             file's listing (leases_jobs_page_json)
 *   cbench worker DB N C      the N jobs already requested at DB (a file or a
 *                             postgres:// URL) drained by the worker loop
 *                             (leases_worker_*, exit-when-empty) on C threads
 *                             of a no-op handler, timed from leases_worker_new
 *                             to the loop's end
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "leases.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + sys) of this process so far, in ns. */
static double cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

static void check(leases_status st, const char *what) {
    if (st != LEASES_OK) {
        fprintf(stderr, "cbench: %s: %s: %s\n", what, leases_status_name(st), leases_last_error());
        exit(1);
    }
}

#define PROD "bench"
#define HOUR_US INT64_C(3600000000)

static leases_authority *open_at(const char *db, int normal) {
    leases_authority *a = NULL;
    if (normal) {
        leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
        o.synchronous = LEASES_SYNCHRONOUS_NORMAL;
        check(leases_authority_open_v2(db, &o, &a), "open");
    } else {
        check(leases_authority_open(db, &a), "open");
    }
    return a;
}

/* The timed loop runs on a handle opened after the fill, as the Go core's row
 * does (fillCore, then openCore): neither row starts with the fill's pages in
 * its connections' caches. */
static leases_authority *open_filled(const char *db, int n, int normal) {
    leases_authority *a = open_at(db, normal);
    check(leases_production_create(a, PROD), "production");
    /* Setup, untimed: request the jobs in edits would need a C request-in-edit
     * call the ABI does not have, so they are requested one by one. */
    static const uint8_t payload[] = "payload-0123456789";
    for (int i = 0; i < n; i++) {
        char *id = NULL;
        check(leases_job_request(a, PROD, NULL, payload, sizeof payload - 1, &id), "request");
        leases_free(id);
    }
    leases_authority_close(a);
    return open_at(db, normal);
}

/* Peak RSS of this process, kB (VmHWM). */
static long hwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* The "next" cursor of a jobs page into cursor ("" when null). */
static void next_cursor(const char *json, char *cursor, size_t cap) {
    const char *at = strstr(json, "\"next\":\"");
    cursor[0] = '\0';
    if (at == NULL) return;
    at += strlen("\"next\":\"");
    size_t n = strcspn(at, "\"");
    if (n >= cap) {
        fprintf(stderr, "cbench: a cursor longer than LEASES_MAX_CURSOR_LEN\n");
        exit(1);
    }
    memcpy(cursor, at, n);
    cursor[n] = '\0';
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int page(const char *db, long jobs, long m) {
    leases_authority *a = NULL;
    check(leases_authority_open(db, &a), "open");
    char cursor[LEASES_MAX_CURSOR_LEN + 1] = "";
    char *json = NULL;
    double t = now_s();
    check(leases_jobs_page_json(a, PROD, NULL, NULL, NULL, NULL, 100, &json), "first page");
    double first_ns = (now_s() - t) * 1e9;
    next_cursor(json, cursor, sizeof cursor);
    leases_free(json);
    for (long walked = 100; walked < jobs / 2 && cursor[0]; walked += LEASES_MAX_PAGE_SIZE) {
        check(leases_jobs_page_json(a, PROD, NULL, NULL, NULL, cursor, LEASES_MAX_PAGE_SIZE, &json), "walk");
        next_cursor(json, cursor, sizeof cursor);
        leases_free(json);
    }
    double *lat = calloc((size_t)m, sizeof *lat);
    long done = 0;
    double start = now_s();
    for (; done < m && cursor[0]; done++) {
        t = now_s();
        check(leases_jobs_page_json(a, PROD, NULL, NULL, NULL, cursor, 100, &json), "page");
        lat[done] = (now_s() - t) * 1e9;
        next_cursor(json, cursor, sizeof cursor);
        leases_free(json);
    }
    double secs = now_s() - start;
    qsort(lat, (size_t)done, sizeof *lat, cmp_double);
    double p50 = done ? lat[(done - 1) / 2] : 0, p99 = done ? lat[(long)(0.99 * (double)(done - 1))] : 0;
    free(lat);
    leases_authority_close(a);
    printf("{\"ops\":%ld,\"secs\":%.6f,\"p50_ns\":%.0f,\"p99_ns\":%.0f,\"extra\":{\"first_page_ns\":%.0f,\"hwm_kb\":%ld}}\n",
           done, secs, p50, p99, first_ns, hwm_kb());
    return 0;
}

/* Voluntary context switches of this process (all threads) so far. */
static double vcsw(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_nvcsw;
}

/* One thread of the worker: next, the no-op job, settle (complete), until
 * the loop hands out nothing more. */
typedef struct {
    leases_worker *w;
    atomic_long handled;
    atomic_int failed; /* a status other than LEASES_OK, or 0 */
} worker_run;

static void *serve(void *arg) {
    worker_run *run = arg;
    for (;;) {
        leases_lease *l = NULL;
        leases_status st = leases_worker_next(run->w, 1000000, &l);
        if (st == LEASES_NOTHING_TO_CLAIM) continue;
        if (st != LEASES_OK) {
            int none = 0;
            atomic_compare_exchange_strong(&run->failed, &none, (int)st);
            return NULL;
        }
        if (l == NULL) return NULL;
        atomic_fetch_add(&run->handled, 1);
        st = leases_worker_settle(run->w, l, LEASES_RESULT_COMPLETE, NULL, 0);
        if (st != LEASES_OK) {
            int none = 0;
            atomic_compare_exchange_strong(&run->failed, &none, (int)st);
        }
    }
}

static int worker(const char *db, long n, int c) {
    leases_authority *a = NULL;
    check(leases_authority_open(db, &a), "open");
    pthread_t *threads = calloc((size_t)c, sizeof *threads);
    worker_run run = {.w = NULL, .handled = 0, .failed = 0};
    leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
    o.flags = LEASES_WORKER_EXIT_WHEN_EMPTY;
    o.concurrency = c;
    double cpu0 = cpu_ns(), cs0 = vcsw();
    double t = now_s();
    check(leases_worker_new(a, PROD, "w", INT64_C(60000000), &o, &run.w), "worker");
    for (int i = 0; i < c; i++) {
        if (pthread_create(&threads[i], NULL, serve, &run) != 0) {
            fprintf(stderr, "cbench: pthread_create failed\n");
            exit(1);
        }
    }
    for (int i = 0; i < c; i++) pthread_join(threads[i], NULL);
    int32_t end = 0;
    check(leases_worker_wait(run.w, 0, NULL, &end), "wait");
    double secs = now_s() - t;
    double cpu = (cpu_ns() - cpu0) / (double)n, cs = (vcsw() - cs0) / (double)n;
    if (atomic_load(&run.failed) != 0) check((leases_status)atomic_load(&run.failed), "the loop");
    if (end != LEASES_WORKER_STOPPED) {
        fprintf(stderr, "cbench: the loop ended %d, not stopped\n", (int)end);
        exit(1);
    }
    if (atomic_load(&run.handled) != n) {
        fprintf(stderr, "cbench: the handler ran %ld times for %ld jobs\n", atomic_load(&run.handled), n);
        exit(1);
    }
    leases_worker_free(run.w);
    free(threads);
    leases_authority_close(a);
    printf("{\"ops\":%ld,\"secs\":%.6f,\"cpu_ns\":%.0f,\"extra\":{\"vcsw\":%.3f}}\n", n, secs, cpu, cs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: cbench cycle|boundary DB N [SYNC] | cbench page DB JOBS M | cbench worker DB N C\n");
        return 2;
    }
    const char *db = argv[2];
    long n = strtol(argv[3], NULL, 10);
    if (strcmp(argv[1], "page") == 0 && argc == 5) return page(db, n, strtol(argv[4], NULL, 10));
    if (strcmp(argv[1], "worker") == 0 && argc == 5) return worker(db, n, (int)strtol(argv[4], NULL, 10));
    if (strcmp(argv[1], "cycle") == 0) {
        leases_authority *a = open_filled(db, (int)n, argc == 5 && strcmp(argv[4], "NORMAL") == 0);
        double cpu0 = cpu_ns();
        double t = now_s();
        for (long i = 0; i < n; i++) {
            leases_lease *l = NULL;
            check(leases_claim(a, PROD, "w", HOUR_US, &l), "claim");
            check(leases_lease_complete(l, NULL), "complete");
            leases_lease_free(l);
        }
        double secs = now_s() - t;
        double cpu = (cpu_ns() - cpu0) / (double)n;
        leases_authority_close(a);
        printf("{\"ops\":%ld,\"secs\":%.6f,\"cpu_ns\":%.0f}\n", n, secs, cpu);
        return 0;
    }
    if (strcmp(argv[1], "boundary") == 0) {
        leases_authority *a = open_filled(db, 1, 0);
        leases_lease *l = NULL;
        check(leases_claim(a, PROD, "w", HOUR_US, &l), "claim");
        volatile uint32_t sink = 0;
        double t = now_s();
        for (long i = 0; i < n; i++) sink += leases_abi_version();
        double abi_ns = (now_s() - t) * 1e9 / (double)n;
        int64_t exp = 0;
        volatile int64_t sink64 = 0;
        t = now_s();
        for (long i = 0; i < n; i++) {
            if (leases_lease_expiry(l, &exp) != LEASES_OK) { check(1, "expiry"); }
            sink64 += exp;
        }
        double exp_ns = (now_s() - t) * 1e9 / (double)n;
        (void)sink; (void)sink64;
        leases_lease_free(l);
        leases_authority_close(a);
        printf("{\"ops\":%ld,\"ns_op\":%.2f,\"extra\":{\"expiry_ns\":%.2f}}\n", n, abi_ns, exp_ns);
        return 0;
    }
    fprintf(stderr, "cbench: unknown mode %s\n", argv[1]);
    return 2;
}
