//go:build leasestest

// Public names of include/leases_testing.h; only in the test build.
#include "../include/leases_testing.h"
#include "_cgo_export.h"
#include "memcheck.h"

int leasesshim_forked(void);

leases_status leases_testing_set_clock(leases_authority *authority, int64_t now_unix_us) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_set_clock((uintptr_t)authority, now_unix_us);
}

leases_status leases_testing_set_clock_sequence(leases_authority *authority,
                                                const int64_t *samples_unix_us, size_t count) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_set_clock_sequence((uintptr_t)authority, (int64_t *)samples_unix_us, count);
}

leases_status leases_testing_open(const char *path, int64_t busy_timeout_us,
                                  leases_authority **out) {
	if (leasesshim_forked()) return LEASES_FORKED;
	uintptr_t h = 0;
	leases_status st = leasesgo_testing_open((char *)path, busy_timeout_us, out ? &h : NULL);
	if (out) *out = (leases_authority *)h;
	return st;
}

leases_status leases_testing_set_safety_poll(leases_authority *authority, int64_t poll_us) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_set_safety_poll((uintptr_t)authority, poll_us);
}

leases_status leases_testing_pragma(leases_authority *authority, const char *name,
                                    char **out_value) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_pragma((uintptr_t)authority, (char *)name, out_value);
}

leases_status leases_testing_lose_commit_acks(leases_authority *authority) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_lose_commit_acks((uintptr_t)authority);
}

leases_status leases_testing_panic(void) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_panic();
}

leases_status leases_testing_lost_track(const char *text, uint32_t as_error, char **out_copy) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_lost_track((char *)text, as_error, out_copy);
}

// What memcheck does to Go memory when it takes a switch between goroutine
// stacks for a stack frame (leasesshim_copy_out in shim.c).
void leasesshim_testing_undefined(const void *p, size_t n) {
	leasesshim_memcheck(LEASES_MC_MAKE_MEM_UNDEFINED, p, n);
}
