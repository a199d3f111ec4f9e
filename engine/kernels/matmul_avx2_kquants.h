#pragma once
// Private to the "avx2" kernel set: its K-quant kernels (matmul_avx2_kquants.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
namespace kiln::kernels::detail {
// matmul for Q2_K..Q6_K weights against Q8_K-prepared activations. Needs no
// scratch; always returns true.
bool avx2_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept;
}  // namespace kiln::kernels::detail
#endif
