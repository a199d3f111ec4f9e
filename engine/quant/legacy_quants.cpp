#include "engine/quant/legacy_quants.h"

#include <cstddef>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"

// Reference file: ggml's C code is compiled without FMA contraction (see
// engine/quant/reference.cpp), so `q * d + m` must round the product first.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace kiln::quant {
namespace {

// Blocks are unaligned inside GGUF data: copy each one out.
template <typename Block>
Block load_block(const void* src, int64_t index) {
    Block block;
    std::memcpy(&block, static_cast<const std::byte*>(src) + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    return block;
}

// Element j's fifth bit, as bit 4 of the code.
int fifth_bit(const uint8_t qh[4], int j) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof(bits));
    return static_cast<int>((bits >> j) & 1u) << 4;
}

}  // namespace

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
