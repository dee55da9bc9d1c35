// The header included twice in one unit, compiled with -Wall -Wextra -Werror
// -pedantic as C++17 (flags set on this file by CMakeLists.txt): catches a
// missing include guard and any warning the header would force on users.
// Linked with every other test unit, it also catches a missing `inline`.
#include <leases/leases.hpp>
#include <leases/leases.hpp>

#include <gtest/gtest.h>

TEST(Header, IncludedTwiceInOneUnitCompilesCleanly) {
    using namespace std::chrono_literals;
    EXPECT_EQ(leases::to_microseconds(2ms), 2000);
    EXPECT_EQ(leases::max_duration.count(), LEASES_MAX_DURATION_US);
}
