// support.hpp: fixtures of the C++ projection tests: a temporary database per
// test, the frozen test clock (build/test/libleases.so only), job lookups
// through the JSON listing and the shared vectors.
#ifndef LEASES_TESTS_SUPPORT_HPP
#define LEASES_TESTS_SUPPORT_HPP

#include <leases/leases.hpp>
#include <leases_testing.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mini_json.hpp"

#ifndef LEASES_VECTORS_DIR
#error "LEASES_VECTORS_DIR must name tests/vectors"
#endif

namespace leases_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string vectors_path(const std::string &name) { return std::string(LEASES_VECTORS_DIR) + "/" + name; }

// A fresh directory removed with everything in it.
class TempDir {
public:
    TempDir() {
        const char *base = std::getenv("TMPDIR");
        std::string pattern = std::string(base && *base ? base : "/tmp") + "/leases-cpp-XXXXXX";
        std::vector<char> buf(pattern.begin(), pattern.end());
        buf.push_back('\0');
        if (mkdtemp(buf.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = buf.data();
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    const fs::path &path() const { return path_; }

private:
    fs::path path_;
};

// Whether the tests run under valgrind (make test-cpp-valgrind sets
// LEASES_UNDER_VALGRIND), where the Go runtime runs many times slower.
inline bool under_valgrind() {
    const char *v = std::getenv("LEASES_UNDER_VALGRIND");
    return v != nullptr && *v != '\0';
}

inline std::int64_t real_now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Freezes the authority's clock (test library seam).
inline void set_clock(leases::Authority &auth, std::int64_t now_unix_us) {
    leases::check(leases_testing_set_clock(auth.capi(), now_unix_us));
}

// One database per test with production "p"; the clock is frozen at t0 so
// that expiry tests move time explicitly.
class AuthorityTest : public ::testing::Test {
protected:
    void SetUp() override {
        db = (dir.path() / "leases.db").string();
        auth = leases::Authority::open(db);
        t0 = real_now_us();
        set_clock(*auth, t0);
        auth->create_production("p");
    }

    leases::Authority &a() { return *auth; }

    std::vector<std::string> request(int n) {
        std::vector<std::string> ids;
        for (int i = 0; i < n; ++i) {
            ids.push_back(a().request_job("p"));
        }
        return ids;
    }

    leases::Lease claim(const std::string &worker = "w", std::chrono::microseconds d = 1min) {
        auto l = a().claim("p", worker, d);
        if (!l) {
            throw std::runtime_error("nothing to claim");
        }
        return std::move(*l);
    }

    void advance(std::chrono::microseconds d) {
        now += d.count();
        set_clock(a(), t0 + now);
    }

    // The job's observation from the listing (no secrets there).
    mini_json::Value job(const std::string &id) {
        const mini_json::Value list = mini_json::Parser(a().jobs_json("p")).document();
        for (const auto &j : list.items) {
            if (j["id"].str() == id) {
                return j;
            }
        }
        throw std::runtime_error("job " + id + " not listed");
    }
    std::string state(const std::string &id) { return job(id)["state"].str(); }

    TempDir dir;
    std::string db;
    std::optional<leases::Authority> auth;
    std::int64_t t0 = 0;
    std::int64_t now = 0;  // offset from t0
};

// Lease::complete_and_claim_next on either store (production "p", no
// jobs yet): the completion and the next claim in one call, nullopt when
// nothing is left, nothing claimed when the completion is refused.
template <class State>
void check_complete_and_claim_next(leases::Authority &a, State state) {
    const std::string first = a.request_job("p"), second = a.request_job("p");
    std::optional<leases::Lease> l = a.claim("p", "w7", 30s);
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->job_id(), first);
    EXPECT_THROW((void)l->complete_and_claim_next(0s), leases::InvalidDurationError);
    EXPECT_THROW((void)l->complete_and_claim_next("{\"metadata\":", 30s), leases::InvalidArgumentError);
    std::optional<leases::Lease> next = l->complete_and_claim_next(R"({"metadata": {"frames": 3}})", 30s);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->job_id(), second);
    EXPECT_EQ(next->worker(), "w7");
    EXPECT_EQ(state(first), "completed");
    EXPECT_EQ(state(second), "claimed");
    EXPECT_THROW(l->renew(30s), leases::ClosedError);
    const std::string third = a.request_job("p");
    a.cancel("p", second);
    EXPECT_THROW((void)next->complete_and_claim_next(30s), leases::CancelledError);
    EXPECT_EQ(state(third), "requested");
    std::optional<leases::Lease> last = a.claim("p", "w7", 30s);
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(last->job_id(), third);
    EXPECT_FALSE(last->complete_and_claim_next(30s).has_value());
    EXPECT_EQ(state(third), "completed");
}

}  // namespace leases_test

#endif
