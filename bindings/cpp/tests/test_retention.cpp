// Retention and pruning in C++, on SQLite and PostgreSQL: the policy set
// and read back, a prune by age with an archive and as a dry run, and bad
// input refused with InvalidArgumentError.
#include "pg.hpp"

#include <fstream>
#include <sstream>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

class Retention : public StoreTest {};

TEST_P(Retention, ThePolicyIsSetAndReadBack) {
    EXPECT_EQ(a().retention_policy("p"), leases::RetentionPolicy{});
    leases::RetentionPolicy r;
    r.keep_completed = 0us;  // for good
    r.keep_failed = 36h;
    a().set_retention_policy("p", r);
    EXPECT_EQ(a().retention_policy("p"), r);
    r.keep_events = -1us;
    EXPECT_THROW(a().set_retention_policy("p", r), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().retention_policy("nope"), leases::NotFoundError);
}

TEST_P(Retention, APruneDeletesOnlyFinishedJobsWithItsArchive) {
    const std::string done = a().request_job("p", "a", std::string());
    std::optional<leases::Lease> l = a().claim("p", "w", 1min);
    ASSERT_TRUE(l.has_value());
    l->complete();
    const std::string waiting = a().request_job("p", "b", std::string());
    advance(1h);
    leases::PruneOptions o;
    o.older_than = 1us;
    o.dry_run = true;
    EXPECT_EQ(a().prune(o).jobs, 1);
    o.dry_run = false;
    o.archive = (dir.path() / "archive.jsonl").string();
    EXPECT_EQ(a().prune(o).jobs, 1);
    EXPECT_THROW((void)a().job("p", done), leases::NotFoundError);
    EXPECT_EQ(a().job("p", waiting).state, leases::JobState::Requested);
    std::ifstream in(o.archive);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find(done), std::string::npos);
    o.older_than = -1us;
    EXPECT_THROW((void)a().prune(o), leases::InvalidArgumentError);
}

INSTANTIATE_TEST_SUITE_P(Stores, Retention, ::testing::Values(Store::SQLite, Store::Postgres), store_name);

}  // namespace
