/* go_defined.h: tells valgrind that a string the library handed over is
 * defined. Every byte of it was written by Go, but memcheck takes some of
 * the Go runtime's switches between goroutine stacks for stack growth and
 * marks the memory in between undefined; a Go buffer there then carries
 * "undefined" into the C copy (seen as "uninitialised value ... created by
 * a stack allocation at <a Go function>" in a C frame reading it). Reports
 * in Go frames are suppressed (valgrind.supp); this covers the bytes that
 * cross into C. Invalid reads and leaks are still reported. Without valgrind
 * (or its header) it does nothing. */
#ifndef LEASES_GO_DEFINED_H
#define LEASES_GO_DEFINED_H

#include <malloc.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif

static inline void go_defined(const void *p) {
#ifdef VALGRIND_MAKE_MEM_DEFINED
	if (p) VALGRIND_MAKE_MEM_DEFINED(p, malloc_usable_size((void *)p));
#else
	(void)p;
#endif
}

#endif
