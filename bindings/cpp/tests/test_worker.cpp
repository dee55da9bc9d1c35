// The worker runtime of the C++ projection on SQLite: waiting claims and
// their cancellers, keep-alive, check and wait_lost on a lease, and
// leases::Worker (drain, drain timeout, stop from another thread, a real
// process stopped by SIGTERM mid-job). PostgreSQL: test_postgres.cpp; the
// Worker's one commit per job and the shared conformance suite (scenarios,
// reasons, the back-off sequence: Stores/WorkerLoop) run on both stores here.
// Timed assertions are upper bounds generous by orders of magnitude; what
// makes each one fail is a wait of an hour that the rule must cut short.
#include "pg.hpp"
#include "process.hpp"

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <sstream>
#include <set>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

// Real-time durations of the keep-alive tests; ten times longer under
// valgrind (make test-cpp-valgrind sets LEASES_UNDER_VALGRIND), where the Go
// runtime runs many times slower and a renewal could miss its window.
std::chrono::milliseconds slow(std::chrono::milliseconds d) { return under_valgrind() ? d * 10 : d; }

// The duration of a claim kept alive in real time for several durations:
// renewed every third of it, it survives a host stalled for two thirds of
// it (over a second here); 10 s under valgrind, as before.
std::chrono::milliseconds kept_alive_duration() { return under_valgrind() ? 10000ms : 2000ms; }

// How soon what must happen promptly (a wait ended by a cancel or a stop)
// must happen: it takes ~100 ms (the slices); seconds leave room for a
// stalled CI host, and are still nothing like the hour-long wait.
constexpr auto prompt = 10s;

// A database on the real clock (keep-alive and expiry run in real time).
class Waiting : public ::testing::Test {
protected:
    void SetUp() override {
        db = (dir.path() / "leases.db").string();
        auth.emplace(leases::Authority::open(db));
        auth->create_production("p");
    }
    leases::Authority &a() { return *auth; }
    leases::JobState state(const std::string &id) { return job_state(a(), id); }
    std::size_t event_count() { return a().events().size(); }

    TempDir dir;
    std::string db;
    std::optional<leases::Authority> auth;
};

// A gate a handler waits at until the test opens it.
class Gate {
public:
    void open() {
        const std::lock_guard<std::mutex> l(mu_);
        open_ = true;
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return open_; });
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
};

}  // namespace

// ---- waiting claims ----------------------------------------------------------

TEST_F(Waiting, AWaitingClaimWakesWhenARequestCommitsOnAnotherThread) {
    std::thread requester([&] {
        std::this_thread::sleep_for(200ms);
        (void)a().request_job("p", "late");
    });
    const auto start = steady::now();
    std::optional<leases::Lease> l = a().claim_wait("p", "w", 1min, 1h);
    requester.join();
    ASSERT_TRUE(l.has_value());
    EXPECT_LT(steady::now() - start, 30s) << "woke by the request, not by the hour's bound";
    EXPECT_EQ(state(l->job_id()), leases::JobState::Claimed);
}

TEST_F(Waiting, AWaitingClaimReturnsNulloptWhenItsWaitPasses) {
    const auto start = steady::now();
    EXPECT_FALSE(a().claim_wait("p", "w", 1min, 150ms).has_value());
    EXPECT_GE(steady::now() - start, 150ms);
    // A zero wait is a plain claim.
    EXPECT_FALSE(a().claim_wait("p", "w", 1min, 0s).has_value());
    const std::string id = a().request_job("p");
    std::optional<leases::Lease> l = a().claim_wait("p", "w", 1min, 0s);
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->job_id(), id);
}

TEST_F(Waiting, ACancellerEndsAWaitFromAnotherThreadPromptlyAndClaimsNothing) {
    const leases::Canceller canceller;
    std::atomic<std::int64_t> cancelled_at{0};
    std::thread other([&] {
        std::this_thread::sleep_for(100ms);
        cancelled_at = steady::now().time_since_epoch().count();
        canceller.cancel();
    });
    try {
        (void)a().claim_wait("p", "w", 1min, 1h, canceller);
        other.join();
        FAIL() << "the wait was not interrupted";
    } catch (const leases::InterruptedError &e) {
        const auto took = steady::now().time_since_epoch() - steady::duration(cancelled_at.load());
        other.join();
        EXPECT_EQ(e.status(), LEASES_INTERRUPTED);
        EXPECT_STREQ(e.name(), "interrupted");
        EXPECT_LT(took, prompt) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    }
    // It stays cancelled: a later wait ends at once, and nothing was claimed.
    const std::string id = a().request_job("p");
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, 1h, &canceller), leases::InterruptedError);
    EXPECT_EQ(state(id), leases::JobState::Requested);
}

TEST_F(Waiting, InterruptedErrorDerivesFromTheProjectionsBaseError) {
    static_assert(std::is_base_of_v<leases::Error, leases::InterruptedError>);
    static_assert(!std::is_base_of_v<leases::NotHeldError, leases::InterruptedError>);
    EXPECT_THROW(leases::check(LEASES_INTERRUPTED), leases::InterruptedError);
}

TEST_F(Waiting, ClosingTheAuthorityEndsAWaitAsClosed) {
    // A second handle on the same file closes under its waiter. The waiter
    // holds the raw handle, so closing it races with nothing of the C++
    // object (whose destructor closes it again: the library accepts that).
    leases::Authority other = leases::Authority::open(db);
    leases_authority *const raw = other.capi();
    std::promise<void> calling;
    auto result = std::async(std::launch::async, [&]() -> leases_status {
        leases_lease *out = nullptr;
        calling.set_value();
        return leases_claim_wait(raw, "p", "w", 60'000'000, 3'600'000'000, nullptr, &out);
    });
    calling.get_future().wait();
    // Into the wait (nothing shows that it waits): a close before the call
    // would make the handle unknown, not the wait closed.
    std::this_thread::sleep_for(slow(500ms));
    leases_authority_close(raw);
    ASSERT_EQ(result.wait_for(30s), std::future_status::ready);
    EXPECT_EQ(result.get(), LEASES_CLOSED);
}

TEST_F(Waiting, BadWaitBoundsAreRejectedBeforeAnyCallAndClaimNothing) {
    const std::string id = a().request_job("p");
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, -1ms), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, 25h), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, std::chrono::nanoseconds(1500)), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().claim_wait("p", "w", 1min, std::chrono::hours::max()), leases::InvalidArgumentError);
    EXPECT_THROW((void)a().claim_wait("p", "w", 0s, 1s), leases::InvalidDurationError);
    EXPECT_THROW((void)a().claim_wait("nope", "w", 1min, 1h), leases::NotFoundError);  // at once, no wait
    EXPECT_EQ(state(id), leases::JobState::Requested);
    // The limit itself is a valid wait (it returns at once: a job is there).
    EXPECT_TRUE(a().claim_wait("p", "w", 1min, leases::max_wait).has_value());
}

// ---- keep-alive, check, wait_lost ---------------------------------------------

TEST_F(Waiting, KeepAliveHoldsALeaseForManyOfItsDurations) {
    (void)a().request_job("p");
    const auto d = kept_alive_duration();
    leases::Lease l = *a().claim("p", "w", d);
    l.keep_alive(d);
    std::this_thread::sleep_for(3 * d);
    const leases::Verdict v = l.check();
    EXPECT_TRUE(v.held()) << v.name() << ": " << v.message();
    EXPECT_TRUE(static_cast<bool>(v));
    l.complete();
}

TEST_F(Waiting, ACoordinatorsCancelReachesAKeptAliveLeaseThroughWaitLost) {
    const std::string id = a().request_job("p");
    leases::Lease l = *a().claim("p", "w", 3s);
    l.keep_alive(3s, 100ms);
    a().cancel("p", id);
    const auto start = steady::now();
    const std::optional<leases::Verdict> v = l.wait_lost(1h);
    ASSERT_TRUE(v.has_value());
    EXPECT_LT(steady::now() - start, 30s);
    EXPECT_EQ(v->reason(), LEASES_CANCELLED);
    EXPECT_TRUE(v->not_held());
    EXPECT_FALSE(v->held());
    EXPECT_THROW(v->throw_if_not_held(), leases::CancelledError);
}

TEST_F(Waiting, WaitLostReturnsNulloptWhenTheTimeoutPassesAndACancellerEndsIt) {
    (void)a().request_job("p");
    leases::Lease l = *a().claim("p", "w", 1min);
    EXPECT_FALSE(l.wait_lost(100ms).has_value());
    EXPECT_FALSE(l.wait_lost(0s).has_value());
    const leases::Canceller c;
    std::thread other([&] {
        std::this_thread::sleep_for(100ms);
        c.cancel();
    });
    EXPECT_THROW((void)l.wait_lost(1h, c), leases::InterruptedError);
    other.join();
    EXPECT_THROW((void)l.wait_lost(-1s), leases::InvalidArgumentError);
    EXPECT_TRUE(l.check().held());
}

TEST_F(Waiting, StopKeepAliveStopsRenewalsAndTheLeaseThenExpires) {
    (void)a().request_job("p");
    leases::Lease l = *a().claim("p", "w", slow(300ms));
    l.keep_alive(slow(300ms), slow(50ms));
    std::this_thread::sleep_for(slow(200ms));
    l.stop_keep_alive();
    const std::size_t events = event_count();
    std::this_thread::sleep_for(slow(600ms));
    EXPECT_EQ(event_count(), events) << "a renewal was written after stop_keep_alive";
    const leases::Verdict v = l.check();
    EXPECT_EQ(v.reason(), LEASES_EXPIRED) << v.name();
}

TEST_F(Waiting, DestroyingAKeptAliveLeaseStopsItsRenewalsAndWritesNothing) {
    // Without backoff a lapsed claim's job is claimable at its expiry (the
    // default policy would hold it back about a second more).
    leases::RetryPolicy at_once;
    at_once.backoff_base = at_once.backoff_cap = 0s;
    a().set_retry_policy("p", at_once);
    const std::string id = a().request_job("p");
    {
        leases::Lease l = *a().claim("p", "w", slow(300ms));
        l.keep_alive(slow(300ms), slow(50ms));
        std::this_thread::sleep_for(slow(150ms));
    }
    const std::size_t events = event_count();
    std::this_thread::sleep_for(slow(500ms));
    EXPECT_EQ(event_count(), events);
    // The claim lapsed; the job is claimable again once the lapse's backoff
    // (the default policy's: about a second) has passed too.
    std::optional<leases::Lease> again;
    for (auto until = std::chrono::steady_clock::now() + 30s; !again && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(50ms);
        again = a().claim("p", "w2", 1min);
    }
    ASSERT_TRUE(again.has_value()) << "the claim expired: the job is claimable again";
    EXPECT_EQ(again->job_id(), id);
}

TEST_F(Waiting, BadKeepAliveDurationsAreRejectedAndTheLeaseStaysAsItIs) {
    (void)a().request_job("p");
    leases::Lease l = *a().claim("p", "w", 1min);
    const std::size_t events = event_count();
    EXPECT_THROW(l.keep_alive(0s), leases::InvalidDurationError);
    EXPECT_THROW(l.keep_alive(1min, 2min), leases::InvalidDurationError);
    EXPECT_THROW(l.keep_alive(1min, std::chrono::microseconds(10)), leases::InvalidDurationError);
    EXPECT_EQ(event_count(), events);
    EXPECT_TRUE(l.check().held());
}

// ---- Worker ------------------------------------------------------------------

namespace {

leases::WorkerOptions options(std::chrono::microseconds duration = 2s) {
    leases::WorkerOptions o;
    o.production = "p";
    o.worker = "cpp-worker";
    o.duration = duration;
    return o;
}

}  // namespace

TEST_F(Waiting, AWorkerCompletesEachJobWithTheFactsItsHandlerReturns) {
    const std::vector<std::string> ids{a().request_job("p", "", "one"), a().request_job("p", "", "two")};
    leases::WorkerOptions o = options();
    o.exit_when_empty = true;
    leases::Worker w(a(), o);
    std::vector<std::string> seen;
    const leases::WorkerReport r = w.run([&](leases::Lease &l) {
        const auto payload = l.payload();
        seen.emplace_back(payload.begin(), payload.end());
        return std::string(R"({"metadata": {"payload": ")") + seen.back() + R"("}})";
    });
    EXPECT_EQ(r.claimed, 2u);
    EXPECT_EQ(r.completed, 2u);
    EXPECT_EQ(seen, (std::vector<std::string>{"one", "two"}));
    for (const auto &id : ids) {
        EXPECT_EQ(state(id), leases::JobState::Completed);
    }
}

TEST_F(Waiting, AWorkerLeavesAJobItsHandlerSettledThroughAnExecution) {
    const std::string id = a().request_job("p", "", "frame");
    leases::WorkerOptions o = options();
    o.max_jobs = 1;
    leases::Worker w(a(), o);
    std::string output;
    const leases::WorkerReport r = w.run([&](leases::Lease &l) {
        leases::Execution run = l.execution(dir.path().string());
        std::ofstream(run.temp_path()) << "rendered";
        output = run.final_path();
        run.finish(R"({"metadata": {"by": "execution"}})");
        return std::string(R"({"metadata": {"never": "published"}})");
    });
    EXPECT_EQ(r.by_handler, 1u);
    EXPECT_EQ(r.completed, 0u);
    EXPECT_EQ(r.unsettled, 0u);
    EXPECT_EQ(state(id), leases::JobState::Completed);
    EXPECT_TRUE(fs::exists(output));
}

TEST_F(Waiting, AWorkerFailsTheJobForARetryWhenItsHandlerThrows) {
    leases::RetryPolicy hour;
    hour.backoff_base = hour.backoff_cap = std::chrono::hours(1);
    hour.jitter_percent = 0;
    a().set_retry_policy("p", hour);
    const std::string thrown = a().request_job("p");
    const std::string other = a().request_job("p");
    leases::WorkerOptions o = options();
    o.max_jobs = 1;
    leases::Worker w(a(), o);
    leases::WorkerReport r = w.run([](leases::Lease &) -> std::string { throw std::runtime_error("boom"); });
    EXPECT_EQ(r.claimed, 1u);
    EXPECT_EQ(r.retried, 1u);
    EXPECT_EQ(r.released, 0u);
    r = w.run([](leases::Lease &) -> std::string { throw 42; });
    EXPECT_EQ(r.retried, 1u);
    for (const auto &[id, reason] : {std::pair<std::string, std::string>{thrown, "boom"},
                                     std::pair<std::string, std::string>{other, "worker: the handler threw"}}) {
        const leases::JobRecord rec = a().job("p", id);
        EXPECT_EQ(rec.state, leases::JobState::Requested);
        ASSERT_EQ(rec.attempt_history.size(), 1u);
        EXPECT_EQ(rec.attempt_history[0].ending, "retry");
        EXPECT_EQ(rec.attempt_history[0].reason.value_or(""), reason);
        ASSERT_TRUE(rec.claimable_at.has_value());
        EXPECT_EQ(*rec.claimable_at, rec.attempt_history[0].ended_at + std::chrono::hours(1)) << "only after the backoff";
    }
}

TEST_F(Waiting, AWorkerKeepsTheLeaseAliveWhileItsHandlerRuns) {
    const std::string id = a().request_job("p");
    const auto d = kept_alive_duration();
    leases::WorkerOptions o = options(d);
    o.max_jobs = 1;
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([d](leases::Lease &l) {
        std::this_thread::sleep_for(3 * d);
        return l.check().held() ? std::string() : std::string("{bad");
    });
    EXPECT_EQ(r.completed, 1u);
    EXPECT_EQ(state(id), leases::JobState::Completed);
}

TEST_F(Waiting, AStopRequestedFromAnotherThreadEndsAnIdleWorkerPromptly) {
    leases::Worker w(a(), options());
    std::atomic<std::int64_t> stopped_at{0};
    std::thread other([&] {
        std::this_thread::sleep_for(300ms);
        stopped_at = steady::now().time_since_epoch().count();
        w.request_stop();
    });
    const leases::WorkerReport r = w.run([](leases::Lease &) { return std::string(); });
    const auto took = steady::now().time_since_epoch() - steady::duration(stopped_at.load());
    other.join();
    EXPECT_EQ(r.claimed, 0u);
    EXPECT_LT(took, prompt) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

TEST_F(Waiting, AStopRequestLetsTheRunningJobFinishAndClaimsNoMore) {
    const std::string first = a().request_job("p");
    const std::string second = a().request_job("p");
    leases::Worker w(a(), options());
    const leases::WorkerReport r = w.run([&](leases::Lease &) {
        w.request_stop();
        std::this_thread::sleep_for(300ms);  // still running after the request
        return std::string(R"({"metadata": {"drained": true}})");
    });
    EXPECT_EQ(r.claimed, 1u);
    EXPECT_EQ(r.completed, 1u);
    EXPECT_FALSE(r.drain_timed_out);
    EXPECT_EQ(state(first), leases::JobState::Completed);
    EXPECT_EQ(state(second), leases::JobState::Requested);
}

TEST_F(Waiting, PastTheDrainTimeoutTheRunningJobIsReleasedAndRunReturns) {
    const std::string id = a().request_job("p");
    leases::WorkerOptions o = options();
    o.drain_timeout = 200ms;
    Gate gate;
    auto lost = std::make_shared<std::promise<leases_status>>();
    std::optional<leases::WorkerReport> r;
    std::size_t events_after_run = 0;
    {
        leases::Worker w(a(), o);
        r = w.run([&w, &gate, lost](leases::Lease &l) {
            w.request_stop();
            gate.wait();  // past the drain timeout
            const std::optional<leases::Verdict> v = l.wait_lost(30s);  // known at once
            lost->set_value(v ? v->reason() : LEASES_OK);
            return std::string();
        });
        events_after_run = event_count();
    }  // ~Worker: never writes
    EXPECT_TRUE(r->drain_timed_out);
    EXPECT_EQ(r->released, 1u);
    EXPECT_EQ(state(id), leases::JobState::Requested);
    gate.open();
    // The handler finds its lease closed: the worker gave the job back.
    auto f = lost->get_future();
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
    EXPECT_EQ(f.get(), LEASES_CLOSED);
    EXPECT_EQ(event_count(), events_after_run) << "something wrote after run() returned";
    EXPECT_EQ(state(id), leases::JobState::Requested);
}

TEST_F(Waiting, ADrainTimeoutOfZeroLetsTheRunningJobFinishAsLongAsItTakes) {
    const std::string id = a().request_job("p");
    leases::WorkerOptions o = options();
    o.drain_timeout = 0s;
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([&w](leases::Lease &) {
        w.request_stop();
        std::this_thread::sleep_for(500ms);  // well past "at once"
        return std::string(R"({"metadata": {"drained": true}})");
    });
    EXPECT_FALSE(r.drain_timed_out);
    EXPECT_EQ(r.released, 0u);
    EXPECT_EQ(r.completed, 1u);
    EXPECT_EQ(state(id), leases::JobState::Completed);
}

TEST_F(Waiting, AWorkerRunsUpToItsConcurrencyOfHandlersAtOnceOnItsOwnThreads) {
    for (int i = 0; i < 4; ++i) {
        (void)a().request_job("p");
    }
    leases::WorkerOptions o = options();
    o.concurrency = 3;
    o.exit_when_empty = true;
    leases::Worker w(a(), o);
    std::mutex mu;
    std::condition_variable cv;
    int running = 0, most = 0;
    std::set<std::thread::id> threads;
    const leases::WorkerReport r = w.run([&](leases::Lease &) {
        std::unique_lock<std::mutex> l(mu);
        threads.insert(std::this_thread::get_id());
        most = std::max(most, ++running);
        cv.notify_all();
        // The first three wait for each other: they run at once or time out.
        cv.wait_for(l, 10s, [&] { return most >= 3; });
        --running;
        return std::string();
    });
    EXPECT_EQ(most, 3) << "handlers running at once";
    EXPECT_EQ(r.completed, 4u);
    EXPECT_GE(threads.size(), 3u);
}

TEST_F(Waiting, AGiveBackRequestReleasesTheRunningJobsAtOnceAfterADrain) {
    const std::string id = a().request_job("p");
    leases::Worker w(a(), options());  // no drain timeout: a drain alone would wait for ever
    const auto started = steady::now();
    const leases::WorkerReport r = w.run([&](leases::Lease &l) {
        w.request_stop();
        std::this_thread::sleep_for(200ms);
        w.request_give_back();
        const std::optional<leases::Verdict> v = l.wait_lost(30s);  // the handler's "done" signal
        EXPECT_TRUE(v && v->reason() == LEASES_CLOSED);
        return std::string();
    });
    EXPECT_LT(steady::now() - started, prompt);
    EXPECT_TRUE(r.gave_back);
    EXPECT_FALSE(r.drain_timed_out);
    EXPECT_EQ(r.released, 1u);
    EXPECT_EQ(state(id), leases::JobState::Requested);
}

// ---- one commit per job (both stores) -------------------------------------------

namespace {

// The Worker on each store, with the clock frozen (StoreTest): nothing
// renews or expires while a test runs.
class WorkerLoop : public StoreTest {
protected:
    leases::WorkerOptions loop_options() {
        leases::WorkerOptions o;
        o.production = "p";
        o.worker = "cpp-loop";
        o.duration = 1min;
        return o;
    }
    std::vector<std::string> request(int n) {
        std::vector<std::string> ids;
        for (int i = 0; i < n; ++i) {
            ids.push_back(a().request_job("p", "", std::to_string(i)));
        }
        return ids;
    }
    leases::JobState state(const std::string &id) { return job_state(a(), id); }
    std::vector<leases::Event> events_of(const std::string &id, const std::string &kind) {
        std::vector<leases::Event> found;
        for (leases::Event &e : a().events("p")) {
            if (e.job_id == id && e.kind == kind) found.push_back(std::move(e));
        }
        return found;
    }
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Stores, WorkerLoop, ::testing::Values(Store::SQLite, Store::Postgres), store_name);

TEST_P(WorkerLoop, AWorkerCompletesEachJobAndClaimsTheNextInOneCommit) {
    const std::vector<std::string> ids = request(3);
    leases::WorkerOptions o = loop_options();
    o.exit_when_empty = true;
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([](leases::Lease &l) {
        const auto payload = l.payload();
        return R"({"metadata": {"payload": ")" + std::string(payload.begin(), payload.end()) + R"("}})";
    });
    EXPECT_EQ(r.claimed, 3u);
    EXPECT_EQ(r.completed, 3u);
    EXPECT_EQ(r.claimed_in_completion, 2u) << "the last completion found nothing to claim";
    for (std::size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(state(ids[i]), leases::JobState::Completed);
        EXPECT_EQ(a().job("p", ids[i]).facts.metadata["payload"], "\"" + std::to_string(i) + "\"");
    }
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
        const auto completed = events_of(ids[i], "completed"), claimed = events_of(ids[i + 1], "claimed");
        ASSERT_EQ(completed.size(), 1u);
        ASSERT_EQ(claimed.size(), 1u);
        EXPECT_EQ(claimed[0].seq, completed[0].seq + 1) << "nothing between the completion and the next claim";
        EXPECT_EQ(claimed[0].worker.value_or(""), "cpp-loop");
    }
}

TEST_P(WorkerLoop, AWorkerAtMaxJobsOrAfterAStopCompletesWithoutClaimingAnother) {
    const std::vector<std::string> ids = request(4);
    leases::WorkerOptions o = loop_options();
    o.max_jobs = 2;
    {
        leases::Worker w(a(), o);
        const leases::WorkerReport r = w.run([](leases::Lease &) { return std::string(); });
        EXPECT_EQ(r.claimed, 2u);
        EXPECT_EQ(r.completed, 2u);
        EXPECT_EQ(r.claimed_in_completion, 1u) << "the second completion claimed nothing: max_jobs";
    }
    EXPECT_EQ(state(ids[1]), leases::JobState::Completed);
    EXPECT_EQ(state(ids[2]), leases::JobState::Requested);
    o.max_jobs = 0;
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([&w](leases::Lease &) {
        w.request_stop();
        return std::string();
    });
    EXPECT_EQ(r.claimed, 1u);
    EXPECT_EQ(r.completed, 1u);
    EXPECT_EQ(r.claimed_in_completion, 0u);
    EXPECT_EQ(state(ids[2]), leases::JobState::Completed);
    EXPECT_EQ(state(ids[3]), leases::JobState::Requested);
    EXPECT_TRUE(events_of(ids[3], "claimed").empty()) << "claimed after the stop request";
}

TEST_P(WorkerLoop, AWorkerFailsAThrowingHandlersJobForARetryAndClaimsTheNextOnItsOwn) {
    const std::vector<std::string> ids = request(3);
    leases::WorkerOptions o = loop_options();
    o.exit_when_empty = true;
    leases::Worker w(a(), o);
    const leases::WorkerReport r = w.run([&ids](leases::Lease &l) {
        if (l.job_id() == ids[0]) {
            throw std::runtime_error("bad input");
        }
        if (l.job_id() == ids[1]) {
            l.complete(R"({"metadata": {"by": "handler"}})");
        }
        return std::string();
    });
    // The failed job waits out its backoff on the frozen clock.
    EXPECT_EQ(r.claimed, 3u);
    EXPECT_EQ(r.retried, 1u);
    EXPECT_EQ(r.by_handler, 1u);
    EXPECT_EQ(r.completed, 1u);
    EXPECT_EQ(r.claimed_in_completion, 0u);
    EXPECT_EQ(state(ids[0]), leases::JobState::Requested);
    const leases::JobRecord failed = a().job("p", ids[0]);
    ASSERT_EQ(failed.attempt_history.size(), 1u);
    EXPECT_EQ(failed.attempt_history[0].ending, "retry");
    EXPECT_EQ(failed.attempt_history[0].reason.value_or(""), "bad input");
    EXPECT_EQ(events_of(ids[1], "completed").size(), 1u) << "completed twice";
    EXPECT_EQ(a().job("p", ids[1]).facts.metadata["by"], "\"handler\"");
    EXPECT_EQ(state(ids[2]), leases::JobState::Completed);
}

TEST_F(Waiting, AWorkerRefusesBadOptionsBeforeAnyStoreAccess) {
    leases::WorkerOptions o = options();
    o.production = "";
    EXPECT_THROW(leases::Worker(a(), o), leases::InvalidArgumentError);
    o = options();
    o.duration = 0s;
    EXPECT_THROW(leases::Worker(a(), o), leases::InvalidDurationError);
    o = options();
    o.keep_alive_interval = 5s;
    EXPECT_THROW(leases::Worker(a(), o), leases::InvalidDurationError);
    o = options();
    o.drain_timeout = -1s;
    EXPECT_THROW(leases::Worker(a(), o), leases::InvalidArgumentError);
    o = options();
    o.production = "nope";
    const std::size_t events = event_count();
    leases::Worker w(a(), o);
    EXPECT_THROW((void)w.run([](leases::Lease &) { return std::string(); }), leases::NotFoundError);
    EXPECT_EQ(event_count(), events);
}

// ---- a real worker process -------------------------------------------------------

TEST_F(Waiting, ASigtermMidJobDrainsTheWorkerProcessAndItsJobCompletes) {
    expect_a_signal_mid_job_drains_a_worker_process(a(), db, SIGTERM);
}

TEST_F(Waiting, ASigintPastTheDrainTimeoutReleasesTheJobOfAWorkerProcess) {
    expect_a_signal_past_the_drain_timeout_releases_the_job(a(), db, SIGINT);
}

TEST_F(Waiting, ASecondSigintGivesTheRunningJobsOfAWorkerProcessBackAtOnce) {
    const std::string first = a().request_job("p");
    const std::string second = a().request_job("p");
    Child child({db, "p", "hang", "0", "2"});
    EXPECT_EQ(child.line(), "ready");
    std::set<std::string> started{child.line(), child.line()};
    EXPECT_EQ(started, (std::set<std::string>{"started " + first, "started " + second}));
    child.signal(SIGINT);
    std::this_thread::sleep_for(500ms);  // a drain without a timeout waits for the handlers
    EXPECT_EQ(state(first), leases::JobState::Claimed);
    EXPECT_EQ(state(second), leases::JobState::Claimed);
    child.signal(SIGINT);
    EXPECT_EQ(child.wait(), 3) << child.rest();
    EXPECT_EQ(state(first), leases::JobState::Requested);
    EXPECT_EQ(state(second), leases::JobState::Requested);
}

// ---- the shared conformance suite (tests/vectors/worker_loop.json) ---------------

namespace {

std::string vector_bytes(const mini_json::Value &segments) {
    std::string out;
    for (const auto &seg : segments.items) {
        const std::string &hex = seg["hex"].str();
        std::string once;
        for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
            once += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
        }
        const mini_json::Value *times = seg.find("times");
        for (std::int64_t k = 0, n = times ? times->integer() : 1; k < n; ++k) {
            out += once;
        }
    }
    return out;
}

mini_json::Value loop_vectors() {
    std::ifstream in(vectors_path("worker_loop.json"));
    std::stringstream text;
    text << in.rdbuf();
    return mini_json::Parser(text.str()).document();
}

}  // namespace

TEST_P(WorkerLoop, AThrownExceptionsTextBecomesTheReasonByTheSharedRule) {
    const mini_json::Value doc = loop_vectors();
    for (const auto &v : doc["reasons"].items) {
        const std::string error = vector_bytes(v["error"]), want = vector_bytes(v["reason"]);
        if (error.find('\0') != std::string::npos) {
            continue;  // what() is a C string: it cannot carry a NUL byte
        }
        const std::string id = a().request_job("p");
        leases::WorkerOptions o = loop_options();
        o.max_jobs = 1;
        leases::Worker w(a(), o);
        const leases::WorkerReport r = w.run([&](leases::Lease &) -> std::string { throw std::runtime_error(error); });
        EXPECT_EQ(r.retried, 1u) << v["name"].str();
        const leases::JobRecord rec = a().job("p", id);
        ASSERT_EQ(rec.attempt_history.size(), 1u) << v["name"].str();
        EXPECT_EQ(rec.attempt_history[0].ending, "retry") << v["name"].str();
        EXPECT_EQ(rec.attempt_history[0].reason.value_or(""), want) << v["name"].str();
    }
}

TEST_P(WorkerLoop, EveryScenarioOfTheSharedLoopSuiteHoldsForTheCppWorker) {
    const mini_json::Value doc = loop_vectors();
    int n = 0;
    for (const auto &sc : doc["scenarios"].items) {
        const std::string name = sc["name"].str();
        const std::string production = "s" + std::to_string(n++);
        a().create_production(production);
        std::vector<std::string> ids;
        for (const auto &job : sc["jobs"].items) {
            ids.push_back(a().request_job(production, "", job.str()));
        }
        const mini_json::Value &opts = sc["options"];
        leases::WorkerOptions o = loop_options();
        o.production = production;
        if (const auto *c = opts.find("concurrency")) o.concurrency = static_cast<unsigned>(c->integer());
        if (const auto *m = opts.find("max_jobs")) o.max_jobs = static_cast<std::uint64_t>(m->integer());
        if (const auto *d = opts.find("drain_timeout_ms")) o.drain_timeout = std::chrono::milliseconds(d->integer());
        if (const auto *i = opts.find("interval_ms")) o.keep_alive_interval = std::chrono::milliseconds(i->integer());
        const mini_json::Value *stop = sc.find("stop");
        o.exit_when_empty = stop == nullptr;
        const std::size_t out = std::min<std::size_t>(std::max(1u, o.concurrency), ids.size());
        leases::Worker w(a(), o);
        std::atomic<std::size_t> started{0};
        std::atomic<bool> stopped{false};
        // The cancelled action: a handler names its job to the coordinator
        // thread (the test's side), which cancels it through the authority,
        // as a coordinator does; then records what its lease reported.
        std::size_t cancelled = 0;
        for (const auto &job : sc["jobs"].items) cancelled += job.str() == "cancelled";
        std::mutex mu;
        std::condition_variable cv;
        std::vector<std::string> asks;
        std::set<std::string> cancels_done;
        std::vector<leases_status> heard;
        std::thread coordinator;
        if (cancelled > 0) {
            coordinator = std::thread([&] {
                for (std::size_t k = 0; k < cancelled; ++k) {
                    std::unique_lock<std::mutex> lock(mu);
                    if (!cv.wait_for(lock, 60s, [&] { return !asks.empty(); })) {
                        ADD_FAILURE() << name << ": a cancelled job's handler never ran";
                        return;
                    }
                    const std::string id = asks.back();
                    asks.pop_back();
                    lock.unlock();
                    a().cancel(production, id);
                    lock.lock();
                    cancels_done.insert(id);
                    cv.notify_all();
                }
            });
        }
        std::thread stopper;
        if (stop != nullptr) {
            stopper = std::thread([&] {
                const auto until = steady::now() + 30s;
                while (started.load() < out && steady::now() < until) std::this_thread::sleep_for(5ms);
                if (stop->str() == "drain") w.request_stop(); else w.request_give_back();
                std::this_thread::sleep_for(200ms);  // past the request reaching the loop
                stopped = true;
            });
        }
        const std::string facts = R"({"metadata":{"done":true}})";
        const leases::WorkerReport r = w.run([&](leases::Lease &l) -> std::string {
            ++started;
            const auto bytes = l.payload();
            const std::string action(bytes.begin(), bytes.end());
            const std::string arg = action.find(':') == std::string::npos ? "" : action.substr(action.find(':') + 1);
            if (action.rfind("error:", 0) == 0) throw std::runtime_error(arg);
            if (action.rfind("panic:", 0) == 0) throw arg;  // not a std::exception
            if (action.rfind("fail:", 0) == 0) l.fail(arg);
            if (action == "release") l.release();
            if (action == "settle") l.complete(facts);
            if (action == "wait") while (!stopped) std::this_thread::sleep_for(5ms);
            if (action == "hang") {
                (void)l.wait_lost(60s);  // given back: run() may have returned, so touch nothing of the test
                return std::string();
            }
            if (action == "cancelled") {
                {
                    std::unique_lock<std::mutex> lock(mu);
                    asks.push_back(l.job_id());
                    cv.notify_all();
                    cv.wait_for(lock, 60s, [&] { return cancels_done.count(l.job_id()) > 0; });
                }
                // The cancel reaches the kept-alive lease at its next renewal;
                // a handler of a lost lease stops working: it throws why.
                const std::optional<leases::Verdict> v = l.wait_lost(60s);
                {
                    const std::lock_guard<std::mutex> lock(mu);
                    heard.push_back(v ? v->reason() : LEASES_OK);
                }
                if (v) v->throw_if_not_held();
                throw std::runtime_error("the cancel never reached the handler");
            }
            return facts;
        });
        if (stopper.joinable()) stopper.join();
        if (coordinator.joinable()) coordinator.join();
        EXPECT_EQ(heard, std::vector<leases_status>(cancelled, LEASES_CANCELLED))
            << name << ": what the cancelled leases reported";
        EXPECT_EQ(r.gave_back ? "gave_back" : "stopped", sc["end"].str()) << name;
        for (std::size_t j = 0; j < ids.size(); ++j) {
            EXPECT_EQ(std::string(leases::to_string(a().job(production, ids[j]).state)), sc["states"].items[j].str())
                << name << ": job " << j;
        }
        if (const mini_json::Value *attempt = sc.find("attempt")) {
            const leases::JobRecord rec = a().job(production, ids[0]);
            ASSERT_FALSE(rec.attempt_history.empty()) << name;
            EXPECT_EQ(rec.attempt_history.back().ending, (*attempt)["ending"].str()) << name;
            const std::string reason = rec.attempt_history.back().reason.value_or("");
            if (const mini_json::Value *want = attempt->find("reason")) {
                EXPECT_EQ(reason, want->str()) << name;
            } else if (sc["jobs"].items[0].str().rfind("panic:", 0) == 0) {
                EXPECT_EQ(reason, "worker: the handler threw") << name << ": the C++ face's text for a throw";
            }
        }
    }
}

namespace {

// Makes every claim of production "p" through another handle with a 1 ms
// busy timeout fail until it is destroyed, as the C suite's hold_claims does:
// on SQLite an edit of the test's authority holds the writer lock; on
// PostgreSQL a psql session holds the schema's jobs table in EXCLUSIVE mode
// (a look reads the job; the claim's row lock waits past its lock_timeout
// and fails). psql runs the statements as they come down the pipe and
// touches a file once the lock is held.
class ClaimsHeld {
public:
    ClaimsHeld(leases::Authority &holder, const PgSchema *schema, const fs::path &scratch) {
        if (schema == nullptr) {
            edit_.emplace(holder.edit());
            held_ = edit_->claim("p", "holder", 1min);  // the writer lock is held
            return;
        }
        const fs::path flag = scratch / "claims-held";
        pipe_ = popen("PSQL=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | tail -n 1); "
                      "PGOPTIONS='-c client_min_messages=warning' \"${PSQL:-psql}\" \"$LEASES_TEST_PG_URL\" -qX "
                      "-v ON_ERROR_STOP=1 >/dev/null",
                      "w");
        if (pipe_ == nullptr) {
            throw std::runtime_error("popen psql failed");
        }
        std::fprintf(pipe_, "SET search_path TO %s;\nBEGIN;\nLOCK TABLE leases_jobs IN EXCLUSIVE MODE;\n\\! touch '%s'\n",
                     schema->name().c_str(), flag.c_str());
        std::fflush(pipe_);
        for (const auto until = steady::now() + 30s; !fs::exists(flag) && steady::now() < until;) {
            std::this_thread::sleep_for(10ms);
        }
        if (!fs::exists(flag)) {
            throw std::runtime_error("psql did not take the lock on the jobs table");
        }
    }
    ClaimsHeld(const ClaimsHeld &) = delete;
    ClaimsHeld &operator=(const ClaimsHeld &) = delete;
    ~ClaimsHeld() { release(); }

    void release() {
        held_.reset();
        if (edit_) {
            edit_->abort();
            edit_.reset();
        }
        if (pipe_ != nullptr) {
            std::fputs("ROLLBACK;\n", pipe_);
            EXPECT_EQ(pclose(pipe_), 0) << "psql failed";
            pipe_ = nullptr;
        }
    }

private:
    std::optional<leases::Edit> edit_;
    std::optional<leases::Lease> held_;
    FILE *pipe_ = nullptr;
};

}  // namespace

// The back-off after failed claims is the shared sequence (backoff_us): with
// its claims kept failing, the handle every C++ Worker runs on reports each
// pause in its stats (leases_worker_stats_json, as the C suite reads them);
// a Worker on such a handle backs off instead of failing, and once the lock
// is free it claims. Not under valgrind, where the C suite leaves it out too:
// the slowed runtime makes the samples of a 50 ms pause unreliable.
TEST_P(WorkerLoop, AWorkersFailedClaimsBackOffByTheSharedSequence) {
    if (under_valgrind()) {
        GTEST_SKIP() << "times 50 ms pauses, which valgrind slows past telling apart; the unit and sanitizer runs check this rule";
    }
    const mini_json::Value doc = loop_vectors();
    const std::string id = a().request_job("p");
    leases::OpenOptions oo;
    oo.busy_timeout = 1ms;
    leases::Authority failing = leases::Authority::open(location, oo);
    set_clock(failing, t0 + now);
    ClaimsHeld held(a(), schema ? &*schema : nullptr, dir.path());

    leases_worker *h = nullptr;
    ASSERT_EQ(leases_worker_new(failing.capi(), "p", "w", 60'000'000, nullptr, &h), LEASES_OK);
    std::map<std::int64_t, std::int64_t> seen;  // failed claims -> the pause after them
    for (const auto until = steady::now() + 60s; (seen.empty() || seen.rbegin()->first < 4) && steady::now() < until;) {
        leases_lease *l = nullptr;
        ASSERT_EQ(leases_worker_next(h, 20000, &l), LEASES_NOTHING_TO_CLAIM);
        char *out = nullptr;
        ASSERT_EQ(leases_worker_stats_json(h, &out), LEASES_OK);
        const mini_json::Value stats = mini_json::Parser(out).document();
        leases_free(out);
        if (const std::int64_t n = stats["failed_claims"].number; n > 0) {
            seen[n] = stats["backoff_us"].number;
        }
    }
    leases_worker_free(h);
    ASSERT_FALSE(seen.empty());
    EXPECT_GE(seen.rbegin()->first, 4) << "failed claims";
    const auto &want = doc["backoff_us"].items;
    for (const auto &[n, us] : seen) {  // a sample may miss one
        ASSERT_LE(static_cast<std::size_t>(n), want.size());
        EXPECT_EQ(us, want[static_cast<std::size_t>(n - 1)].number) << "the pause after " << n << " failed claims";
    }

    // The C++ Worker on such a handle: run() backs off and goes on.
    leases::WorkerOptions o = loop_options();
    o.max_jobs = 1;
    leases::Worker w(failing, o);
    auto run = std::async(std::launch::async, [&] { return w.run([](leases::Lease &) { return std::string(); }); });
    EXPECT_EQ(run.wait_for(300ms), std::future_status::timeout) << "run() returned while every claim failed";
    held.release();
    if (run.wait_for(30s) != std::future_status::ready) {
        w.request_give_back();
        FAIL() << "the Worker did not claim once the lock was free";
    }
    const leases::WorkerReport r = run.get();
    EXPECT_EQ(r.completed, 1u) << "once the lock is free the Worker claims";
    EXPECT_EQ(state(id), leases::JobState::Completed);
}
