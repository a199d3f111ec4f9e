#pragma once
// Llama 3's pre-tokenization, written out by hand (as llama.cpp does; its
// results are the reference), for the pattern
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// At each position the first alternative that matches wins:
//   1. an apostrophe with s, t, re, ve, m, ll or d in either case;
//   2. one character that is not CR, LF, a letter or a number (a space, a
//      tab, punctuation...), or none, then a run of letters;
//   3. one to three numbers: "12345" is "123" then "45";
//   4. an optional space, a run of characters that are neither whitespace,
//      letters nor numbers, then any CRs and LFs;
//   5. whitespace up to and including its last CR or LF, when it has one;
//   6. a whitespace run less its last character when a non-whitespace
//      character follows, else the whole run.
// Classes as gpt2_pretokenizer.h (letter, number, whitespace from
// unicode_class.h); bytes that are not valid UTF-8 are "other" characters.
#include <cstddef>
#include <string_view>

namespace kiln {

// The end of the pre-token that starts at `at` (< text.size()).
size_t llama3_pretoken_end(std::string_view text, size_t at) noexcept;

}  // namespace kiln
