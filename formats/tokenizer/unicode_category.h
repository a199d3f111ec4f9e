#pragma once
// The general-category groups llama.cpp's regular-expression pre-tokenizers
// name (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}) plus whitespace, one per code
// point. Generated into unicode_category_table.cpp by make_unicode_tables.py
// from the same Unicode version as unicode_class.h, so letter, number and
// whitespace agree with char_class() everywhere.
#include <cstddef>
#include <cstdint>

namespace kiln {

enum class CharCategory : uint8_t {
    other = 0,        // separators that are not whitespace, controls, unassigned, surrogates, private use
    letter = 1,       // L*
    number = 2,       // N*
    whitespace = 3,   // the White_Space property (wins over the general category)
    punctuation = 4,  // P*
    mark = 5,         // M*
    symbol = 6,       // S*
};

namespace detail {
extern const size_t kCategoryRunCount;
extern const uint32_t kCategoryRunStarts[];
extern const uint8_t kCategoryRunValues[];
}  // namespace detail

// The category of a code point; anything above U+10FFFF is "other".
CharCategory char_category(char32_t code_point) noexcept;

}  // namespace kiln
