#pragma once
// Private to the NEON kernel sets: their K-quant kernels (matmul_neon_kquants.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
namespace kiln::kernels::detail {
// matmul for Q4_K or Q6_K weights (no other type) against Q8_K-prepared
// activations; needs no scratch memory.
void neon_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
