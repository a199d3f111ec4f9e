#pragma once
// Private to the "avx512-vnni" K-quant kernels: a Q2_K..Q6_K super-block
// unpacked in registers (the decode tiles use it directly, the GEMM stores it
// into its panels). Include only where KILN_HAVE_AVX512_VNNI is 1.
#include "engine/kernels/simd.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/dtype.h"

namespace kiln::kernels::detail::avx512_kquant {

constexpr int64_t kXBytes = 292;  // a Q8_K block: float d, 256 codes, 16 int16 bsums
constexpr int64_t kXCodes = 4, kXBsums = 260;

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
inline __m256i srl16(__m256i v, int n) noexcept { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
// Two 32-byte halves as one 512-bit vector (elements in order).
inline __m512i join(__m256i lo, __m256i hi) noexcept { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// A super-block ready for the dot: codes of chunk c (elements 64c .. 64c+63) as
// u8, the 16 per-16 scales, the 16 int16 weights of the bsums term, and the
// float super-scales.
struct Unpacked {
    __m512i codes[4];
    __m256i scales;
    __m256i corr;
    float d, dmin;  // dmin == 0: corr is an offset term in units of d
};

template <DType T>
constexpr int64_t kBlockBytes = T == DType::Q2_K ? 84 : T == DType::Q3_K ? 110 : T == DType::Q4_K ? 144
                                : T == DType::Q5_K ? 176 : 210;

// Q4_K / Q5_K: the 8 six-bit scales and mins (12 packed bytes) as 8 bytes
// each, each repeated for the two 16-element halves of its sub-block.
inline void scales_mins_k4(const std::byte* packed, __m256i& scales, __m256i& mins) noexcept {
    const uint32_t a = u32_at(packed), b = u32_at(packed + 4), c = u32_at(packed + 8);
    const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
    const __m128i sc8 = _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo));
    const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo));
    scales = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc8, sc8));
    mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

template <DType T>
inline void unpack(const std::byte* p, Unpacked& u) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        u.d = half_at(p);
        u.dmin = half_at(p + 2);
        scales_mins_k4(p + 4, u.scales, u.corr);
        const std::byte* qs = p + (T == DType::Q4_K ? 16 : 48);
        [[maybe_unused]] const __m256i qh = T == DType::Q5_K ? load256(p + 16) : _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i q = load256(qs + 32 * c);
            __m512i v = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), low4);
            if constexpr (T == DType::Q5_K) {
                const __m512i h = _mm512_and_si512(join(srl16(qh, 2 * c), srl16(qh, 2 * c + 1)), one);
                v = _mm512_or_si512(v, _mm512_slli_epi16(h, 4));
            }
            u.codes[c] = v;
        }
    } else if constexpr (T == DType::Q6_K) {
        u.d = half_at(p + 208);
        u.dmin = 0.0f;
        u.scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
        u.corr = _mm256_slli_epi16(u.scales, 5);  // 32 x scale
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(p + 64 * h);
            const __m256i qh = load256(p + 128 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(ql, 4 * part), low4);  // part 0: low nibbles
                const __m512i hi = _mm512_and_si512(join(srl16(qh, 4 * part), srl16(qh, 4 * part + 2)), low2);
                u.codes[2 * h + part] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
            }
        }
    } else if constexpr (T == DType::Q3_K) {
        u.d = half_at(p + 108);
        u.dmin = 0.0f;
        // 16 six-bit scales: low nibbles in bytes 0-7, top 2 bits in bytes 8-11.
        const uint32_t a = u32_at(p + 96), b = u32_at(p + 100), t = u32_at(p + 104);
        const uint32_t s0 = (a & 0x0F0F0F0Fu) | ((t & 0x03030303u) << 4);
        const uint32_t s1 = (b & 0x0F0F0F0Fu) | (((t >> 2) & 0x03030303u) << 4);
        const uint32_t s2 = ((a >> 4) & 0x0F0F0F0Fu) | (((t >> 4) & 0x03030303u) << 4);
        const uint32_t s3 = ((b >> 4) & 0x0F0F0F0Fu) | (((t >> 6) & 0x03030303u) << 4);
        const __m128i s8 = _mm_sub_epi8(
            _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1), static_cast<int>(s0)),
            _mm_set1_epi8(32));
        u.scales = _mm256_cvtepi8_epi16(s8);
        u.corr = _mm256_slli_epi16(u.scales, 2);  // 4 x scale
        const __m256i hm = load256(p);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(p + 32 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const int g = 2 * part;  // groups g, g + 1 of 32 elements
                const __m512i lo = _mm512_and_si512(join(srl16(q, 2 * g), srl16(q, 2 * g + 2)), low2);
                const __m512i hb =
                    _mm512_and_si512(join(srl16(hm, 4 * h + g), srl16(hm, 4 * h + g + 1)), one);
                u.codes[2 * h + part] = _mm512_or_si512(lo, _mm512_slli_epi16(hb, 2));
            }
        }
    } else {  // Q2_K
        u.d = half_at(p + 80);
        u.dmin = half_at(p + 82);
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        u.scales = _mm256_cvtepu8_epi16(_mm_and_si128(sm, _mm_set1_epi8(0x0F)));
        u.corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(p + 16 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const int g = 2 * part;
                u.codes[2 * h + part] = _mm512_and_si512(join(srl16(q, 2 * g), srl16(q, 2 * g + 2)), low2);
            }
        }
    }
}

}  // namespace kiln::kernels::detail::avx512_kquant
