#pragma once
// Reference quantizers and dequantizers of the legacy 32-element block types Q4_1, Q5_0 and
// Q5_1, bit-exact with ggml's quantize_row_*_ref / dequantize_row_* (ggml-quants.c). n is an element
// count, a multiple of 32.
#include <cstdint>

namespace kiln::quant {

// Quantizers: ggml's quantize_row_*_ref.
void q4_1_from_float_ref(const float* src, void* dst, int64_t n);
void q5_0_from_float_ref(const float* src, void* dst, int64_t n);
void q5_1_from_float_ref(const float* src, void* dst, int64_t n);

// Q8_1, the activation type of Q4_1/Q5_1 dot products.
void q8_1_from_float_ref(const float* src, void* dst, int64_t n);
void q8_1_to_float(const void* src, float* dst, int64_t n);

void q4_1_to_float(const void* src, float* dst, int64_t n);
void q5_0_to_float(const void* src, float* dst, int64_t n);
void q5_1_to_float(const void* src, float* dst, int64_t n);

}  // namespace kiln::quant
