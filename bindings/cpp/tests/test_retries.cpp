// Retries in C++, on SQLite and PostgreSQL: retry policies (RetryPolicy at
// creation and set_retry_policy), request options (priority, run-at, delay),
// Lease::fail_retry, the dead state, Authority::retry_job and redrive, and
// the attempt history of a job's record. The clock is frozen, so backoffs
// and delays pass by advancing it, never by sleeping.
#include "pg.hpp"

#include <algorithm>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

using leases::JobState;

// A policy without jitter, so backoffs are exact.
leases::RetryPolicy exact_policy(std::int32_t attempts, std::chrono::microseconds base,
                                 std::chrono::microseconds cap = 1h) {
    leases::RetryPolicy p;
    p.max_attempts = attempts;
    p.backoff_base = base;
    p.backoff_cap = cap;
    p.jitter_percent = 0;
    return p;
}

leases::RequestOptions options(std::int32_t priority, std::chrono::microseconds delay = 0us) {
    leases::RequestOptions o;
    o.priority = priority;
    o.delay = delay;
    return o;
}

class Retries : public StoreTest {
protected:
    leases::Lease claim_from(const std::string &production, const std::string &worker = "w") {
        std::optional<leases::Lease> l = a().claim(production, worker, 1min);
        if (!l) {
            throw std::runtime_error("nothing to claim in " + production);
        }
        return std::move(*l);
    }
    leases::Job listed(const std::string &production, const std::string &id) {
        for (const leases::Job &j : a().jobs(production)) {
            if (j.id == id) return j;
        }
        throw std::runtime_error("job " + id + " not listed");
    }
    std::vector<std::string> kinds_of(const std::string &id) {
        std::vector<std::string> kinds;
        for (const leases::Event &e : a().events()) {
            if (e.job_id == id) kinds.push_back(e.kind);
        }
        return kinds;
    }
    std::size_t events_of_kind(const std::string &kind) {
        const auto all = a().events();
        return static_cast<std::size_t>(
            std::count_if(all.begin(), all.end(), [&](const leases::Event &e) { return e.kind == kind; }));
    }
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Stores, Retries, ::testing::Values(Store::SQLite, Store::Postgres), store_name);

TEST_P(Retries, ADefaultConstructedRetryPolicyIsTheLibrarysDefault) {
    const leases::RetryPolicy p;
    const leases_retry_policy c = LEASES_RETRY_POLICY_INIT;
    EXPECT_EQ(p.max_attempts, c.max_attempts);
    EXPECT_EQ(p.jitter_percent, c.jitter_percent);
    EXPECT_EQ(p.backoff_base.count(), c.backoff_base_us);
    EXPECT_EQ(p.backoff_cap.count(), c.backoff_cap_us);
    // The default production accepts the default policy as its own.
    EXPECT_NO_THROW(a().create_production("p", p));
}

TEST_P(Retries, ARetryableFailureReturnsTheJobAfterThePolicysBackoffOnTheAuthoritysClock) {
    a().create_production("r", exact_policy(5, 10s, 1min));
    const std::string id = a().request_job("r");
    claim_from("r").fail_retry("disk full");
    const leases::Job j = listed("r", id);
    EXPECT_EQ(j.state, JobState::Requested);
    EXPECT_EQ(j.attempts, 1);
    EXPECT_EQ(j.claimable_at, std::optional<leases::time_point>(at() + 10s));
    EXPECT_FALSE(a().claim("r", "w", 1min).has_value()) << "claimable before its backoff passed";
    advance(10s - 1us);
    EXPECT_FALSE(a().claim("r", "w", 1min).has_value());
    advance(1us);
    std::optional<leases::Lease> again = a().claim("r", "w2", 1min);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->job_id(), id);
    // The second backoff doubles: 20 s.
    again->fail_retry();
    EXPECT_EQ(listed("r", id).claimable_at, std::optional<leases::time_point>(at() + 20s));
    EXPECT_EQ(kinds_of(id), (std::vector<std::string>{"requested", "claimed", "retry", "claimed", "retry"}));
}

TEST_P(Retries, AFailRetryDelayReplacesTheBackoffAndZeroMeansTheBackoff) {
    a().create_production("r", exact_policy(5, 10s));
    const std::string id = a().request_job("r");
    claim_from("r").fail_retry("later", 3s);
    EXPECT_EQ(listed("r", id).claimable_at, std::optional<leases::time_point>(at() + 3s));
    advance(3s);
    claim_from("r").fail_retry("", 0s);
    EXPECT_EQ(listed("r", id).claimable_at, std::optional<leases::time_point>(at() + 20s));
}

TEST_P(Retries, AFailRetryWithABadDelayIsRefusedAndTheClaimStaysHeld) {
    const std::string id = a().request_job("p");
    leases::Lease l = claim_from("p");
    EXPECT_THROW(l.fail_retry("x", -1s), leases::InvalidArgumentError);
    EXPECT_THROW(l.fail_retry("x", std::chrono::hours(24 * 366) + 1us), leases::InvalidArgumentError);
    EXPECT_THROW(l.fail_retry("x", std::chrono::nanoseconds(1500)), leases::InvalidArgumentError);
    EXPECT_THROW(l.fail_retry(std::string(LEASES_MAX_REASON_LEN + 1, 'r'), 1s), leases::InvalidArgumentError);
    EXPECT_THROW(l.fail_retry(std::string("a\0b", 3)), leases::InvalidArgumentError);
    EXPECT_TRUE(l.check().held());
    EXPECT_EQ(listed("p", id).state, JobState::Claimed);
    l.fail_retry("at most the longest delay", leases::max_delay);  // the bound itself is fine
    EXPECT_EQ(listed("p", id).claimable_at, std::optional<leases::time_point>(at() + leases::max_delay));
    EXPECT_THROW(l.fail_retry("again"), leases::ClosedError) << "success closes the lease";
}

TEST_P(Retries, AJobThatUsesUpItsAttemptsIsDeadAndItsRecordKeepsEveryAttempt) {
    a().create_production("r", exact_policy(2, 0s, 0s));
    const std::string id = a().request_job("r");
    claim_from("r", "w1").fail_retry("first");
    advance(1s);
    claim_from("r", "w2").fail_retry("second");
    const leases::Job j = listed("r", id);
    EXPECT_EQ(j.state, JobState::Dead);
    EXPECT_EQ(j.state_text, "dead");
    EXPECT_EQ(j.claimable_at, std::nullopt);
    EXPECT_FALSE(a().claim("r", "w", 1min).has_value()) << "a dead job is never claimed";
    EXPECT_THROW((void)a().claim_job("r", id, "w", 1min), leases::WrongStateError);
    EXPECT_EQ(kinds_of(id).back(), "dead");

    const leases::JobRecord r = a().job("r", id);
    EXPECT_EQ(r.state, JobState::Dead);
    EXPECT_EQ(r.attempts, 2);
    ASSERT_EQ(r.attempt_history.size(), 2u);
    EXPECT_EQ(r.attempt_history[0].number, 1);
    EXPECT_EQ(r.attempt_history[0].worker, "w1");
    EXPECT_EQ(r.attempt_history[0].ending, "retry");
    EXPECT_EQ(r.attempt_history[0].reason, std::optional<std::string>("first"));
    EXPECT_EQ(r.attempt_history[0].claimed_at, at() - 1s);
    EXPECT_EQ(r.attempt_history[0].ended_at, at() - 1s);
    EXPECT_EQ(r.attempt_history[1].number, 2);
    EXPECT_EQ(r.attempt_history[1].worker, "w2");
    EXPECT_EQ(r.attempt_history[1].reason, std::optional<std::string>("second"));
    EXPECT_EQ(r.attempt_history[1].ended_at, at());
}

TEST_P(Retries, RedriveBringsBackEveryJobOfAStateWithAttemptsResetAndHistoryKept) {
    a().create_production("r", exact_policy(1, 0s, 0s));
    const std::string dead1 = a().request_job("r");
    const std::string dead2 = a().request_job("r");
    const std::string waiting = a().request_job("r");
    claim_from("r").fail_retry("one");
    claim_from("r").release();  // a release ends an attempt too
    EXPECT_EQ(listed("r", dead1).state, JobState::Dead);
    EXPECT_EQ(listed("r", dead2).state, JobState::Dead);
    EXPECT_EQ(a().redrive("r", JobState::Dead), 2);
    for (const std::string &id : {dead1, dead2}) {
        const leases::JobRecord r = a().job("r", id);
        EXPECT_EQ(r.state, JobState::Requested);
        EXPECT_EQ(r.attempts, 0);
        EXPECT_EQ(r.attempt_history.size(), 1u) << "the history keeps the old attempt";
        EXPECT_EQ(kinds_of(id).back(), "redriven");
    }
    EXPECT_EQ(listed("r", waiting).state, JobState::Requested);
    EXPECT_EQ(a().redrive("r", JobState::Dead), 0);
    EXPECT_EQ(a().redrive("r", JobState::Failed), 0);
}

TEST_P(Retries, RedriveOfAStateOtherThanFailedDeadOrCancelledIsRefusedAndChangesNothing) {
    const std::string id = a().request_job("p");
    const std::size_t before = a().events().size();
    for (JobState s : {JobState::Requested, JobState::Claimed, JobState::Completed, JobState::Unknown}) {
        EXPECT_THROW((void)a().redrive("p", s), leases::InvalidArgumentError) << leases::to_string(s);
    }
    EXPECT_THROW((void)a().redrive("missing", JobState::Dead), leases::NotFoundError);
    EXPECT_EQ(a().events().size(), before);
    EXPECT_EQ(listed("p", id).state, JobState::Requested);
}

TEST_P(Retries, RetryJobRedrivesOneFailedDeadOrCancelledJobAndRefusesAnyOtherState) {
    const std::string failed = a().request_job("p");
    const std::string cancelled = a().request_job("p");
    const std::string waiting = a().request_job("p");
    claim_from("p").fail("broken input");
    a().cancel("p", cancelled);
    a().retry_job("p", failed);
    a().retry_job("p", cancelled);
    EXPECT_EQ(listed("p", failed).state, JobState::Requested);
    EXPECT_EQ(listed("p", failed).attempts, 0);
    EXPECT_EQ(listed("p", cancelled).state, JobState::Requested);
    EXPECT_THROW(a().retry_job("p", waiting), leases::WrongStateError);
    EXPECT_EQ(kinds_of(waiting), std::vector<std::string>{"requested"}) << "a refusal writes nothing";
    EXPECT_THROW(a().retry_job("p", "00000000-0000-0000-0000-000000000000"), leases::NotFoundError);
    EXPECT_THROW(a().retry_job("p", "not an id"), leases::InvalidArgumentError);
}

TEST_P(Retries, ClaimOrderIsPriorityThenClaimableTimeThenRequestOrder) {
    const std::string low1 = a().request_job("p");
    const std::string delayed = a().request_job("p", "", "", options(9, 1min));
    const std::string low2 = a().request_job("p");
    const std::string urgent = a().request_job("p", "", "", options(5));
    EXPECT_EQ(listed("p", urgent).priority, 5);
    EXPECT_EQ(listed("p", delayed).claimable_at, std::optional<leases::time_point>(at() + 1min));
    EXPECT_EQ(claim_from("p").job_id(), urgent);
    EXPECT_EQ(claim_from("p").job_id(), low1);
    advance(1min);
    EXPECT_EQ(claim_from("p").job_id(), delayed);
    EXPECT_EQ(claim_from("p").job_id(), low2);
}

TEST_P(Retries, ARunAtIsAnAuthorityTimeAndOneInThePastMeansNow) {
    leases::RequestOptions o;
    o.run_at = at() + 30s;
    const std::string later = a().request_job("p", "", std::vector<std::uint8_t>{1, 2}, o);
    EXPECT_EQ(listed("p", later).claimable_at, o.run_at);
    EXPECT_FALSE(a().claim("p", "w", 1min).has_value());
    EXPECT_THROW((void)a().claim_job("p", later, "w", 1min), leases::WrongStateError);
    o.run_at = at() - 1h;
    const std::string past = a().request_job("p", "", "", o);
    EXPECT_EQ(claim_from("p").job_id(), past) << "a past run-at is claimable at once";
    advance(30s);
    EXPECT_EQ(claim_from("p").job_id(), later);
}

TEST_P(Retries, BadRequestOptionsAreInvalidArgumentsAndWriteNothing) {
    const std::size_t before = a().events().size();
    std::vector<leases::RequestOptions> bad(6);
    bad[0].priority = -1;
    bad[1].priority = LEASES_MAX_PRIORITY + 1;
    bad[2].delay = 1s;
    bad[2].run_at = at() + 1min;  // both
    bad[3].delay = -1s;
    bad[4].delay = leases::max_delay + 1us;
    bad[5].run_at = at() + leases::max_delay + 1s;
    for (const leases::RequestOptions &o : bad) {
        EXPECT_THROW((void)a().request_job("p", "k", "payload", o), leases::InvalidArgumentError)
            << o.priority << " " << o.delay.count();
    }
    EXPECT_THROW((void)a().request_job("p", "", std::string(LEASES_MAX_PAYLOAD_LEN + 1, 'x'), leases::RequestOptions{}),
                 leases::InvalidArgumentError);
    EXPECT_THROW((void)a().request_job("missing", "", "", leases::RequestOptions{}), leases::NotFoundError);
    EXPECT_TRUE(a().jobs("p").empty());
    EXPECT_EQ(a().events().size(), before);
    const std::string edge = a().request_job("p", "", "", options(LEASES_MAX_PRIORITY, leases::max_delay));
    EXPECT_EQ(listed("p", edge).priority, LEASES_MAX_PRIORITY);
}

TEST_P(Retries, AKeyedRepeatReturnsTheJobWithTheFirstRequestsOptions) {
    const std::string id = a().request_job("p", "frame-1", "x", options(7));
    EXPECT_EQ(a().request_job("p", "frame-1", "x", options(1, 1h)), id);
    EXPECT_EQ(listed("p", id).priority, 7);
    EXPECT_EQ(claim_from("p").job_id(), id);
}

TEST_P(Retries, ABadRetryPolicyIsAnInvalidArgumentAndChangesNothing) {
    std::vector<leases::RetryPolicy> bad(7);
    bad[0].max_attempts = 0;
    bad[1].max_attempts = LEASES_MAX_ATTEMPTS + 1;
    bad[2].jitter_percent = -1;
    bad[3].jitter_percent = 101;
    bad[4].backoff_base = 2h;  // above the cap (1 h)
    bad[5].backoff_cap = leases::max_delay + 1us;
    bad[6].backoff_base = -1us;
    const std::size_t before = a().events().size();
    for (const leases::RetryPolicy &p : bad) {
        EXPECT_THROW(a().create_production("bad", p), leases::InvalidArgumentError);
        EXPECT_THROW(a().set_retry_policy("p", p), leases::InvalidArgumentError);
    }
    EXPECT_EQ(a().events().size(), before);
    EXPECT_THROW((void)a().jobs("bad"), leases::NotFoundError);
    EXPECT_THROW(a().set_retry_policy("missing", leases::RetryPolicy{}), leases::NotFoundError);
}

TEST_P(Retries, CreatingAProductionIsIdempotentOnlyForTheSamePolicy) {
    const leases::RetryPolicy mine = exact_policy(3, 5s);
    a().create_production("r", mine);
    a().create_production("r", mine);
    a().create_production("r");  // without a policy: the production as it is
    EXPECT_THROW(a().create_production("r", exact_policy(4, 5s)), leases::WrongStateError);
    EXPECT_THROW(a().create_production("r", leases::RetryPolicy{}), leases::WrongStateError);
}

TEST_P(Retries, SetRetryPolicyAppliesToTheNextEndedAttemptAndIsRecorded) {
    const std::string id = a().request_job("p");
    leases::Lease l = claim_from("p");
    a().set_retry_policy("p", exact_policy(1, 0s, 0s));
    EXPECT_EQ(events_of_kind("policy_changed"), 1u);
    l.fail_retry("the only attempt now");
    EXPECT_EQ(listed("p", id).state, JobState::Dead);
    a().set_retry_policy("p", leases::RetryPolicy{});  // back to the default: 25 attempts
    EXPECT_EQ(events_of_kind("policy_changed"), 2u);
    a().retry_job("p", id);
    claim_from("p").fail_retry();
    EXPECT_EQ(listed("p", id).state, JobState::Requested);
}
