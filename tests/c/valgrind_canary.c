/* valgrind_canary.c: deliberately wrong C use of the library. The valgrind
 * target runs it with the same suppressions and requires valgrind to report
 * it, proving that suppressing the Go runtime hides no error in C code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leases.h"

int main(int argc, char **argv) {
	if (argc != 2) return 2;
	leases_authority *a = NULL;
	if (leases_authority_open(argv[1], &a) != LEASES_OK) return 2;
	leases_production_create(a, "p");
	char *id = NULL, *leaked = NULL;
	if (leases_job_request(a, "p", NULL, NULL, 0, &id) != LEASES_OK) return 2;
	if (leases_job_request(a, "p", NULL, NULL, 0, &leaked) != LEASES_OK) return 2;
	leaked = NULL;               /* a definite leak of a library string */
	leases_free(id);
	volatile char c = id[0];     /* a read after leases_free */
	(void)c;
	leases_authority_close(a);
	return 0;
}
