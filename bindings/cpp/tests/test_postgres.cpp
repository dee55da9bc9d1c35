// A postgres:// or postgresql:// location selects the PostgreSQL store
// (several hosts): the projection passes the URL to leases_authority_open as is,
// the whole API works on it, a token crosses between two handles, the clock
// seam replaces the server's clock, and an open failure never shows the URL's
// password. Each test runs in a fresh schema of $LEASES_TEST_PG_URL, created
// and dropped with psql; without a server the tests fail under
// LEASES_REQUIRE_PG and are skipped otherwise.
#include "pg.hpp"
#include "process.hpp"

#include <future>
#include <thread>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

const char *const kPassword = "SECRETPW";

// A fresh schema and an authority opened on it by URL, with production "p".
class Postgres : public ::testing::Test {
protected:
    void SetUp() override {
        pg_server_or_skip(server);
        if (server.empty()) {
            return;
        }
        schema = unique_schema();
        psql("CREATE SCHEMA " + schema);
        url = with_param(server, "search_path=" + schema);
        auth.emplace(leases::Authority::open(url));
        auth->create_production("p");
    }

    void TearDown() override {
        auth.reset();
        if (!schema.empty()) {
            psql("DROP SCHEMA " + schema + " CASCADE");
        }
    }

    leases::Authority &a() { return *auth; }

    // Runs sql with the test's schema as the current one.
    std::string query(const std::string &sql) { return psql("SET search_path TO " + schema + "; " + sql); }

    std::string state(const std::string &id) {
        const mini_json::Value list = mini_json::Parser(a().jobs_json("p")).document();
        for (const auto &j : list.items) {
            if (j["id"].str() == id) {
                return j["state"].str();
            }
        }
        throw std::runtime_error("job " + id + " not listed");
    }

    std::string server, schema, url;
    std::optional<leases::Authority> auth;
};

}  // namespace

TEST_F(Postgres, APostgresUrlOpensThePostgresqlStoreForTheWholeLifecycle) {
    const std::string first = a().request_job("p", "frame-1", "one");
    const std::string second = a().request_job("p", "frame-2");
    EXPECT_EQ(a().request_job("p", "frame-1", "one"), first);

    std::optional<leases::Lease> l = a().claim("p", "w1", 30s);
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->job_id(), first);
    const std::vector<std::uint8_t> payload = l->payload();
    EXPECT_EQ(std::string(payload.begin(), payload.end()), "one");
    const auto before = l->expiry();
    l->renew(std::chrono::minutes(5));
    EXPECT_GT(l->expiry(), before);
    l->complete(R"({"metadata": {"frames": 1}, "provenance": {"tool": "cpp"}})");

    const mini_json::Value jobs = mini_json::Parser(a().jobs_json("p")).document();
    ASSERT_EQ(jobs.items.size(), 2u);
    EXPECT_EQ(jobs.items[0]["id"].str(), first);
    EXPECT_EQ(jobs.items[0]["state"].str(), "completed");
    EXPECT_EQ(jobs.items[0]["worker"].str(), "w1");
    EXPECT_EQ(jobs.items[1]["id"].str(), second);
    EXPECT_EQ(jobs.items[1]["state"].str(), "requested");

    // Each test has a schema of its own and no other writer of it runs, so
    // the process reads its own committed events at once (docs/postgres.md).
    std::vector<std::string> kinds;
    std::int64_t last_seq = 0;
    const mini_json::Value events = mini_json::Parser(a().events_json("p")).document();
    for (const auto &e : events.items) {
        EXPECT_GT(e["seq"].integer(), last_seq);
        last_seq = e["seq"].integer();
        if (e["job_id"].kind == mini_json::Value::Kind::String && e["job_id"].str() == first) {
            kinds.push_back(e["kind"].str());
        }
    }
    EXPECT_EQ(kinds, (std::vector<std::string>{"requested", "claimed", "renewed", "completed"}));
    EXPECT_EQ(mini_json::Parser(a().events_json("p", last_seq)).document().items.size(), 0u);

    // The rows are in the PostgreSQL schema: the URL was not taken for a file name.
    EXPECT_EQ(query("SELECT count(*) FROM leases_jobs"), "2");
    EXPECT_EQ(query("SELECT string_agg(kind || ':' || key || '=' || value_json, ',' ORDER BY kind) "
                    "FROM leases_facts WHERE job_id = '" + first + "'"),
              R"(metadata:frames=1,provenance:tool="cpp")");
}

TEST_F(Postgres, ThePostgresqlSchemeSelectsPostgresqlToo) {
    const std::string alt = "postgresql" + url.substr(url.find("://"));
    {
        auto other = leases::Authority::open(alt.c_str());  // a C string converts too
        other.create_production("q");
    }
    EXPECT_EQ(query("SELECT count(*) FROM leases_productions"), "2");
}

TEST_F(Postgres, ATokenExportedOnOneHandleIsImportedThroughASecondHandle) {
    const std::string id = a().request_job("p");
    leases::Lease l = a().claim_job("p", id, "w1", 1min);
    const std::string token = l.export_token();
    {
        leases::Authority other = leases::Authority::open(url);
        leases::Lease again = other.import_token(token);
        EXPECT_EQ(again.job_id(), id);
        EXPECT_EQ(again.worker(), "w1");
        EXPECT_EQ(again.expiry_unix_us(), l.expiry_unix_us());
        again.renew(2min);
        again.complete(R"({"metadata": {"by": "second handle"}})");
    }
    EXPECT_EQ(state(id), "completed");
    EXPECT_THROW(l.renew(3min), leases::WrongStateError);  // the claim is finished, for every copy
}

TEST_F(Postgres, ACancelThroughOneHandleIsSeenByTheHolderOnAnother) {
    const std::string id = a().request_job("p");
    leases::Authority worker_side = leases::Authority::open(url);
    std::optional<leases::Lease> l = worker_side.claim("p", "w1", 30s);
    ASSERT_TRUE(l.has_value());
    a().cancel("p", id);
    EXPECT_THROW(l->complete(), leases::CancelledError);
}

TEST_F(Postgres, AnEditPublishesOnlyAtCommit) {
    const std::string id = a().request_job("p");
    leases::Edit edit = a().edit();
    std::optional<leases::Lease> pending = edit.claim("p", "w1", 5s);
    ASSERT_TRUE(pending.has_value());
    edit.complete(*pending, R"({"metadata": {"inline": true}})");
    edit.commit();
    EXPECT_EQ(state(id), "completed");
}

TEST_F(Postgres, TheSeamClockReplacesTheServersAndAClockBehindTheMarkRegresses) {
    const std::int64_t t0 = real_now_us();
    set_clock(a(), t0);
    const std::string id = a().request_job("p");
    (void)a().request_job("p");
    leases::Lease l = a().claim_job("p", id, "w1", 30s + 1us);
    EXPECT_EQ(l.expiry_unix_us(), t0 + 30'000'001);  // the seam's clock, not the server's
    set_clock(a(), t0 + 10'000'000);
    l.renew(30s);
    EXPECT_EQ(l.expiry_unix_us(), t0 + 40'000'000);

    set_clock(a(), t0 + 5'000'000);  // behind the high-water mark (t0 + 10 s)
    EXPECT_THROW(l.renew(1min), leases::ClockRegressedError);
    EXPECT_THROW((void)a().claim("p", "w2", 30s), leases::ClockRegressedError);
    EXPECT_EQ(l.expiry_unix_us(), t0 + 40'000'000) << "a rejection changes nothing";

    set_clock(a(), t0 + 10'000'000);  // caught up
    l.complete();
    EXPECT_EQ(state(id), "completed");
}

TEST(PostgresOpen, AFailedOpenIsAStorageErrorWithoutThePassword) {
    const std::string url = std::string("postgres://u:") + kPassword + "@127.0.0.1:1/x";
    try {
        (void)leases::Authority::open(url);
        FAIL() << "opening a server that is not there succeeded";
    } catch (const leases::StorageError &e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find(kPassword), std::string::npos) << "the password leaked into the message";
        EXPECT_NE(what.find("127.0.0.1:1"), std::string::npos) << what;  // still names the server
        const char *last = leases_last_error();
        EXPECT_EQ(std::string(last ? last : "").find(kPassword), std::string::npos);
    }
}

TEST_F(Postgres, PagesRecordsAndOpenOptionsWorkOnPostgres) {
    const std::string first = a().request_job("p", "k1");
    const std::string second = a().request_job("p", "k2");
    const mini_json::Value page = mini_json::Parser(a().jobs_page_json("p", "", "", "", "", 1)).document();
    ASSERT_EQ(page["jobs"].items.size(), 1u);
    EXPECT_EQ(page["jobs"].items[0]["id"].str(), first);
    const mini_json::Value rest = mini_json::Parser(a().jobs_page_json("p", "", "", "", page["next"].str(), 1)).document();
    EXPECT_EQ(rest["jobs"].items[0]["id"].str(), second);
    EXPECT_EQ(rest["next"].kind, mini_json::Value::Kind::Null);
    EXPECT_EQ(mini_json::Parser(a().job_json("p", second)).document()["key"].str(), "k2");
    EXPECT_EQ(mini_json::Parser(a().job_counts_json("p")).document()["requested"].integer(), 2);

    leases::OpenOptions o;
    o.synchronous = leases::Synchronous::Full;  // a SQLite setting
    EXPECT_THROW((void)leases::Authority::open(url, o), leases::InvalidArgumentError);
    o = leases::OpenOptions{};
    o.must_exist = true;
    o.busy_timeout = 30s;  // not the default, and no bound a loaded host's connect could pass
    leases::Authority again = leases::Authority::open(url, o);
    EXPECT_EQ(again.jobs("p").size(), 2u);
    const std::string empty_schema = unique_schema();
    psql("CREATE SCHEMA " + empty_schema);
    EXPECT_THROW((void)leases::Authority::open(with_param(server, "search_path=" + empty_schema), o),
                 leases::NotFoundError);
    psql("DROP SCHEMA " + empty_schema + " CASCADE");
}

TEST_F(Postgres, CompleteAndClaimNextCompletesAndClaimsInOneCommit) {
    check_complete_and_claim_next(a(), [this](const std::string &id) { return state(id); });
}

// ---- the worker runtime on PostgreSQL ------------------------------------------

TEST_F(Postgres, AWaitingClaimWakesWhenAnotherHandleCommitsARequest) {
    leases::Authority other = leases::Authority::open(url);
    std::thread requester([&] {
        std::this_thread::sleep_for(200ms);
        (void)other.request_job("p", "late");
    });
    const auto start = std::chrono::steady_clock::now();
    std::optional<leases::Lease> l = a().claim_wait("p", "w", 1min, 1h);
    requester.join();
    ASSERT_TRUE(l.has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "woke by NOTIFY, not by the hour's bound";
    EXPECT_EQ(state(l->job_id()), "claimed");
}

TEST_F(Postgres, ACancellerEndsAWaitAndClaimsNothing) {
    const leases::Canceller c;
    std::thread other([&] {
        std::this_thread::sleep_for(100ms);
        c.cancel();
    });
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, 1h, c), leases::InterruptedError);
    other.join();
    const std::string id = a().request_job("p");
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, 1h, c), leases::InterruptedError);
    EXPECT_EQ(state(id), "requested");
}

TEST_F(Postgres, ACoordinatorsCancelOnAnotherHandleReachesAKeptAliveLease) {
    const std::string id = a().request_job("p");
    leases::Lease l = *a().claim("p", "w", 3s);
    l.keep_alive(3s, 100ms);
    leases::Authority other = leases::Authority::open(url);
    other.cancel("p", id);
    const std::optional<leases::Verdict> v = l.wait_lost(1h);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->reason(), LEASES_CANCELLED);
    EXPECT_THROW(v->throw_if_not_held(), leases::CancelledError);
}

TEST_F(Postgres, KeepAliveHoldsALeaseForManyOfItsDurations) {
    (void)a().request_job("p");
    // Renewed every third of 2 s: a host stalled for over a second keeps it.
    leases::Lease l = *a().claim("p", "w", 2s);
    l.keep_alive(2s);
    std::this_thread::sleep_for(6s);
    EXPECT_TRUE(l.check().held());
    l.complete();
}

TEST_F(Postgres, AWorkerDrainsOnAStopRequestAndPastItsTimeoutReleases) {
    const std::string first = a().request_job("p");
    const std::string second = a().request_job("p");
    leases::WorkerOptions o;
    o.production = "p";
    o.worker = "cpp-worker";
    o.duration = 2s;
    {
        leases::Worker w(a(), o);
        const leases::WorkerReport r = w.run([&](leases::Lease &) {
            w.request_stop();
            return std::string(R"({"metadata": {"drained": true}})");
        });
        EXPECT_EQ(r.completed, 1u);
    }
    EXPECT_EQ(state(first), "completed");
    EXPECT_EQ(state(second), "requested");
    o.drain_timeout = 200ms;
    auto gate = std::make_shared<std::promise<void>>();
    std::shared_future<void> opened = gate->get_future().share();
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([&w, opened](leases::Lease &) {
        w.request_stop();
        opened.wait();
        return std::string();
    });
    EXPECT_TRUE(r.drain_timed_out);
    EXPECT_EQ(state(second), "requested");
    gate->set_value();
}

TEST_F(Postgres, ASigtermMidJobDrainsTheWorkerProcessAndItsJobCompletes) {
    expect_a_signal_mid_job_drains_a_worker_process(a(), url, SIGTERM);
}

TEST_F(Postgres, ASigtermPastTheDrainTimeoutReleasesTheJobOfAWorkerProcess) {
    expect_a_signal_past_the_drain_timeout_releases_the_job(a(), url, SIGTERM);
}
