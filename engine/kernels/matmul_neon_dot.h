#pragma once
// Private to the NEON kernel sets (matmul_neon.cpp, matmul_neon_kquants.cpp):
// the int8 dot product of 16 code pairs, with `sdot` where the build targets it.
#if defined(__aarch64__) && defined(__ARM_NEON)

#include "engine/kernels/simd.h"

namespace kiln::kernels::detail::neon {

// acc plus Σ w_j · x_j over 16 pairs, spread over the four int32 lanes (only
// the lanes' total is meaningful: the grouping differs with and without sdot).
// Without sdot, vmull_s8 multiplies 8 pairs into int16 and vmlal_high_s8 adds
// the next 8: a lane then holds two products, at most 2 x 128 x 127 = 32512
// when one side is in [-127, 127] (activation codes always are, as the Q8
// quantizers produce them; weight codes may be any byte), so int16 is exact;
// vpadalq_s16 widens the pairs into the int32 lanes.
inline int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) noexcept {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, x);
#else
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
#endif
}

// 16 bytes at p (any alignment) as signed codes.
inline int8x16_t load_s8(const std::byte* p) noexcept { return vld1q_s8(reinterpret_cast<const int8_t*>(p)); }

}  // namespace kiln::kernels::detail::neon

#endif
