// Typed listings: Authority::jobs/events parse the library's JSON into
// leases::Job and leases::Event, keep a state added later as its text, and
// refuse anything that is not the documented shape with InternalError.
#include "support.hpp"

using namespace leases_test;
using namespace std::chrono_literals;

using ListingsTest = AuthorityTest;

TEST_F(ListingsTest, JobsAreTypedRecordsInRequestOrder) {
    const std::string first = a().request_job("p", "key-1");
    const std::string second = a().request_job("p");
    leases::Lease l = claim("w1", 30s);
    l.fail("disk full");
    const auto jobs = a().jobs("p");
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[0].id, first);
    EXPECT_EQ(jobs[0].production, "p");
    EXPECT_EQ(jobs[0].key, std::optional<std::string>("key-1"));
    EXPECT_EQ(jobs[0].state, leases::JobState::Failed);
    EXPECT_EQ(jobs[0].state_text, "failed");
    EXPECT_EQ(jobs[0].reason, std::optional<std::string>("disk full"));
    EXPECT_EQ(jobs[0].attempts, 1);
    EXPECT_EQ(jobs[1].id, second);
    EXPECT_EQ(jobs[1].key, std::nullopt);
    EXPECT_EQ(jobs[1].state, leases::JobState::Requested);
    EXPECT_EQ(jobs[1].worker, std::nullopt);
    EXPECT_EQ(jobs[1].expiry, std::nullopt);
    EXPECT_EQ(jobs[1].attempts, 0);
}

TEST_F(ListingsTest, AClaimedJobCarriesItsWorkerAndExactTimes) {
    request(1);
    leases::Lease l = claim("w1", 30s);
    const auto jobs = a().jobs("p");
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].state, leases::JobState::Claimed);
    EXPECT_EQ(jobs[0].worker, std::optional<std::string>("w1"));
    ASSERT_TRUE(jobs[0].expiry.has_value());
    EXPECT_EQ(*jobs[0].expiry, l.expiry());
    ASSERT_TRUE(jobs[0].claimed_at.has_value());
    EXPECT_EQ(jobs[0].claimed_at->time_since_epoch().count(), t0);
}

TEST_F(ListingsTest, EventsAreTypedAndPageByAfterSeq) {
    const std::string id = request(1)[0];
    leases::Lease l = claim("w1", 30s);
    l.complete();
    const auto events = a().events("p");
    ASSERT_GE(events.size(), 3u);
    const leases::Event &last = events.back();
    EXPECT_EQ(last.kind, "completed");
    EXPECT_EQ(last.job_id, std::optional<std::string>(id));
    EXPECT_EQ(last.production, "p");
    EXPECT_EQ(last.at.time_since_epoch().count(), t0);
    for (std::size_t i = 1; i < events.size(); ++i) {
        EXPECT_GT(events[i].seq, events[i - 1].seq);
    }
    EXPECT_TRUE(a().events("p", last.seq).empty());
    EXPECT_EQ(a().events("p", events[events.size() - 2].seq).size(), 1u);
    EXPECT_FALSE(a().events().empty());  // every production
}

TEST(Listings, AStateAddedLaterIsUnknownWithItsTextKept) {
    const auto jobs = leases::parse_jobs(
        R"([{"id":"x","production":"p","key":null,"state":"paused","worker":null,)"
        R"("claimed_at_unix_us":null,"expiry_unix_us":null,"attempts":0,"reason":null}])");
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].state, leases::JobState::Unknown);
    EXPECT_EQ(jobs[0].state_text, "paused");
    EXPECT_STREQ(leases::to_string(leases::JobState::Cancelled), "cancelled");
    EXPECT_EQ(leases::job_state_from("cancelled"), leases::JobState::Cancelled);
}

TEST(Listings, FieldsAddedLaterOfAnyTypeAreIgnored) {
    const auto events = leases::parse_events(
        R"([{"seq":7,"at_unix_us":-5,"production":"p","kind":"renewed","new":{"a":[1,2.5e3,true,false,null]},)"
        R"("detail":"caf\u00e9 \ud83d\ude00 \"q\"\n"}])");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].seq, 7);
    EXPECT_EQ(events[0].at.time_since_epoch().count(), -5);
    EXPECT_EQ(events[0].detail, std::optional<std::string>("caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"\n"));
    EXPECT_EQ(events[0].job_id, std::nullopt);
}

TEST(Listings, AListingThatIsNotTheDocumentedShapeIsAnInternalError) {
    const char *bad[] = {
        "",
        "{}",
        "[1]",
        "[{\"id\":\"x\"}]",                                          // fields missing
        "[{\"seq\":\"1\",\"at_unix_us\":1,\"production\":\"p\",\"kind\":\"k\"}]",  // wrong type
        "[{\"seq\":1.5,\"at_unix_us\":1,\"production\":\"p\",\"kind\":\"k\"}]",    // not an integer
        "[{\"seq\":99999999999999999999,\"at_unix_us\":1,\"production\":\"p\",\"kind\":\"k\"}]",
        "[] x",
        "[{\"a\":\"\\ud800\"}]",  // lone surrogate
        "[{\"a\":\"\x01\"}]",      // control character
        "[{\"a\":01}]",
        "[{\"a\" 1}]",
        "[{\"a\":\"unterminated}]",
    };
    for (const char *text : bad) {
        EXPECT_THROW((void)leases::parse_events(text), leases::InternalError) << text;
    }
    EXPECT_THROW((void)leases::parse_jobs(std::string(100, '[') + std::string(100, ']')), leases::InternalError);
    EXPECT_EQ(leases::parse_events("[]").size(), 0u);
    const auto min = leases::parse_events(
        R"([{"seq":-9223372036854775808,"at_unix_us":9223372036854775807,"production":"p","kind":"k"}])");
    EXPECT_EQ(min[0].seq, std::numeric_limits<std::int64_t>::min());
}
