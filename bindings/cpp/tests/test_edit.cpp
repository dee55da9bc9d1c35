// Edit semantics through the C++ projection: one write transaction, pending
// leases until commit, rollback on abort and on destruction.
#include "support.hpp"

using namespace leases_test;
using namespace std::chrono_literals;

using Edits = AuthorityTest;

TEST_F(Edits, ClaimAndCompleteInOneEditPublishAtomicallyOnCommit) {
    const auto ids = request(1);
    auto other = leases::Authority::open(db);  // another reader of the same file
    auto e = a().edit();
    std::optional<leases::Lease> l = e.claim("p", "w", 1min);
    ASSERT_TRUE(l.has_value());
    e.complete(*l, R"({"metadata": {"inline": true}})");
    // Uncommitted: nobody else sees the claim or the completion.
    auto before = mini_json::Parser(other.jobs_json("p")).document();
    EXPECT_EQ(before.items.at(0)["state"].str(), "requested");
    e.commit();
    EXPECT_EQ(e.capi(), nullptr) << "commit consumes the edit";
    auto after = mini_json::Parser(other.jobs_json("p")).document();
    EXPECT_EQ(after.items.at(0)["state"].str(), "completed");
    EXPECT_EQ(state(ids[0]), "completed");
    EXPECT_THROW(l->renew(1s), leases::ClosedError) << "completion closed the lease";
}

TEST_F(Edits, APendingLeaseIsClosedForItsOwnOperationsUntilTheEditCommits) {
    request(1);
    auto e = a().edit();
    auto l = e.claim("p", "w", 1min);
    ASSERT_TRUE(l.has_value());
    EXPECT_THROW(l->renew(1h), leases::ClosedError);
    EXPECT_THROW(l->complete(), leases::ClosedError);
    EXPECT_THROW((void)l->export_token(), leases::ClosedError);
    e.commit();
    l->renew(1h);
    l->complete();
}

TEST_F(Edits, AbortRollsBackEverythingAndClosesPendingLeases) {
    const auto ids = request(2);
    const std::string before = a().jobs_json("p");
    auto e = a().edit();
    auto l1 = e.claim("p", "w", 1min);
    auto l2 = e.claim("p", "w", 1min);
    ASSERT_TRUE(l1 && l2);
    e.complete(*l2);
    e.abort();
    EXPECT_EQ(e.capi(), nullptr);
    EXPECT_EQ(a().jobs_json("p"), before);
    EXPECT_THROW(l1->renew(1h), leases::ClosedError);
    EXPECT_THROW(l2->renew(1h), leases::ClosedError);
    e.abort();  // a second abort does nothing
}

TEST_F(Edits, DestroyingAnUncommittedEditRollsItBack) {
    const auto ids = request(1);
    const std::string before = a().jobs_json("p");
    std::optional<leases::Lease> pending;
    {
        auto e = a().edit();
        pending = e.claim("p", "w", 1min);
        ASSERT_TRUE(pending.has_value());
    }
    EXPECT_EQ(a().jobs_json("p"), before);
    EXPECT_THROW(pending->renew(1h), leases::ClosedError);
    // The writer lock was given back: a new claim succeeds.
    EXPECT_TRUE(a().claim("p", "w", 1min).has_value());
}

TEST_F(Edits, NothingToClaimInsideAnEditIsNulloptAndLeavesTheEditUsable) {
    request(1);
    auto e = a().edit();
    auto l = e.claim("p", "w", 1min);
    ASSERT_TRUE(l.has_value());
    EXPECT_FALSE(e.claim("p", "w", 1min).has_value());
    e.complete(*l);
    EXPECT_THROW(e.complete(*l), leases::WrongStateError) << "this claim already finished inside the edit";
    e.commit();
    EXPECT_EQ(state(l->job_id()), "completed");
}

TEST_F(Edits, AFailedCommitConsumesTheEditClosesPendingLeasesAndKeepsActiveOnes) {
    const auto ids = request(2);
    auto active = claim("w", 1h);
    auto e = a().edit();
    auto pending = e.claim("p", "w", 1s);
    ASSERT_TRUE(pending.has_value());
    e.complete(active);
    advance(2s);  // the pending claim is expired at commit
    EXPECT_THROW(e.commit(), leases::ExpiredError);
    EXPECT_EQ(e.capi(), nullptr) << "a failed commit consumes the edit too";
    EXPECT_THROW(pending->renew(1h), leases::ClosedError);
    EXPECT_EQ(state(active.job_id()), "claimed");
    EXPECT_EQ(state(pending->job_id()), "requested");
    active.complete();  // a failed operation left the active lease usable
}

TEST_F(Edits, AConsumedEditRejectsFurtherUse) {
    request(1);
    auto e = a().edit();
    e.commit();
    EXPECT_THROW((void)e.claim("p", "w", 1min), leases::InvalidArgumentError);
    EXPECT_THROW(e.commit(), leases::InvalidArgumentError);
}
