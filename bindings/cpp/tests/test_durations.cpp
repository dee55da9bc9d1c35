// Duration rules of the C++ projection: integral std::chrono durations of any
// period, positive whole microseconds up to 24 h, rejected before the C call,
// never rounded, no overflow for huge counts.
#include "support.hpp"

#include <limits>

using namespace leases_test;
using namespace std::chrono_literals;
using leases::to_microseconds;

namespace {

template <class D>
void expect_rejected(D d) {
    EXPECT_THROW((void)to_microseconds(d), leases::InvalidDurationError) << d.count();
    try {
        (void)to_microseconds(d);
    } catch (const leases::InvalidDurationError &e) {
        EXPECT_EQ(e.status(), LEASES_INVALID_DURATION);
    }
}

}  // namespace

TEST(Durations, NanosecondsAreAcceptedOnlyInWholeMicroseconds) {
    EXPECT_EQ(to_microseconds(1000ns), 1);
    EXPECT_EQ(to_microseconds(1500000ns), 1500);
    EXPECT_EQ(to_microseconds(std::chrono::nanoseconds(86'400'000'000'000)), LEASES_MAX_DURATION_US);
    expect_rejected(1ns);
    expect_rejected(999ns);
    expect_rejected(1500ns);
    expect_rejected(std::chrono::nanoseconds(86'400'000'000'001));
    expect_rejected(std::chrono::nanoseconds(86'400'000'001'000));
}

TEST(Durations, MicrosecondsFromOneUpTo24HoursInclusive) {
    EXPECT_EQ(to_microseconds(1us), 1);
    EXPECT_EQ(to_microseconds(1500us), 1500);
    EXPECT_EQ(to_microseconds(std::chrono::microseconds(86'399'999'999)), 86'399'999'999);
    EXPECT_EQ(to_microseconds(leases::max_duration), LEASES_MAX_DURATION_US);
    expect_rejected(0us);
    expect_rejected(-1us);
    expect_rejected(leases::max_duration + 1us);
}

TEST(Durations, MillisecondsAndSecondsConvertExactly) {
    EXPECT_EQ(to_microseconds(250ms), 250'000);
    EXPECT_EQ(to_microseconds(30s), 30'000'000);
    EXPECT_EQ(to_microseconds(std::chrono::milliseconds(86'400'000)), LEASES_MAX_DURATION_US);
    expect_rejected(0ms);
    expect_rejected(-5s);
    expect_rejected(std::chrono::milliseconds(86'400'001));
    expect_rejected(86401s);
}

TEST(Durations, HoursUpTo24AndHugeCountsRejectWithoutOverflow) {
    EXPECT_EQ(to_microseconds(24h), LEASES_MAX_DURATION_US);
    EXPECT_EQ(to_microseconds(1h), 3'600'000'000);
    expect_rejected(25h);
    expect_rejected(48h);
    // hours::max() * 3.6e9 overflows int64 many times over: a naive
    // duration_cast<microseconds> would wrap into a "valid" value.
    expect_rejected(std::chrono::hours::max());
    expect_rejected(std::chrono::hours::min());
    expect_rejected(std::chrono::minutes::max());
    expect_rejected(std::chrono::seconds::max());
    expect_rejected(std::chrono::milliseconds::max());
    expect_rejected(std::chrono::microseconds::max());
    expect_rejected(std::chrono::nanoseconds::max());
    expect_rejected(std::chrono::nanoseconds::min());
}

TEST(Durations, EveryIntegralRepAndPeriodFollowsTheSameRule) {
    // Narrow and unsigned counts.
    EXPECT_EQ(to_microseconds(std::chrono::duration<std::int8_t, std::ratio<3600>>(24)), LEASES_MAX_DURATION_US);
    expect_rejected(std::chrono::duration<std::int8_t, std::ratio<3600>>(25));
    expect_rejected(std::chrono::duration<std::int8_t, std::ratio<3600>>(-1));
    EXPECT_EQ(to_microseconds(std::chrono::duration<unsigned short, std::milli>(65535)), 65'535'000);
    expect_rejected(std::chrono::duration<std::uint64_t, std::nano>(std::numeric_limits<std::uint64_t>::max()));
    expect_rejected(std::chrono::duration<std::uint64_t, std::ratio<86400>>(std::numeric_limits<std::uint64_t>::max()));
    expect_rejected(std::chrono::duration<std::uint32_t>(0));
    // Periods that are not powers of ten: thirds of a second, 7 us ticks, attoseconds.
    EXPECT_EQ(to_microseconds(std::chrono::duration<long long, std::ratio<1, 3>>(3)), 1'000'000);
    expect_rejected(std::chrono::duration<long long, std::ratio<1, 3>>(1));  // 333333.33 us
    EXPECT_EQ(to_microseconds(std::chrono::duration<int, std::ratio<7, 1'000'000>>(3)), 21);
    EXPECT_EQ(to_microseconds(std::chrono::duration<long long, std::atto>(1'000'000'000'000)), 1);
    expect_rejected(std::chrono::duration<long long, std::atto>(1'000'000'000'001));
    // Days (a period of its own) at the boundary.
    EXPECT_EQ(to_microseconds(std::chrono::duration<int, std::ratio<86400>>(1)), LEASES_MAX_DURATION_US);
    expect_rejected(std::chrono::duration<int, std::ratio<86400>>(2));
}

TEST(Durations, SharedVectorsAgreeWithTheRule) {
    const auto v = mini_json::parse_file(vectors_path("durations.json"));
    ASSERT_EQ(v["max_us"].integer(), LEASES_MAX_DURATION_US);
    for (const auto &ok : v["accepted"].items) {
        const std::int64_t ns = std::stoll(ok["nanoseconds"].str());
        EXPECT_EQ(to_microseconds(std::chrono::nanoseconds(ns)), ns / 1000) << ok["text"].str();
    }
    for (const auto &bad : v["rejected"].items) {
        const std::int64_t ns = std::stoll(bad["nanoseconds"].str());
        expect_rejected(std::chrono::nanoseconds(ns));
    }
}

TEST(Durations, InMessagesTheyAreWrittenAsPeopleWriteThemAsOnEverySurface) {
    const auto v = mini_json::parse_file(vectors_path("durations.json"));
    ASSERT_GE(v["shown"].items.size(), 20u);
    for (const auto &c : v["shown"].items) {
        const std::int64_t ns = std::stoll(c["nanoseconds"].str());
        EXPECT_EQ(leases::format_duration(std::chrono::nanoseconds(ns)), c["shown"].str()) << ns;
    }
    // Every period and count type, as people write it.
    EXPECT_EQ(leases::format_duration(48h), "48h");
    EXPECT_EQ(leases::format_duration(90min), "1h30m");
    EXPECT_EQ(leases::format_duration(250ms), "250ms");
    EXPECT_EQ(leases::format_duration(1500us), "1500us");
    EXPECT_EQ(leases::format_duration(1500ms), "1s500ms");
    EXPECT_EQ(leases::format_duration(0s), "0s");
    EXPECT_EQ(leases::format_duration(-90s), "-1m30s");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<int, std::ratio<86400>>(2)), "48h");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<std::int8_t, std::ratio<3600>>(-128)), "-128h");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<unsigned short, std::milli>(65535)), "1m5s535ms");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<long long, std::ratio<3, 2>>(1)), "1s500ms");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<int, std::ratio<7, 1'000'000>>(3)), "21us");
    EXPECT_EQ(leases::format_duration(std::chrono::hours::max()), "9223372036854775807h");
    EXPECT_EQ(leases::format_duration(std::chrono::nanoseconds::min()), "-2562047h47m16s854775808ns");
    // Exactly, where no unit states it: thirds of a second, a count too large.
    EXPECT_EQ(leases::format_duration(std::chrono::duration<long long, std::ratio<1, 3>>(1)), "1 x 1/3 s");
    EXPECT_EQ(leases::format_duration(std::chrono::duration<std::uint64_t, std::ratio<86400>>(
                  std::numeric_limits<std::uint64_t>::max())),
              "18446744073709551615 x 86400/1 s");
    // And in the errors that show a duration.
    try {
        (void)to_microseconds(48h);
        ADD_FAILURE() << "48h was accepted";
    } catch (const leases::InvalidDurationError &e) {
        EXPECT_EQ(std::string(e.what()).rfind("duration 48h is longer than 24 h;", 0), 0u) << e.what();
    }
    try {
        (void)to_microseconds(1500ns);
        ADD_FAILURE() << "1500ns was accepted";
    } catch (const leases::InvalidDurationError &e) {
        EXPECT_NE(std::string(e.what()).find("duration 1500ns is not a whole number of microseconds"), std::string::npos)
            << e.what();
    }
}

using DurationsAtTheBoundary = AuthorityTest;

TEST_F(DurationsAtTheBoundary, InvalidDurationsRejectBeforeTheLibraryIsCalled) {
    // The production does not exist and the authority handle is empty: a
    // library call would report not_found or invalid_argument, so
    // InvalidDurationError proves the check came first.
    EXPECT_THROW((void)a().claim("no-such-production", "w", 1500ns), leases::InvalidDurationError);
    EXPECT_THROW((void)a().claim_job("no-such-production", "x", "w", 0s), leases::InvalidDurationError);
    leases::Authority empty = std::move(*auth);
    EXPECT_THROW((void)auth->claim("p", "w", 25h), leases::InvalidDurationError);
    EXPECT_THROW((void)auth->claim("p", "w", 1s), leases::InvalidArgumentError);
    auth = std::move(empty);

    request(1);
    auto l = claim("w", 1min);
    EXPECT_THROW(l.renew(1ns), leases::InvalidDurationError);
    EXPECT_THROW(l.renew(std::chrono::hours::max()), leases::InvalidDurationError);
    auto e = a().edit();
    EXPECT_THROW((void)e.claim("p", "w", -1us), leases::InvalidDurationError);
    e.abort();
    l.renew(2min);  // the lease was never touched by the rejected renewals
    EXPECT_EQ(l.expiry_unix_us(), t0 + 120'000'000);
}

TEST_F(DurationsAtTheBoundary, TheLibraryAgreesOnTheMicrosecondRange) {
    request(1);
    leases_lease *out = nullptr;
    EXPECT_EQ(leases_claim(a().capi(), "p", "w", 0, &out), LEASES_INVALID_DURATION);
    EXPECT_EQ(leases_claim(a().capi(), "p", "w", LEASES_MAX_DURATION_US + 1, &out), LEASES_INVALID_DURATION);
    auto l = a().claim("p", "w", std::chrono::microseconds(LEASES_MAX_DURATION_US));
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->expiry_unix_us(), t0 + LEASES_MAX_DURATION_US);
}
