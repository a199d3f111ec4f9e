// The K-quant kernels of the "avx2" set: Q2_K..Q6_K weights against Q8_K
// activations, the arithmetic of matmul_avx512_kquants.cpp on 256-bit vectors.
//
// A super-block is unpacked 32 elements (a chunk) at a time to unsigned codes
// (Q3_K +4, Q6_K +32, taken back through the bsums), and the chunk's two
// per-16 scales are spread over its 16 int16 pairs with one byte shuffle.
// vpmaddubsw (u8 codes x s8 activations, pairs into int16, at most 2 x 63 x 127)
// and vpmaddwd by the scales give exact int32 lanes; the min term (Q2_K, Q4_K,
// Q5_K) is bsums x mins in float with dmin, the offset term (Q3_K, Q6_K) is
// subtracted in int32. One token: tiles of 4 rows; several: 2 rows x 4 tokens.
// A row's arithmetic does not depend on its tile, so claimed chunks give the
// bits of one call.
#include "engine/kernels/matmul_avx2_kquants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/simd.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

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
};

template <DType T>
inline Scales block_scales(const std::byte* p) noexcept {
    Scales s;
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        const uint32_t a = u32_at(p + 4), b = u32_at(p + 8), c = u32_at(p + 12);
        const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
        const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
        const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
        const __m128i sc8 = _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo));
        const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo));
        s.scales8 = _mm_unpacklo_epi8(sc8, sc8);  // each sub-block of 32 is two of 16
        s.corr = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        s.d = half_at(p);
        s.dmin = half_at(p + 2);
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
        s.d = half_at(p + 80);
        s.dmin = half_at(p + 82);
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

template <DType T, int R, int NT>
void kquant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    __m256 acc[R][NT];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            const std::byte* ahead = blk + R * static_cast<int64_t>(w_stride);
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(ahead + off, 0, 3);
            const Scales s = block_scales<T>(blk);
            __m256i isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
            for (int c = 0; c < 8; ++c) {
                // Bytes 2c (x8) then 2c + 1 (x8): the scale of each int16 pair of the chunk.
                const __m128i pick = _mm_set_epi64x(0x0101010101010101LL * (2 * c + 1), 0x0101010101010101LL * (2 * c));
                const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s.scales8, pick));
                const __m256i q = chunk_codes<T>(blk, c);
                for (int t = 0; t < NT; ++t) {
                    const __m256i xq = load256(x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes + 32 * c);
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), sc));
                }
            }
            for (int t = 0; t < NT; ++t) {
                const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + i * kXBytes;
                const __m256i corr = _mm256_madd_epi16(load256(xb + kXBsums), s.corr);
                float dx;
                std::memcpy(&dx, xb, 4);
                if constexpr (kHasMin<T>) {
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(s.d * dx), acc[r][t]);
                    acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(s.dmin * dx), acc[r][t]);
                } else {
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[t], corr)),
                                                _mm256_set1_ps(s.d * dx), acc[r][t]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) {
            __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[r][t]), _mm256_extractf128_ps(acc[r][t], 1));
            v = _mm_add_ps(v, _mm_movehl_ps(v, v));
            v = _mm_add_ss(v, _mm_movehdup_ps(v));
            out[t * out_stride + r] = _mm_cvtss_f32(v);
        }
}

using TileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;

template <DType T, int R, size_t... N>
constexpr std::array<TileFn, sizeof...(N)> tile_table(std::index_sequence<N...>) noexcept {
    return {kquant_tile<T, R, static_cast<int>(N) + 1>...};
}

template <DType T>
void kquant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                   size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kDecode = tile_table<T, 4>(std::make_index_sequence<1>{});
    static constexpr auto kBatch = tile_table<T, 2>(std::make_index_sequence<4>{});
    static constexpr auto kOne = tile_table<T, 1>(std::make_index_sequence<4>{});
    const int64_t nb = k / 256;
    const int rows_per_tile = n_tokens == 1 ? 4 : 2;
    const int tokens_per_tile = n_tokens == 1 ? 1 : 4;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tokens_per_tile) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(tokens_per_tile, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        float* ot = out + t0 * out_stride;
        const TileFn full = n_tokens == 1 ? kDecode[0] : kBatch[nt - 1];
        int64_t r = r0;
        for (; r + rows_per_tile <= r1; r += rows_per_tile)
            full(nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
    }
}

}  // namespace

bool avx2_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        switch (type) {
            case DType::Q2_K: kquant_matmul<DType::Q2_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q3_K: kquant_matmul<DType::Q3_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q4_K: kquant_matmul<DType::Q4_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q5_K: kquant_matmul<DType::Q5_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            default: kquant_matmul<DType::Q6_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
        }
    });
    return true;
}

}  // namespace kiln::kernels::detail

#endif
