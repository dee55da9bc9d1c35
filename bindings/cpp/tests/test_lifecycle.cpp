// Lifecycle of the C++ handles: claim, renew, finish, ownership and moves,
// the reference executor, and the ABI check at open.
#include "support.hpp"

#include <fstream>
#include <set>
#include <thread>
#include <type_traits>

using namespace leases_test;
using namespace std::chrono_literals;

static_assert(!std::is_copy_constructible_v<leases::Authority> && std::is_nothrow_move_constructible_v<leases::Authority>,
              "Authority is move-only");
static_assert(!std::is_copy_constructible_v<leases::Lease> && std::is_nothrow_move_constructible_v<leases::Lease>,
              "Lease is move-only");
static_assert(!std::is_copy_constructible_v<leases::Edit> && std::is_nothrow_move_constructible_v<leases::Edit>,
              "Edit is move-only");
static_assert(!std::is_copy_constructible_v<leases::Execution> &&
                  std::is_nothrow_move_constructible_v<leases::Execution>,
              "Execution is move-only");
static_assert(!std::is_copy_assignable_v<leases::Lease> && std::is_nothrow_move_assignable_v<leases::Lease>,
              "Lease is move-assignable only");

using Lifecycle = AuthorityTest;

TEST_F(Lifecycle, ClaimRenewCompleteClosesTheLeaseAndCompletesTheJob) {
    const auto ids = request(1);
    std::optional<leases::Lease> l = a().claim("p", "w1", 30s);
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->job_id(), ids[0]);
    EXPECT_EQ(state(ids[0]), "claimed");
    l->renew(1min);
    l->complete(R"({"metadata": {"frames": 1}, "provenance": {"tool": "cpp"}})");
    EXPECT_EQ(state(ids[0]), "completed");
    EXPECT_THROW(l->complete(), leases::ClosedError);
}

TEST_F(Lifecycle, ClaimReturnsNulloptWhenNothingIsClaimable) {
    EXPECT_FALSE(a().claim("p", "w", 1s).has_value());
    request(1);
    auto first = a().claim("p", "w", 1s);
    EXPECT_TRUE(first.has_value());
    EXPECT_FALSE(a().claim("p", "w", 1s).has_value());
}

TEST_F(Lifecycle, LeaseReportsJobProductionWorkerAndExactExpiry) {
    const auto ids = request(1);
    auto l = a().claim_job("p", ids[0], "worker-7", 1500us);
    EXPECT_EQ(l.job_id(), ids[0]);
    EXPECT_EQ(l.production(), "p");
    EXPECT_EQ(l.worker(), "worker-7");
    EXPECT_EQ(l.expiry_unix_us(), t0 + 1500);  // frozen clock, no rounding
    EXPECT_EQ(l.expiry().time_since_epoch(), std::chrono::microseconds(t0 + 1500));
    const auto j = job(ids[0]);
    EXPECT_EQ(j["worker"].str(), "worker-7");
    EXPECT_EQ(j["expiry_unix_us"].integer(), t0 + 1500);
}

TEST_F(Lifecycle, ALeaseReadsItsJobsPayloadExactly) {
    const std::string bytes("\0\xff" "binary\0", 9);
    const auto id = a().request_job("p", "", bytes);
    auto l = a().claim_job("p", id, "w", 1s);
    const auto got = l.payload();
    EXPECT_EQ(std::string(got.begin(), got.end()), bytes);
    const auto empty = a().request_job("p");
    auto e = a().claim_job("p", empty, "w", 1s);
    EXPECT_TRUE(e.payload().empty());
    l.release();
    EXPECT_THROW((void)l.payload(), leases::ClosedError);
}

TEST_F(Lifecycle, DestroyingALeaseFreesLocalMemoryOnlyAndWritesNothing) {
    const auto ids = request(1);
    const std::string events_before = a().events_json("p");
    {
        auto l = claim("w", 1min);
        (void)l;
    }
    const std::string jobs_after_drop = a().jobs_json("p");
    const std::string events_after_drop = a().events_json("p");
    EXPECT_EQ(state(ids[0]), "claimed") << "the claim lasts until expiry or cancel";
    // Nothing written by the destructor: a later read sees the same rows.
    EXPECT_EQ(a().jobs_json("p"), jobs_after_drop);
    EXPECT_EQ(a().events_json("p"), events_after_drop);
    EXPECT_NE(events_after_drop, events_before);  // the claim itself was recorded
    EXPECT_FALSE(a().claim("p", "w2", 1s).has_value()) << "still owned by the dropped lease";
}

TEST_F(Lifecycle, ReleaseMakesTheJobRequestedAgainAndClosesTheLease) {
    const auto ids = request(1);
    auto l = claim();
    l.release();
    EXPECT_EQ(state(ids[0]), "requested");
    EXPECT_THROW(l.renew(1s), leases::ClosedError);
    EXPECT_TRUE(a().claim("p", "w2", 1s).has_value());
}

TEST_F(Lifecycle, FailRecordsTheReasonAndClosesTheLease) {
    const auto ids = request(1);
    auto l = claim();
    l.fail("render crashed");
    EXPECT_EQ(state(ids[0]), "failed");
    EXPECT_EQ(job(ids[0])["reason"].str(), "render crashed");
    EXPECT_THROW(l.release(), leases::ClosedError);
}

TEST_F(Lifecycle, RequestWithAKeyIsIdempotent) {
    const std::string a1 = a().request_job("p", "frame-1", std::string("payload"));
    const std::string a2 = a().request_job("p", "frame-1", std::string("payload"));
    EXPECT_EQ(a1, a2);
    const std::vector<std::uint8_t> bytes{0, 1, 2, 255};
    const std::string b = a().request_job("p", "frame-2", bytes);
    EXPECT_NE(a1, b);
    EXPECT_THROW((void)a().request_job("p", "frame-1", std::string("other")), leases::WrongStateError);
}

TEST_F(Lifecycle, MovedFromHandlesAreEmptyAndRejectedNotDereferenced) {
    request(1);
    auto l = claim();
    leases::Lease moved = std::move(l);
    EXPECT_EQ(l.capi(), nullptr);  // NOLINT(bugprone-use-after-move): the rule under test
    EXPECT_NE(moved.capi(), nullptr);
    EXPECT_THROW(l.renew(1s), leases::InvalidArgumentError);
    EXPECT_THROW((void)l.job_id(), leases::InvalidArgumentError);
    moved.renew(2min);

    leases::Authority other = std::move(*auth);
    EXPECT_EQ(auth->capi(), nullptr);
    EXPECT_THROW(auth->create_production("q"), leases::InvalidArgumentError);
    other.create_production("q");
    auth = std::move(other);
}

TEST_F(Lifecycle, ALeaseOutlivingItsAuthorityReportsClosed) {
    request(1);
    auto l = claim();
    auth->close();
    EXPECT_THROW(l.renew(1s), leases::ClosedError);
}

TEST_F(Lifecycle, InputsWithANulByteAreRejectedInsteadOfCut) {
    // "p\0x" would reach C as "p": an existing production.
    EXPECT_THROW(a().create_production(std::string("p\0x", 3)), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().claim(std::string("p\0x", 3), "w", 1s), leases::InvalidArgumentError);
}

TEST_F(Lifecycle, CapiHandleIsTheOneTheWrapperOwns) {
    request(1);
    auto l = claim();
    std::int64_t expiry = 0;
    ASSERT_EQ(leases_lease_expiry(l.capi(), &expiry), LEASES_OK);
    EXPECT_EQ(expiry, l.expiry_unix_us());
    leases_lease *raw = l.release_capi();
    EXPECT_EQ(l.capi(), nullptr);
    leases::Lease adopted(raw);
    EXPECT_EQ(adopted.expiry_unix_us(), expiry);
}

TEST(Library, AbiVersionOfTheLoadedLibraryEqualsTheHeader) {
    EXPECT_EQ(leases::abi_version(), static_cast<std::uint32_t>(LEASES_ABI_VERSION));
    EXPECT_GE(leases::abi_revision(), static_cast<std::uint32_t>(LEASES_ABI_REVISION));
    EXPECT_FALSE(leases::version().empty());
}

TEST(Library, AbiMismatchNamesBothNumbers) {
    try {
        leases::detail::check_abi(1, 7, 1, 1);
        FAIL() << "no AbiMismatch";
    } catch (const leases::AbiMismatch &e) {
        EXPECT_EQ(e.compiled(), 1u);
        EXPECT_EQ(e.loaded(), 7u);
        const std::string m = e.what();
        EXPECT_NE(m.find("LEASES_ABI_VERSION 1"), std::string::npos) << m;
        EXPECT_NE(m.find("reports ABI version 7"), std::string::npos) << m;
        EXPECT_EQ(e.status(), LEASES_INTERNAL);
    }
    EXPECT_NO_THROW(leases::detail::check_abi(LEASES_ABI_VERSION, leases::abi_version(), LEASES_ABI_REVISION,
                                              leases::abi_revision()));
}

TEST(Library, AbiMismatchOnAnOlderRevisionNamesBothRevisions) {
    try {
        leases::detail::check_abi(1, 1, 3, 2);
        FAIL() << "no AbiMismatch";
    } catch (const leases::AbiMismatch &e) {
        EXPECT_EQ(e.compiled_revision(), 3u);
        EXPECT_EQ(e.loaded_revision(), 2u);
        const std::string m = e.what();
        EXPECT_NE(m.find("revision 3,"), std::string::npos) << m;
        EXPECT_NE(m.find("revision 2;"), std::string::npos) << m;
    }
    EXPECT_NO_THROW(leases::detail::check_abi(1, 1, 2, 3));  // a newer library fits
}

// ---- reference executor ----------------------------------------------------------

using ExecutionTest = AuthorityTest;

TEST_F(ExecutionTest, FinishRenamesTheOutputAndCompletesTheLease) {
    const auto ids = request(1);
    auto l = claim("w", 1min);
    const fs::path out = dir.path() / "out";
    fs::create_directory(out);
    leases::Execution run = l.execution(out.string());
    const std::string temp = run.temp_path(), final_path = run.final_path();
    EXPECT_NE(temp, final_path);
    EXPECT_NE(temp.find(ids[0]), std::string::npos);
    EXPECT_NE(final_path.find(ids[0]), std::string::npos);
    {
        std::ofstream f(temp, std::ios::binary);
        f << "rendered";
    }
    run.finish(R"({"metadata": {"bytes": 8}})");
    EXPECT_EQ(run.capi(), nullptr) << "finish consumes the execution";
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_TRUE(fs::exists(final_path));
    EXPECT_EQ(state(ids[0]), "completed");
    EXPECT_THROW(l.renew(1s), leases::ClosedError);
}

TEST_F(ExecutionTest, FinishWithBadFactsThrowsAndLeavesTheExecutionUsable) {
    request(1);
    auto l = claim("w", 1min);
    const fs::path out = dir.path() / "out";
    fs::create_directory(out);
    auto run = l.execution(out.string());
    { std::ofstream(run.temp_path()) << "x"; }
    EXPECT_THROW(run.finish("{not json"), leases::InvalidArgumentError);
    ASSERT_NE(run.capi(), nullptr);
    run.finish();
}

TEST_F(ExecutionTest, DestroyingAnUnfinishedExecutionRemovesOnlyItsOwnFilesAndKeepsTheClaim) {
    const auto ids = request(1);
    auto l = claim("w", 1min);
    const fs::path out = dir.path() / "out";
    fs::create_directory(out);
    std::ofstream(out / "someone-elses-file") << "keep";
    std::string temp;
    {
        auto run = l.execution(out.string());
        temp = run.temp_path();
        std::ofstream(temp) << "partial";
    }
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_TRUE(fs::exists(out / "someone-elses-file"));
    EXPECT_EQ(state(ids[0]), "claimed");
    l.complete();
}

TEST_F(ExecutionTest, ARejectedFinishRemovesItsFilesAndConsumesTheExecution) {
    const auto ids = request(1);
    auto l = claim("w", 1s);
    const fs::path out = dir.path() / "out";
    fs::create_directory(out);
    auto run = l.execution(out.string());
    const std::string temp = run.temp_path(), final_path = run.final_path();
    std::ofstream(temp) << "late";
    advance(2s);
    EXPECT_THROW(run.finish(), leases::ExpiredError);
    EXPECT_EQ(run.capi(), nullptr);
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_FALSE(fs::exists(final_path));
    EXPECT_THROW((void)run.temp_path(), leases::ClosedError);
}

TEST_F(Lifecycle, AMovedEditAndExecutionKeepTheirWorkWhenTheSourceIsDestroyed) {
    const auto ids = request(2);
    std::optional<leases::Edit> target;
    {
        leases::Edit source = a().edit();
        auto pending = source.claim("p", "w", 1min);
        ASSERT_TRUE(pending.has_value());
        target.emplace(std::move(source));
    }  // the moved-from source must not abort the transaction
    target->commit();
    EXPECT_EQ(state(ids[0]), "claimed");

    auto l = claim("w", 1min);
    const fs::path out = dir.path() / "out";
    fs::create_directory(out);
    std::optional<leases::Execution> run;
    {
        leases::Execution first = l.execution(out.string());
        std::ofstream(first.temp_path()) << "moved";
        run.emplace(std::move(first));
    }  // the moved-from execution must not abandon (remove) the files
    EXPECT_TRUE(fs::exists(run->temp_path()));
    run->finish();
    EXPECT_EQ(state(ids[1]), "completed");
}

TEST_F(Lifecycle, ThreadsSharingOneAuthorityClaimEachJobExactlyOnce) {
    constexpr int jobs = 24, workers = 4;
    request(jobs);
    std::vector<std::vector<std::string>> claimed(workers);
    std::vector<std::string> errors(workers);
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
        threads.emplace_back([&, w] {
            try {
                while (auto l = a().claim("p", "worker-" + std::to_string(w), 1min)) {
                    claimed[static_cast<std::size_t>(w)].push_back(l->job_id());
                    l->complete();
                }
                // Per-thread errors: this thread's message is its own.
                (void)a().claim("missing-" + std::to_string(w), "w", 1s);
            } catch (const leases::NotFoundError &e) {
                errors[static_cast<std::size_t>(w)] = e.what();
            } catch (const std::exception &e) {
                errors[static_cast<std::size_t>(w)] = std::string("unexpected: ") + e.what();
            }
        });
    }
    for (auto &t : threads) t.join();
    std::set<std::string> all;
    std::size_t total = 0;
    for (int w = 0; w < workers; ++w) {
        total += claimed[static_cast<std::size_t>(w)].size();
        all.insert(claimed[static_cast<std::size_t>(w)].begin(), claimed[static_cast<std::size_t>(w)].end());
        EXPECT_NE(errors[static_cast<std::size_t>(w)].find("missing-" + std::to_string(w)), std::string::npos)
            << errors[static_cast<std::size_t>(w)];
    }
    EXPECT_EQ(total, static_cast<std::size_t>(jobs));
    EXPECT_EQ(all.size(), static_cast<std::size_t>(jobs)) << "a job was claimed twice";
}

TEST_F(Lifecycle, CompleteAndClaimNextCompletesAndClaimsInOneCommit) {
    check_complete_and_claim_next(a(), [this](const std::string &id) { return state(id); });
}

// Every face takes complete_and_claim_next's facts before its duration (C,
// Go, Python, Rust); C++ too. The published facts are the completed job's.
TEST_F(Lifecycle, CompleteAndClaimNextTakesTheFactsThenTheDurationAsEveryFaceDoes) {
    const auto ids = request(2);
    std::optional<leases::Lease> l = a().claim("p", "w", 30s);
    ASSERT_TRUE(l.has_value());
    const std::string facts = R"({"metadata": {"frames": "3"}})";
    std::optional<leases::Lease> next = l->complete_and_claim_next(facts, 30s);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->job_id(), ids[1]);
    EXPECT_EQ(a().job("p", ids[0]).facts.metadata, (std::map<std::string, std::string>{{"frames", "\"3\""}}));
}
