// Must NOT compile: a floating-point count could hold 1.5 us, and the
// authority never rounds. Built with -DLEASES_EXPECT_COMPILES (an integral
// count in the same call) it must compile, so the failure is the Rep's alone.
#include <leases/leases.hpp>

std::int64_t duration_of_a_double_count() {
#ifdef LEASES_EXPECT_COMPILES
    return leases::to_microseconds(std::chrono::duration<long long>(2));
#else
    return leases::to_microseconds(std::chrono::duration<double>(1.5));
#endif
}

void claim_for_a_double_count(leases::Authority &auth) {
#ifdef LEASES_EXPECT_COMPILES
    (void)auth.claim("p", "w", std::chrono::duration<long long, std::milli>(250));
#else
    (void)auth.claim("p", "w", std::chrono::duration<double, std::milli>(250.0));
#endif
}
