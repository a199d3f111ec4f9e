#pragma once
// Reference dequantizers of the legacy 32-element block types Q4_1, Q5_0 and
// Q5_1, bit-exact with ggml's dequantize_row_* (ggml-quants.c). n is an element
// count, a multiple of 32.
#include <cstdint>

namespace kiln::quant {

void q4_1_to_float(const void* src, float* dst, int64_t n);
void q5_0_to_float(const void* src, float* dst, int64_t n);
void q5_1_to_float(const void* src, float* dst, int64_t n);

}  // namespace kiln::quant
