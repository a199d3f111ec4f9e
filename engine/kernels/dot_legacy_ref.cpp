#include "engine/kernels/dot_legacy_ref.h"

#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"

// The per-block float arithmetic is ggml's, in its order; no FMA contraction so
// the reference rounds exactly as written (the SIMD sets are tested against it
// with a tolerance, not for equal bits).
#include "engine/core/no_fp_contract.h"

namespace kiln::kernels {
namespace {

using namespace kiln::quant;

inline uint32_t high_bits(const uint8_t qh[4]) noexcept {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    return h;
}

// The signed 5-bit codes of a Q5 block's elements j and j + 16 (before the offset).
inline void q5_codes(const uint8_t* qs, uint32_t qh, int j, int& lo, int& hi) noexcept {
    lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
}

}  // namespace

float dot_q4_1_q8_1_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kQK4_1; ++b) {
        const auto wb = load_block<BlockQ4_1>(w, b);
        const auto xb = load_block<BlockQ8_1>(x, b);
        int32_t sumi = 0;
        for (int j = 0; j < 16; ++j) sumi += (wb.qs[j] & 0x0F) * xb.qs[j] + (wb.qs[j] >> 4) * xb.qs[j + 16];
        sum += (fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d)) * static_cast<float>(sumi) +
               fp16_to_fp32(wb.m) * fp16_to_fp32(xb.s);
    }
    return sum;
}

float dot_q5_0_q8_0_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kQK5_0; ++b) {
        const auto wb = load_block<BlockQ5_0>(w, b);
        const auto xb = load_block<BlockQ8_0>(x, b);
        const uint32_t qh = high_bits(wb.qh);
        int32_t sumi = 0;
        for (int j = 0; j < 16; ++j) {
            int lo, hi;
            q5_codes(wb.qs, qh, j, lo, hi);
            sumi += (lo - 16) * xb.qs[j] + (hi - 16) * xb.qs[j + 16];
        }
        sum += (fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d)) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_q5_1_q8_1_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kQK5_1; ++b) {
        const auto wb = load_block<BlockQ5_1>(w, b);
        const auto xb = load_block<BlockQ8_1>(x, b);
        const uint32_t qh = high_bits(wb.qh);
        int32_t sumi = 0;
        for (int j = 0; j < 16; ++j) {
            int lo, hi;
            q5_codes(wb.qs, qh, j, lo, hi);
            sumi += lo * xb.qs[j] + hi * xb.qs[j + 16];
        }
        sum += (fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d)) * static_cast<float>(sumi) +
               fp16_to_fp32(wb.m) * fp16_to_fp32(xb.s);
    }
    return sum;
}

float dot_iq4_nl_q8_0_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kQK4_NL; ++b) {
        const auto wb = load_block<BlockIQ4_NL>(w, b);
        const auto xb = load_block<BlockQ8_0>(x, b);
        int32_t lo = 0, hi = 0;
        for (int j = 0; j < 16; ++j) {
            lo += xb.qs[j] * kIQ4NLValues[wb.qs[j] & 0x0F];
            hi += xb.qs[j + 16] * kIQ4NLValues[wb.qs[j] >> 4];
        }
        sum += fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d) * static_cast<float>(lo + hi);
    }
    return sum;
}

float dot_iq4_xs_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kQK_K; ++b) {
        const auto wb = load_block<BlockIQ4_XS>(w, b);
        const auto xb = load_block<BlockQ8_K>(x, b);
        const float d = fp16_to_fp32(wb.d) * xb.d;
        for (int s = 0; s < 8; ++s) {
            // Sub-block s: 4 low scale bits in a nibble of scales_l, 2 high bits in scales_h.
            const int low = (wb.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
            const int high = (wb.scales_h >> (2 * s)) & 0x03;
            const int scale = (low | (high << 4)) - 32;
            const uint8_t* qs = wb.qs + 16 * s;
            const int8_t* q8 = xb.qs + 32 * s;
            int32_t lo = 0, hi = 0;
            for (int j = 0; j < 16; ++j) {
                lo += q8[j] * kIQ4NLValues[qs[j] & 0x0F];
                hi += q8[j + 16] * kIQ4NLValues[qs[j] >> 4];
            }
            sum += (d * static_cast<float>(scale)) * static_cast<float>(lo + hi);
        }
    }
    return sum;
}

}  // namespace kiln::kernels
