// pg.hpp: PostgreSQL for the tests (a fresh schema of $LEASES_TEST_PG_URL per
// test, created and dropped with psql) and StoreTest, the fixture that runs
// one test body on SQLite and on PostgreSQL with the frozen test clock.
// Without a server the PostgreSQL runs fail under LEASES_REQUIRE_PG and are
// skipped otherwise.
#ifndef LEASES_TESTS_PG_HPP
#define LEASES_TESTS_PG_HPP

#include "support.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>

namespace leases_test {

inline std::string env(const char *name) {
    const char *v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

// Runs sql on $LEASES_TEST_PG_URL through psql (the shell expands the URL
// itself, so it needs no quoting here); returns the unaligned, tuples-only
// output without the final newline. sql must not contain '"', '$' or '`'.
inline std::string psql(const std::string &sql) {
    const std::string command =
        "PSQL=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | tail -n 1); "
        "\"${PSQL:-psql}\" -X -q -A -t -v ON_ERROR_STOP=1 -d \"$LEASES_TEST_PG_URL\" -c \"" +
        sql + "\" 2>&1";
    FILE *pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
        throw std::runtime_error("popen psql failed");
    }
    std::string out;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
        out.append(buf, n);
    }
    const int status = pclose(pipe);
    if (status != 0) {
        throw std::runtime_error("psql failed (" + std::to_string(status) + "): " + out);
    }
    while (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

inline std::string with_param(const std::string &url, const std::string &kv) {
    return url + (url.find('?') == std::string::npos ? "?" : "&") + kv;
}

inline std::string unique_schema() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    return "leases_cpp_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
           std::to_string(rd() % 1000000);
}

// Sets server to the server's URL; "" when there is none, and then the test is skipped,
// or failed under LEASES_REQUIRE_PG (the caller returns). Both are fatal: called from
// SetUp, they keep the test body from running without an authority.
inline void pg_server_or_skip(std::string &server) {
    server = env("LEASES_TEST_PG_URL");
    if (server.empty()) {
        if (!env("LEASES_REQUIRE_PG").empty()) {
            FAIL() << "LEASES_REQUIRE_PG is set but LEASES_TEST_PG_URL is not "
                             "(run under tests/pg/cluster.sh run -- ...)";
        } else {
            GTEST_SKIP() << "PostgreSQL tests skipped: LEASES_TEST_PG_URL is not set "
                            "(run under tests/pg/cluster.sh run -- ...)";
        }
    }
}

// A fresh PostgreSQL schema, dropped with everything in it.
class PgSchema {
public:
    explicit PgSchema(const std::string &server) : name_(unique_schema()) {
        psql("CREATE SCHEMA " + name_);
        url_ = with_param(server, "search_path=" + name_);
    }
    ~PgSchema() {
        try {
            psql("DROP SCHEMA " + name_ + " CASCADE");
        } catch (const std::exception &e) {
            ADD_FAILURE() << e.what();
        }
    }
    PgSchema(const PgSchema &) = delete;
    PgSchema &operator=(const PgSchema &) = delete;
    const std::string &name() const { return name_; }
    const std::string &url() const { return url_; }

private:
    std::string name_, url_;
};

enum class Store { SQLite, Postgres };

inline const char *to_string(Store s) { return s == Store::SQLite ? "SQLite" : "Postgres"; }
inline std::string store_name(const ::testing::TestParamInfo<Store> &info) { return to_string(info.param); }
// How GoogleTest shows the parameter (found by argument-dependent lookup).
inline void PrintTo(Store s, std::ostream *os) { *os << to_string(s); }

// One authority per test on the store of the parameter, with production "p"
// and the clock frozen at t0 (advance() moves it: backoffs and delays pass
// without sleeping).
class StoreTest : public ::testing::TestWithParam<Store> {
protected:
    void SetUp() override {
        if (GetParam() == Store::SQLite) {
            location = (dir.path() / "leases.db").string();
        } else {
            std::string server;
            pg_server_or_skip(server);
            if (server.empty()) {
                return;
            }
            schema.emplace(server);
            location = schema->url();
        }
        auth.emplace(open_store(location));
        t0 = real_now_us();
        set_clock(*auth, t0);
        auth->create_production("p");
    }
    void TearDown() override { auth.reset(); }

    // Opens location with the default options, except under valgrind: there a
    // loaded host can stall the slowed Go runtime for seconds, and on
    // PostgreSQL a statement counts as unanswered after the busy timeout plus
    // 3 s (docs/postgres.md), so the authority waits a minute rather than 10 s.
    // Nothing in these tests waits for a lock, so nothing else changes.
    static leases::Authority open_store(const std::string &location) {
        if (!under_valgrind()) {
            return leases::Authority::open(location);
        }
        leases::OpenOptions options;
        options.busy_timeout = std::chrono::minutes(1);
        return leases::Authority::open(location, options);
    }

    leases::Authority &a() { return *auth; }

    // Moves the frozen clock d past t0's offset so far.
    void advance(std::chrono::microseconds d) {
        now += d.count();
        set_clock(a(), t0 + now);
    }
    // The authority's current (frozen) time.
    leases::time_point at() const { return leases::time_point(std::chrono::microseconds(t0 + now)); }

    TempDir dir;
    std::optional<PgSchema> schema;
    std::string location;
    std::optional<leases::Authority> auth;  // closed before the schema is dropped
    std::int64_t t0 = 0;
    std::int64_t now = 0;
};

}  // namespace leases_test

#endif
