/* capi/status_names.h: leases_status_name's table, generated from include/leases.h by abi/leases_abi.py (make abi-generate); do not edit. */
#ifndef LEASES_STATUS_NAMES_H
#define LEASES_STATUS_NAMES_H
static const char *const leases_status_names[] = {
	"ok", /* LEASES_OK */
	"invalid_argument", /* LEASES_INVALID_ARGUMENT */
	"invalid_duration", /* LEASES_INVALID_DURATION */
	"not_found", /* LEASES_NOT_FOUND */
	"nothing_to_claim", /* LEASES_NOTHING_TO_CLAIM */
	"wrong_state", /* LEASES_WRONG_STATE */
	"lease_lost", /* LEASES_LEASE_LOST */
	"expired", /* LEASES_EXPIRED */
	"cancelled", /* LEASES_CANCELLED */
	"not_extended", /* LEASES_NOT_EXTENDED */
	"clock_regressed", /* LEASES_CLOCK_REGRESSED */
	"closed", /* LEASES_CLOSED */
	"bad_token", /* LEASES_BAD_TOKEN */
	"busy", /* LEASES_BUSY */
	"storage", /* LEASES_STORAGE */
	"outcome_unknown", /* LEASES_OUTCOME_UNKNOWN */
	"schema_too_new", /* LEASES_SCHEMA_TOO_NEW */
	"forked", /* LEASES_FORKED */
	"internal", /* LEASES_INTERNAL */
	"interrupted", /* LEASES_INTERRUPTED */
};
#endif
