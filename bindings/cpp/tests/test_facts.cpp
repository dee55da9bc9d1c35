// Facts as typed values (leases::FactValue): every kind of JSON value a fact
// can hold reads into its type and writes back as the same value; text that
// is not JSON is the caller's error; and facts published from typed values
// read back, through the library, as the same values.
#include <leases/leases.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

using leases::FactArray;
using leases::FactObject;
using leases::FactValue;

TEST(FactValue, EveryKindOfJsonValueReadsIntoItsTypeAndWritesBackTheSameValue) {
    const FactValue v = FactValue::parse(
        R"( {"n": null, "t": true, "f": false, "i": -9223372036854775808, "d": 0.5, "e": 1e3,
             "s": "r\u00e9sum\u00e9 \"q\" \\ \n\u0001", "a": [1, "two", [], {}], "o": {"k": {"deep": [null]}}} )");
    ASSERT_TRUE(v.is_object());
    EXPECT_TRUE(v.find("n")->is_null());
    EXPECT_TRUE(v.find("t")->as_bool());
    EXPECT_FALSE(v.find("f")->as_bool());
    EXPECT_EQ(v.find("i")->as_integer(), std::numeric_limits<std::int64_t>::min());
    EXPECT_FALSE(v.find("d")->is_integer());
    EXPECT_EQ(v.find("d")->as_number(), 0.5);
    EXPECT_EQ(v.find("e")->as_number(), 1000.0);
    EXPECT_EQ(v.find("s")->as_string(), "r\xc3\xa9sum\xc3\xa9 \"q\" \\ \n\x01");
    ASSERT_EQ(v.find("a")->as_array().size(), 4u);
    EXPECT_EQ(v.find("a")->as_array()[0].as_integer(), 1);
    EXPECT_EQ(v.find("a")->as_array()[1].as_string(), "two");
    EXPECT_TRUE(v.find("a")->as_array()[2].as_array().empty());
    EXPECT_TRUE(v.find("a")->as_array()[3].as_object().empty());
    EXPECT_TRUE(v.find("o")->find("k")->find("deep")->as_array()[0].is_null());
    EXPECT_EQ(v.find("missing"), nullptr);

    // Compact, members in their order, and the same value read back.
    const std::string json = v.to_json();
    EXPECT_EQ(json.substr(0, 36), R"({"n":null,"t":true,"f":false,"i":-92)");
    EXPECT_EQ(FactValue::parse(json), v);
    EXPECT_EQ(FactValue::parse(json).to_json(), json);
}

TEST(FactValue, ANumberThatIsNotAnIntegerStaysOneWhenWrittenAndReadBack) {
    for (const double d : {2.0, -0.0, 1e300, 0.1, 123456789.0}) {
        const FactValue back = FactValue::parse(FactValue(d).to_json());
        EXPECT_FALSE(back.is_integer()) << FactValue(d).to_json();
        EXPECT_EQ(back.as_number(), d) << FactValue(d).to_json();
    }
    EXPECT_TRUE(FactValue::parse("2").is_integer());
}

TEST(FactValue, TextThatIsNotJsonOrANumberJsonCannotWriteIsTheCallersInvalidArgument) {
    for (const char *bad : {"", "{", "[1,]", "{\"a\" 1}", "nul", "01", "1 2", "\"\\x\"", "99999999999999999999",
                            "1e999"}) {
        EXPECT_THROW((void)FactValue::parse(bad), leases::InvalidArgumentError) << bad;
    }
    EXPECT_THROW((void)FactValue(std::nan("")).to_json(), leases::InvalidArgumentError);
    EXPECT_THROW((void)FactValue(std::numeric_limits<double>::infinity()).to_json(), leases::InvalidArgumentError);
    EXPECT_THROW((void)FactValue("text").as_integer(), leases::InvalidArgumentError);
    EXPECT_THROW((void)FactValue(1).as_string(), leases::InvalidArgumentError);
}

TEST(FactValue, FactsPublishedFromTypedValuesReadBackThroughTheLibraryAsTheSameValues) {
    char tmpl[] = "/tmp/leases-facts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::filesystem::path dir(tmpl);
    {
        leases::Authority a = leases::Authority::open((dir / "leases.db").string());
        a.create_production("p");
        const std::string id = a.request_job("p");
        auto lease = a.claim("p", "w", std::chrono::minutes(1));
        ASSERT_TRUE(lease.has_value());
        const FactValue frames(24), ratio(0.5), tags(FactArray{"hd", true, nullptr});
        const FactValue tool(FactObject{{"name", "render \"2.1\""}, {"flags", FactArray{}}});
        const FactValue facts(FactObject{{"metadata", FactObject{{"frames", frames}, {"ratio", ratio}, {"tags", tags}}},
                                         {"provenance", FactObject{{"tool", tool}}}});
        lease->complete(facts.to_json());
        const leases::JobRecord r = a.job("p", id);
        ASSERT_EQ(r.facts.metadata.size(), 3u);
        EXPECT_EQ(FactValue::parse(r.facts.metadata.at("frames")), frames);
        EXPECT_EQ(FactValue::parse(r.facts.metadata.at("ratio")), ratio);
        EXPECT_EQ(FactValue::parse(r.facts.metadata.at("tags")), tags);
        EXPECT_EQ(FactValue::parse(r.facts.provenance.at("tool")), tool);
    }
    std::filesystem::remove_all(dir);
}

TEST(JobsFactsPage, APageOfJobsWithFactsCarriesEachCompletedJobsFactsInOneCall) {
    char tmpl[] = "/tmp/leases-pagefacts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::filesystem::path dir(tmpl);
    {
        leases::Authority a = leases::Authority::open((dir / "leases.db").string());
        a.create_production("p");
        std::vector<std::string> ids;
        for (int i = 0; i < 4; ++i) {
            ids.push_back(a.request_job("p"));
        }
        auto first = a.claim("p", "w", std::chrono::minutes(1));
        ASSERT_TRUE(first.has_value());
        first->complete(FactValue(FactObject{{"metadata", FactObject{{"frames", 24}, {"tags", FactArray{"hd", true}}}},
                                             {"provenance", FactObject{{"tool", "render"}}}})
                            .to_json());
        auto second = a.claim("p", "w", std::chrono::minutes(1));
        ASSERT_TRUE(second.has_value());
        second->complete();  // publishing nothing
        auto third = a.claim("p", "w", std::chrono::minutes(1));  // stays claimed
        ASSERT_TRUE(third.has_value());

        const leases::JobsFactsPage page = a.jobs_page_facts("p");
        const leases::Page<leases::Job> plain = a.jobs_page("p");
        ASSERT_EQ(page.items.size(), plain.items.size());
        for (std::size_t i = 0; i < page.items.size(); ++i) {
            EXPECT_EQ(page.items[i].id, plain.items[i].id);
        }
        EXPECT_EQ(page.next, plain.next);
        ASSERT_EQ(page.facts.size(), 2u) << "an entry for each completed job, none for the others";
        for (int i = 0; i < 2; ++i) {
            const leases::JobRecord r = a.job("p", ids[static_cast<std::size_t>(i)]);
            const leases::Facts &got = page.facts.at(ids[static_cast<std::size_t>(i)]);
            EXPECT_EQ(got.metadata, r.facts.metadata);
            EXPECT_EQ(got.provenance, r.facts.provenance);
        }
        EXPECT_EQ(FactValue::parse(page.facts.at(ids[0]).metadata.at("tags")), FactValue(FactArray{"hd", true}));
        EXPECT_TRUE(page.facts.at(ids[1]).metadata.empty());

        leases::JobQuery one;
        one.page_size = 1;
        const leases::JobsFactsPage p1 = a.jobs_page_facts("p", one);
        EXPECT_EQ(p1.facts.size(), 1u);
        EXPECT_EQ(p1.facts.count(ids[0]), 1u);
        EXPECT_THROW((void)a.jobs_page_facts("no-such-production"), leases::NotFoundError);
    }
    std::filesystem::remove_all(dir);
}
