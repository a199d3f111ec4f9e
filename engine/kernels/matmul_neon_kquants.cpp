// The K-quant kernels of the NEON sets: Q4_K and Q6_K weights against Q8_K
// activations (Q2_K, Q3_K and Q5_K run the scalar reference).
//
// Per super-block of 256, the reference's exact integers (dot_kquants_ref.h):
// each sub-block's codes are unpacked to signed bytes (Q4_K's nibbles, 0-15;
// Q6_K's 6-bit codes less 32) and dotted with the activation codes 16 pairs at
// a time (matmul_neon_dot.h), the lanes multiplied by the sub-block's scale and
// added in int32: at most 8 x 63 x 32 x 15 x 127 for Q4_K and 16 x 128 x 16 x
// 32 x 127 for Q6_K, far inside int32. Q4_K's min term is Σ min_j x (the two
// bsums of sub-block j), also exact. Then, as the reference, one float update
// per super-block: sum += (d_w d_x) isum - (dmin_w d_x) msum.
// One token: tiles of 4 rows; more: 2 rows x 4 tokens. A row's arithmetic does
// not depend on its tile, so claimed chunks give the bits of one call.
#include "engine/kernels/matmul_neon_kquants.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include "engine/core/half.h"
#include "engine/kernels/matmul_neon_dot.h"
#include "engine/quant/blocks.h"

namespace kiln::kernels::detail {
namespace {

using neon::dot16;
using neon::load_s8;

// Q8_K: float d, 256 codes, 16 bsums (engine/quant/blocks.h).
constexpr int64_t kXBytes = sizeof(quant::BlockQ8_K);
constexpr int64_t kXCodes = offsetof(quant::BlockQ8_K, qs);
constexpr int64_t kXBsums = offsetof(quant::BlockQ8_K, bsums);

template <DType T>
constexpr int64_t kBlockBytes = T == DType::Q4_K ? sizeof(quant::BlockQ4_K) : sizeof(quant::BlockQ6_K);

inline float x_scale(const std::byte* xb) noexcept {
    float d;
    std::memcpy(&d, xb, sizeof(d));
    return d;
}

inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

// Q4_K's 6-bit scale and min of each sub-block of 32 (ggml's get_scale_min_k4):
// j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 in the nibbles of byte
// j + 4 with their top 2 bits in the top bits of bytes j - 4 and j.
struct Q4KScales {
    int32_t scale[8];
    int16_t min[8];
};

inline Q4KScales q4_k_scales(const uint8_t* q) noexcept {
    Q4KScales s;
    for (int j = 0; j < 4; ++j) {
        s.scale[j] = q[j] & 63;
        s.min[j] = static_cast<int16_t>(q[j + 4] & 63);
        s.scale[j + 4] = (q[j + 8] & 0x0F) | ((q[j] >> 6) << 4);
        s.min[j + 4] = static_cast<int16_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
    return s;
}

// Σ_j min_j · (bsums[2j] + bsums[2j + 1]) of one activation block.
inline int32_t q4_k_min_sum(const int16x8_t mins, const std::byte* xb) noexcept {
    const auto* bsums = reinterpret_cast<const uint8_t*>(xb + kXBsums);
    const int16x8_t b0 = vreinterpretq_s16_u8(vld1q_u8(bsums));
    const int16x8_t b1 = vreinterpretq_s16_u8(vld1q_u8(bsums + 16));
    const int16x8_t pairs = vpaddq_s16(b0, b1);  // at most 32 x 127 each: exact in int16
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(pairs)), mins, pairs));
}

// Q6_K's codes of elements 32m .. 32m + 31 of half h, less 32: the low 4 bits
// from ql (low nibbles for m < 2, high for m >= 2; bytes 32 (m % 2) on), the
// high 2 bits from bits 2m of qh.
template <int M>
inline void q6_k_codes(const uint8x16_t ql[4], const uint8x16_t qh[2], int8x16_t codes[2]) noexcept {
    for (int i = 0; i < 2; ++i) {
        const uint8x16_t src = ql[2 * (M % 2) + i];
        const uint8x16_t low = M < 2 ? vandq_u8(src, vdupq_n_u8(0x0F)) : vshrq_n_u8(src, 4);
        uint8x16_t high;
        if constexpr (M == 0) high = vshlq_n_u8(vandq_u8(qh[i], vdupq_n_u8(0x03)), 4);
        else if constexpr (M == 1) high = vshlq_n_u8(vandq_u8(qh[i], vdupq_n_u8(0x0C)), 2);
        else if constexpr (M == 2) high = vandq_u8(qh[i], vdupq_n_u8(0x30));
        else high = vshrq_n_u8(vandq_u8(qh[i], vdupq_n_u8(0xC0)), 2);
        codes[i] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, high)), vdupq_n_s8(32));
    }
}

template <DType T, int R, int NT>
void kquant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    float acc[R][NT] = {};
    const std::byte* xr[NT];
    for (int t = 0; t < NT; ++t) xr[t] = x + t * static_cast<int64_t>(x_stride);
    for (int64_t i = 0; i < nb; ++i) {
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            // The next tile's row r at this block (see matmul_float_simd.h).
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(blk + R * static_cast<int64_t>(w_stride) + off, 0, 3);
            int32x4_t isum[NT];
            for (int t = 0; t < NT; ++t) isum[t] = vdupq_n_s32(0);
            if constexpr (T == DType::Q4_K) {
                const auto* qs = reinterpret_cast<const uint8_t*>(blk + offsetof(quant::BlockQ4_K, qs));
                const Q4KScales s = q4_k_scales(reinterpret_cast<const uint8_t*>(blk + offsetof(quant::BlockQ4_K, scales)));
                // Chunk c of 64 elements: 32 bytes, low nibbles sub-block 2c, high nibbles 2c + 1.
                for (int c = 0; c < 4; ++c) {
                    const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
                    const uint8x16_t low4 = vdupq_n_u8(0x0F);
                    const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(q0, low4));
                    const int8x16_t lo1 = vreinterpretq_s8_u8(vandq_u8(q1, low4));
                    const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
                    const int8x16_t hi1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
                    for (int t = 0; t < NT; ++t) {
                        const std::byte* xq = xr[t] + i * kXBytes + kXCodes + 64 * c;
                        const int32x4_t lo = dot16(dot16(vdupq_n_s32(0), lo0, load_s8(xq)), lo1, load_s8(xq + 16));
                        const int32x4_t hi = dot16(dot16(vdupq_n_s32(0), hi0, load_s8(xq + 32)), hi1, load_s8(xq + 48));
                        isum[t] = vmlaq_n_s32(vmlaq_n_s32(isum[t], lo, s.scale[2 * c]), hi, s.scale[2 * c + 1]);
                    }
                }
                const int16x8_t mins = vld1q_s16(s.min);
                const float d = half_at(blk + offsetof(quant::BlockQ4_K, d));
                const float dmin = half_at(blk + offsetof(quant::BlockQ4_K, dmin));
                for (int t = 0; t < NT; ++t) {
                    const std::byte* xb = xr[t] + i * kXBytes;
                    const float dx = x_scale(xb);
                    const auto msum = static_cast<float>(q4_k_min_sum(mins, xb));
                    acc[r][t] += dx * d * static_cast<float>(vaddvq_s32(isum[t])) - dx * dmin * msum;
                }
            } else {
                static_assert(T == DType::Q6_K);
                const auto* ql = reinterpret_cast<const uint8_t*>(blk + offsetof(quant::BlockQ6_K, ql));
                const auto* qh = reinterpret_cast<const uint8_t*>(blk + offsetof(quant::BlockQ6_K, qh));
                const auto* sc = reinterpret_cast<const int8_t*>(blk + offsetof(quant::BlockQ6_K, scales));
                for (int h = 0; h < 2; ++h) {
                    const uint8x16_t l[4] = {vld1q_u8(ql + 64 * h), vld1q_u8(ql + 64 * h + 16), vld1q_u8(ql + 64 * h + 32),
                                             vld1q_u8(ql + 64 * h + 48)};
                    const uint8x16_t hb[2] = {vld1q_u8(qh + 32 * h), vld1q_u8(qh + 32 * h + 16)};
                    const auto part = [&]<int M>() {
                        int8x16_t codes[2];
                        q6_k_codes<M>(l, hb, codes);
                        const int s0 = sc[8 * h + 2 * M], s1 = sc[8 * h + 2 * M + 1];
                        for (int t = 0; t < NT; ++t) {
                            const std::byte* xq = xr[t] + i * kXBytes + kXCodes + 128 * h + 32 * M;
                            isum[t] = vmlaq_n_s32(isum[t], dot16(vdupq_n_s32(0), codes[0], load_s8(xq)), s0);
                            isum[t] = vmlaq_n_s32(isum[t], dot16(vdupq_n_s32(0), codes[1], load_s8(xq + 16)), s1);
                        }
                    };
                    part.template operator()<0>();
                    part.template operator()<1>();
                    part.template operator()<2>();
                    part.template operator()<3>();
                }
                const float d = half_at(blk + offsetof(quant::BlockQ6_K, d));
                for (int t = 0; t < NT; ++t)
                    acc[r][t] += x_scale(xr[t] + i * kXBytes) * d * static_cast<float>(vaddvq_s32(isum[t]));
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) out[t * out_stride + r] = acc[r][t];
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

void neon_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        if (type == DType::Q4_K)
            kquant_matmul<DType::Q4_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride);
        else
            kquant_matmul<DType::Q6_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride);
    });
}

}  // namespace kiln::kernels::detail

#endif
