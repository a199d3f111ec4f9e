#pragma once
// One regular expression of a BPE pre-tokenizer, run as llama.cpp runs its
// general (not hand-written) ones, so kiln cuts text where llama.cpp does.
//
// llama.cpp matches with std::regex (ECMAScript) and, because std::regex
// knows no \p{..} classes, it rewrites both the text and the pattern first:
//   * a pattern that names \p{N}, \p{L}, \p{P}, \p{M} or \p{S} runs on a
//     "collapsed" text with one unit per code point: ASCII as itself, other
//     whitespace as U+000B, every other code point as a marker for its
//     category (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark,
//     0xD5 symbol, 0xD0 anything else); each \p{X} becomes a class of its
//     marker and the ASCII members of X. The ASCII symbol set leaves out '~'
//     (llama.cpp's does), so '~' matches neither \p{S} nor \p{P} here.
//   * any other pattern runs on the code points, with non-ASCII whitespace
//     turned into U+000B (std::regex's \s knows only ASCII whitespace).
// kiln does the same rewriting and matches with PCRE2's 32-bit library in
// non-UTF mode (a code unit is a code point or a marker, never an encoding
// error), with $ matching only at the very end, as in ECMAScript.
//
// Splitting: each chunk from the previous step is searched on its own (its
// end is the end of the text for $ and look-ahead); every match and every
// gap between matches becomes a piece.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class PretokenizerRegex {
public:
    // Throws kiln::Error("tokenizer", ...) when PCRE2 refuses the pattern.
    explicit PretokenizerRegex(std::string_view pattern);
    ~PretokenizerRegex();
    PretokenizerRegex(PretokenizerRegex&&) noexcept;
    PretokenizerRegex& operator=(PretokenizerRegex&&) noexcept;

    // Whether the pattern names a \p{..} class, so it runs on the collapsed text.
    bool collapsed() const noexcept { return collapsed_; }
    const std::string& pattern() const noexcept { return pattern_; }

    // Splits each chunk (lengths in code units, consecutive from the start of
    // `units`) into pieces, appending their lengths to `out`. `units` is the
    // collapsed text or the whitespace-folded code points, as collapsed() says.
    void split(std::span<const uint32_t> units, std::span<const size_t> chunks, std::vector<size_t>& out) const;

private:
    struct Compiled;
    std::string pattern_;
    bool collapsed_ = false;
    std::unique_ptr<Compiled> compiled_;
};

// The collapsed unit of a code point (see above).
uint32_t collapsed_unit(char32_t code_point) noexcept;
// The code point as the non-collapsed patterns see it (non-ASCII whitespace
// as U+000B).
uint32_t folded_unit(char32_t code_point) noexcept;

}  // namespace kiln
