#pragma once
// Private to the "avx512-vnni" kernel set: whether this build has it, and the
// entry point of its int8 kernels (matmul_avx512_quant.cpp).
#include "engine/kernels/matmul_impl.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)
#define KILN_HAVE_AVX512_VNNI 1
#else
#define KILN_HAVE_AVX512_VNNI 0
#endif

namespace kiln::kernels::detail {

#if KILN_HAVE_AVX512_VNNI
// matmul for Q8_0/Q4_0 weights against Q8_0-prepared activations (for their
// interleaved layouts, only the GEMM: 4 tokens or more). Returns false
// (having written nothing) when its scratch memory could not be had.
bool avx512_quant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                         const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                         const RowClaims* claims) noexcept;
// matmul for Q2_K..Q6_K weights against Q8_K-prepared activations
// (matmul_avx512_kquants.cpp); from 8 tokens on it runs the GEMM below and returns its result.
bool avx512_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                          const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                          const RowClaims* claims) noexcept;
// The K-quant GEMM for many tokens (matmul_avx512_kquant_gemm.cpp). Returns
// false (having written nothing) when its scratch memory could not be had.
bool avx512_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept;
// matmul for the interleaved layouts (matmul_avx512_interleaved.cpp): its own
// decode kernels, the K-quant GEMM from 8 tokens on. Returns false as the GEMM does.
bool avx512_interleaved_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                               const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                               const RowClaims* claims) noexcept;
#endif

}  // namespace kiln::kernels::detail
