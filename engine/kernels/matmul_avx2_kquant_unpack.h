#pragma once
// Private to the "avx2" K-quant kernels: a Q2_K..Q6_K super-block's scales and
// its codes 32 elements at a time (the decode tiles use them directly, the GEMM
// stores them into its panels). Include only where AVX2, FMA and F16C are on.
#include "engine/kernels/simd.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/dtype.h"

namespace kiln::kernels::detail::avx2_kquant {

constexpr int64_t kXBytes = 292, kXCodes = 4, kXBsums = 260;  // a Q8_K block

inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
inline uint32_t u32_at(const std::byte* p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline __m256i load256(const std::byte* p) noexcept { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i bcast32(const void* p) noexcept {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
inline __m256i srl16(__m256i v, int n) noexcept { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

template <DType T>
constexpr int64_t kBlockBytes = T == DType::Q2_K ? 84 : T == DType::Q3_K ? 110 : T == DType::Q4_K ? 144
                                : T == DType::Q5_K ? 176 : 210;
template <DType T>
constexpr bool kHasMin = T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K;

// A super-block's scales (16 signed bytes, one per 16 elements), the int16
// weights of its bsums term, and its super-scales.
struct Scales {
    __m128i scales8;
    __m256i corr;
    float d, dmin;
    __m128 d_dmin{};  // [d, dmin, -, -] for the types with a minimum (one conversion for both); zeros for the others
};

template <DType T>
inline Scales block_scales(const std::byte* p) noexcept {
    Scales s;
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        // The 12 scale bytes as 32-bit lanes [a, b, c, -] (the 4 bytes past
        // them are the block's codes, loaded and dropped): scales 0-3 are
        // a & 63, mins 0-3 b & 63; scales 4-7 are (c & 15) | (a >> 6) << 4,
        // mins 4-7 (c >> 4) | (b >> 6) << 4 (ggml's get_scale_min_k4), in
        // vector registers rather than through general ones.
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4));
        const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3F));                       // [sc 0-3, m 0-3, -, -]
        const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi8(0x03)), 4);
        const __m128i c = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xAA), _mm_set_epi32(0, 0, 4, 0));  // [c, c >> 4, -, -]
        const __m128i hi = _mm_or_si128(_mm_and_si128(c, _mm_set1_epi8(0x0F)), top);    // [sc 4-7, m 4-7, -, -]
        const __m128i sc_m = _mm_unpacklo_epi32(lo, hi);                                 // [sc 0-3, sc 4-7, m 0-3, m 4-7]
        s.scales8 = _mm_unpacklo_epi8(sc_m, sc_m);  // each sub-block of 32 is two of 16
        const __m128i m8 = _mm_unpackhi_epi64(sc_m, sc_m);
        s.corr = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        s.d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u32_at(p))));
        s.d = _mm_cvtss_f32(s.d_dmin);
        s.dmin = _mm_cvtss_f32(_mm_movehdup_ps(s.d_dmin));
    } else if constexpr (T == DType::Q6_K) {
        s.scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
        s.corr = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s.scales8), 5);
        s.d = half_at(p + 208);
        s.dmin = 0.0f;
    } else if constexpr (T == DType::Q3_K) {
        const uint32_t a = u32_at(p + 96), b = u32_at(p + 100), t = u32_at(p + 104);
        const uint32_t s0 = (a & 0x0F0F0F0Fu) | ((t & 0x03030303u) << 4);
        const uint32_t s1 = (b & 0x0F0F0F0Fu) | (((t >> 2) & 0x03030303u) << 4);
        const uint32_t s2 = ((a >> 4) & 0x0F0F0F0Fu) | (((t >> 4) & 0x03030303u) << 4);
        const uint32_t s3 = ((b >> 4) & 0x0F0F0F0Fu) | (((t >> 6) & 0x03030303u) << 4);
        s.scales8 = _mm_sub_epi8(
            _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1), static_cast<int>(s0)),
            _mm_set1_epi8(32));
        s.corr = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s.scales8), 2);
        s.d = half_at(p + 108);
        s.dmin = 0.0f;
    } else {
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        s.scales8 = _mm_and_si128(sm, _mm_set1_epi8(0x0F));
        s.corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        s.d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u32_at(p + 80))));
        s.d = _mm_cvtss_f32(s.d_dmin);
        s.dmin = _mm_cvtss_f32(_mm_movehdup_ps(s.d_dmin));
    }
    return s;
}

// The unsigned codes of elements 32c .. 32c + 31.
template <DType T>
inline __m256i chunk_codes(const std::byte* p, int c) noexcept {
    const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        const std::byte* qs = p + (T == DType::Q4_K ? 16 : 48);
        __m256i v = _mm256_and_si256(srl16(load256(qs + 32 * (c / 2)), 4 * (c % 2)), low4);
        if constexpr (T == DType::Q5_K)
            v = _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(srl16(load256(p + 16), c), one), 4));
        return v;
    } else if constexpr (T == DType::Q6_K) {
        const int h = c / 4, m = c % 4;
        const __m256i lo = _mm256_and_si256(srl16(load256(p + 64 * h + 32 * (m % 2)), 4 * (m / 2)), low4);
        const __m256i hi = _mm256_and_si256(srl16(load256(p + 128 + 32 * h), 2 * m), low2);
        return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    } else if constexpr (T == DType::Q3_K) {
        const int h = c / 4, g = c % 4;
        const __m256i lo = _mm256_and_si256(srl16(load256(p + 32 + 32 * h), 2 * g), low2);
        const __m256i hb = _mm256_and_si256(srl16(load256(p), 4 * h + g), one);
        return _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
    } else {
        const int h = c / 4, g = c % 4;
        return _mm256_and_si256(srl16(load256(p + 16 + 32 * h), 2 * g), low2);
    }
}

}  // namespace kiln::kernels::detail::avx2_kquant
