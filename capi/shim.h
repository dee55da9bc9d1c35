// shim.h: what the shim's files share: the fork check, handles as ids, and
// handle outputs through a local id (so that Go never writes a pointer type).
#ifndef LEASES_SHIM_H
#define LEASES_SHIM_H

#include <stdint.h>

#include "../include/leases.h"

int leasesshim_forked(void); // shim.c

#define H(p) ((uintptr_t)(p))
#define CHECK_FORK() do { if (leasesshim_forked()) return LEASES_FORKED; } while (0)

// Returns call's status, having stored the handle it wrote (type T) in *out.
#define OUT_HANDLE(T, out, call)                            \
	do {                                                    \
		uintptr_t h_ = 0;                                   \
		uintptr_t *hp_ = (out) ? &h_ : NULL;                \
		leases_status st_ = (call);                         \
		if (out) *(out) = (T *)h_;                          \
		return st_;                                         \
	} while (0)

#endif
