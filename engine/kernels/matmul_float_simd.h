#pragma once
// Float-weight (F32, F16, BF16) matmul kernels written once over the xsimd
// architecture and instantiated by each SIMD kernel set (matmul_avx2.cpp,
// matmul_avx512.cpp). Prepared activations are plain F32 rows.
//
// Two shapes of work, chosen by the number of tokens:
//
//  * Few tokens (decode): each output is a dot product along k, which is what
//    a matrix-vector product is. Weight rows are streamed once, kFloatDotRows at
//    a time against up to kFloatDotTokens token rows, with vector lanes along k and one
//    accumulator per (row, token); small tiles get two accumulator sets so that
//    enough independent FMA chains are in flight to hide FMA latency. This path
//    is bound by memory bandwidth and does no packing. While a tile streams its
//    rows it prefetches the same bytes of the next tile's rows: rows are short
//    (768 halves are 1.5 KiB) and the hardware prefetcher, which learns each
//    stream anew, otherwise leaves much of every row to demand misses (F16 rows
//    of 768 ran at half the bytes per second of F32 rows without it).
//
//  * Many tokens (prompt processing): a register-blocked GEMM. A panel of
//    2 vectors' worth of weight rows is packed (converted to F32 and transposed
//    so one k step of the panel is two aligned vector loads), and a tile of
//    tokens is packed so one k step is kTileTokens consecutive floats. The micro
//    kernel keeps 2 x kTileTokens accumulators (rows in lanes), and per k step
//    does 2 loads, kTileTokens broadcasts and 2 * kTileTokens FMAs: every loaded
//    weight is used by every token of the tile. Rows in lanes means each
//    accumulator stores straight to out[t][r .. r + 2N) with no horizontal sums.
//    k is processed in chunks of kChunk so the packed panel chunk stays in L1/L2
//    while all token tiles pass over it; later chunks add to the output. A
//    panel's chunks are taken one after another, so its rows are read from
//    memory front to back (32 steady streams for the prefetcher) rather than
//    a kChunk piece of each row per pass over all panels.
//
// The architecture-specific parts (F16/BF16 loads, FMA, the transposing panel
// pack, tile sizes) come from FloatArch<A>, specialised by each including file.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/core/half.h"
#include "engine/kernels/matmul_impl.h"
#include "engine/kernels/simd.h"

namespace kiln::kernels::detail {

// Specialised per architecture with:
//   using Batch = xsimd::batch<float, A>;
//   static constexpr int kTileTokens, kChunk;
//   static Batch fma(Batch a, Batch b, Batch c);                 // a * b + c
//   static Batch load_f16(const std::byte*), load_bf16(const std::byte*);
//   template <DType W> static void pack_panel(const std::byte* w, size_t w_stride, int rows,
//                                              int64_t k0, int64_t kc, float* panel);
//     panel[kk * 2N + r] = W[r][k0 + kk] as float for r < rows, 0 for rows <= r < 2N.
//   static void pack_tokens(const std::byte* x, size_t x_stride, int nt, int64_t k, float* xp);
//     xp[kk * kTileTokens + t] = X[t][kk] for t < nt, 0 for nt <= t < kTileTokens.
template <class A>
struct FloatArch;

inline constexpr int kFloatDotRows = 4;    // weight rows per dot-path tile
inline constexpr int kFloatDotTokens = 4;  // token rows per dot-path tile
// From 8 tokens on the GEMM path is used. With cache-resident weights the two
// paths tie around 8 tokens (kiln-kernel-bench --sweep); with weights streamed
// from DRAM the GEMM reads them once where the dot path reads them once per
// kFloatDotTokens tokens, so the GEMM is the better side of the tie.
inline constexpr int64_t kFloatGemmMinTokens = 8;

template <DType W>
inline float weight_at(const std::byte* row, int64_t i) noexcept {
    if constexpr (W == DType::F32) {
        float v;
        std::memcpy(&v, row + i * 4, 4);
        return v;
    } else {
        uint16_t h;
        std::memcpy(&h, row + i * 2, 2);
        if constexpr (W == DType::F16) return fp16_to_fp32(h);
        else return bf16_to_fp32(h);
    }
}

// Prefetches the cache lines of [p, p + bytes) into all cache levels.
inline void prefetch_lines(const std::byte* p, int64_t bytes) noexcept {
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

template <class A, DType W>
inline typename FloatArch<A>::Batch load_weights(const std::byte* row, int64_t i) noexcept {
    using Arch = FloatArch<A>;
    if constexpr (W == DType::F32) return Arch::Batch::load_unaligned(reinterpret_cast<const float*>(row) + i);
    else if constexpr (W == DType::F16) return Arch::load_f16(row + i * 2);
    else return Arch::load_bf16(row + i * 2);
}

// out[t * out_stride + r] = W[r] · X[t] for R rows and T tokens.
template <class A, DType W, int R, int T>
void float_dot_tile(int64_t k, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride,
                    float* out, int64_t out_stride) noexcept {
    using Arch = FloatArch<A>;
    using B = typename Arch::Batch;
    constexpr int64_t N = B::size;
    constexpr int U = R * T <= 8 ? 2 : 1;

    const std::byte* wr[R];
    const float* xr[T];
    for (int r = 0; r < R; ++r) wr[r] = w + r * w_stride;
    for (int t = 0; t < T; ++t) xr[t] = reinterpret_cast<const float*>(x + t * x_stride);

    B acc[U][R][T];
    for (int u = 0; u < U; ++u)
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[u][r][t] = B(0.0f);

    // The tile after this one (rows R .. 2R), prefetched at the same offsets.
    // Prefetches never fault, so running past the last row is harmless.
    constexpr int64_t kElementBytes = W == DType::F32 ? 4 : 2;
    const std::byte* next = w + R * w_stride;

    int64_t i = 0;
    for (; i + U * N <= k; i += U * N) {
        for (int r = 0; r < R; ++r) prefetch_lines(next + r * w_stride + i * kElementBytes, U * N * kElementBytes);
#pragma GCC unroll 2
        for (int u = 0; u < U; ++u) {
            B xv[T];
            for (int t = 0; t < T; ++t) xv[t] = B::load_unaligned(xr[t] + i + u * N);
            for (int r = 0; r < R; ++r) {
                const B wv = load_weights<A, W>(wr[r], i + u * N);
                for (int t = 0; t < T; ++t) acc[u][r][t] = Arch::fma(wv, xv[t], acc[u][r][t]);
            }
        }
    }
    if constexpr (U > 1) {
        for (; i + N <= k; i += N) {
            B xv[T];
            for (int t = 0; t < T; ++t) xv[t] = B::load_unaligned(xr[t] + i);
            for (int r = 0; r < R; ++r) {
                const B wv = load_weights<A, W>(wr[r], i);
                for (int t = 0; t < T; ++t) acc[0][r][t] = Arch::fma(wv, xv[t], acc[0][r][t]);
            }
        }
    }
    float tail[R][T] = {};
    for (; i < k; ++i)
        for (int r = 0; r < R; ++r) {
            const float wv = weight_at<W>(wr[r], i);
            for (int t = 0; t < T; ++t) tail[r][t] += wv * xr[t][i];
        }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) {
            B sum = acc[0][r][t];
            for (int u = 1; u < U; ++u) sum += acc[u][r][t];
            out[t * out_stride + r] = xsimd::hadd(sum) + tail[r][t];
        }
}

template <class A, DType W, int R, size_t... T>
constexpr auto float_dot_table(std::index_sequence<T...>) noexcept {
    using Fn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;
    return std::array<Fn, sizeof...(T)>{float_dot_tile<A, W, R, static_cast<int>(T) + 1>...};
}

template <class A, DType W>
void float_matmul_dot(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                      size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kFull = float_dot_table<A, W, kFloatDotRows>(std::make_index_sequence<kFloatDotTokens>{});
    static constexpr auto kOne = float_dot_table<A, W, 1>(std::make_index_sequence<kFloatDotTokens>{});
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kFloatDotTokens) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(kFloatDotTokens, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        float* ot = out + t0 * out_stride;
        int64_t r = r0;
        for (; r + kFloatDotRows <= r1; r += kFloatDotRows)
            kFull[nt - 1](k, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](k, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
    }
}

// One GEMM micro-kernel call: rows in lanes (2 vectors), T tokens, kc k steps.
// panel: kc x 2N floats; xp: kc x kTileTokens floats (token t of step kk at
// xp[kk * kTileTokens + t]). Writes (or adds to) out[t * out_stride + r], r < rows.
template <class A, int T>
void float_gemm_tile(int64_t kc, const float* panel, const float* xp, float* out, int64_t out_stride, int rows,
                     bool accumulate) noexcept {
    using Arch = FloatArch<A>;
    using B = typename Arch::Batch;
    constexpr int64_t N = B::size;
    constexpr int64_t TM = Arch::kTileTokens;

    B acc0[T], acc1[T];
    for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = B(0.0f);
    for (int64_t kk = 0; kk < kc; ++kk) {
        const B w0 = B::load_aligned(panel + kk * 2 * N);
        const B w1 = B::load_aligned(panel + kk * 2 * N + N);
        const float* xk = xp + kk * TM;
        for (int t = 0; t < T; ++t) {
            const B xb(xk[t]);
            acc0[t] = Arch::fma(w0, xb, acc0[t]);
            acc1[t] = Arch::fma(w1, xb, acc1[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        float* o = out + t * out_stride;
        if (rows == 2 * N) {
            if (accumulate) {
                acc0[t] += B::load_unaligned(o);
                acc1[t] += B::load_unaligned(o + N);
            }
            acc0[t].store_unaligned(o);
            acc1[t].store_unaligned(o + N);
        } else {
            alignas(64) float tmp[2 * N];
            acc0[t].store_aligned(tmp);
            acc1[t].store_aligned(tmp + N);
            for (int r = 0; r < rows; ++r) o[r] = accumulate ? o[r] + tmp[r] : tmp[r];
        }
    }
}

template <class A, size_t... T>
constexpr auto float_gemm_table(std::index_sequence<T...>) noexcept {
    using Fn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, bool) noexcept;
    return std::array<Fn, sizeof...(T)>{float_gemm_tile<A, static_cast<int>(T) + 1>...};
}

// Returns false (having written nothing) when scratch memory is not available.
template <class A, DType W>
bool float_matmul_gemm(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                       size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                       const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    using Arch = FloatArch<A>;
    constexpr int64_t N = Arch::Batch::size;
    constexpr int64_t P = 2 * N;
    constexpr int64_t TM = Arch::kTileTokens;
    constexpr int64_t KC = Arch::kChunk;
    static constexpr auto kTiles = float_gemm_table<A>(std::make_index_sequence<TM>{});

    const int64_t n_tiles = (n_tokens + TM - 1) / TM;
    // Rounded to 16 floats so the panel behind it stays 64-byte aligned.
    const size_t xp_floats = round_up(static_cast<size_t>(n_tiles * k * TM), 16);
    const size_t panel_floats = static_cast<size_t>(std::min(KC, k) * P);
    std::byte* scratch = thread_scratch((xp_floats + panel_floats) * sizeof(float));
    if (scratch == nullptr) return false;
    auto* xp = reinterpret_cast<float*>(scratch);
    float* panel = xp + xp_floats;

    // Token tiles, k-major: xp[tile][kk][t]. Padding tokens are zero.
    for (int64_t tile = 0; tile < n_tiles; ++tile)
        Arch::pack_tokens(x + tile * TM * static_cast<int64_t>(x_stride), x_stride,
                          static_cast<int>(std::min(TM, n_tokens - tile * TM)), k, xp + tile * k * TM);

    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t p0 = a; p0 < b; p0 += P) {
            const int rows = static_cast<int>(std::min(P, b - p0));
            for (int64_t k0 = 0; k0 < k; k0 += KC) {
                const int64_t kc = std::min(KC, k - k0);
                Arch::template pack_panel<W>(w + p0 * static_cast<int64_t>(w_stride), w_stride, rows, k0, kc, panel);
                for (int64_t tile = 0; tile < n_tiles; ++tile) {
                    const auto nt = static_cast<size_t>(std::min(TM, n_tokens - tile * TM));
                    kTiles[nt - 1](kc, panel, xp + tile * k * TM + k0 * TM, out + tile * TM * out_stride + p0,
                                   out_stride, rows, k0 > 0);
                }
            }
        }
    });
    return true;
}

// Returns false when it could not run (no scratch memory); the caller then
// uses the scalar set.
template <class A, DType W>
bool float_matmul(int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x, size_t x_stride,
                  int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    if (n_tokens < kFloatGemmMinTokens || k == 0) {
        for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
            float_matmul_dot<A, W>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride);
        });
        return true;
    }
    return float_matmul_gemm<A, W>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
}

}  // namespace kiln::kernels::detail
