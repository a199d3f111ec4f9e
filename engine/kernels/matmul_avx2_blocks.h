#pragma once
// Private to the "avx2" kernel set: the 32-element block types it multiplies
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), how their blocks and the prepared
// activations' blocks are laid out, and their codes unpacked 32 at a time.
// Used by the small-batch tiles (matmul_avx2.cpp) and the GEMM
// (matmul_avx2_block_gemm.cpp). Include only where AVX2, FMA and F16C are on.
#include "engine/kernels/simd.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/dtype.h"
#include "engine/quant/blocks.h"
#include "engine/quant/legacy_quants.h"

namespace kiln::kernels::detail::avx2_blocks {

inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// The weight types of 32-element blocks this set multiplies, and how their
// blocks are laid out (engine/quant/blocks.h): an fp16 scale first; Q4_1/Q5_1
// then an fp16 minimum (their codes are unsigned, value = d·q + m, and they
// meet Q8_1 activations, whose s = d·Σq gives the minimum's share); Q5_0/Q5_1
// then 32 high bits; then the codes.
template <DType W>
constexpr int64_t kBlockBytes = W == DType::Q8_0   ? sizeof(quant::BlockQ8_0)
                                : W == DType::Q4_0 ? sizeof(quant::BlockQ4_0)
                                : W == DType::Q4_1 ? sizeof(quant::BlockQ4_1)
                                : W == DType::Q5_0 ? sizeof(quant::BlockQ5_0)
                                : W == DType::Q5_1 ? sizeof(quant::BlockQ5_1)
                                                   : sizeof(quant::BlockIQ4_NL);
template <DType W>
constexpr bool kHasMinimum = W == DType::Q4_1 || W == DType::Q5_1;
// The activation block: Q8_1 (d, s, codes) for the types with a minimum, else Q8_0 (d, codes).
template <DType W>
constexpr int64_t kActBytes = kHasMinimum<W> ? sizeof(quant::BlockQ8_1) : sizeof(quant::BlockQ8_0);
template <DType W>
constexpr int64_t kActCodes = kHasMinimum<W> ? 4 : 2;

// 16 bytes of packed nibbles: low nibbles (elements 0-15) in the low half,
// high nibbles (16-31) in the high half.
inline __m256i unpack_nibbles(const std::byte* p) noexcept {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
}

// The fifth bits of Q5_0/Q5_1: bit j of the 32-bit qh, as 0x10 in byte j.
inline __m256i fifth_bits(const std::byte* qh) noexcept {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    // Byte j takes qh's byte j / 8 (the shuffle stays within each 128-bit half,
    // where the broadcast put all four), then tests its own bit j % 8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(bits)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// A weight block's 32 codes in element order: signed for the types without a
// minimum (Q8_0, Q4_0 - 8, Q5_0 - 16, IQ4_NL's table values), unsigned for Q4_1 and Q5_1.
template <DType W>
inline __m256i load_codes(const std::byte* blk) noexcept {
    if constexpr (W == DType::Q8_0) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    } else if constexpr (W == DType::Q4_0) {
        return _mm256_sub_epi8(unpack_nibbles(blk + 2), _mm256_set1_epi8(8));
    } else if constexpr (W == DType::Q4_1) {
        return unpack_nibbles(blk + 4);
    } else if constexpr (W == DType::Q5_0) {
        return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(blk + 6), fifth_bits(blk + 2)), _mm256_set1_epi8(16));
    } else if constexpr (W == DType::Q5_1) {
        return _mm256_or_si256(unpack_nibbles(blk + 8), fifth_bits(blk + 4));
    } else {
        static_assert(W == DType::IQ4_NL);
        const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIQ4NLValues));
        return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), unpack_nibbles(blk + 2));
    }
}

}  // namespace kiln::kernels::detail::avx2_blocks
