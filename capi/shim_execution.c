// Public names of the reference executor (see shim.c for the conventions).
#include "../include/leases.h"
#include "_cgo_export.h"
#include "shim.h"

leases_status leases_execution_begin(leases_lease *lease, const char *output_dir,
                                     leases_execution **out) {
	CHECK_FORK();
	OUT_HANDLE(leases_execution, out, leasesgo_execution_begin(H(lease), (char *)output_dir, hp_));
}

const char *leases_execution_temp_path(const leases_execution *execution) {
	if (leasesshim_forked()) return NULL;
	return leasesgo_execution_temp_path(H(execution));
}

const char *leases_execution_final_path(const leases_execution *execution) {
	if (leasesshim_forked()) return NULL;
	return leasesgo_execution_final_path(H(execution));
}

leases_status leases_execution_finish(leases_execution *execution, const char *facts_json) {
	if (leasesshim_forked()) return LEASES_FORKED;
	return leasesgo_execution_finish(H(execution), (char *)facts_json);
}

void leases_execution_abandon(leases_execution *execution) {
	if (execution == NULL || leasesshim_forked()) return;
	leasesgo_execution_abandon(H(execution));
}
