// The paged observations and the open options of the C ABI (since revision
// 1) through the thin Authority methods that call them: raw JSON pages
// followed to the end, one job's record, counts, productions, and
// Authority::open with leases_open_options. PostgreSQL: test_postgres.cpp.
#include "support.hpp"

#include <set>

using namespace leases_test;
using namespace std::chrono_literals;

using ObserveTest = AuthorityTest;

namespace {

using Kind = mini_json::Value::Kind;

// Every job id of production p, following "next" until it is null.
std::vector<std::string> every_job(leases::Authority &a, const std::string &states, std::uint32_t limit,
                                   int *pages = nullptr) {
    std::vector<std::string> ids;
    std::string cursor;
    for (int n = 1;; ++n) {
        const mini_json::Value page = mini_json::Parser(a.jobs_page_json("p", states, "", "", cursor, limit)).document();
        for (const auto &j : page["jobs"].items) ids.push_back(j["id"].str());
        if (page["next"].kind == Kind::Null) {
            if (pages) *pages = n;
            return ids;
        }
        cursor = page["next"].str();
    }
}

}  // namespace

TEST_F(ObserveTest, JobPagesFollowedToTheEndListEveryJobOnceInRequestOrder) {
    const std::vector<std::string> ids = request(9);
    int pages = 0;
    EXPECT_EQ(every_job(a(), "", 4, &pages), ids);
    EXPECT_EQ(pages, 3);
    leases::Lease l = claim("w1", 30s);
    EXPECT_EQ(every_job(a(), "claimed", 0), std::vector<std::string>{ids[0]});
    EXPECT_EQ(every_job(a(), "requested,claimed", 2).size(), 9u);
    EXPECT_THROW((void)a().jobs_page_json("p", "running"), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().jobs_page_json("p", "", "", "", "not a cursor"), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().jobs_page_json("p", "", "", "", "", LEASES_MAX_PAGE_SIZE + 1), leases::InvalidArgumentError);
}

TEST_F(ObserveTest, EventPagesRecordsCountsAndProductions) {
    const std::string id = a().request_job("p", "k", "payload");
    leases::Lease l = claim("w1", 30s);
    l.complete(R"({"metadata": {"frames": 2}})");

    std::vector<std::string> kinds;
    std::int64_t after = 0;
    for (;;) {
        const mini_json::Value page = mini_json::Parser(a().events_page_json("p", "", "", after, 1)).document();
        for (const auto &e : page["events"].items) kinds.push_back(e["kind"].str());
        after = page["next"].integer();
        if (!page["more"].boolean) break;
    }
    EXPECT_EQ(kinds, (std::vector<std::string>{"production_created", "requested", "claimed", "completed"}));
    const mini_json::Value timeline = mini_json::Parser(a().events_page_json("", id, "completed")).document();
    ASSERT_EQ(timeline["events"].items.size(), 1u);

    const mini_json::Value rec = mini_json::Parser(a().job_json("p", id)).document();
    EXPECT_EQ(rec["state"].str(), "completed");
    EXPECT_EQ(rec["payload_size"].integer(), 7);
    EXPECT_EQ(rec["facts"]["metadata"]["frames"].integer(), 2);
    EXPECT_THROW((void)a().job_json("p", "00000000-0000-0000-0000-000000000000"), leases::NotFoundError);

    const mini_json::Value counts = mini_json::Parser(a().job_counts_json("p")).document();
    EXPECT_EQ(counts["completed"].integer(), 1);
    EXPECT_EQ(counts["requested"].integer(), 0);
    EXPECT_EQ(counts["at_unix_us"].integer(), t0);  // the authority's (frozen) clock

    a().create_production("a");
    const mini_json::Value first = mini_json::Parser(a().productions_page_json("", 1)).document();
    ASSERT_EQ(first["productions"].items.size(), 1u);
    EXPECT_EQ(first["productions"].items[0]["name"].str(), "a");
    const mini_json::Value second = mini_json::Parser(a().productions_page_json(first["next"].str(), 1)).document();
    EXPECT_EQ(second["productions"].items[0]["name"].str(), "p");
    EXPECT_EQ(second["next"].kind, Kind::Null);
}

// The raw C struct of 0.1.0 still opens, deprecated for one release.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(OpenOptions, MustExistSynchronousAndBusyTimeout) {
    TempDir dir;
    const std::string db = (dir.path() / "opts.db").string();
    leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
    o.flags = LEASES_OPEN_MUST_EXIST;
    EXPECT_THROW((void)leases::Authority::open(db, o), leases::NotFoundError);
    EXPECT_FALSE(fs::exists(db));
    o.flags = 0;
    o.synchronous = LEASES_SYNCHRONOUS_NORMAL;
    o.busy_timeout_us = 250000;
    {
        leases::Authority a = leases::Authority::open(db, o);
        a.create_production("p");
        char *v = nullptr;
        leases::check(leases_testing_pragma(a.capi(), "synchronous", &v));
        EXPECT_EQ(leases::detail::take_string(v), "1");
    }
    o.synchronous = 7;
    EXPECT_THROW((void)leases::Authority::open(db, o), leases::InvalidArgumentError);
    o = LEASES_OPEN_OPTIONS_INIT;
    o.flags = LEASES_OPEN_MUST_EXIST;
    leases::Authority again = leases::Authority::open(db, o);
    EXPECT_TRUE(again.jobs("p").empty());
}
#pragma GCC diagnostic pop

// C++ opens with options of its own: must_exist, synchronous as an enum,
// busy_timeout as a std::chrono duration; never the raw C struct. Each
// reaches the store (SQLite's pragmas say so); {} is every default.
TEST(OpenOptions, CppOpensWithTypedOptionsNeverTheRawCStruct) {
    TempDir dir;
    const std::string db = (dir.path() / "typed.db").string();
    EXPECT_THROW((void)leases::Authority::open(db, {/*must_exist=*/true}), leases::NotFoundError);
    EXPECT_FALSE(fs::exists(db));
    const auto pragma = [](leases::Authority &a, const char *name) {
        char *v = nullptr;
        leases::check(leases_testing_pragma(a.capi(), name, &v));
        return leases::detail::take_string(v);
    };
    {
        leases::Authority a = leases::Authority::open(db, {});
        a.create_production("p");
        EXPECT_EQ(pragma(a, "synchronous"), "2");  // FULL
        EXPECT_EQ(pragma(a, "busy_timeout"), "10000");
    }
    leases::OpenOptions o;
    o.must_exist = true;
    o.synchronous = leases::Synchronous::Normal;
    o.busy_timeout = 250ms;
    {
        leases::Authority a = leases::Authority::open(db, o);
        EXPECT_TRUE(a.jobs("p").empty());
        EXPECT_EQ(pragma(a, "synchronous"), "1");
        EXPECT_EQ(pragma(a, "busy_timeout"), "250");
    }
    o.synchronous = leases::Synchronous::Extra;
    o.busy_timeout = 1500us;  // rounded up to whole milliseconds
    {
        leases::Authority a = leases::Authority::open(db, o);
        EXPECT_EQ(pragma(a, "synchronous"), "3");
        EXPECT_EQ(pragma(a, "busy_timeout"), "2");
    }
    o.busy_timeout = -1ms;
    EXPECT_THROW((void)leases::Authority::open(db, o), leases::InvalidArgumentError);
    static_assert(std::is_same_v<decltype(leases::OpenOptions::busy_timeout), std::chrono::microseconds>);
    static_assert(std::is_enum_v<decltype(leases::OpenOptions::synchronous)>);
}
