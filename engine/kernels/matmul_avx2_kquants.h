#pragma once
// Private to the "avx2" kernel set: its K-quant kernels (matmul_avx2_kquants.cpp),
// the K-quant GEMM for many tokens (matmul_avx2_kquant_gemm.cpp) and the decode
// kernels of the interleaved layouts (matmul_avx2_interleaved.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
namespace kiln::kernels::detail {
// matmul for Q2_K..Q6_K weights against Q8_K-prepared activations; from 6
// tokens on it runs the GEMM below and returns its result, else it needs no
// scratch and returns true.
bool avx2_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept;
// From this many tokens on, the K-quant kernels run the GEMM: with 6 of a
// vector's 8 token lanes busy it already beats the 2 x 4 decode tiles
// (measured 30% faster at 6 tokens, about even at 5, slower at 4).
inline constexpr int64_t kAvx2KquantGemmTokens = 6;
// matmul for Q4_K_R16, Q5_K_R16 and Q6_K_R16 (quant/interleave.h): the decode
// kernels of matmul_avx2_interleaved.cpp, and from kAvx2KquantGemmTokens on the GEMM.
bool avx2_interleaved_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                             const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                             const RowClaims* claims) noexcept;
// The K-quant GEMM for many tokens, of plain or interleaved K-quant weights. Returns false (having written nothing)
// when its scratch memory could not be had.
bool avx2_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                      const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                      const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
