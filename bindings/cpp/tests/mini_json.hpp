// mini_json.hpp: the tests read the shared vectors (tests/vectors/*.json) and
// the library's raw listings with the projection's own strict JSON reader
// (leases::detail::JsonReader), so the suite needs no JSON dependency and that
// reader is exercised by every vector too.
#ifndef LEASES_TESTS_MINI_JSON_HPP
#define LEASES_TESTS_MINI_JSON_HPP

#include <leases/leases.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mini_json {

using Value = leases::detail::JsonReader::Value;

class Parser {
public:
    explicit Parser(std::string text) : text_(std::move(text)) {}
    Value document() const { return leases::detail::JsonReader(text_).document(); }

private:
    std::string text_;
};

inline Value parse_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("mini_json: cannot read " + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return Parser(ss.str()).document();
}

}  // namespace mini_json

#endif
