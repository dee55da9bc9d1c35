// memcheck.h: the two memcheck client requests the shim makes (mark bytes
// defined, and, in the test seam, undefined), without valgrind's headers.
#ifndef LEASES_MEMCHECK_H
#define LEASES_MEMCHECK_H

#include <stddef.h>

// Request numbers of valgrind/memcheck.h: VG_USERREQ_TOOL_BASE('M','C') + n.
// They and the instruction sequences below are valgrind's stable client
// request interface (Go's runtime makes the same requests the same way).
#define LEASES_MC_MAKE_MEM_UNDEFINED 0x4d430001UL
#define LEASES_MC_MAKE_MEM_DEFINED 0x4d430002UL

// Outside valgrind the sequence is four rotations of a register by 128 bits in
// all (no change) and an exchange of a register with itself: nothing happens.
// Under valgrind it is the request. Elsewhere than amd64/arm64 Linux it is
// nothing at all.
static inline void leasesshim_memcheck(unsigned long request, const void *p, size_t n) {
#if defined(__linux__) && defined(__x86_64__) && !defined(__ILP32__)
	volatile unsigned long args[6] = {request, (unsigned long)p, (unsigned long)n, 0, 0, 0};
	unsigned long result;
	__asm__ volatile("rolq $3,  %%rdi ; rolq $13, %%rdi\n\t"
	                 "rolq $61, %%rdi ; rolq $51, %%rdi\n\t"
	                 "xchgq %%rbx,%%rbx"
	                 : "=d"(result)
	                 : "a"(&args[0]), "0"(0UL)
	                 : "cc", "memory");
	(void)result;
#elif defined(__linux__) && defined(__aarch64__)
	volatile unsigned long args[6] = {request, (unsigned long)p, (unsigned long)n, 0, 0, 0};
	unsigned long result;
	__asm__ volatile("mov x3, %1\n\t"
	                 "mov x4, %2\n\t"
	                 "ror x12, x12, #3  ;  ror x12, x12, #13 \n\t"
	                 "ror x12, x12, #51 ;  ror x12, x12, #61 \n\t"
	                 "orr x10, x10, x10\n\t"
	                 "mov %0, x3"
	                 : "=r"(result)
	                 : "r"(0UL), "r"(&args[0])
	                 : "cc", "memory", "x3", "x4");
	(void)result;
#else
	(void)request, (void)p, (void)n;
#endif
}

#endif
