#pragma once
// Scalar reference dot products of K-quant weight rows (Q2_K..Q6_K) with
// Q8_K-quantized activation rows, as ggml's vec_dot_q*_K_q8_K compute them:
// per super-block of 256 an exact integer sum of scale x (code . activation
// code) over its sub-blocks, and for the types with minimums (Q2_K, Q4_K, Q5_K)
// an exact integer sum of min x (activation sums of 16, the Q8_K bsums); then
// sum += (d_w * d_x) * isum - (dmin_w * d_x) * msum, super-block by super-block.
//
// The unpackers below also serve the SIMD kernels' tests and any kernel that
// unpacks a super-block to int8 codes plus per-16 integer scales.
#include <cstddef>
#include <cstdint>

#include "engine/core/dtype.h"

namespace kiln::kernels {

// One super-block unpacked: the signed codes of its 256 elements (the Q3_K -4
// and Q6_K -32 offsets applied), the integer scale and min of each 16 elements
// (a sub-block of 32 repeats its scale twice), and its float super-scales.
struct UnpackedSuperBlock {
    int8_t codes[256];
    int16_t scales[16];
    int16_t mins[16];  // zero for types without minimums
    float d;
    float dmin;  // zero for types without minimums
};

// Unpacks super-block `block` (its bytes, any alignment) of a weight of type
// Q2_K, Q3_K, Q4_K, Q5_K or Q6_K.
void unpack_kquant_block(DType type, const std::byte* block, UnpackedSuperBlock& out) noexcept;

// dot(weight row, activation row) for k elements (a multiple of 256): w holds
// k / 256 blocks of `type`, x holds k / 256 Q8_K blocks.
float dot_q2_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q3_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q4_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q5_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q6_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;

bool is_kquant(DType type) noexcept;

}  // namespace kiln::kernels
