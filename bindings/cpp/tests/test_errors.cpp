// One exception class per status: every status of tests/vectors/statuses.json
// is driven for real through the projection (clock statuses through the test
// library's frozen clock) and must throw its own leases::Error subclass.
#include "support.hpp"

#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <typeindex>

#include <cxxabi.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

struct StatusVector {
    int code;
    std::string name;
    std::string stem;  // the class is leases::<stem>Error
    bool not_held;
};

void PrintTo(const StatusVector &s, std::ostream *os) { *os << s.name << " (" << s.code << ")"; }

std::vector<StatusVector> status_vectors() {
    std::vector<StatusVector> out;
    for (const auto &s : mini_json::parse_file(vectors_path("statuses.json")).items) {
        out.push_back({static_cast<int>(s["code"].integer()), s["name"].str(), s["stem"].str(),
                       s["not_held"].boolean});
    }
    return out;
}

// The class each status must map to.
const std::map<std::string, std::type_index> &expected_classes() {
    static const std::map<std::string, std::type_index> m{
        {"invalid_argument", typeid(leases::InvalidArgumentError)},
        {"invalid_duration", typeid(leases::InvalidDurationError)},
        {"not_found", typeid(leases::NotFoundError)},
        {"nothing_to_claim", typeid(leases::NothingToClaimError)},
        {"wrong_state", typeid(leases::WrongStateError)},
        {"lease_lost", typeid(leases::LeaseLostError)},
        {"expired", typeid(leases::ExpiredError)},
        {"cancelled", typeid(leases::CancelledError)},
        {"not_extended", typeid(leases::NotExtendedError)},
        {"clock_regressed", typeid(leases::ClockRegressedError)},
        {"closed", typeid(leases::ClosedError)},
        {"bad_token", typeid(leases::BadTokenError)},
        {"busy", typeid(leases::BusyError)},
        {"storage", typeid(leases::StorageError)},
        {"outcome_unknown", typeid(leases::OutcomeUnknownError)},
        {"schema_too_new", typeid(leases::SchemaTooNewError)},
        {"forked", typeid(leases::ForkedError)},
        {"internal", typeid(leases::InternalError)},
        {"interrupted", typeid(leases::InterruptedError)},
    };
    return m;
}

class EveryStatus : public AuthorityTest, public ::testing::WithParamInterface<StatusVector> {
protected:
    // Runs the real operation that yields the status; it must throw.
    void drive(const std::string &name);

    // Sets RLIMIT_FSIZE to 0 around fn so every file write fails (EFBIG):
    // the commit's WAL append fails after the transaction did its work.
    template <class F>
    void with_writes_failing(F fn) {
        struct rlimit old {};
        ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
        void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit none = old;
        none.rlim_cur = 0;
        ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &none), 0);
        try {
            fn();
        } catch (...) {
            setrlimit(RLIMIT_FSIZE, &old);
            std::signal(SIGXFSZ, old_handler);
            throw;
        }
        setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, old_handler);
    }
};

void EveryStatus::drive(const std::string &name) {
    if (name == "invalid_argument") {
        a().create_production("");  // empty name
    } else if (name == "invalid_duration") {
        // The projection never lets one through (InvalidDurationError before the
        // call, tests/test_durations.cpp); here the library's own status.
        request(1);
        leases_lease *out = nullptr;
        leases::check(leases_claim(a().capi(), "p", "w", 0, &out));
    } else if (name == "not_found") {
        (void)a().claim("no-such-production", "w", 1s);
    } else if (name == "nothing_to_claim") {
        // claim() turns it into std::nullopt; the raw status maps to its class.
        EXPECT_FALSE(a().claim("p", "w", 1s).has_value());
        leases_lease *out = nullptr;
        leases::check(leases_claim(a().capi(), "p", "w", 1'000'000, &out));
    } else if (name == "wrong_state") {
        const auto ids = request(1);
        claim().complete();
        a().cancel("p", ids[0]);  // cancelling a completed job
    } else if (name == "lease_lost") {
        request(1);
        auto old = claim("w1", 1s);
        advance(3s);  // past the expiry and the default policy's first backoff (at most 1.2 s)
        auto current = claim("w2", 1min);
        old.renew(1min);
    } else if (name == "expired") {
        request(1);
        auto l = claim("w", 1s);
        advance(1s);  // expiry is exclusive
        l.complete();
    } else if (name == "cancelled") {
        const auto ids = request(1);
        auto l = claim();
        a().cancel("p", ids[0]);
        l.complete();
    } else if (name == "not_extended") {
        request(1);
        auto l = claim("w", 1h);
        l.renew(1s);
    } else if (name == "clock_regressed") {
        request(2);
        advance(1min);
        auto l = claim();  // the high-water mark is now t0 + 1 min
        now = 0;
        advance(0s);  // back to t0
        (void)a().claim("p", "w", 1s);
    } else if (name == "closed") {
        request(1);
        auto l = claim();
        l.release();
        l.release();
    } else if (name == "bad_token") {
        (void)a().import_token("lt1.not-a-token");
    } else if (name == "busy") {
        leases_authority *raw = nullptr;
        leases::check(leases_testing_open(db.c_str(), 50'000, &raw));  // 50 ms
        leases::Authority impatient(raw);
        request(1);
        auto e = a().edit();  // holds the writer lock
        (void)impatient.claim("p", "w", 1s);
    } else if (name == "storage") {
        const std::string junk = (dir.path() / "not-a-database").string();
        std::ofstream(junk, std::ios::binary) << std::string(8192, 'x');
        (void)leases::Authority::open(junk);
    } else if (name == "outcome_unknown") {
        request(1);
        auto l = claim("w", 1min);
        bool thrown = false;
        with_writes_failing([&] {
            try {
                l.renew(1h);
            } catch (const leases::OutcomeUnknownError &) {
                thrown = true;
            }
        });
        ASSERT_TRUE(thrown) << "renew under a failing disk did not report outcome_unknown";
        // The lease stays active locally; its next use asks the store.
        l.renew(2h);
        with_writes_failing([&] { l.complete(); });
    } else if (name == "schema_too_new") {
        auth.reset();  // the last connection checkpoints and removes the WAL
        ASSERT_FALSE(fs::exists(db + "-wal"));
        {
            // PRAGMA user_version is the big-endian 32-bit integer at offset 60.
            std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(60);
            const char newer[4] = {0, 0, 0x27, 0x0f};  // 9999
            f.write(newer, 4);
        }
        (void)leases::Authority::open(db);
    } else if (name == "forked") {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            int code = 1;
            try {
                (void)leases::Authority::open(db);
            } catch (const leases::ForkedError &e) {
                code = e.status() == LEASES_FORKED ? 0 : 2;
            } catch (...) {
                code = 3;
            }
            _exit(code);
        }
        int wstatus = 0;
        ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
        ASSERT_TRUE(WIFEXITED(wstatus));
        ASSERT_EQ(WEXITSTATUS(wstatus), 0) << "the forked child did not get ForkedError";
        throw leases::ForkedError("seen in the child");  // reported to the parent by exit code
    } else if (name == "internal") {
        leases::check(leases_testing_panic());
    } else if (name == "interrupted") {
        // The header's own call, until the C++ worker loop wraps it: a wait
        // whose canceller was cancelled.
        leases_canceller *c = nullptr;
        leases::check(leases_canceller_new(&c));
        std::unique_ptr<leases_canceller, void (*)(leases_canceller *)> owned(c, leases_canceller_free);
        leases::check(leases_canceller_cancel(c));
        leases_lease *out = nullptr;
        leases::check(leases_claim_wait(a().capi(), "p", "w", 1'000'000, 1'000'000, c, &out));
    } else {
        FAIL() << "no driver for status " << name << ": add one";
    }
}

}  // namespace

TEST_P(EveryStatus, ThrowsItsOwnExceptionClassCarryingTheStatus) {
    const StatusVector &s = GetParam();
    if (s.code == LEASES_OK) {
        EXPECT_STREQ(leases_status_name(LEASES_OK), "ok");
        EXPECT_NO_THROW(leases::check(LEASES_OK));
        return;
    }
    EXPECT_STREQ(leases_status_name(s.code), s.name.c_str());
    auto cls = expected_classes().find(s.name);
    ASSERT_NE(cls, expected_classes().end()) << "no exception class expected for " << s.name;
    try {
        drive(s.name);
        if (!HasFatalFailure()) {
            ADD_FAILURE() << s.name << ": nothing thrown";
        }
    } catch (const leases::Error &e) {
        EXPECT_EQ(std::type_index(typeid(e)), cls->second) << "thrown " << e.name() << ": " << e.what();
        EXPECT_EQ(e.status(), s.code);
        EXPECT_STREQ(e.name(), s.name.c_str());
        EXPECT_NE(std::string(e.what()), "") << "messages come from leases_last_error()";
    }
}

INSTANTIATE_TEST_SUITE_P(Statuses, EveryStatus, ::testing::ValuesIn(status_vectors()),
                         [](const ::testing::TestParamInfo<StatusVector> &info) { return info.param.name; });

TEST(StatusMapping, EachStatusHasADistinctClassAndUnknownStatusesKeepTheBase) {
    std::set<std::type_index> seen;
    for (const auto &s : status_vectors()) {
        if (s.code == LEASES_OK) continue;
        try {
            leases::throw_status(s.code, "m");
        } catch (const leases::Error &e) {
            EXPECT_EQ(e.status(), s.code);
            EXPECT_TRUE(seen.insert(typeid(e)).second) << s.name << " shares a class";
            EXPECT_NE(std::type_index(typeid(e)), std::type_index(typeid(leases::Error)));
        }
    }
    EXPECT_EQ(seen.size(), expected_classes().size());
    try {
        leases::throw_status(99, "future");
    } catch (const leases::Error &e) {
        EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(leases::Error)));
        EXPECT_EQ(e.status(), 99);
    }
}

std::string demangled(const std::type_info &t) {
    int rc = 0;
    std::unique_ptr<char, void (*)(void *)> name(abi::__cxa_demangle(t.name(), nullptr, nullptr, &rc), std::free);
    return rc == 0 && name ? std::string(name.get()) : std::string(t.name());
}

TEST(StatusMapping, EachClassIsNamedAfterItsStatusAndNotHeldOnesShareABase) {
    int not_held = 0;
    for (const auto &s : status_vectors()) {
        if (s.code == LEASES_OK) continue;
        try {
            leases::throw_status(s.code, "m");
        } catch (const leases::Error &e) {
            EXPECT_EQ(demangled(typeid(e)), "leases::" + s.stem + "Error") << s.name;
            const bool is_not_held = dynamic_cast<const leases::NotHeldError *>(&e) != nullptr;
            EXPECT_EQ(is_not_held, s.not_held) << s.name;
            not_held += is_not_held;
        }
    }
    EXPECT_EQ(not_held, 3);  // lease_lost, expired, cancelled
}

TEST_F(AuthorityTest, ALostLeaseIsCaughtAsNotHeldError) {
    const std::string job = request(1)[0];
    leases::Lease lease = claim();
    a().cancel("p", job);
    try {
        lease.renew(30s);
        FAIL() << "renewing a cancelled claim succeeded";
    } catch (const leases::NotHeldError &e) {
        EXPECT_EQ(e.status(), LEASES_CANCELLED);
        EXPECT_NE(dynamic_cast<const leases::CancelledError *>(&e), nullptr);
    }
}

// A claim whose outcome is unknown returns no lease, so its error names the
// job the claim chose (Error::job_id(), from leases_last_error_job_id): for
// complete_and_claim_next the next job, not the completed one.
TEST_F(AuthorityTest, AnOutcomeUnknownClaimNamesTheJobItChoseInJobId) {
    const std::vector<std::string> ids = request(3);
    leases::Lease lease = claim();
    ASSERT_EQ(lease.job_id(), ids[0]);
    try {
        (void)a().claim_job("p", ids[0], "w", 30s);
        FAIL() << "claiming a claimed job succeeded";
    } catch (const leases::WrongStateError &e) {
        EXPECT_EQ(e.job_id(), ids[0]);  // the job the refused call acted on
    }
    try {
        (void)a().claim("p", "", 30s);
        FAIL() << "an empty worker was accepted";
    } catch (const leases::InvalidArgumentError &e) {
        EXPECT_EQ(e.job_id(), "");
    }
    leases::check(leases_testing_lose_commit_acks(a().capi()));
    try {
        (void)lease.complete_and_claim_next(30s);
        FAIL() << "a lost acknowledgement went unreported";
    } catch (const leases::OutcomeUnknownError &e) {
        EXPECT_EQ(e.job_id(), ids[1]);
    }
    try {
        (void)a().claim("p", "w", 30s);
        FAIL() << "a lost acknowledgement went unreported";
    } catch (const leases::Error &e) {
        EXPECT_EQ(e.status(), LEASES_OUTCOME_UNKNOWN);
        EXPECT_EQ(e.job_id(), ids[2]);
        EXPECT_NE(std::string(e.what()).find(ids[2]), std::string::npos);
    }
}

// The library's message passes through, so every surface says the same: how
// this lease ended its claim, and that a settled lease is closed.
TEST_F(AuthorityTest, ASettledLeaseSaysHowThisLeaseEndedItsClaimAndThatASettledLeaseIsClosed) {
    const std::vector<std::pair<std::string, std::function<void(leases::Lease &)>>> endings{
        {"completed", [](leases::Lease &l) { l.complete(); }},
        {"released", [](leases::Lease &l) { l.release(); }},
        {"failed", [](leases::Lease &l) { l.fail("broken"); }},
    };
    request(static_cast<int>(endings.size()));
    for (const auto &[how, settle] : endings) {
        leases::Lease lease = claim();
        settle(lease);
        try {
            lease.complete();
            FAIL() << "completing a " << how << " lease succeeded";
        } catch (const leases::ClosedError &e) {
            EXPECT_EQ(std::string(e.what()), "closed: lease for job " + lease.job_id() +
                                                 " is closed: this lease already " + how +
                                                 " the job; a lease is closed once it has completed, released or "
                                                 "failed its claim");
        }
    }
}

// The names before the status-named classes stay for one release, deprecated.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(StatusMapping, TheOldNamesAreAliasesOfTheStatusNamedClasses) {
    EXPECT_TRUE((std::is_same_v<leases::WrongStateError, leases::WrongStateError>));
    EXPECT_TRUE((std::is_same_v<leases::InvalidDurationError, leases::InvalidDurationError>));
    EXPECT_TRUE((std::is_same_v<leases::BadTokenError, leases::BadTokenError>));
    EXPECT_TRUE((std::is_same_v<leases::SchemaTooNewError, leases::SchemaTooNewError>));
    EXPECT_TRUE((std::is_same_v<leases::ForkedError, leases::ForkedError>));
    EXPECT_TRUE((std::is_same_v<leases::ExpiredError, leases::ExpiredError>));
    EXPECT_THROW(leases::throw_status(LEASES_WRONG_STATE, "x"), leases::WrongStateError);
}
#pragma GCC diagnostic pop

TEST(StatusMapping, EveryErrorIsARuntimeError) {
    EXPECT_THROW(leases::throw_status(LEASES_EXPIRED, "x"), std::runtime_error);
    EXPECT_THROW(leases::throw_status(LEASES_EXPIRED, "x"), leases::Error);
}
