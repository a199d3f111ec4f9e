#pragma once
// Private to the "amx" kernel set (matmul_avx512_amx*.cpp, the only files
// compiled with the tile instructions enabled; targets.cmake).
#include "engine/kernels/amx_support.h"
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define KILN_HAVE_AMX_INT8 1
#include <immintrin.h>
#else
#define KILN_HAVE_AMX_INT8 0
#endif

namespace kiln::kernels::detail {

#if KILN_HAVE_AMX_INT8
// The tiles of the int8 kernels: 0 and 1 hold 16 x 16 int32 sums, 2 and 3 are
// A tiles of 16 rows of k_bytes codes, 4 and 5 B tiles of k_bytes / 4 rows of
// 64 bytes (two of each, for two blocks in flight).
constexpr AmxTileConfig int8_tile_config(int k_bytes) noexcept {
    AmxTileConfig c;
    for (int t : {0, 1}) c.rows[t] = 16, c.bytes_per_row[t] = 64;
    for (int t : {2, 3}) c.rows[t] = 16, c.bytes_per_row[t] = static_cast<uint16_t>(k_bytes);
    for (int t : {4, 5}) c.rows[t] = static_cast<uint8_t>(k_bytes / 4), c.bytes_per_row[t] = 64;
    return c;
}

// The K-quant GEMM on tiles (matmul_avx512_amx_kquants.cpp): Q2_K..Q6_K
// weights, plain or interleaved, against Q8_K-prepared tokens; the
// avx512-vnni K-quant GEMM's bits. Returns false (having written nothing)
// when its scratch memory could not be had.
bool amx_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                     size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                     const RowClaims* claims) noexcept;
#endif

}  // namespace kiln::kernels::detail
