#pragma once
// Portable scalar conversions between float and the two 16-bit float formats
// GGUF stores: IEEE binary16 ("f16") and bfloat16 ("bf16").
//
// These are the reference that fast kernels are checked against, so they are
// plain bit manipulation with no intrinsics:
//  - fp32_to_fp16 rounds to nearest, ties to even, with correct subnormals,
//    overflow to infinity, and NaNs kept as quiet NaNs with the top payload bits.
//    That is bit-identical to x86 F16C `_cvtss_sh(x, 0)` (tests/test_half.cpp
//    checks it against the instruction when the build has F16C).
//  - fp16_to_fp32 is exact; a signalling NaN comes back quiet, as F16C
//    `_cvtsh_ss` does, so the scalar and SIMD paths agree on every bit pattern.
//  - fp32_to_bf16 follows ggml: NaN keeps its upper half with the quiet bit set;
//    everything else rounds to nearest, ties to even (overflowing to infinity).
//  - bf16_to_fp32 is exact (a shift).
#include <bit>
#include <cstdint>

namespace kiln {

inline uint16_t fp32_to_fp16(float value) noexcept {
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t abs = bits & 0x7fffffffu;

    if (abs >= 0x7f800000u) {
        if (abs == 0x7f800000u) return sign | 0x7c00u;  // infinity
        // NaN: keep the top 10 payload bits and force the quiet bit (bit 9).
        return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x03ffu));
    }
    // 65520 is exactly halfway between 65504 (largest f16, odd mantissa) and
    // 65536 (one step past it), so it and everything above rounds to infinity.
    if (abs >= 0x477ff000u) return sign | 0x7c00u;

    if (abs >= 0x38800000u) {
        // Normal in f16 (>= 2^-14): rebias the exponent from 127 to 15, then drop
        // 13 mantissa bits with round-to-nearest-even. A carry out of the mantissa
        // correctly bumps the exponent (it cannot reach infinity: checked above).
        const uint32_t rebased = abs - ((127u - 15u) << 23);
        const uint32_t round = 0x0fffu + ((rebased >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((rebased + round) >> 13));
    }

    // Below 2^-14 the result is an f16 subnormal, a multiple of 2^-24. Values up
    // to 2^-25 inclusive round to zero (2^-25 is a tie between 0 and 2^-24, and 0
    // is even).
    if (abs <= 0x33000000u) return sign;
    // abs = m * 2^(e - 150) with the implicit bit restored in m; in units of
    // 2^-24 that is m >> (126 - e). Here e is in [102, 112], so shift is 14..24.
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - exponent;
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u))) ++result;  // may become 0x400: the smallest normal
    return static_cast<uint16_t>(sign | result);
}

inline float fp16_to_fp32(uint16_t half) noexcept {
    const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
    const uint32_t exponent = (half >> 10) & 0x1fu;
    uint32_t mantissa = half & 0x03ffu;

    if (exponent == 0x1fu) {
        if (mantissa == 0) return std::bit_cast<float>(sign | 0x7f800000u);
        return std::bit_cast<float>(sign | 0x7fc00000u | (mantissa << 13));  // quiet NaN
    }
    if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
    if (mantissa == 0) return std::bit_cast<float>(sign);  // signed zero

    // Subnormal m * 2^-24: normalise so the leading 1 sits at bit 10; each shift
    // lowers the f32 exponent by one from that of 2^-14.
    uint32_t f32_exponent = 127u - 14u;
    while ((mantissa & 0x0400u) == 0) {
        mantissa <<= 1;
        --f32_exponent;
    }
    return std::bit_cast<float>(sign | (f32_exponent << 23) | ((mantissa & 0x03ffu) << 13));
}

inline uint16_t fp32_to_bf16(float value) noexcept {
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 64u);  // quiet NaN
    // Adding 0x7fff rounds up exactly when the low half is above 0x8000; adding
    // one more when the kept half is odd turns the tie into round-to-even.
    return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline float bf16_to_fp32(uint16_t value) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(value) << 16); }

}  // namespace kiln
