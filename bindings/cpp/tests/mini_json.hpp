// mini_json.hpp: a small strict JSON reader for the shared test vectors
// (tests/vectors/*.json), so the C++ suite needs no JSON dependency.
// Strings keep every byte (\u0000 included); numbers stay as their text.
#ifndef LEASES_TESTS_MINI_JSON_HPP
#define LEASES_TESTS_MINI_JSON_HPP

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mini_json {

struct Value {
    enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
    bool boolean = false;
    std::string text;  // String: the decoded bytes; Number: the literal
    std::vector<Value> items;
    std::map<std::string, Value> members;

    const Value &operator[](const std::string &key) const {
        auto it = members.find(key);
        if (kind != Kind::Object || it == members.end()) {
            throw std::runtime_error("mini_json: no member " + key);
        }
        return it->second;
    }
    const std::string &str() const {
        if (kind != Kind::String) throw std::runtime_error("mini_json: not a string");
        return text;
    }
    std::int64_t integer() const {
        if (kind != Kind::Number) throw std::runtime_error("mini_json: not a number");
        return std::stoll(text);
    }
};

class Parser {
public:
    explicit Parser(const std::string &s) : s_(s) {}

    Value document() {
        Value v = value();
        ws();
        if (i_ != s_.size()) fail("trailing data");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string &why) const {
        throw std::runtime_error("mini_json: " + why + " at offset " + std::to_string(i_));
    }
    void ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
    }
    bool eat(char c) {
        ws();
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    bool literal(const char *word) {
        const std::string w(word);
        if (s_.compare(i_, w.size(), w) == 0) {
            i_ += w.size();
            return true;
        }
        return false;
    }

    Value value() {
        ws();
        if (i_ >= s_.size()) fail("unexpected end");
        Value v;
        const char c = s_[i_];
        if (c == '{') {
            ++i_;
            v.kind = Value::Kind::Object;
            if (eat('}')) return v;
            do {
                ws();
                std::string key = string();
                expect(':');
                v.members[key] = value();
            } while (eat(','));
            expect('}');
        } else if (c == '[') {
            ++i_;
            v.kind = Value::Kind::Array;
            if (eat(']')) return v;
            do {
                v.items.push_back(value());
            } while (eat(','));
            expect(']');
        } else if (c == '"') {
            v.kind = Value::Kind::String;
            v.text = string();
        } else if (literal("true")) {
            v.kind = Value::Kind::Bool;
            v.boolean = true;
        } else if (literal("false")) {
            v.kind = Value::Kind::Bool;
        } else if (literal("null")) {
            v.kind = Value::Kind::Null;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            v.kind = Value::Kind::Number;
            const std::size_t start = i_++;
            while (i_ < s_.size() && std::string("0123456789.eE+-").find(s_[i_]) != std::string::npos) ++i_;
            v.text = s_.substr(start, i_ - start);
        } else {
            fail("unexpected character");
        }
        return v;
    }

    unsigned hex4() {
        if (i_ + 4 > s_.size()) fail("short \\u escape");
        unsigned u = 0;
        for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            u <<= 4;
            if (h >= '0' && h <= '9') u |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') u |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') u |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad hex digit");
        }
        return u;
    }

    static void utf8(std::string &out, unsigned cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected string");
        ++i_;
        std::string out;
        for (;;) {
            if (i_ >= s_.size()) fail("unterminated string");
            const char c = s_[i_++];
            if (c == '"') return out;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= s_.size()) fail("unterminated escape");
            const char e = s_[i_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp = hex4();
                if (cp >= 0xD800 && cp < 0xDC00) {
                    if (!literal("\\u")) fail("lone high surrogate");
                    const unsigned lo = hex4();
                    if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                utf8(out, cp);
                break;
            }
            default: fail("bad escape");
            }
        }
    }

    const std::string &s_;
    std::size_t i_ = 0;
};

inline Value parse_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("mini_json: cannot read " + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    return Parser(text).document();
}

}  // namespace mini_json

#endif
