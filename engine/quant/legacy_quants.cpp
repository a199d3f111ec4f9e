#include "engine/quant/legacy_quants.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"

// Reference file: ggml's C code is compiled without FMA contraction (see
// engine/core/no_fp_contract.h), so `q * d + m` must round the product first.
#include "engine/core/no_fp_contract.h"

namespace kiln::quant {
namespace {

// Blocks are unaligned inside GGUF data: copy each one out.
// Element j's fifth bit, as bit 4 of the code.
int fifth_bit(const uint8_t qh[4], int j) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof(bits));
    return static_cast<int>((bits >> j) & 1u) << 4;
}


// ggml truncates `scaled + offset` to an integer code with a plain cast (into
// int8_t for Q4_1/Q5_0, uint8_t for Q5_1). The values lie in [0, limit + 1)
// for finite input; non-finite ones (inf/NaN input, 1/d overflow) would be
// undefined behaviour and get code `fallback` instead.
uint8_t truncated_code(float shifted, int limit, uint8_t fallback) {
    if (!std::isfinite(shifted) || shifted < 0.0f || shifted >= 128.0f) return fallback;
    const int code = static_cast<int>(shifted);
    return static_cast<uint8_t>(code < limit ? code : limit);
}

struct MinMax {
    float min;
    float max;
};

MinMax block_min_max(const float* x) {
    MinMax r{std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
    for (int j = 0; j < 32; ++j) {
        if (x[j] < r.min) r.min = x[j];
        if (x[j] > r.max) r.max = x[j];
    }
    return r;
}

}  // namespace

void q4_1_from_float_ref(const float* src, void* dst, int64_t n) {
    constexpr int kHalf = kQK4_1 / 2;
    for (int64_t b = 0; b < n / kQK4_1; ++b) {
        const float* x = src + b * kQK4_1;
        const MinMax mm = block_min_max(x);
        const float d = (mm.max - mm.min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ4_1 block{};
        block.d = fp32_to_fp16(d);
        block.m = fp32_to_fp16(mm.min);
        for (int j = 0; j < kHalf; ++j) {
            const float x0 = (x[j] - mm.min) * id;
            const float x1 = (x[j + kHalf] - mm.min) * id;
            const uint8_t q0 = truncated_code(x0 + 0.5f, 15, 0);
            const uint8_t q1 = truncated_code(x1 + 0.5f, 15, 0);
            block.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
        store_block(dst, b, block);
    }
}

void q5_0_from_float_ref(const float* src, void* dst, int64_t n) {
    constexpr int kHalf = kQK5_0 / 2;
    for (int64_t b = 0; b < n / kQK5_0; ++b) {
        const float* x = src + b * kQK5_0;
        // The element of largest magnitude (first wins) sets d = max / -16.
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK5_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ5_0 block{};
        block.d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[j + kHalf] * id;
            const uint8_t q0 = truncated_code(x0 + 16.5f, 31, 16);
            const uint8_t q1 = truncated_code(x1 + 16.5f, 31, 16);
            block.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>(q0 >> 4) << j;
            qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
        }
        std::memcpy(block.qh, &qh, sizeof(qh));
        store_block(dst, b, block);
    }
}

void q5_1_from_float_ref(const float* src, void* dst, int64_t n) {
    constexpr int kHalf = kQK5_1 / 2;
    for (int64_t b = 0; b < n / kQK5_1; ++b) {
        const float* x = src + b * kQK5_1;
        const MinMax mm = block_min_max(x);
        const float d = (mm.max - mm.min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ5_1 block{};
        block.d = fp32_to_fp16(d);
        block.m = fp32_to_fp16(mm.min);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const float x0 = (x[j] - mm.min) * id;
            const float x1 = (x[j + kHalf] - mm.min) * id;
            // ggml casts straight to uint8_t here (no clamp); codes stay <= 31.
            const uint8_t q0 = truncated_code(x0 + 0.5f, 31, 0);
            const uint8_t q1 = truncated_code(x1 + 0.5f, 31, 0);
            block.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>(q0 >> 4) << j;
            qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
        }
        std::memcpy(block.qh, &qh, sizeof(qh));
        store_block(dst, b, block);
    }
}

// Q8_1 as Q8_0 (d = amax / 127, codes rounded half away from zero) plus
// s = fp16(d * sum of codes), the activation side of the Q4_1/Q5_1 min terms.
void q8_1_from_float_ref(const float* src, void* dst, int64_t n) {
    constexpr int kHalf = kQK8_1 / 2;
    for (int64_t b = 0; b < n / kQK8_1; ++b) {
        const float* x = src + b * kQK8_1;
        float amax = 0.0f;
        for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_1 block{};
        block.d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kHalf; ++j) {
            const float r0 = std::round(x[j] * id);
            const float r1 = std::round(x[j + kHalf] * id);
            block.qs[j] = std::isfinite(r0) ? static_cast<int8_t>(r0) : int8_t{0};
            block.qs[j + kHalf] = std::isfinite(r1) ? static_cast<int8_t>(r1) : int8_t{0};
            sum += block.qs[j] + block.qs[j + kHalf];
        }
        block.s = fp32_to_fp16(static_cast<float>(sum) * d);
        store_block(dst, b, block);
    }
}

void q8_1_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK8_1; ++b) {
        const auto block = load_block<BlockQ8_1>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int j = 0; j < kQK8_1; ++j) dst[b * kQK8_1 + j] = static_cast<float>(block.qs[j]) * d;
    }
}

void q4_1_to_float(const void* src, float* dst, int64_t n) {
    constexpr int kHalf = kQK4_1 / 2;
    for (int64_t b = 0; b < n / kQK4_1; ++b) {
        const auto block = load_block<BlockQ4_1>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float m = fp16_to_fp32(block.m);
        float* y = dst + b * kQK4_1;
        for (int j = 0; j < kHalf; ++j) {
            y[j] = static_cast<float>(block.qs[j] & 0x0F) * d + m;
            y[j + kHalf] = static_cast<float>(block.qs[j] >> 4) * d + m;
        }
    }
}

void q5_0_to_float(const void* src, float* dst, int64_t n) {
    constexpr int kHalf = kQK5_0 / 2;
    for (int64_t b = 0; b < n / kQK5_0; ++b) {
        const auto block = load_block<BlockQ5_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        float* y = dst + b * kQK5_0;
        for (int j = 0; j < kHalf; ++j) {
            const int low = (block.qs[j] & 0x0F) | fifth_bit(block.qh, j);
            const int high = (block.qs[j] >> 4) | fifth_bit(block.qh, j + kHalf);
            y[j] = static_cast<float>(low - 16) * d;
            y[j + kHalf] = static_cast<float>(high - 16) * d;
        }
    }
}

void q5_1_to_float(const void* src, float* dst, int64_t n) {
    constexpr int kHalf = kQK5_1 / 2;
    for (int64_t b = 0; b < n / kQK5_1; ++b) {
        const auto block = load_block<BlockQ5_1>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float m = fp16_to_fp32(block.m);
        float* y = dst + b * kQK5_1;
        for (int j = 0; j < kHalf; ++j) {
            const int low = (block.qs[j] & 0x0F) | fifth_bit(block.qh, j);
            const int high = (block.qs[j] >> 4) | fifth_bit(block.qh, j + kHalf);
            y[j] = static_cast<float>(low) * d + m;
            y[j + kHalf] = static_cast<float>(high) * d + m;
        }
    }
}

}  // namespace kiln::quant
