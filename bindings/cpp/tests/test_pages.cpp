// Typed paged listings on SQLite and PostgreSQL: Authority::jobs_page,
// events_page and productions_page, and the ranges each_job, each_event and
// each_production that read a page at a time, with more rows than a page.
#include "pg.hpp"

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

class Pages : public StoreTest {
protected:
    template <class Range>
    static std::vector<std::string> ids(Range &&range) {
        std::vector<std::string> out;
        for (const auto &item : range) out.push_back(item.id);
        return out;
    }
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Stores, Pages, ::testing::Values(Store::SQLite, Store::Postgres), store_name);

TEST_P(Pages, EachJobListsEveryJobOnceInRequestOrderAcrossPages) {
    std::vector<std::string> all;
    for (int i = 0; i < 7; ++i) all.push_back(a().request_job("p"));
    leases::JobQuery q;
    q.page_size = 3;
    EXPECT_EQ(ids(a().each_job("p", q)), all);
    EXPECT_EQ(ids(a().each_job("p")), all);  // the default page size

    leases::Page<leases::Job> first = a().jobs_page("p", q);
    ASSERT_EQ(first.items.size(), 3u);
    ASSERT_TRUE(first.next.has_value());
    EXPECT_EQ(first.items[0].id, all[0]);
    EXPECT_EQ(first.items[0].state, leases::JobState::Requested);
    const leases::Page<leases::Job> second = a().jobs_page("p", q, *first.next);
    EXPECT_EQ(second.items[0].id, all[3]);
    q.page_size = 7;
    EXPECT_EQ(a().jobs_page("p", q).next, std::nullopt) << "a page holding the last job has no next";
}

TEST_P(Pages, EachJobFiltersByStateKeyAndId) {
    std::vector<std::string> all;
    for (int i = 0; i < 5; ++i) all.push_back(a().request_job("p", "k" + std::to_string(i)));
    (void)a().claim_job("p", all[1], "w", 1min);
    (void)a().claim_job("p", all[3], "w", 1min);
    a().cancel("p", all[4]);
    leases::JobQuery q;
    q.page_size = 1;
    q.states = {leases::JobState::Claimed};
    EXPECT_EQ(ids(a().each_job("p", q)), (std::vector<std::string>{all[1], all[3]}));
    q.states = {leases::JobState::Requested, leases::JobState::Cancelled};
    EXPECT_EQ(ids(a().each_job("p", q)), (std::vector<std::string>{all[0], all[2], all[4]}));
    for (const leases::Job &j : a().each_job("p", q)) {
        EXPECT_NE(j.state, leases::JobState::Claimed);
    }
    q.states = {leases::JobState::Dead};
    EXPECT_TRUE(ids(a().each_job("p", q)).empty());
    q.states.clear();
    q.key = "k2";
    EXPECT_EQ(ids(a().each_job("p", q)), std::vector<std::string>{all[2]});
    q.key.clear();
    q.job_id = all[3];
    EXPECT_EQ(ids(a().each_job("p", q)), std::vector<std::string>{all[3]});
}

TEST_P(Pages, EachJobReadsPageByPageNotEverythingAtOnce) {
    for (int i = 0; i < 5; ++i) (void)a().request_job("p");
    leases::JobQuery q;
    q.page_size = 2;
    auto range = a().each_job("p", q);
    auto it = range.begin();
    ASSERT_NE(it, range.end());
    // A job requested after the first page was read still comes: the later
    // pages are read as the iteration reaches them.
    const std::string late = a().request_job("p");
    std::vector<std::string> seen;
    for (; it != range.end(); ++it) seen.push_back(it->id);
    ASSERT_EQ(seen.size(), 6u);
    EXPECT_EQ(seen.back(), late);
}

TEST_P(Pages, BadPageArgumentsAreRefusedAtTheCallAndReadNothing) {
    leases::JobQuery q;
    q.page_size = LEASES_MAX_PAGE_SIZE + 1;
    EXPECT_THROW((void)a().each_job("p", q), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().jobs_page("p", q), leases::InvalidArgumentError);
    q.page_size = LEASES_MAX_PAGE_SIZE;
    EXPECT_NO_THROW((void)a().jobs_page("p", q));
    q.states = {leases::JobState::Unknown};
    EXPECT_THROW((void)a().each_job("p", q), leases::InvalidArgumentError);
    q.states.clear();
    q.key = std::string("a\0b", 3);
    EXPECT_THROW((void)a().each_job("p", q), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().jobs_page("p", leases::JobQuery{}, "not a cursor"), leases::InvalidArgumentError);
    auto missing = a().each_job("missing");
    EXPECT_THROW((void)missing.begin(), leases::NotFoundError);

    leases::EventQuery e;
    e.production = "p";
    e.kinds = {"claimed", ""};
    EXPECT_THROW((void)a().each_event(e), leases::InvalidArgumentError);
    e.kinds = {"claimed,completed"};
    EXPECT_THROW((void)a().each_event(e), leases::InvalidArgumentError);
    e.kinds = {"no_such_kind"};
    EXPECT_THROW((void)a().events_page(e), leases::InvalidArgumentError);
    e.kinds.clear();
    e.after_seq = -1;
    EXPECT_THROW((void)a().each_event(e), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().each_production(LEASES_MAX_PAGE_SIZE + 1), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().productions_page("", LEASES_MAX_PAGE_SIZE + 1), leases::InvalidArgumentError);
}

TEST_P(Pages, EachEventFollowsNextUntilNoMoreCanBeReadNow) {
    std::vector<std::string> jobs;
    for (int i = 0; i < 3; ++i) jobs.push_back(a().request_job("p"));
    for (const std::string &id : jobs) a().claim_job("p", id, "w", 1min).complete();
    leases::EventQuery q;
    q.production = "p";
    q.page_size = 2;
    std::vector<std::string> kinds;
    std::int64_t last = 0;
    for (const leases::Event &e : a().each_event(q)) {
        EXPECT_GT(e.seq, last);
        last = e.seq;
        kinds.push_back(e.kind);
    }
    EXPECT_EQ(kinds.size(), 10u);  // production_created, then 3 x (requested, claimed, completed)
    EXPECT_EQ(kinds.front(), "production_created");
    q.after_seq = last;
    auto after = a().each_event(q);
    EXPECT_TRUE(after.begin() == after.end()) << "nothing after the last";
    const leases::EventPage none = a().events_page(q);
    EXPECT_TRUE(none.items.empty());
    EXPECT_EQ(none.next, last);
    EXPECT_FALSE(none.more);

    leases::EventQuery timeline;
    timeline.job_id = jobs[1];
    timeline.kinds = {"claimed", "completed"};
    timeline.page_size = 1;
    std::vector<std::string> of_one;
    for (const leases::Event &e : a().each_event(timeline)) {
        EXPECT_EQ(e.job_id, std::optional<std::string>(jobs[1]));
        of_one.push_back(e.kind);
    }
    EXPECT_EQ(of_one, (std::vector<std::string>{"claimed", "completed"}));
    const leases::EventPage first = a().events_page(timeline);
    EXPECT_EQ(first.items.size(), 1u);
    EXPECT_TRUE(first.more);
    EXPECT_EQ(first.next, first.items[0].seq);
}

TEST_P(Pages, EachProductionListsEveryProductionByNameAcrossPages) {
    for (const char *name : {"d", "b", "a", "c"}) a().create_production(name);
    std::vector<std::string> names;
    for (const leases::Production &p : a().each_production(2)) {
        EXPECT_EQ(p.id.size(), 36u);
        EXPECT_EQ(p.created_at, at());
        names.push_back(p.name);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "p"}));
    // The range serves the standard library's input-iterator algorithms.
    auto range = a().each_production(2);
    const std::vector<leases::Production> all(range.begin(), range.end());
    ASSERT_EQ(all.size(), 5u);
    EXPECT_EQ(all[4].name, "p");
    auto again = a().each_production(1);
    auto it = again.begin();
    EXPECT_EQ((*it++).name, "a");
    EXPECT_EQ(it->name, "b");
    const leases::Page<leases::Production> first = a().productions_page("", 3);
    ASSERT_EQ(first.items.size(), 3u);
    ASSERT_TRUE(first.next.has_value());
    const leases::Page<leases::Production> rest = a().productions_page(*first.next, 3);
    ASSERT_EQ(rest.items.size(), 2u);
    EXPECT_EQ(rest.items[1].name, "p");
    EXPECT_EQ(rest.next, std::nullopt);
}
