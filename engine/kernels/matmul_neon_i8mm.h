#pragma once
// Private to the NEON kernel sets: the int8 GEMM of prompt batches with SMMLA
// (FEAT_I8MM) for Q8_0 and Q4_0 weights (matmul_neon_i8mm.cpp). It exists in
// the "neon-i8mm" set alone: only that target's flags (+i8mm) define
// __ARM_FEATURE_MATMUL_INT8.
#include "engine/kernels/matmul_impl.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_MATMUL_INT8)
namespace kiln::kernels::detail {
// Products of at least this many tokens take the GEMM; one token (decode)
// takes the dot-product tiles of matmul_neon.cpp, which stream each weight
// row once and have no second token to pair it with.
constexpr int64_t kI8mmMinTokens = 2;
// matmul for Q8_0 or Q4_0 weights (no other type) against Q8_0-prepared
// activations, n_tokens >= kI8mmMinTokens. Returns false, having written and
// claimed nothing, when its scratch memory could not be had.
bool neon_i8mm_matmul(DType type, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                      const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                      const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
