/* Installed-package smoke test for C users: built with
 * `pkg-config --cflags --libs leases` by `make test-cpp`. */
#include <leases.h>

#include <stdio.h>

int main(int argc, char **argv) {
    leases_authority *auth = NULL;
    char *job = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: consumer-c DB\n");
        return 2;
    }
    if (leases_abi_version() != LEASES_ABI_VERSION) {
        fprintf(stderr, "ABI mismatch: header %d, library %u\n", LEASES_ABI_VERSION, leases_abi_version());
        return 1;
    }
    if (leases_authority_open(argv[1], &auth) != LEASES_OK ||
        leases_production_create(auth, "c") != LEASES_OK ||
        leases_job_request(auth, "c", NULL, NULL, 0, &job) != LEASES_OK) {
        fprintf(stderr, "consumer-c: %s\n", leases_last_error());
        leases_authority_close(auth);
        return 1;
    }
    printf("consumer-c: libleases %s requested job %s: ok\n", leases_version(), job);
    leases_free(job);
    leases_authority_close(auth);
    return 0;
}
