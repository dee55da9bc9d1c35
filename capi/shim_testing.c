//go:build leasestest

// Public names of include/leases_testing.h; only in the test build.
#include "../include/leases_testing.h"
#include "_cgo_export.h"

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

leases_status leases_testing_pragma(leases_authority *authority, const char *name,
                                    char **out_value) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_pragma((uintptr_t)authority, (char *)name, out_value);
}

leases_status leases_testing_panic(void) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_testing_panic();
}
