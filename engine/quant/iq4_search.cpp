// The IQ4_NL / IQ4_XS quantizers: for each group of 32 a scale searched over
// 15 candidate grids (the table scaled so that the group's extreme lands on
// each of the table's end values shifted by -7..7), each element mapped to its
// nearest table entry, and the weighted least-squares scale of the best
// candidate kept, with weights x^2 (no importance matrix). IQ4_XS then
// quantizes the 8 group scales to 6 bits against one fp16 super-scale and
// re-picks every element's entry with its group's stored scale. This is the
// path llama-quantize writes (ggml's quantize_iq4_nl / quantize_iq4_xs with
// 7 tries each way), operation for operation, so the bytes are the same.
#include <cmath>
#include <cstddef>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/iq4_quants.h"
#include "engine/quant/rounding.h"

#include "engine/core/no_fp_contract.h"

namespace kiln::quant {
namespace {

constexpr int kTries = 7;
constexpr float kGroupMaxEps = 1e-15f;  // a group below this is all zeros

// The index of the table entry nearest x (ties to the lower one), as ggml's
// best_index_int8; NaN compares false everywhere and lands on a fixed index.
int nearest_entry(float x) noexcept {
    const int8_t* v = kIQ4NLValues;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid]) hi = mid;
        else lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// The best scale of one group of 32 (0 for an all-zero group), and its codes in L.
float search_group(const float* x, uint8_t* L) noexcept {
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        const float ax = std::fabs(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < kGroupMaxEps) return 0.0f;
    const auto fit = [&](float id, float& sumqx, float& sumq2, bool keep) {
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const int l = nearest_entry(id * x[j]);
            if (keep) L[j] = static_cast<uint8_t>(l);
            const float q = kIQ4NLValues[l];
            const float w = weight[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
    };
    float d = -max / kIQ4NLValues[0];
    float sumqx, sumq2;
    fit(1 / d, sumqx, sumq2, true);
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int t = -kTries; t <= kTries; ++t) {
        fit(static_cast<float>(t + kIQ4NLValues[0]) / max, sumqx, sumq2, false);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// Element j of each 16-pair in the low nibble, j + 16 in the high one.
void pack_codes(const uint8_t* L, uint8_t* qs, int groups) noexcept {
    for (int g = 0; g < groups; ++g)
        for (int j = 0; j < 16; ++j) qs[16 * g + j] = static_cast<uint8_t>(L[32 * g + j] | (L[32 * g + 16 + j] << 4));
}

}  // namespace

void iq4_nl_from_float_ref(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK4_NL; ++b) {
        const float* x = src + b * kQK4_NL;
        uint8_t L[32];
        const float d = search_group(x, L);
        BlockIQ4_NL block{};
        block.d = fp32_to_fp16(d);
        // The codes are picked again with the chosen scale.
        const float id = d != 0.0f ? 1 / d : 0;
        for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_entry(id * x[j]));
        pack_codes(L, block.qs, 1);
        store_block(dst, b, block);
    }
}

void iq4_xs_from_float_ref(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        uint8_t L[kQK_K];
        float scales[8];
        float amax_scale = 0, max_scale = 0;
        for (int g = 0; g < 8; ++g) {
            scales[g] = search_group(x + 32 * g, L + 32 * g);
            const float a = std::fabs(scales[g]);
            if (a > amax_scale) {
                amax_scale = a;
                max_scale = scales[g];
            }
        }
        BlockIQ4_XS block{};
        const float d = -max_scale / 32;
        block.d = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.0f;
        for (int g = 0; g < 8; ++g) {
            int l = nearest_int(id * scales[g]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * static_cast<float>(l);
            const float idl = dl != 0.0f ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; ++j) L[32 * g + j] = static_cast<uint8_t>(nearest_entry(idl * x[32 * g + j]));
            l += 32;
            const auto low = static_cast<uint8_t>(l & 0x0F), high = static_cast<uint8_t>(l >> 4);
            block.scales_l[g / 2] |= static_cast<uint8_t>(g % 2 == 0 ? low : low << 4);
            block.scales_h = static_cast<uint16_t>(block.scales_h | (high << (2 * g)));
        }
        pack_codes(L, block.qs, 8);
        store_block(dst, b, block);
    }
}

}  // namespace kiln::quant
