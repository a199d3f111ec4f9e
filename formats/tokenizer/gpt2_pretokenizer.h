#pragma once
// GPT-2's pre-tokenization: the text is cut into pieces ("pre-tokens") that
// BPE merges never cross, by the pattern of OpenAI's encoder.py
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matched repeatedly from the start of the text, written out by hand (no
// regex library). At each position the first alternative that matches wins:
//   1. an apostrophe with s, t, re, ve, m, ll or d (lower case only: "'LL" is
//      the punctuation "'" and the letters "LL");
//   2-4. an optional U+0020 space, then a run of letters, or of numbers, or of
//      "other" characters (neither letter, number nor whitespace; apostrophes
//      included, so "''s" is "''" then "s");
//   5. a run of whitespace that is not followed by a non-whitespace
//      character: at the end of the text the whole run, before a word the run
//      less its last character (which then starts the next pre-token, as
//      alternative 2-4's space or, for a tab or newline, on its own);
//   6. otherwise the single whitespace character.
// Classes come from unicode_class.h (Unicode 14.0.0). Bytes that are not valid
// UTF-8 count as "other" characters (each maximal invalid subpart one
// character), as Python sees them after decoding with surrogateescape.
#include <cstddef>
#include <string_view>

namespace kiln {

// The end of the pre-token that starts at `at` (< text.size()).
size_t gpt2_pretoken_end(std::string_view text, size_t at) noexcept;

}  // namespace kiln
