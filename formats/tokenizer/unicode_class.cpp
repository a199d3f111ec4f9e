#include "formats/tokenizer/unicode_class.h"

#include <algorithm>

namespace kiln::detail {

CharClass char_class_slow(char32_t code_point) noexcept {
    if (code_point > 0x10FFFF) return CharClass::other;
    // The last run that starts at or before the code point holds it.
    const uint32_t* begin = kCharClassRunStarts;
    const uint32_t* end = kCharClassRunStarts + kCharClassRunCount;
    const uint32_t* run = std::upper_bound(begin, end, static_cast<uint32_t>(code_point)) - 1;
    return static_cast<CharClass>(kCharClassRunValues[run - begin]);
}

}  // namespace kiln::detail
