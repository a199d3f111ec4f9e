// The K-quant kernels of the "avx512-vnni" set: Q2_K..Q6_K weights against
// Q8_K-prepared activations (ggml's vec_dot_q*_K_q8_K arithmetic, vectorized).
//
// Each weight super-block is unpacked in registers, 64 elements at a time, to
// unsigned codes u in element order (Q3_K and Q6_K carry their -4 / -32 offset
// as +4 / +32 in u), and its sub-block scales to 16 int16 (one per 16
// elements). Per token: vpmaddubsw (u8 codes x s8 activation codes, pairs into
// int16: at most 2 x 63 x 127, no saturation), vpmaddwd by the scales of each
// pair's sub-block (into int32), summed over the 4 chunks: an exact int32 sum
// per lane. The min term (Q2_K, Q4_K, Q5_K) and the offset term (Q3_K, Q6_K)
// are the activations' bsums (sums of 16 codes) times the per-16 mins or
// offset x scales, one vpmaddwd per super-block. The offset term is subtracted
// in int32 (same scale d), the min term in float with dmin. Only the float sum
// over lanes and super-blocks differs from the scalar set's order.
//
// Tiles of 4 rows x up to 4 tokens: a super-block's unpacking (the costly part
// for one token) is shared by the tile's tokens; each row's arithmetic is the
// same whatever tile it is in, so claimed chunks give the bits of one call.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/matmul_avx512_kquant_unpack.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

using namespace avx512_kquant;

// Lane i (an int16 pair of elements 64c + 2i, + 1) of chunk c is in sub-block 4c + i / 8.
inline __m512i chunk_scale_index(int c) noexcept {
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(4 * c + i / 8);
    return _mm512_load_si512(idx);
}

constexpr int64_t kPrefetchBytes = 8192;

template <DType T, int R, int NT>
void kquant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    constexpr bool kHasMin = T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K;
    const __m512i idx[4] = {chunk_scale_index(0), chunk_scale_index(1), chunk_scale_index(2), chunk_scale_index(3)};
    // The same blocks of a later tile: the rows are one contiguous stream, and
    // at least kPrefetchBytes ahead the lines arrive before they are needed
    // even when a tile's rows are short (one tile ahead is ~100 ns at k = 768,
    // less than a memory access).
    const int64_t tile_bytes = R * static_cast<int64_t>(w_stride);
    const int64_t ahead_bytes = std::max<int64_t>(1, kPrefetchBytes / tile_bytes) * tile_bytes;
    __m512 acc[R][NT];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            const std::byte* ahead = blk + ahead_bytes;
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(ahead + off, 0, 3);
            Unpacked u;
            unpack<T>(blk, u);
            __m512i sc[4];
            for (int c = 0; c < 4; ++c) sc[c] = _mm512_permutexvar_epi16(idx[c], _mm512_castsi256_si512(u.scales));
            for (int t = 0; t < NT; ++t) {
                const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + i * kXBytes;
                __m512i isum = _mm512_setzero_si512();
                for (int c = 0; c < 4; ++c) {
                    const __m512i xq = _mm512_loadu_si512(xb + kXCodes + 64 * c);
                    isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(u.codes[c], xq), sc[c]));
                }
                const __m256i corr = _mm256_madd_epi16(load256(xb + kXBsums), u.corr);
                float dx;
                std::memcpy(&dx, xb, 4);
                if constexpr (kHasMin) {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(u.d * dx), acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(corr)),
                                                 _mm512_set1_ps(u.dmin * dx), acc[r][t]);
                } else {
                    isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(corr));
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(u.d * dx), acc[r][t]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) out[t * out_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

using TileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;
constexpr int kRows = 4, kTokens = 4;

template <DType T, int R, size_t... N>
constexpr std::array<TileFn, sizeof...(N)> tile_table(std::index_sequence<N...>) noexcept {
    return {kquant_tile<T, R, static_cast<int>(N) + 1>...};
}

template <DType T>
void kquant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                   size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kFull = tile_table<T, kRows>(std::make_index_sequence<kTokens>{});
    static constexpr auto kOne = tile_table<T, 1>(std::make_index_sequence<kTokens>{});
    const int64_t nb = k / 256;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(kTokens, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        float* ot = out + t0 * out_stride;
        int64_t r = r0;
        for (; r + kRows <= r1; r += kRows)
            kFull[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
    }
}

// From this many tokens on, the GEMM (matmul_avx512_kquant_gemm.cpp) runs.
constexpr int64_t kGemmTokens = 8;

}  // namespace

bool avx512_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                          const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                          const RowClaims* claims) noexcept {
    if (n_tokens >= kGemmTokens)
        return avx512_kquant_gemm(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
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

#endif  // KILN_HAVE_AVX512_VNNI
