#include "engine/quant/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/kquant_search.h"
#include "engine/quant/rounding.h"

// Bit-exactness with ggml's C needs every product rounded before the following
// addition: no fused multiply-add (see engine/core/no_fp_contract.h).
#include "engine/core/no_fp_contract.h"

namespace kiln::quant {
namespace {

inline int clamp_int(int v, int lo, int hi) noexcept { return std::max(lo, std::min(hi, v)); }

// Q3_K's 16 six-bit scales (stored offset by 32): low nibbles in bytes 0..7
// (j < 8 low, j >= 8 high nibble of byte j - 8), top two bits of scale j in
// bits 2*(j/4) of byte 8 + j%4. Returns the signed scale.
inline int q3_k_scale(const uint8_t* scales, int j) noexcept {
    const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// Packs 256 2-bit codes the Q2_K/Q3_K way: byte l of each 32-byte group holds
// elements l, l + 32, l + 64, l + 96 of its 128 in bits 0-1, 2-3, 4-5, 6-7.
template <class Code>
void pack_2bit(const Code* L, uint8_t* qs) noexcept {
    for (int j = 0; j < kQK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                                 (L[j + l + 96] << 6));
}

// Q4_K/Q5_K: 8 sub-blocks of 32, asymmetric search per sub-block with weights
// av_x + |x| (av_x the sub-block's rms), then 6-bit scales and mins against the
// largest of each, then every element re-quantized against the rounded scales.
// Returns codes in L (0..nmax); writes d, dmin and the scales array.
void quantize_k4_style(const float* x, int nmax, float rmin, int nstep, uint8_t* L, uint16_t* d, uint16_t* dmin,
                       uint8_t* packed_scales) {
    constexpr int kSub = 32;
    float mins[kQK_K / kSub];
    float scales[kQK_K / kSub];
    float weights[kSub];
    uint8_t Laux[kSub];
    float max_scale = 0;  // the min is subtracted, so scales are never negative
    float max_min = 0;
    for (int j = 0; j < kQK_K / kSub; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < kSub; ++l) sum_x2 += x[kSub * j + l] * x[kSub * j + l];
        const float av_x = std::sqrt(sum_x2 / kSub);
        for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(x[kSub * j + l]);
        scales[j] = make_qkx2_quants(kSub, nmax, x + kSub * j, weights, L + kSub * j, &mins[j], Laux, rmin, 0.1f,
                                     nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(packed_scales, 0, kKScaleSize);
    for (int j = 0; j < kQK_K / kSub; ++j) {
        // ggml stores nearest_int's result in a uint8_t before clamping: keep that wrap.
        const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
        if (j < 4) {
            packed_scales[j] = ls;
            packed_scales[j + 4] = lm;
        } else {
            packed_scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            packed_scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            packed_scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
    *d = fp32_to_fp16(max_scale / 63.f);
    *dmin = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < kQK_K / kSub; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed_scales, &sc, &m);
        const float dj = fp16_to_fp32(*d) * sc;
        if (dj == 0.0f) continue;  // keep the search's codes, as ggml does
        const float dm = fp16_to_fp32(*dmin) * m;
        for (int ii = 0; ii < kSub; ++ii) {
            const int l = nearest_int((x[kSub * j + ii] + dm) / dj);
            L[kSub * j + ii] = static_cast<uint8_t>(clamp_int(l, 0, nmax));
        }
    }
}

}  // namespace

// ------------------------------------------------------------------------ Q2_K

void q2_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto b = load_block<BlockQ2_K>(src, i);
        const float d = fp16_to_fp32(b.d);
        const float dmin = fp16_to_fp32(b.dmin);
        const uint8_t* q = b.qs;
        int is = 0;
        for (int half = 0; half < kQK_K; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {  // elements l and l + 16 of each 32-byte row
                    const uint8_t sc = b.scales[is++];
                    const float dl = d * static_cast<float>(sc & 0xF);
                    const float ml = dmin * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *dst++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void q2_k_from_float_ref(const float* x, void* dst, int64_t n) {
    constexpr float kQ4Scale = 15.f;
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        BlockQ2_K y{};
        uint8_t L[kQK_K];
        uint8_t Laux[16];
        float weights[16];
        float mins[kQK_K / 16];
        float scales[kQK_K / 16];
        float max_scale = 0;
        float max_min = 0;
        for (int j = 0; j < kQK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = kQ4Scale / max_scale;
            for (int j = 0; j < kQK_K / 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y.d = fp32_to_fp16(max_scale / kQ4Scale);
        } else {
            y.d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = kQ4Scale / max_min;
            for (int j = 0; j < kQK_K / 16; ++j)
                y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
            y.dmin = fp32_to_fp16(max_min / kQ4Scale);
        } else {
            y.dmin = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii)
                L[16 * j + ii] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
        }
        pack_2bit(L, y.qs);
        store_block(dst, i, y);
    }
}

// ------------------------------------------------------------------------ Q3_K

void q3_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto b = load_block<BlockQ3_K>(src, i);
        const float d_all = fp16_to_fp32(b.d);
        const uint8_t* q = b.qs;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < kQK_K; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = d_all * static_cast<float>(q3_k_scale(b.scales, is++));
                    for (int l = 0; l < 16; ++l) {
                        const int k = l + 16 * part;
                        const int code = ((q[k] >> shift) & 3) - ((b.hmask[k] & m) ? 0 : 4);
                        *dst++ = dl * static_cast<float>(code);
                    }
                }
            }
        }
    }
}

void q3_k_from_float_ref(const float* x, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        BlockQ3_K y{};
        int8_t L[kQK_K];
        float scales[kQK_K / 16];
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < kQK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < kQK_K / 16; ++j) {
                // ggml narrows to int8_t before clamping; kept (C++20 narrowing wraps).
                int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = clamp_int(l, -32, 31) + 32;
                if (j < 8)
                    y.scales[j] = static_cast<uint8_t>(l & 0xF);
                else
                    y.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
                y.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
            }
            y.d = fp32_to_fp16(1 / iscale);
        } else {
            y.d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y.d) * static_cast<float>(q3_k_scale(y.scales, j));
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii)
                L[16 * j + ii] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
        }
        // High bit of element j goes to bit j / 32 of hmask[j % 32].
        for (int j = 0; j < kQK_K; ++j) {
            if (L[j] > 3) {
                y.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
                L[j] = static_cast<int8_t>(L[j] - 4);
            }
        }
        pack_2bit(L, y.qs);
        store_block(dst, i, y);
    }
}

// ------------------------------------------------------------------------ Q4_K

void q4_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto b = load_block<BlockQ4_K>(src, i);
        const float d = fp16_to_fp32(b.d);
        const float dmin = fp16_to_fp32(b.dmin);
        const uint8_t* q = b.qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(is, b.scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            get_scale_min_k4(is + 1, b.scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

void q4_k_from_float_ref(const float* x, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        BlockQ4_K y{};
        uint8_t L[kQK_K];
        quantize_k4_style(x, 15, -1.f, 20, L, &y.d, &y.dmin, y.scales);
        // Byte l of each 32-byte group: element l of a 64 in the low nibble, l + 32 high.
        for (int j = 0; j < kQK_K; j += 64)
            for (int l = 0; l < 32; ++l) y.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
        store_block(dst, i, y);
    }
}

// ------------------------------------------------------------------------ Q5_K

void q5_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto b = load_block<BlockQ5_K>(src, i);
        const float d = fp16_to_fp32(b.d);
        const float dmin = fp16_to_fp32(b.dmin);
        const uint8_t* ql = b.qs;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 = static_cast<uint8_t>(u1 << 2), u2 = static_cast<uint8_t>(u2 << 2)) {
            uint8_t sc, m;
            get_scale_min_k4(is, b.scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            get_scale_min_k4(is + 1, b.scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l)
                *dst++ = d1 * static_cast<float>((ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *dst++ = d2 * static_cast<float>((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

void q5_k_from_float_ref(const float* x, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        BlockQ5_K y{};
        uint8_t L[kQK_K];
        quantize_k4_style(x, 31, -0.5f, 15, L, &y.d, &y.dmin, y.scales);
        // As Q4_K's nibbles; the fifth bits of elements l and l + 32 of the k-th 64
        // go to bits 2k and 2k + 1 of qh[l].
        for (int k = 0; k < 4; ++k) {
            for (int l = 0; l < 32; ++l) {
                int l1 = L[64 * k + l];
                int l2 = L[64 * k + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y.qh[l] |= static_cast<uint8_t>(1u << (2 * k));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y.qh[l] |= static_cast<uint8_t>(2u << (2 * k));
                }
                y.qs[32 * k + l] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
        }
        store_block(dst, i, y);
    }
}

// ------------------------------------------------------------------------ Q6_K

void q6_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto b = load_block<BlockQ6_K>(src, i);
        const float d = fp16_to_fp32(b.d);
        for (int half = 0; half < 2; ++half, dst += 128) {
            const uint8_t* ql = b.ql + 64 * half;
            const uint8_t* qh = b.qh + 32 * half;
            const int8_t* sc = b.scales + 8 * half;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * sc[is] * static_cast<float>(q1);
                dst[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
                dst[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
                dst[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
            }
        }
    }
}

void q6_k_from_float_ref(const float* x, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        BlockQ6_K y{};
        int8_t L[kQK_K];
        float scales[kQK_K / 16];
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < kQK_K / 16; ++ib) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, nullptr);
            const float abs_scale = std::fabs(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < 1e-15f) {  // ggml's GROUP_MAX_EPS: an all-zero block
            store_block(dst, i, BlockQ6_K{});
            continue;
        }
        const float iscale = -128.f / max_scale;
        y.d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < kQK_K / 16; ++ib)
            y.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y.d) * y.scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii)
                L[16 * j + ii] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
        }
        for (int half = 0; half < 2; ++half) {
            uint8_t* ql = y.ql + 64 * half;
            uint8_t* qh = y.qh + 32 * half;
            const int8_t* Lh = L + 128 * half;
            for (int l = 0; l < 32; ++l) {
                ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                             ((Lh[l + 96] >> 4) << 6));
            }
        }
        store_block(dst, i, y);
    }
}

}  // namespace kiln::quant
