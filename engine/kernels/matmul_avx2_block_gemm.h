#pragma once
// Private to the "avx2" kernel set: prompt batches of the 32-element block
// types (matmul_avx2_block_gemm.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
namespace kiln::kernels::detail {
// Batches of at least this many tokens take the GEMM; fewer take the tiles of matmul_avx2.cpp.
constexpr int64_t kBlockGemmMinTokens = 8;
// matmul for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL weights against Q8_0/Q8_1-prepared
// activations (n_tokens >= kBlockGemmMinTokens). Returns false (having written
// nothing) when its scratch memory could not be had.
bool avx2_block_gemm(DType type, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                     const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                     const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
