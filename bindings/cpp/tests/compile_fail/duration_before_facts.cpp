// Must NOT compile with -Werror=deprecated-declarations: every face takes
// complete_and_claim_next's facts before its duration; the order of 0.1.0
// (duration, facts) is deprecated. Built with -DLEASES_EXPECT_COMPILES (the
// same call, facts first) it must compile, so the failure is the order's.
#include <leases/leases.hpp>

std::optional<leases::Lease> next_in_the_old_order(leases::Lease &lease) {
#ifdef LEASES_EXPECT_COMPILES
    return lease.complete_and_claim_next(std::string(R"({"metadata": {"frames": 3}})"), std::chrono::seconds(30));
#else
    return lease.complete_and_claim_next(std::chrono::seconds(30), std::string(R"({"metadata": {"frames": 3}})"));
#endif
}
