#include "engine/quant/reference.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/rounding.h"

// ggml's reference quantizers round every product before an addition: see
// no_fp_contract.h (tests/test_quant_fixture.cpp has values that need it).
#include "engine/core/no_fp_contract.h"

namespace kiln::quant {
namespace {

// ggml converts a scaled value to an integer code with a plain cast, which is
// undefined behaviour when the value is not finite. That only happens for
// inputs holding inf/NaN, or a block so tiny (|max| < ~4e-37) that 1/d
// overflows; kiln then stores the code that dequantizes to zero instead.
inline int8_t q8_code(float scaled) noexcept {
    const float r = std::round(scaled);  // roundf: halves away from zero, like ggml
    return std::isfinite(r) ? static_cast<int8_t>(r) : int8_t{0};
}

inline uint8_t q4_code(float scaled) noexcept {
    const float shifted = scaled + 8.5f;  // a separate rounding (no_fp_contract.h)
    if (!std::isfinite(shifted)) return 8;
    // Truncation toward zero of a value in [0, 16.5], clamped: the element equal
    // to the block's signed max maps to code 0 and the opposite extreme to 15.
    const auto code = static_cast<int8_t>(shifted);
    return static_cast<uint8_t>(code < 15 ? code : 15);
}

}  // namespace

void f32_from_float(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f32_to_float(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f16_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<std::byte*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(out + i * 2, &h, 2);
    }
}

void f16_to_float(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const std::byte*>(src);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + i * 2, 2);
        dst[i] = fp16_to_fp32(h);
    }
}

void bf16_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<std::byte*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(out + i * 2, &h, 2);
    }
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const std::byte*>(src);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + i * 2, 2);
        dst[i] = bf16_to_fp32(h);
    }
}

// Q8_0: d = max|x| / 127, codes round(x / d) in [-127, 127].
void q8_0_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<std::byte*>(dst);
    const int64_t blocks = n / kQK8_0;
    for (int64_t b = 0; b < blocks; ++b) {
        const float* x = src + b * kQK8_0;
        float amax = 0.0f;
        for (int64_t j = 0; j < kQK8_0; ++j) {
            const float a = std::fabs(x[j]);
            amax = amax > a ? amax : a;  // ggml's MAX(amax, a), NaN handling included
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;

        BlockQ8_0 block;
        block.d = fp32_to_fp16(d);
        for (int64_t j = 0; j < kQK8_0; ++j) block.qs[j] = q8_code(x[j] * id);
        std::memcpy(out + b * static_cast<int64_t>(sizeof(BlockQ8_0)), &block, sizeof(block));
    }
}

void q8_0_to_float(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const std::byte*>(src);
    const int64_t blocks = n / kQK8_0;
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ8_0 block;
        std::memcpy(&block, in + b * static_cast<int64_t>(sizeof(BlockQ8_0)), sizeof(block));
        const float d = fp16_to_fp32(block.d);
        for (int64_t j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = static_cast<float>(block.qs[j]) * d;
    }
}

// Q4_0: the element of largest magnitude, with its sign, defines d = max / -8,
// so it gets code 0 exactly and the others fall in [0, 15] (offset by 8).
void q4_0_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<std::byte*>(dst);
    constexpr int64_t kHalf = kQK4_0 / 2;
    const int64_t blocks = n / kQK4_0;
    for (int64_t b = 0; b < blocks; ++b) {
        const float* x = src + b * kQK4_0;
        float amax = 0.0f;
        float max = 0.0f;
        for (int64_t j = 0; j < kQK4_0; ++j) {
            const float a = std::fabs(x[j]);
            if (amax < a) {  // strictly greater: the first of equal magnitudes wins
                amax = a;
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;

        BlockQ4_0 block;
        block.d = fp32_to_fp16(d);
        for (int64_t j = 0; j < kHalf; ++j) {
            const uint8_t lo = q4_code(x[j] * id);
            const uint8_t hi = q4_code(x[j + kHalf] * id);
            block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
        std::memcpy(out + b * static_cast<int64_t>(sizeof(BlockQ4_0)), &block, sizeof(block));
    }
}

void q4_0_to_float(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const std::byte*>(src);
    constexpr int64_t kHalf = kQK4_0 / 2;
    const int64_t blocks = n / kQK4_0;
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ4_0 block;
        std::memcpy(&block, in + b * static_cast<int64_t>(sizeof(BlockQ4_0)), sizeof(block));
        const float d = fp16_to_fp32(block.d);
        float* y = dst + b * kQK4_0;
        for (int64_t j = 0; j < kHalf; ++j) {
            y[j] = static_cast<float>((block.qs[j] & 0x0F) - 8) * d;
            y[j + kHalf] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
        }
    }
}

// Q8_K: the element of largest magnitude, with its sign, defines the scale
// 1/d = -127 / max, so it gets code -127 exactly; codes are rounded to nearest
// even and clamped at 127 (the opposite extreme can reach 128 by rounding).
// bsums holds the sum of each 16 codes. An all-zero block is all zeros.
void q8_k_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<std::byte*>(dst);
    const int64_t blocks = n / kQK_K;
    for (int64_t b = 0; b < blocks; ++b) {
        const float* x = src + b * kQK_K;
        float amax = 0.0f;
        float max = 0.0f;
        for (int64_t j = 0; j < kQK_K; ++j) {
            const float a = std::fabs(x[j]);
            if (a > amax) {
                amax = a;
                max = x[j];
            }
        }
        BlockQ8_K block{};
        if (amax != 0.0f) {
            const float iscale = -127.0f / max;
            for (int64_t j = 0; j < kQK_K; ++j) {
                const float scaled = iscale * x[j];
                // Non-finite inputs have no code; ggml's cast would be undefined.
                const int v = std::isfinite(scaled) ? nearest_int(scaled) : 0;
                block.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
            }
            for (int64_t g = 0; g < kQK_K / 16; ++g) {
                int sum = 0;
                for (int64_t j = 0; j < 16; ++j) sum += block.qs[g * 16 + j];
                block.bsums[g] = static_cast<int16_t>(sum);
            }
            block.d = 1.0f / iscale;
        }
        std::memcpy(out + b * static_cast<int64_t>(sizeof(BlockQ8_K)), &block, sizeof(block));
    }
}

void q8_k_to_float(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const std::byte*>(src);
    const int64_t blocks = n / kQK_K;
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ8_K block;
        std::memcpy(&block, in + b * static_cast<int64_t>(sizeof(BlockQ8_K)), sizeof(block));
        for (int64_t j = 0; j < kQK_K; ++j) dst[b * kQK_K + j] = block.d * static_cast<float>(block.qs[j]);
    }
}

}  // namespace kiln::quant
