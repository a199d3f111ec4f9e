#pragma once
// Private to the NEON kernel sets (matmul_neon.cpp, matmul_neon_i8mm.cpp): a
// Q8_0 or Q4_0 block's scale and its 32 codes as signed bytes, in element
// order, which both the dot-product tiles and the SMMLA GEMM multiply.
#if defined(__aarch64__) && defined(__ARM_NEON)

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/kernels/simd.h"
#include "engine/quant/blocks.h"

namespace kiln::kernels::detail::neon {

// The fp16 at p as a float (blocks inside a GGUF file need not be 2-byte aligned).
inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

template <DType W>
constexpr int64_t kBlockBytes = W == DType::Q8_0 ? sizeof(quant::BlockQ8_0) : sizeof(quant::BlockQ4_0);

// A weight block's 32 signed codes in element order (Q8_0's bytes; Q4_0's
// nibbles less 8: low nibbles are elements 0-15, high nibbles 16-31).
struct Codes {
    int8x16_t lo, hi;
};

template <DType W>
inline Codes load_codes(const std::byte* blk) noexcept {
    const auto* q = reinterpret_cast<const uint8_t*>(blk + 2);
    if constexpr (W == DType::Q8_0) {
        return {vreinterpretq_s8_u8(vld1q_u8(q)), vreinterpretq_s8_u8(vld1q_u8(q + 16))};
    } else {
        static_assert(W == DType::Q4_0);
        const uint8x16_t packed = vld1q_u8(q);
        const int8x16_t eight = vdupq_n_s8(8);
        return {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight),
                vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight)};
    }
}

// An activation block (Q8_0) in the same form.
inline Codes load_activation(const std::byte* blk) noexcept { return load_codes<DType::Q8_0>(blk); }

}  // namespace kiln::kernels::detail::neon

#endif
