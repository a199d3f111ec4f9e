#pragma once
// Scalar reference dot products of the 32-element block types other than
// Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL) and of IQ4_XS, against the activation
// type ggml pairs each with: Q8_1 for Q4_1/Q5_1 (its s = d * sum of codes
// carries the weights' minimum term), Q8_0 for Q5_0/IQ4_NL, Q8_K for IQ4_XS.
// As ggml's vec_dot_*: an exact int32 sum of code products per block, then one
// float multiply-add per block (per sub-block of 32 for IQ4_XS), in block order.
// These are what every kernel set runs for these types until it has its own.
#include <cstddef>
#include <cstdint>

namespace kiln::kernels {

// dot(weight row, activation row) for k elements (a multiple of the block size).
float dot_q4_1_q8_1_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q5_0_q8_0_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_q5_1_q8_1_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_iq4_nl_q8_0_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;
float dot_iq4_xs_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept;

}  // namespace kiln::kernels
