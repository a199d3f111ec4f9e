#include "formats/tokenizer/unicode_category.h"

#include <algorithm>

namespace kiln {

CharCategory char_category(char32_t code_point) noexcept {
    if (code_point > 0x10FFFF) return CharCategory::other;
    // The last run that starts at or before the code point holds it.
    const uint32_t* begin = detail::kCategoryRunStarts;
    const uint32_t* end = begin + detail::kCategoryRunCount;
    const uint32_t* run = std::upper_bound(begin, end, static_cast<uint32_t>(code_point)) - 1;
    return static_cast<CharCategory>(detail::kCategoryRunValues[run - begin]);
}

}  // namespace kiln
