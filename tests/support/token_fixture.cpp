#include "support/token_fixture.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "support/paths.h"

namespace kiln::test {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    FAIL("bad hex digit '" << c << "' in a fixture");
    return 0;
}

}  // namespace

// One fixture line: "<escaped text>"<TAB><ids>, as spm_reference.py writes it.
TokenCase parse_token_case(const std::string& line, int number) {
    INFO("fixture line " << number << ": " << line);
    REQUIRE(line.size() >= 2);
    REQUIRE(line[0] == '"');
    TokenCase c;
    c.line = number;
    size_t i = 1;
    for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\') {
            c.text.push_back(line[i]);
            continue;
        }
        REQUIRE(i + 1 < line.size());
        const char e = line[++i];
        if (e == 'n') c.text.push_back('\n');
        else if (e == 't') c.text.push_back('\t');
        else if (e == 'r') c.text.push_back('\r');
        else if (e == '\\' || e == '"') c.text.push_back(e);
        else if (e == 'x') {
            REQUIRE(i + 2 < line.size());
            c.text.push_back(static_cast<char>(hex_value(line[i + 1]) * 16 + hex_value(line[i + 2])));
            i += 2;
        } else {
            FAIL("unknown escape \\" << e);
        }
    }
    REQUIRE(i < line.size());  // the closing quote
    REQUIRE(i + 1 < line.size());
    REQUIRE(line[i + 1] == '\t');
    std::istringstream ids(line.substr(i + 2));
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    REQUIRE(ids.eof());  // nothing but ids after the tab
    return c;
}

std::vector<TokenCase> read_token_fixture(const std::string& name) {
    const auto path = fixtures_dir() / "tokenizer" / name;
    std::ifstream in(path, std::ios::binary);
    INFO(path.string());
    REQUIRE(in);
    std::vector<TokenCase> cases;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number)
        if (!line.empty() && line[0] != '#') cases.push_back(parse_token_case(line, number));
    return cases;
}

const TokenCase& find_token_case(const std::vector<TokenCase>& cases, std::string_view text) {
    for (const TokenCase& c : cases)
        if (c.text == text) return c;
    FAIL("the fixture has no case for '" << text << "'");
    return cases.front();
}

}  // namespace kiln::test
