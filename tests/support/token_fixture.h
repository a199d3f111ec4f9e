#pragma once
// Reading the tokenizer fixtures of tests/fixtures/tokenizer/ that
// tests/reference/spm_reference.py and gpt2_bpe_reference.py write: one case
// per line, "<escaped text>"<TAB><ids>, '#' lines are comments.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test {

struct TokenCase {
    std::string text;
    std::vector<int32_t> ids;
    int line = 0;
};

// Fails the current test on a malformed line.
TokenCase parse_token_case(const std::string& line, int number);
std::vector<TokenCase> read_token_fixture(const std::string& name);
// The case for `text`; fails the test when the fixture has none.
const TokenCase& find_token_case(const std::vector<TokenCase>& cases, std::string_view text);

}  // namespace kiln::test
