// Limits in C++: sizes are checked before the library reads or
// copies an input, with a clear error and nothing written; and the names
// rule of tests/vectors/names.json (docs/decisions.md, Names).
#include "support.hpp"

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

class Limits : public AuthorityTest {
protected:
    std::size_t events() { return a().events().size(); }
};

}  // namespace

TEST_F(Limits, AnOversizePayloadIsRefusedBeforeTheLibraryReadsIt) {
    const std::size_t before = events();
    // 16 real bytes and a length of 1 GiB: were the length passed on, the
    // library would read far past the buffer (ASan and valgrind would see it).
    const std::uint8_t small[16] = {};
    try {
        (void)a().request_job("p", "big", small, std::size_t{1} << 30);
        FAIL() << "an oversize payload was accepted";
    } catch (const leases::InvalidArgumentError &e) {
        EXPECT_NE(std::string(e.what()).find("LEASES_MAX_PAYLOAD_LEN"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)a().request_job("p", "big", std::string(LEASES_MAX_PAYLOAD_LEN + 1, 'x')),
                 leases::InvalidArgumentError);
    EXPECT_EQ(events(), before);
    (void)a().request_job("p", "max", std::string(LEASES_MAX_PAYLOAD_LEN, 'x'));  // the limit itself
}

TEST_F(Limits, OversizeStringsAreRefusedBeforeTheCallAndWriteNothing) {
    (void)request(1);
    leases::Lease l = claim();
    const std::size_t before = events();
    const std::string name(LEASES_MAX_NAME_LEN + 1, 'n');
    const auto refused = [](auto &&call, const char *limit) {
        try {
            call();
            ADD_FAILURE() << "accepted an input over " << limit;
        } catch (const leases::InvalidArgumentError &e) {
            EXPECT_NE(std::string(e.what()).find(limit), std::string::npos) << e.what();
        }
    };
    refused([&] { a().create_production(name); }, "LEASES_MAX_NAME_LEN");
    refused([&] { (void)a().request_job("p", name); }, "LEASES_MAX_NAME_LEN");
    refused([&] { (void)a().claim("p", name, 1min); }, "LEASES_MAX_NAME_LEN");
    refused([&] { l.fail(std::string(LEASES_MAX_REASON_LEN + 1, 'r')); }, "LEASES_MAX_REASON_LEN");
    refused([&] { l.complete(std::string(LEASES_MAX_FACTS_LEN + 1, ' ')); }, "LEASES_MAX_FACTS_LEN");
    refused([&] { (void)leases::Authority::open(std::string(LEASES_MAX_PATH_LEN + 1, 'p')); }, "LEASES_MAX_PATH_LEN");
    EXPECT_THROW((void)a().import_token(std::string(LEASES_MAX_TOKEN_LEN + 1, 't')), leases::BadTokenError);
    EXPECT_EQ(events(), before);
    l.fail(std::string(LEASES_MAX_REASON_LEN, 'r'));  // the limit itself
}

TEST_F(Limits, ANegativeEventSequenceIsRefused) {
    EXPECT_THROW((void)a().events("", -1), leases::InvalidArgumentError);
}

// Every name the vectors accept works as a production, a key and a worker;
// every refused one is InvalidArgumentError naming the problem, and writes nothing.
TEST_F(Limits, NamesFollowTheSharedNamesVectors) {
    const mini_json::Value v = mini_json::parse_file(vectors_path("names.json"));
    for (const auto &c : v["accepted"].items) {
        const std::string name = c["name"].str();
        SCOPED_TRACE(c["why"].str());
        a().create_production(name);
        const std::string id = a().request_job("p", name);
        leases::Lease l = a().claim_job("p", id, name, 1min);
        EXPECT_EQ(l.worker(), name);
        l.complete();
        EXPECT_EQ(state(id), "completed");
    }
    const std::size_t before = events();
    for (const auto &c : v["refused"].items) {
        const std::string name = c["name"].str();
        SCOPED_TRACE(c["why"].str());
        const std::vector<std::function<void()>> calls{
            [&] { a().create_production(name); },
            [&] { (void)a().request_job("p", name); },
            [&] { (void)a().claim("p", name, 1min); },
        };
        for (const auto &call : calls) {
            try {
                call();
                ADD_FAILURE() << "accepted a refused name";
            } catch (const leases::InvalidArgumentError &e) {
                for (const auto &part : c["error_contains"].items) {
                    EXPECT_NE(std::string(e.what()).find(part.str()), std::string::npos)
                        << e.what() << " lacks " << part.str();
                }
            }
        }
    }
    EXPECT_EQ(events(), before) << "a refused name wrote something";
}
