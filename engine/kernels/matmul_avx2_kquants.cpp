// The K-quant kernels of the "avx2" set: Q2_K..Q6_K weights against Q8_K
// activations, the arithmetic of matmul_avx512_kquants.cpp on 256-bit vectors.
//
// A super-block is unpacked 32 elements (a chunk) at a time to unsigned codes
// (Q3_K +4, Q6_K +32, taken back through the bsums), and the chunk's two
// per-16 scales are spread over its 16 int16 pairs with one byte shuffle.
// vpmaddubsw (u8 codes x s8 activations, pairs into int16, at most 2 x 63 x 127)
// and vpmaddwd by the scales give exact int32 lanes; the min term (Q2_K, Q4_K,
// Q5_K) is bsums x mins in float with dmin, the offset term (Q3_K, Q6_K) is
// subtracted in int32. One token: tiles of 4 rows; 2-5 tokens: 2 rows x 4
// tokens; from 6 tokens on, the GEMM of matmul_avx2_kquant_gemm.cpp.
// A row's arithmetic does not depend on its tile, so claimed chunks give the
// bits of one call.
#include "engine/kernels/matmul_avx2_kquants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/matmul_avx2_kquant_unpack.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

using namespace avx2_kquant;

constexpr int64_t kPrefetchBytes = 8192;

// The byte shuffle that fills a 256-bit vector's low half with int16 number 2k
// of the same half and its high half with int16 number 2k + 1 of that half.
inline __m256i pair_pick(int k) noexcept {
    const char a = static_cast<char>(4 * k), b = static_cast<char>(4 * k + 2);
    return _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,  //
                            b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
}

template <DType T, int R, int NT>
void kquant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    __m256 acc[R][NT];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    // The same blocks of a later tile, at least kPrefetchBytes ahead in the
    // contiguous weight stream (as the avx512-vnni tiles).
    const int64_t tile_bytes = R * static_cast<int64_t>(w_stride);
    const int64_t ahead_bytes = std::max<int64_t>(1, kPrefetchBytes / tile_bytes) * tile_bytes;
    for (int64_t i = 0; i < nb; ++i) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            const std::byte* ahead = blk + ahead_bytes;
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(ahead + off, 0, 3);
            const Scales s = block_scales<T>(blk);
            // The 16 scales widened once, scales 0-7 in both halves and 8-15
            // in both halves: one byte shuffle per chunk then spreads scale 2c
            // over its low half's int16 pairs and 2c + 1 over its high half's.
            const __m256i sc16 = _mm256_cvtepi8_epi16(s.scales8);
            const __m256i sc_first = _mm256_permute2x128_si256(sc16, sc16, 0x00);
            const __m256i sc_last = _mm256_permute2x128_si256(sc16, sc16, 0x11);
            __m256i isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
            for (int c = 0; c < 8; ++c) {
                const __m256i sc = _mm256_shuffle_epi8(c < 4 ? sc_first : sc_last, pair_pick(c % 4));
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
                    // d * dx and dmin * dx in one multiply: the same products.
                    const __m128 f = _mm_mul_ps(s.d_dmin, _mm_set1_ps(dx));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_broadcastss_ps(f), acc[r][t]);
                    acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_broadcastss_ps(_mm_movehdup_ps(f)),
                                                 acc[r][t]);
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
    if (n_tokens >= kAvx2KquantGemmTokens)
        return avx2_kquant_gemm(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
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
