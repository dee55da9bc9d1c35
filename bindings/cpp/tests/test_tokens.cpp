// Token export/import through the C++ projection, checked against the shared
// vectors of tests/vectors/tokens.json.
#include "support.hpp"

#include <algorithm>

using namespace leases_test;
using namespace std::chrono_literals;

namespace {

const mini_json::Value &token_vectors() {
    static const mini_json::Value v = mini_json::parse_file(vectors_path("tokens.json"));
    return v;
}

// A message must hold no token and no secret (nor a long slice of one).
void expect_no_secret(const std::string &message, const std::string &token, const std::string &secret_hex = "") {
    if (token.size() > 8) {
        const std::string body = token.substr(std::min<std::size_t>(4, token.size()));
        for (std::size_t i = 0; i + 12 <= body.size(); i += 6) {
            EXPECT_EQ(message.find(body.substr(i, 12)), std::string::npos) << "message echoes the token: " << message;
        }
    }
    if (!secret_hex.empty()) {
        EXPECT_EQ(message.find(secret_hex), std::string::npos) << message;
        EXPECT_EQ(message.find(secret_hex.substr(0, 8)), std::string::npos) << message;
    }
}

}  // namespace

using Tokens = AuthorityTest;

TEST_F(Tokens, EveryInvalidVectorIsABadTokenAndIsNeverEchoed) {
    const auto &invalid = token_vectors()["invalid"].items;
    ASSERT_FALSE(invalid.empty());
    for (const auto &v : invalid) {
        const std::string &token = v["token"].str();
        SCOPED_TRACE(v["why"].str());
        try {
            (void)a().import_token(token);
            ADD_FAILURE() << "accepted";
        } catch (const leases::BadTokenError &e) {
            EXPECT_EQ(e.status(), LEASES_BAD_TOKEN);
            expect_no_secret(e.what(), token);
        } catch (const leases::Error &e) {
            ADD_FAILURE() << "wrong class: " << e.name() << ": " << e.what();
        }
    }
}

TEST_F(Tokens, EveryValidVectorDecodesAndIsCheckedAgainstTheStore) {
    // The vectors name productions this database does not have: a token that
    // decodes reaches the store and is not_found, never bad_token.
    const auto &valid = token_vectors()["valid"].items;
    ASSERT_FALSE(valid.empty());
    for (const auto &v : valid) {
        const std::string &token = v["token"].str();
        SCOPED_TRACE(token.substr(0, 4));
        EXPECT_LE(token.size(), static_cast<std::size_t>(token_vectors()["max_token_len"].integer()));
        try {
            (void)a().import_token(token);
            ADD_FAILURE() << "a token of an unknown production was accepted";
        } catch (const leases::NotFoundError &e) {
            expect_no_secret(e.what(), token, v["secret_hex"].str());
        } catch (const leases::Error &e) {
            ADD_FAILURE() << "wrong class: " << e.name() << ": " << e.what();
        }
    }
}

TEST_F(Tokens, MaxTokenLengthOfTheVectorsEqualsTheHeader) {
    EXPECT_EQ(token_vectors()["max_token_len"].integer(), LEASES_MAX_TOKEN_LEN);
}

TEST_F(Tokens, ExportedTokenImportsAsTheSameClaimInAnotherHandle) {
    const auto ids = request(1);
    auto l = claim("w", 1min);
    const std::string token = l.export_token();
    EXPECT_EQ(token.rfind("lt1.", 0), 0u);
    EXPECT_LE(token.size(), static_cast<std::size_t>(LEASES_MAX_TOKEN_LEN));

    // Another process would open its own authority on the same file.
    auto other = leases::Authority::open(db);
    set_clock(other, t0);
    leases::Lease again = other.import_token(token);
    EXPECT_EQ(again.job_id(), ids[0]);
    EXPECT_EQ(again.production(), "p");
    again.complete();
    EXPECT_EQ(state(ids[0]), "completed");
    // The first handle's claim finished through another handle.
    EXPECT_THROW(l.complete(), leases::WrongStateError);
}

TEST_F(Tokens, AnyChangedCharacterOfARealTokenIsRejectedWithoutEcho) {
    request(1);
    auto l = claim("w", 1min);
    const std::string token = l.export_token();
    for (std::size_t i = 4; i < token.size(); ++i) {
        std::string bad = token;
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        try {
            (void)a().import_token(bad);
            ADD_FAILURE() << "changed character " << i << " accepted";
        } catch (const leases::BadTokenError &e) {
            expect_no_secret(e.what(), token);
        }
    }
}

TEST_F(Tokens, ATokenWithANulByteIsABadTokenNotATruncatedOne) {
    request(1);
    auto l = claim("w", 1min);
    const std::string token = l.export_token();
    EXPECT_THROW((void)a().import_token(token + std::string(1, '\0') + "x"), leases::BadTokenError);
    EXPECT_THROW((void)a().import_token(std::string(1, '\0') + token), leases::BadTokenError);
}
