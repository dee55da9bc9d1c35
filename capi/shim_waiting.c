// Public names of revision 1's waiting claims, keep-alive and cancellers
// (see shim.c for the conventions). No call here holds anything while it
// waits: a waiting thread is parked in Go, and every other thread goes on.
#include "../include/leases.h"
#include "_cgo_export.h"
#include "shim.h"

leases_status leases_canceller_new(leases_canceller **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_canceller, out, leasesgo_canceller_new(hp_));
}

leases_status leases_canceller_cancel(leases_canceller *canceller) {
	CHECK_FORK();
	return leasesgo_canceller_cancel(H(canceller));
}

void leases_canceller_free(leases_canceller *canceller) {
	if (canceller == NULL || leasesshim_forked()) return;
	leasesgo_canceller_free(H(canceller));
}

leases_status leases_claim_wait(leases_authority *authority, const char *production,
                                const char *worker, int64_t duration_us, int64_t wait_us,
                                leases_canceller *canceller, leases_lease **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_lease, out,
	           leasesgo_claim_wait(H(authority), (char *)production, (char *)worker, duration_us, wait_us,
	                               H(canceller), hp_));
}

leases_status leases_lease_keep_alive(leases_lease *lease, int64_t duration_us,
                                      int64_t interval_us) {
	CHECK_FORK();
	return leasesgo_lease_keep_alive(H(lease), duration_us, interval_us);
}

leases_status leases_lease_keep_alive_stop(leases_lease *lease) {
	CHECK_FORK();
	return leasesgo_lease_keep_alive_stop(H(lease));
}

leases_status leases_lease_check(const leases_lease *lease, leases_status *out_reason) {
	CHECK_FORK();
	return leasesgo_lease_check(H(lease), out_reason);
}

leases_status leases_lease_wait_lost(const leases_lease *lease, int64_t timeout_us,
                                     leases_canceller *canceller, leases_status *out_reason) {
	CHECK_FORK();
	return leasesgo_lease_wait_lost(H(lease), timeout_us, H(canceller), out_reason);
}
