#pragma once
// ggml's nearest_int: round to nearest with ties to even, done the way ggml
// does it (adding 1.5 * 2^23 and reading the mantissa), so that every quantizer
// built on it reproduces ggml's codes bit for bit. Valid for |x| <= 4194303;
// callers pass scaled values well inside that. Kept in a header of its own so
// that every reference quantizer rounds the same way.
#include <cstdint>
#include <cstring>

namespace kiln::quant {

inline int nearest_int(float x) noexcept {
    const float shifted = x + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace kiln::quant
