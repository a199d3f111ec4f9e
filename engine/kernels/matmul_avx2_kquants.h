#pragma once
// Private to the "avx2" kernel set: its K-quant kernels (matmul_avx2_kquants.cpp)
// and the K-quant GEMM for many tokens (matmul_avx2_kquant_gemm.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
namespace kiln::kernels::detail {
// matmul for Q2_K..Q6_K weights against Q8_K-prepared activations; from 6
// tokens on it runs the GEMM below and returns its result, else it needs no
// scratch and returns true.
bool avx2_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept;
// The K-quant GEMM for many tokens. Returns false (having written nothing)
// when its scratch memory could not be had.
bool avx2_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                      const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                      const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
