#pragma once
// The character classes GPT-2's pre-tokenizer splits on: \p{L}, \p{N}, \s and
// everything else, as the `regex` module that GPT-2's encoder.py uses defines
// them. The table comes from unicode_class_table.cpp, which
// make_unicode_tables.py generates from Python's unicodedata (Unicode 14.0.0):
// code points assigned in later versions count as "other".
#include <cstddef>
#include <cstdint>

namespace kiln {

enum class CharClass : uint8_t {
    other = 0,
    letter = 1,      // general category L*
    number = 2,      // general category N*
    whitespace = 3,  // the White_Space property
};

namespace detail {
extern const char kUnicodeVersion[];
extern const size_t kCharClassRunCount;
extern const uint32_t kCharClassRunStarts[];
extern const uint8_t kCharClassRunValues[];
CharClass char_class_slow(char32_t code_point) noexcept;
}  // namespace detail

// The Unicode version of the table, e.g. "14.0.0".
inline const char* unicode_class_version() noexcept { return detail::kUnicodeVersion; }

// The class of a code point; anything above U+10FFFF is "other".
inline CharClass char_class(char32_t code_point) noexcept {
    // ASCII is nearly all of most texts: answer it without a search.
    if (code_point < 0x80) {
        if ((code_point | 0x20) >= 'a' && (code_point | 0x20) <= 'z') return CharClass::letter;
        if (code_point >= '0' && code_point <= '9') return CharClass::number;
        if (code_point == ' ' || (code_point >= 0x09 && code_point <= 0x0D)) return CharClass::whitespace;
        return CharClass::other;
    }
    return detail::char_class_slow(code_point);
}

}  // namespace kiln
