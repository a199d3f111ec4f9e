#pragma once
// Private to the "avx2" kernel set: prompt batches of the 32-element block
// types (matmul_avx2_block_gemm.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
namespace kiln::kernels::detail {
// Batches of at least this many tokens take the GEMM; fewer take the tiles of matmul_avx2.cpp.
constexpr int64_t kBlockGemmMinTokens = 8;
// Interleaved Q8_0_R16 / Q4_0_R16 rows take the GEMM later: their decode tiles
// (matmul_avx2_interleaved.cpp, two tokens at a time over a 16-row group that
// stays in L2) hold 90-100 GFLOP/s at any batch, while the GEMM unpacks a
// panel per 32 rows and needs the tokens to pay for it. `kiln-kernel-bench -t 1
// --types q8_0,q4_0 --sweep` (768x2048), tiles vs GEMM: Q8_0 93 vs 49 at 8
// tokens, 95 vs 75 at 16, 93 vs 97 at 32; Q4_0 101 vs 88 at 8, 94 vs 104 at 13.
constexpr int64_t interleaved_block_gemm_min_tokens(DType layout) noexcept {
    return layout == DType::Q8_0_R16 ? 32 : 13;
}
// matmul for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL weights against Q8_0/Q8_1-prepared
// activations (n_tokens >= kBlockGemmMinTokens). Returns false (having written
// nothing) when its scratch memory could not be had.
bool avx2_block_gemm(DType type, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                     const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                     const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
